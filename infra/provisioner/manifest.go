package provisioner

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// Limit is one limit declaration: Capacity tokens refilled RefillAmount
// (default Capacity) every RefillPeriod seconds (default 60), or, with
// Calendar ("day", "week" or "month"), a calendar limit of Capacity tokens
// each period, starting at 00:00 in Timezone (an IANA zone; empty is UTC),
// without refill fields, or, with Prepaid, a prepaid balance whose
// Capacity (optional: [store.DefaultPrepaidCapacity]) is the ceiling of its
// top-ups, without refill or calendar fields, or, with InFlight, a limit
// of Capacity calls in flight at once, with no other field.
type Limit struct {
	Capacity     Number `json:"Capacity"`
	RefillAmount Number `json:"RefillAmount,omitempty"`
	RefillPeriod Number `json:"RefillPeriod,omitempty"`
	Calendar     string `json:"Calendar,omitempty"`
	Timezone     string `json:"Timezone,omitempty"`
	Prepaid      Bool   `json:"Prepaid,omitempty"`
	InFlight     Bool   `json:"InFlight,omitempty"`
}

// Bool is a boolean given as a JSON boolean or as the string "true" or
// "false" (CloudFormation passes every property value as a string).
type Bool bool

// UnmarshalJSON accepts true, false, "true" and "false".
func (b *Bool) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "true", `"true"`:
		*b = true
	case "false", `"false"`, "null":
		*b = false
	default:
		return fmt.Errorf("%s is not a boolean (true or false)", data)
	}
	return nil
}

// PrepaidLimit returns the validated prepaid limit name whose ceiling of
// top-ups is capacity ([store.DefaultPrepaidCapacity] when zero).
func PrepaidLimit(name string, capacity int64) (limiter.Limit, error) {
	l := limiter.Prepaid(name)
	if capacity != 0 {
		l = l.WithBurst(capacity)
	}
	if err := l.Validate(); err != nil {
		return limiter.Limit{}, err
	}
	return l, nil
}

// ParseCalendar returns the calendar period named "day", "week" or
// "month".
func ParseCalendar(name string) (store.CalendarPeriod, error) {
	for _, p := range []store.CalendarPeriod{store.CalendarDay, store.CalendarWeek, store.CalendarMonth} {
		if name == p.String() {
			return p, nil
		}
	}
	return store.CalendarNone, fmt.Errorf("calendar %q: use day, week or month", name)
}

// CalendarLimit returns the validated calendar limit of capacity tokens
// each period, in the IANA zone tz ("" is UTC), with its location loaded
// as stored limits are read back (store.LoadCalendarLocation), so that a
// declared limit and the stored one compare equal.
func CalendarLimit(name string, capacity int64, period store.CalendarPeriod, tz string) (limiter.Limit, error) {
	loc, err := store.LoadCalendarLocation(tz)
	if err != nil {
		return limiter.Limit{}, fmt.Errorf("timezone %q: not an IANA time zone (e.g. America/New_York)", tz)
	}
	l := limiter.Limit{Name: name, Capacity: capacity, Calendar: period}.InLocation(loc)
	if err := l.Validate(); err != nil {
		return limiter.Limit{}, err
	}
	return l, nil
}

// calendarLimit converts a declaration with Calendar.
func calendarLimit(name string, d Limit) (limiter.Limit, error) {
	if d.RefillAmount != 0 || d.RefillPeriod != 0 {
		return limiter.Limit{}, errors.New("a calendar limit resets each period and takes no RefillAmount or RefillPeriod")
	}
	period, err := ParseCalendar(d.Calendar)
	if err != nil {
		return limiter.Limit{}, err
	}
	return CalendarLimit(name, int64(d.Capacity), period, d.Timezone)
}

// Number is an integer given as a JSON number or a decimal string (as
// CloudFormation sends it). Zero means not given.
type Number int64

// UnmarshalJSON accepts 5 and "5".
func (n *Number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not an integer", b)
	}
	*n = Number(v)
	return nil
}

// Limits maps limit names to declarations.
type Limits map[string]Limit

// System is the namespace's defaults.
type System struct {
	OnUnavailable string `json:"OnUnavailable,omitempty"`
	Limits        Limits `json:"Limits,omitempty"`
}

// Resource is one resource's defaults, or an entity's limits on one
// resource.
type Resource struct {
	Limits Limits `json:"Limits"`
}

// Entity is one entity's limits per resource ("_default_" for every
// resource without its own, "*" for the entity-wide limits that every
// acquire of the entity is charged against, whatever its resource).
type Entity struct {
	Resources map[string]Resource `json:"Resources"`
}

