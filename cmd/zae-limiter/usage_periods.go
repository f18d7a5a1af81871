package main

// `usage periods`: the spend of an entity's calendar limits per period,
// and of its parent's when it cascades (an acquire charges both).
// Each period of a calendar limit L of entity E on resource R is an
// ordinary bucket, (E, "R/L.tag"), created full at the limit's capacity
// and refilled by one token a century (less than a token in any period),
// so the bucket's capacity minus its balance is exactly what the period
// spent, refunds deducted. The current period's remaining budget is the
// library's own answer (RateLimiter.Available); the buckets of previous
// periods are read by their keys, computed from the limit's calendar, in
// one BatchGetItem.

import (
	"errors"
	"fmt"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// maxPreviousPeriods bounds --previous: the keys of one limit's periods
// are read in one request.
const maxPreviousPeriods = 36

// periodJSON is one period of a calendar limit of entity_id (the entity
// asked about, or the parent it cascades to), stored at level source.
// Amounts are in the limit's tokens (micro-dollars for the limit usd).
// Start and end are RFC 3339 in the limit's zone; end is the next period's
// start.
type periodJSON struct {
	EntityID  string `json:"entity_id"`
	Source    string `json:"source"`
	Limit     string `json:"limit"`
	Calendar  string `json:"calendar"`
	Timezone  string `json:"timezone,omitempty"`
	Period    string `json:"period"`
	Bucket    string `json:"bucket"`
	Start     string `json:"start"`
	End       string `json:"end"`
	Current   bool   `json:"current"`
	Capacity  int64  `json:"capacity"`
	Spent     int64  `json:"spent"`
	Remaining int64  `json:"remaining"`
}

// periodsJSON is the output of usage periods.
type periodsJSON struct {
	EntityID string       `json:"entity_id"`
	Resource string       `json:"resource"`
	Periods  []periodJSON `json:"periods"`
}

// periodKey is one period of a calendar limit whose bucket is read.
type periodKey struct {
	limit      limiter.Limit
	source     limiter.ConfigSource
	start, end time.Time
	tag        string
	key        store.BucketKey
	current    bool
}

// calendarPeriods returns the current period of calendar limit l at now and
// up to previous periods before it, newest first.
func calendarPeriods(l limiter.LimitInForce, now time.Time, previous int) ([]periodKey, error) {
	var out []periodKey
	t := now
	for i := 0; i <= previous; i++ {
		start, end, tag := store.Limit(l.Limit).CalendarPeriodAt(t)
		bucket, _, err := store.Limit(l.Limit).CalendarBucket(l.Resource, t)
		if err != nil {
			return nil, err
		}
		out = append(out, periodKey{limit: l.Limit, source: l.Source, start: start, end: end, tag: tag,
			key: store.BucketKey{EntityID: l.EntityID, Resource: bucket}, current: i == 0})
		t = start.Add(-time.Nanosecond)
	}
	return out, nil
}

// spentIn returns what the period whose bucket state is s spent by atMs:
// the bucket's capacity minus its balance refilled to atMs, in whole
// tokens. The refill of a period bucket adds less than a token in a
// century, so the floored balance is the whole tokens left.
func spentIn(s store.BucketState, atMs int64) int64 {
	bal, _ := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, atMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return s.Capacity() - bucketmath.FloorDivMilli(bal)
}

func cmdUsagePeriods(c *cli) *command {
	f := c.newFlags("usage periods", "Show the spend of an entity's calendar limits (PerCalendarDay/Week/Month, the manifest's usd_per_month) "+
		"on a resource, and of its parent's when it cascades, per period: the current period and, with --previous, earlier ones whose buckets are in the table. "+
		"Spent is the period bucket's capacity minus its balance; amounts of the limit usd are micro-dollars (shown as dollars).", 0, 0, true)
	var entityID, resource string
	var previous int
	f.str(&entityID, "entity-id", "e", "", "entity whose calendar limits to show (required)")
	f.str(&resource, "resource", "r", "", "resource of the limits (required)")
	f.integer(&previous, "previous", "", 0, fmt.Sprintf("also show up to this many earlier periods of each limit (at most %d)", maxPreviousPeriods))
	f.run = func([]string) error {
		if entityID == "" || resource == "" {
			return errors.New("usage periods: --entity-id and --resource are required")
		}
		if previous < 0 || previous > maxPreviousPeriods {
			return fmt.Errorf("invalid --previous %d: use 0 to %d", previous, maxPreviousPeriods)
		}
		if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
			return err
		}
		if resource != limiter.AllResources { // '*': the entity-wide limits' periods
			if err := store.ValidateResource(resource); err != nil {
				return err
			}
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		inForce, err := repo.LimitsInForce(c.ctx, entityID, resource)
		var ve *limiter.ValidationError
		if errors.As(err, &ve) && ve.Field == "limits" {
			inForce, err = nil, nil // none at any level: no calendar limit either
		}
		if err != nil {
			return err
		}
		out := periodsJSON{EntityID: entityID, Resource: resource, Periods: []periodJSON{}}
		now := time.Now()
		var keys []periodKey
		for _, l := range inForce {
			if !store.Limit(l.Limit).IsCalendar() {
				continue
			}
			ps, err := calendarPeriods(l, now, previous)
			if err != nil {
				return err
			}
			keys = append(keys, ps...)
		}
		if len(keys) > 0 {
			if out.Periods, err = readPeriods(c, repo, resource, keys, now); err != nil {
				return err
			}
		}
		if c.jsonOutput() {
			return c.writeJSON(out)
		}
		if len(keys) == 0 {
			c.printf("No calendar limits in force for entity '%s' on resource '%s' "+
				"(zae-limiter entity limits-in-force %s -r %s shows the limits in force)\n", entityID, resource, entityID, resource)
			return nil
		}
		rows := make([][]string, len(out.Periods))
		for i, p := range out.Periods {
			period := p.Period
			if p.Current {
				period += " (current)"
			}
			rows[i] = []string{p.EntityID, p.Limit, period, p.Start, p.End,
				formatAmount(p.Limit, p.Capacity), formatAmount(p.Limit, p.Spent), formatAmount(p.Limit, p.Remaining)}
		}
		c.printf("Calendar limits in force for entity '%s' on resource '%s':\n", entityID, resource)
		return c.table([]string{"ENTITY", "LIMIT", "PERIOD", "START", "END", "CAPACITY", "SPENT", "REMAINING"}, rows)
	}
	return f
}

// readPeriods reads the period buckets of keys: the current periods are
// always shown (a missing bucket has spent nothing), earlier ones only
// when their bucket is in the table.
func readPeriods(c *cli, repo *table, resource string, keys []periodKey, now time.Time) ([]periodJSON, error) {
	bkeys := make([]store.BucketKey, len(keys))
	for i, k := range keys {
		bkeys[i] = k.key
	}
	_, buckets, err := repo.repo.LoadBuckets(c.ctx, nil, bkeys)
	if err != nil {
		return nil, fmt.Errorf("usage periods: %w", err)
	}
	avail := map[string]map[string]int64{} // entity → Available
	out := make([]periodJSON, 0, len(keys))
	for _, k := range keys {
		var s store.BucketState
		ok := false
		if b := buckets[k.key]; b != nil {
			s, ok = b.State(k.limit.Name)
		}
		p := periodJSON{EntityID: k.key.EntityID, Source: string(k.source), Limit: k.limit.Name, Calendar: k.limit.Calendar.String(), Timezone: store.Limit(k.limit).LocationName(), Period: k.tag,
			Bucket: k.key.Resource, Start: k.start.Format(time.RFC3339), End: k.end.Format(time.RFC3339), Current: k.current}
		switch {
		case k.current:
			left, seen := avail[k.key.EntityID]
			if !seen {
				if left, err = repo.Available(c.ctx, k.key.EntityID, resource); err != nil {
					return nil, err
				}
				avail[k.key.EntityID] = left
			}
			p.Capacity, p.Remaining = k.limit.Capacity, left[k.limit.Name]
			if ok {
				p.Spent = spentIn(s, now.UnixMilli())
			}
		case !ok:
			continue // no bucket: nothing was charged, or it expired
		default:
			p.Capacity = s.Capacity()
			at := now
			if k.end.Before(now) {
				at = k.end
			}
			p.Spent = spentIn(s, at.UnixMilli())
			p.Remaining = p.Capacity - p.Spent
		}
		out = append(out, p)
	}
	return out, nil
}
