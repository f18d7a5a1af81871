package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// limitSyntax is the --limit/-l syntax.
const limitSyntax = "name:rate[/period][:burst], e.g. rpm:100, tpm:10000/min:20000, rph:500/hour; " +
	"a calendar budget name:amount/calendar-day|week|month[@zone], e.g. usd:500000000/calendar-month@America/New_York; " +
	"a prepaid balance name:prepaid[:ceiling]; calls in flight name:inflight:slots, e.g. calls:inflight:8"

// calendarLimitPeriods are the --limit periods of calendar limits.
var calendarLimitPeriods = map[string]func(name string, amount int64) limiter.Limit{
	"calendar-day": limiter.PerCalendarDay, "calendar-week": limiter.PerCalendarWeek, "calendar-month": limiter.PerCalendarMonth,
}

// periodPattern is a --limit period: an optional count and a unit.
var periodPattern = regexp.MustCompile(`\A(\d+)?(sec|min|hour|day)\z`)

var periodUnits = map[string]int64{"sec": 1, "min": 60, "hour": 3600, "day": 86400}

// parseLimit parses "name:rate[/period][:burst]": rate tokens refilled every
// period (default /min; /sec, /min, /hour, /day with an optional count such
// as /5min), with capacity burst (default rate); "name:amount/calendar-day"
// (or -week, -month), optionally "@zone": a calendar limit; and
// "name:prepaid[:ceiling]": a prepaid balance; "name:inflight:slots": a
// limit of calls in flight.
func parseLimit(s string) (limiter.Limit, error) {
	bad := func(format string, a ...any) (limiter.Limit, error) {
		return limiter.Limit{}, fmt.Errorf("invalid limit %q: %s", s, fmt.Sprintf(format, a...))
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return bad("expected %s", limitSyntax)
	}
	name, ratePart := parts[0], parts[1]
	if ratePart == "inflight" {
		if len(parts) != 3 {
			return bad("expected name:inflight:slots, e.g. calls:inflight:8")
		}
		slots, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return bad("slots %q is not an integer", parts[2])
		}
		return validLimit(limiter.InFlight(name, slots), bad)
	}
	if ratePart == "prepaid" {
		l := limiter.Prepaid(name)
		if len(parts) == 3 {
			ceiling, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil {
				return bad("ceiling %q is not an integer", parts[2])
			}
			l = l.WithBurst(ceiling)
		}
		return validLimit(l, bad)
	}
	rateStr, periodStr, hasPeriod := strings.Cut(ratePart, "/")
	if per, zone, _ := strings.Cut(periodStr, "@"); calendarLimitPeriods[per] != nil {
		amount, err := strconv.ParseInt(rateStr, 10, 64)
		switch {
		case err != nil:
			return bad("amount %q is not an integer", rateStr)
		case len(parts) == 3:
			return bad("a calendar limit takes no burst: its amount is its budget")
		}
		l := calendarLimitPeriods[per](name, amount)
		if zone != "" {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				return bad("time zone %q: %v", zone, err)
			}
			l = l.InLocation(loc)
		}
		return validLimit(l, bad)
	}
	rate, err := strconv.ParseInt(rateStr, 10, 64)
	if err != nil {
		return bad("rate %q is not an integer", rateStr)
	}
	capacity := rate
	if len(parts) == 3 {
		if capacity, err = strconv.ParseInt(parts[2], 10, 64); err != nil {
			return bad("burst %q is not an integer", parts[2])
		}
	}
	period := int64(60)
	if hasPeriod {
		m := periodPattern.FindStringSubmatch(periodStr)
		if m == nil {
			return bad("period %q: %s", "/"+periodStr, periodHint(periodStr))
		}
		n := int64(1)
		if m[1] != "" {
			if n, err = strconv.ParseInt(m[1], 10, 64); err != nil || n > math.MaxInt64/int64(time.Second)/periodUnits[m[2]] {
				return bad("period %q is too long", "/"+periodStr)
			}
		}
		period = n * periodUnits[m[2]]
	}
	l := limiter.Limit{Name: name, Capacity: capacity, RefillAmount: rate, RefillPeriod: time.Duration(period) * time.Second}
	err = l.Validate()
	if err != nil {
		var ve *limiter.ValidationError
		if errors.As(err, &ve) {
			return bad("%s", ve.Reason)
		}
		return bad("%v", err)
	}
	return l, nil
}

