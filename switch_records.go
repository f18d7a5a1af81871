// Layer 3, the rules: the records of limits that switch buckets (a change
// of kind, calendar period or zone), which calendar_switch.go carries the
// spend across; here what a config keeps of them and what an acquire
// finds, with no read of any bucket.

package limiter

import (
	"slices"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// switchesBucket reports whether a limit defined as old, changed to l,
// moves to other buckets: a change of kind, calendar period or zone.
func switchesBucket(old, l store.Limit) bool {
	return old.Prepaid != l.Prepaid || old.Calendar != l.Calendar || old.LocationName() != l.LocationName()
}

// spendCarries reports whether a switch to or from l carries what was
// spent, as its kind says (a balance and slots have nothing to carry).
func spendCarries(l store.Limit) bool { return kindOf(l).carriesSpend() }

// maxSwitches and maxSwitchAge bound the switch records a config keeps
// (the system config's, those of deleted DefaultResource configs too).
const (
	maxSwitches  = 32
	maxSwitchAge = 62 * 24 * time.Hour
)

// limitSwitch is a switch record as an acquire applies it: the old
// definition resolved (an inherited one from the levels after the config).
// inForce marks a switch away from the definition in force now, whatever
// it is: the record of an entity's first DefaultResource config set over
// the defaults it inherited, kept after that config was deleted (the
// entity inherits them again).
type limitSwitch struct {
	name    string
	from    store.Limit
	atMs    int64
	inForce bool
}

// switchSet is what an acquire of entityID on resource needs to find the
// switch records that apply to its limits, as the resolution found them
// (no copy, no allocation): own, the records of the config the limits
// come from, inherited the limits of the first config after it (an
// inherited definition's), and sys the system config's records (of
// which those of entityID's scope apply).
type switchSet struct {
	own                []store.LimitSwitch
	inherited          []store.Limit
	sys                []store.LimitSwitch
	entityID, resource string
}

// recorded reports whether s holds any switch record (the common set
// holds none: no limit of the entity ever changed kind), so that a caller
// can skip what only a switch needs, such as reading the clock.
func (s switchSet) recorded() bool { return s.own != nil || s.sys != nil }

// list returns the switches that apply: own's for resource or every
// resource and every entity, then sys's of entityID's scope.
func (s switchSet) list() []limitSwitch {
	var out []limitSwitch
	for _, r := range s.own {
		if (r.Resource != "" && r.Resource != s.resource) || r.Entity != "" {
			continue
		}
		from := r.From
		if r.Inherited {
			i := slices.IndexFunc(s.inherited, func(l store.Limit) bool { return l.Name == r.Name })
			if i < 0 {
				continue
			}
			from = s.inherited[i]
		}
		out = append(out, limitSwitch{name: r.Name, from: from, atMs: r.AtMs})
	}
	for _, r := range s.sys {
		if r.Entity == "" || r.Entity != s.entityID || (r.Resource != "" && r.Resource != s.resource) {
			continue
		}
		out = append(out, limitSwitch{name: r.Name, from: r.From, atMs: r.AtMs, inForce: r.Inherited})
	}
	return out
}

// movedSwitches returns the records recs of a deleted config of defaults
// as the system config keeps them: scoped to resource (a resource's
// defaults: the records of another resource left out) or to entityID (an
// entity's DefaultResource config). Without them, a definition switched
// away from and back to by the deleted config's deletion would find its
// bucket as it stands: a day spent in one zone, moved to another and
// spent there, then deleted back to the first zone's day, would admit
// that day again. An inherited record of an entity's config stays
// inherited: it is a switch away from what the entity inherits, which it
// inherits again (limitSwitch.inForce); one of a resource's has no
// definition to name and is left out (none is written).
func movedSwitches(recs []store.LimitSwitch, resource, entityID string) []store.LimitSwitch {
	var out []store.LimitSwitch
	for _, r := range recs {
		if r.Entity != "" || (resource != "" && r.Resource != "" && r.Resource != resource) || (r.Inherited && entityID == "") {
			continue
		}
		if resource != "" {
			r.Resource = resource
		}
		r.Entity = entityID
		out = append(out, r)
	}
	return out
}

// recordSwitches returns the switch records of a config of defaults whose
// limits change from old to limits at nowMs: those of kept younger than
// maxSwitchAge, then one (scoped to resource, "" for all) per limit of
// limits, rolling or calendar, whose definition in old is rolling or
// calendar and switches buckets; with inherited (old is what the levels
// after the config give, which depends on the resource), one per rolling
// or calendar limit, marked Inherited. added is how many are new.
func recordSwitches(kept []store.LimitSwitch, old, limits []store.Limit, inherited bool, resource string, nowMs int64) (out []store.LimitSwitch, added int) {
	for _, s := range kept {
		if s.AtMs >= nowMs-maxSwitchAge.Milliseconds() {
			out = append(out, s)
		}
	}
	for _, l := range limits {
		if !spendCarries(l) {
			continue // nothing carries into a balance, nor into slots
		}
		if inherited {
			out = append(out, store.LimitSwitch{Name: l.Name, Resource: resource, Inherited: true, AtMs: nowMs})
			added++
			continue
		}
		i := slices.IndexFunc(old, func(o store.Limit) bool { return o.Name == l.Name })
		if i < 0 || !spendCarries(old[i]) || !switchesBucket(old[i], l) {
			continue
		}
		out = append(out, store.LimitSwitch{Name: l.Name, Resource: resource, From: old[i], AtMs: nowMs})
		added++
	}
	if len(out) > maxSwitches {
		out = out[len(out)-maxSwitches:]
	}
	return out, added
}