// Properties are the custom resource's properties.
type Properties struct {
	ServiceToken string              `json:"ServiceToken,omitempty"`
	TableName    string              `json:"TableName"`
	Namespace    string              `json:"Namespace,omitempty"`
	System       *System             `json:"System,omitempty"`
	Resources    map[string]Resource `json:"Resources,omitempty"`
	Entities     map[string]Entity   `json:"Entities,omitempty"`
}

// ParseProperties decodes a resource's properties (as the event carries
// them) and fills the defaults: TableName defaultTable when empty,
// Namespace "default".
func ParseProperties(raw map[string]any, defaultTable string) (Properties, error) {
	var p Properties
	if raw == nil {
		return p, errors.New("no properties")
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("invalid properties: %w", err)
	}
	if p.TableName == "" {
		p.TableName = defaultTable
	}
	if p.TableName == "" {
		return p, errors.New("invalid properties: TableName is required")
	}
	if p.Namespace == "" {
		p.Namespace = limiter.DefaultNamespace
	}
	return p, nil
}

// Changes returns how many changes p declares, each one write of the
// provisioner: the system defaults, each resource's defaults and each
// entity's limits on each resource. An Update also deletes what the old
// properties declared and p does not.
func (p Properties) Changes() int {
	n := len(p.Resources)
	if p.System != nil {
		n++
	}
	for _, e := range p.Entities {
		n += len(e.Resources)
	}
	return n
}

// desired is what a set of properties declares: with its limits, validated
// (desired), or only the names of what it declares (declared).
type desired struct {
	system        bool
	systemLimits  []limiter.Limit
	onUnavailable limiter.OnUnavailable
	resources     map[string][]limiter.Limit
	entities      map[[2]string][]limiter.Limit // {entity, resource}
}

// changes returns how many changes d holds.
func (d desired) changes() int {
	n := len(d.resources) + len(d.entities)
	if d.system {
		n++
	}
	return n
}

// maxReported bounds the problems an invalid manifest's error lists (a
// CloudFormation reason is shown in one line of the console).
const maxReported = 10

// manifestError lists every problem of a manifest.
type manifestError struct{ problems []string }

func (e *manifestError) Error() string {
	shown := e.problems[:min(len(e.problems), maxReported)]
	msg := "invalid limits: " + strings.Join(shown, "; ")
	if more := len(e.problems) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	return msg
}

func toLimits(path string, ls Limits) ([]limiter.Limit, []string) {
	out := make([]limiter.Limit, 0, len(ls))
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(ls)) {
		d := ls[name]
		if d.InFlight {
			if d.RefillAmount != 0 || d.RefillPeriod != 0 || d.Calendar != "" || d.Timezone != "" || d.Prepaid {
				problems = append(problems, fmt.Sprintf("%s.%s: a limit of calls in flight takes no RefillAmount, RefillPeriod, Calendar, Timezone or Prepaid", path, name))
				continue
			}
			if d.Capacity <= 0 {
				problems = append(problems, fmt.Sprintf("%s.%s: Capacity must be a positive integer", path, name))
				continue
			}
			l := limiter.InFlight(name, int64(d.Capacity))
			if err := l.Validate(); err != nil {
				problems = append(problems, fmt.Sprintf("%s.%s: %v", path, name, err))
				continue
			}
			out = append(out, l)
			continue
		}
		if d.Prepaid {
			if d.RefillAmount != 0 || d.RefillPeriod != 0 || d.Calendar != "" || d.Timezone != "" {
				problems = append(problems, fmt.Sprintf("%s.%s: a prepaid balance takes no RefillAmount, RefillPeriod, Calendar or Timezone", path, name))
				continue
			}
			l, err := PrepaidLimit(name, int64(d.Capacity))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s.%s: %v", path, name, err))
				continue
			}
			out = append(out, l)
			continue
		}
		if d.Capacity <= 0 {
			problems = append(problems, fmt.Sprintf("%s.%s: Capacity must be a positive integer", path, name))
			continue
		}
		if d.Calendar != "" {
			l, err := calendarLimit(name, d)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s.%s: %v", path, name, err))
				continue
			}
			out = append(out, l)
			continue
		}
		if d.Timezone != "" {
			problems = append(problems, fmt.Sprintf("%s.%s: Timezone is only for a calendar limit (Calendar day, week or month)", path, name))
			continue
		}
		refill, period := int64(d.Capacity), int64(60)
		if d.RefillAmount != 0 {
			refill = int64(d.RefillAmount)
		}
		if d.RefillPeriod != 0 {
			period = int64(d.RefillPeriod)
		}
		if period <= 0 || period > int64(1<<62)/int64(time.Second) {
			problems = append(problems, fmt.Sprintf("%s.%s: RefillPeriod must be a positive number of seconds", path, name))
			continue
		}
		l := limiter.Limit{Name: name, Capacity: int64(d.Capacity), RefillAmount: refill, RefillPeriod: time.Duration(period) * time.Second}
		err := l.Validate()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s.%s: %v", path, name, err))
			continue
		}
		out = append(out, l)
	}
	return out, problems
}