// periodHints are the --limit periods a misspelled one is compared with.
var periodHints = []string{"sec", "min", "hour", "day", "calendar-day", "calendar-week", "calendar-month"}

// periodHint answers a --limit period that is none of the forms: the
// period meant when one is close, and every form.
func periodHint(period string) string {
	forms := "use /[N]sec, /[N]min, /[N]hour or /[N]day (a rolling limit, e.g. rpm:100/min), " +
		"/calendar-day, /calendar-week or /calendar-month with an optional @Zone (a calendar budget, e.g. usd:500000000/calendar-month@America/New_York); " +
		"a prepaid balance is name:prepaid[:ceiling]"
	per, _, _ := strings.Cut(period, "@")
	if s := suggest(per, periodHints); s != "" {
		return "did you mean /" + s + "? " + forms
	}
	return forms
}

// validLimit returns l when it is valid, else bad's error with the
// reason.
func validLimit(l limiter.Limit, bad func(format string, a ...any) (limiter.Limit, error)) (limiter.Limit, error) {
	if err := l.Validate(); err != nil {
		var ve *limiter.ValidationError
		if errors.As(err, &ve) {
			return bad("%s", ve.Reason)
		}
		return bad("%v", err)
	}
	return l, nil
}

// parseLimits parses every --limit value.
func parseLimits(specs []string) ([]limiter.Limit, error) {
	limits := make([]limiter.Limit, 0, len(specs))
	for _, s := range specs {
		l, err := parseLimit(s)
		if err != nil {
			return nil, err
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// formatPeriod formats a period in seconds in its largest whole unit:
// "/min", "/5min", "/hour", "/90sec".
func formatPeriod(seconds int64) string {
	for _, u := range []struct {
		name string
		secs int64
	}{{"day", 86400}, {"hour", 3600}, {"min", 60}, {"sec", 1}} {
		if seconds%u.secs == 0 {
			if n := seconds / u.secs; n != 1 {
				return "/" + strconv.FormatInt(n, 10) + u.name
			}
			return "/" + u.name
		}
	}
	return "/" + strconv.FormatInt(seconds, 10) + "sec"
}

// formatLimit formats a limit on one line: "rpm: 1,000/min",
// "tpm: 10,000/min (burst: 20,000)", or for a calendar limit
// "rpd: 5,000/calendar day" and "usd: $500/calendar month
// (America/New_York)" (the limit usd is counted in micro-dollars).
func formatLimit(l limiter.Limit) string {
	if store.Limit(l).IsInFlight() {
		return l.Name + ": " + thousands(l.Capacity) + " in flight"
	}
	if store.Limit(l).IsPrepaid() {
		return l.Name + ": prepaid balance (top-ups up to " + formatAmount(l.Name, l.Capacity) + ")"
	}
	if store.Limit(l).IsCalendar() {
		s := l.Name + ": " + formatAmount(l.Name, l.Capacity) + "/calendar " + l.Calendar.String()
		if tz := store.Limit(l).LocationName(); tz != "" {
			s += " (" + tz + ")"
		}
		return s
	}
	s := l.Name + ": " + thousands(l.RefillAmount) + formatPeriod(store.Limit(l).RefillPeriodSeconds())
	if l.Capacity != l.RefillAmount {
		s += " (burst: " + thousands(l.Capacity) + ")"
	}
	return s
}

// formatAmount formats an amount of limit name's tokens: dollars for the
// limit usd (micro-dollars), else the count with comma separators.
func formatAmount(name string, n int64) string {
	if name == usdLimitName {
		return formatDollars(n)
	}
	return thousands(n)
}

// limitRefillCells returns the REFILL and PERIOD cells of a limits table:
// "100" and "60s" (dollars for the limit usd, as capacityCell), or "-" and
// "month" (with its zone) for a calendar limit.
func limitRefillCells(l limiter.Limit) (refill, period string) {
	if store.Limit(l).IsPrepaid() {
		return "-", "prepaid"
	}
	if store.Limit(l).IsInFlight() {
		return "-", "in flight"
	}
	if store.Limit(l).IsCalendar() {
		period = "calendar " + l.Calendar.String()
		if tz := store.Limit(l).LocationName(); tz != "" {
			period += " " + tz
		}
		return "-", period
	}
	if l.Name == usdLimitName {
		return formatDollars(l.RefillAmount), fmt.Sprint(store.Limit(l).RefillPeriodSeconds()) + "s"
	}
	return fmt.Sprint(l.RefillAmount), fmt.Sprint(store.Limit(l).RefillPeriodSeconds()) + "s"
}

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// limitFlag registers the repeatable --limit/-l flag.
func (f *command) limitFlag(p *[]string) {
	f.list(p, "limit", "l", "limit as "+limitSyntax+" (repeatable)")
}

// printLimits shows stored limits, or the none message.
func (c *cli) printLimits(out limitsJSON, limits []limiter.Limit, none string) error {
	if c.jsonOutput() {
		return c.writeJSON(out)
	}
	if len(limits) == 0 && out.OnUnavailable == "" {
		c.printf("%s\n", none)
		return nil
	}
	if len(limits) > 0 {
		if err := c.limitsTable(limits); err != nil {
			return err
		}
	}
	if out.OnUnavailable != "" {
		c.printf("on_unavailable: %s\n", out.OnUnavailable)
	}
	return nil
}

func cmdResourceSetDefaults(c *cli) *command {
	f := c.newFlags("resource set-defaults RESOURCE", "Store the default limits of RESOURCE (used by entities without their own; "+
		"'*' for the entity-wide defaults), replacing those stored before (with --merge only those of the names given), and say what was replaced.", 1, 1, true)
	var specs []string
	var merge bool
	f.limitFlag(&specs)
	f.mergeFlag(&merge)
	f.run = func(pos []string) error {
		limits, err := parseLimits(specs)
		if err != nil {
			return err
		}
		if len(limits) == 0 {
			return errors.New("resource set-defaults: at least one --limit is required")
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		before, err := repo.Admin().Limits(c.ctx, limiter.Scope{Resource: pos[0]})
		if err != nil {
			return err
		}
		stored, ch := mergeLimits(before, limits, merge)
		if err := repo.Admin().SetLimits(c.ctx, limiter.Scope{Resource: pos[0]}, stored); err != nil {
			return err
		}
		return c.reportSet(fmt.Sprintf("Set %d default(s) for resource '%s':", len(limits), pos[0]),
			limitsJSON{Resource: pos[0], Limits: limitsToJSON(limits)}, limits, ch)
	}
	return f
}

func cmdResourceGetDefaults(c *cli) *command {
	f := c.newFlags("resource get-defaults RESOURCE", "Show the default limits of RESOURCE.", 1, 1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		limits, err := repo.Admin().Limits(c.ctx, limiter.Scope{Resource: pos[0]})
		if err != nil {
			return err
		}
		return c.printLimits(limitsJSON{Resource: pos[0], Limits: limitsToJSON(limits)}, limits,
			fmt.Sprintf("No defaults configured for resource '%s'", pos[0]))
	}
	return f
}

func cmdResourceDeleteDefaults(c *cli) *command {
	f := c.newFlags("resource delete-defaults RESOURCE", "Delete the default limits of RESOURCE.", 1, 1, true)
	f.confirm(func(pos []string) string { return "delete the defaults of resource " + pos[0] })
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if err := repo.Admin().DeleteLimits(c.ctx, limiter.Scope{Resource: pos[0]}); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Deleted defaults for resource '%s'", pos[0]), map[string]any{"deleted": true, "resource": pos[0]})
	}
	return f
}

func cmdResourceList(c *cli) *command {
	f := c.newFlags("resource list", "List the resources with default limits.", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		res, err := iterx.Collect(repo.Admin().ResourcesWithDefaults(c.ctx))
		if err != nil {
			return err
		}
		return c.stringList(res, "resources", "No resources with defaults configured")
	}
	return f
}

func cmdSystemSetDefaults(c *cli) *command {
	f := c.newFlags("system set-defaults", "Store the namespace-wide default limits (used for every resource without its own) and the on-unavailable mode, "+
		"replacing those stored before (with --merge only the limits of the names given, and the mode only when given), and say what was replaced.", 0, 0, true)
	var specs []string
	var onUnavailable string
	var merge bool
	f.limitFlag(&specs)
	f.mergeFlag(&merge)
	f.str(&onUnavailable, "on-unavailable", "", "", "what acquires do when DynamoDB is unavailable: allow or block")
	f.run = func([]string) error {
		limits, err := parseLimits(specs)
		if err != nil {
			return err
		}
		if len(limits) == 0 && onUnavailable == "" {
			return errors.New("system set-defaults: give at least one --limit or --on-unavailable")
		}
		ou := limiter.OnUnavailable(onUnavailable)
		if ou != "" && !ou.Valid() {
			return fmt.Errorf("invalid --on-unavailable %q: use allow or block", onUnavailable)
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		before, beforeOU, err := repo.Admin().SystemDefaults(c.ctx)
		if err != nil {
			return err
		}
		stored, ch := mergeLimits(before, limits, merge)
		if merge && ou == "" {
			ou = beforeOU
		}
		if err := repo.Admin().SetSystemDefaults(c.ctx, stored, ou); err != nil {
			return err
		}
		return c.reportSet(fmt.Sprintf("Set %d system-wide default(s):", len(limits)),
			limitsJSON{OnUnavailable: string(ou), Limits: limitsToJSON(limits)}, limits, ch)
	}
	return f
}

func cmdSystemGetDefaults(c *cli) *command {
	f := c.newFlags("system get-defaults", "Show the namespace-wide default limits and on-unavailable mode.", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		limits, ou, err := repo.Admin().SystemDefaults(c.ctx)
		if err != nil {
			return err
		}
		return c.printLimits(limitsJSON{OnUnavailable: string(ou), Limits: limitsToJSON(limits)}, limits, "No system defaults configured")
	}
	return f
}

func cmdSystemDeleteDefaults(c *cli) *command {
	f := c.newFlags("system delete-defaults", "Delete the namespace-wide default limits and on-unavailable mode.", 0, 0, true)
	f.confirm(func([]string) string { return "delete the system defaults" })
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if err := repo.Admin().DeleteLimits(c.ctx, limiter.Scope{}); err != nil {
			return err
		}
		return c.done("Deleted system defaults", map[string]any{"deleted": true})
	}
	return f
}

// done reports a completed change: msg as text, v as JSON.
func (c *cli) done(msg string, v any) error {
	if c.jsonOutput() {
		return c.writeJSON(v)
	}
	c.printf("%s\n", msg)
	return nil
}

// stringList prints a list of names, one a line, or a JSON object
// {key: [...]}.
func (c *cli) stringList(items []string, key, none string) error {
	if c.jsonOutput() {
		if items == nil {
			items = []string{}
		}
		return c.writeJSON(map[string][]string{key: items})
	}
	if len(items) == 0 {
		c.printf("%s\n", none)
		return nil
	}
	for _, s := range items {
		c.printf("%s\n", s)
	}
	return nil
}