// checkName returns the problem of a name the library refuses, or "".
func checkName(path string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%s: %v", path, err)
}

// ValidateEntityResource checks the resource of an entity's limits: a
// resource name, "_default_" (every resource without its own) or "*"
// ([limiter.AllResources]: the entity-wide limits, charged by every acquire
// of the entity), as RateLimiter.SetLimits takes them.
func ValidateEntityResource(resource string) error {
	if resource == limiter.DefaultResource || resource == limiter.AllResources {
		return nil
	}
	return store.ValidateResource(resource)
}

// ValidateDefaultsResource checks the resource of resource defaults: a
// resource name, or "*" ([limiter.AllResources]: the entity-wide limits of
// every entity without its own).
func ValidateDefaultsResource(resource string) error {
	if resource == limiter.AllResources {
		return nil
	}
	return store.ValidateResource(resource)
}

// nameProblems checks the table, namespace, resource and entity names of p
// with the library's rules, so that nothing is written for a manifest that
// a later write would refuse.
func (p Properties) nameProblems() []string {
	var problems []string
	add := func(s string) {
		if s != "" {
			problems = append(problems, s)
		}
	}
	add(checkName("TableName", ddbschema.ValidateStackName(p.TableName)))
	if p.Namespace == ddbschema.ReservedNamespace {
		problems = append(problems, fmt.Sprintf("Namespace %q: reserved for system use", p.Namespace))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Resources)) {
		add(checkName("Resources."+name, ValidateDefaultsResource(name)))
	}
	for _, id := range slices.Sorted(maps.Keys(p.Entities)) {
		add(checkName("Entities."+id, store.ValidateIdentifier(id, "entity_id")))
		for _, res := range slices.Sorted(maps.Keys(p.Entities[id].Resources)) {
			add(checkName("Entities."+id+".Resources."+res, ValidateEntityResource(res)))
		}
	}
	return problems
}

// desired validates the whole of p — names with the library's rules,
// numbers, the on-unavailable mode, and that every resource and entity
// entry declares limits — and returns what it declares. The error, a
// *manifestError, lists every problem found.
func (p Properties) desired() (desired, error) {
	d := desired{resources: map[string][]limiter.Limit{}, entities: map[[2]string][]limiter.Limit{}}
	problems := p.nameProblems()
	if s := p.System; s != nil {
		d.system = true
		var ps []string
		d.systemLimits, ps = toLimits("System.Limits", s.Limits)
		problems = append(problems, ps...)
		d.onUnavailable = limiter.OnUnavailable(strings.ToLower(s.OnUnavailable))
		if d.onUnavailable != "" && !d.onUnavailable.Valid() {
			problems = append(problems, fmt.Sprintf("System.OnUnavailable %q: use allow or block", s.OnUnavailable))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Resources)) {
		path := "Resources." + name + ".Limits"
		ls, ps := toLimits(path, p.Resources[name].Limits)
		problems = append(problems, ps...)
		if len(p.Resources[name].Limits) == 0 {
			problems = append(problems, path+": no limits declared")
		}
		d.resources[name] = ls
	}
	for _, id := range slices.Sorted(maps.Keys(p.Entities)) {
		for _, res := range slices.Sorted(maps.Keys(p.Entities[id].Resources)) {
			path := "Entities." + id + ".Resources." + res + ".Limits"
			ls, ps := toLimits(path, p.Entities[id].Resources[res].Limits)
			problems = append(problems, ps...)
			if len(p.Entities[id].Resources[res].Limits) == 0 {
				problems = append(problems, path+": no limits declared")
			}
			d.entities[[2]string{id, res}] = ls
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return desired{}, &manifestError{problems: problems}
	}
	return d, nil
}

// declared returns the names p declares, for deleting them: entries whose
// names the library refuses are left out, since nothing can have been
// stored under them; numbers are not looked at.
func (p Properties) declared() desired {
	d := desired{system: p.System != nil, resources: map[string][]limiter.Limit{}, entities: map[[2]string][]limiter.Limit{}}
	for name := range p.Resources {
		if ValidateDefaultsResource(name) == nil {
			d.resources[name] = nil
		}
	}
	for id, e := range p.Entities {
		if store.ValidateIdentifier(id, "entity_id") != nil {
			continue
		}
		for res := range e.Resources {
			if ValidateEntityResource(res) == nil {
				d.entities[[2]string{id, res}] = nil
			}
		}
	}
	return d
}
