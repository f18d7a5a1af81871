// Layer 4, mechanics: the switches of defaults at the acquire: a bucket
// that an acquire creates for a limit whose definition switched buckets
// in a config of defaults starts from what the old definition had spent
// (the records are switch_records.go's, the carry of SetLimits
// calendar_switch.go's).

package limiter

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Switches of defaults. A change of the limits of a config of defaults (an
// entity's DefaultResource config, a resource's or the system's) applies
// to every entity that inherits it, and is not carried at the change: the
// config keeps a record of each limit whose definition switches buckets
// (store.LimitSwitch: the old definition and the instant), and an acquire
// that creates the new definition's bucket (the period's bucket of a
// calendar limit, the limit in the entity's bucket of a rolling one)
// starts it from what the old definition had spent at that instant, as
// SetLimits would have left it: a calendar limit only in the period that
// contains the change (later periods start full), a rolling one refilled
// at its rate since. An entity that spent nothing under the old
// definition starts as before. A new bucket that exists already predates
// the switch only after a switch back (away from its definition, then to
// it again, within the time its spend counts): it then holds at most what
// the switches leave (switchedBack), so that flipping a default between
// two zones admits one period's budget, not one per zone. A record is
// kept for maxSwitchAge, the last maxSwitches of them.
//
// DeleteResourceDefaults records its switches in the system config, for
// the resource alone (the system defaults are what the resource's
// entities inherit then); DeleteLimits of an entity's DefaultResource
// config records its limits there too, for the entity alone, whichever
// defaults (a resource's or the system's) its resources inherit then.

// carrySwitches sets g.startMilli for each limit of g missing from its
// bucket (read already) that g.switches switched to: the balance the
// limit's new bucket starts with (see the comment above maxSwitches); and
// g.capMilli for each limit in its bucket that a switch back reached (see
// switchedBack): the most its balance may hold now. base is the resource
// the limits are defined on, and cal the calendar limit whose period
// bucket g is (nil for the entity's bucket).
func (rl *RateLimiter) carrySwitches(ctx context.Context, g *entityGroup, base string, cal *store.Limit, nowMs int64) error {
	if g.switches.own == nil && g.switches.sys == nil {
		return nil
	}
	var sw []limitSwitch
	for _, l := range g.limits {
		_, found := g.bucket.State(l.Name)
		def := l
		if cal != nil {
			def = *cal
		}
		if !spendCarries(def) {
			continue
		}
		if sw == nil {
			if sw = g.switches.list(); len(sw) == 0 {
				return nil
			}
		}
		if found && !switchedBack(sw, def, nowMs) {
			continue
		}
		left, ok, err := rl.switchedStart(ctx, g.entityID, base, def, sw, nowMs)
		if err != nil {
			return fmt.Errorf("carry the spend of %s: %w", def.Name, err)
		}
		switch {
		case !ok:
		case found:
			if g.capMilli == nil {
				g.capMilli = make(map[string]int64, 1)
			}
			g.capMilli[l.Name] = left
		default:
			if g.startMilli == nil {
				g.startMilli = make(map[string]int64, 1)
			}
			g.startMilli[l.Name] = left
		}
	}
	return nil
}

// switchedBack reports whether sw holds, for limit def, a switch away from
// def's buckets followed by a switch back to them from other buckets, both
// within the time a spend of def still counts (its current period for a
// calendar limit; the time it takes to refill from empty for a rolling
// one). def's bucket may then predate the switch back, and hold what the
// other definition's spend should have taken: flipping a default between
// two zones within a day would admit each zone's budget once. Its
// balance is then capped at what switchedStart leaves (a cap, so applying
// it again changes nothing). Without a switch away first, def's bucket is
// created after the switch to it, with the carry.
func switchedBack(sw []limitSwitch, def store.Limit, nowMs int64) bool {
	since := carryHorizon(def, nowMs)
	away := int64(math.MaxInt64)
	for _, s := range sw {
		if s.name == def.Name && s.atMs >= since && s.atMs <= nowMs && (s.inForce || !switchesBucket(s.from, def)) {
			away = min(away, s.atMs)
		}
	}
	if away == math.MaxInt64 {
		return false
	}
	// A switch back within the same millisecond counts too: the cap is
	// harmless where none was needed.
	for _, s := range sw {
		if s.name == def.Name && s.atMs >= away && s.atMs <= nowMs && !s.inForce && spendCarries(s.from) && switchesBucket(s.from, def) {
			return true
		}
	}
	return false
}

// carryHorizon returns the earliest instant (ms) whose spend limit def
// still feels at nowMs: the start of its current period for a calendar
// limit; for a rolling one, nowMs less the time it takes to refill from
// empty.
func carryHorizon(def store.Limit, nowMs int64) int64 {
	if def.IsCalendar() {
		start, _, _ := def.CalendarPeriodAt(time.UnixMilli(nowMs))
		return start.UnixMilli()
	}
	if def.RefillAmount <= 0 {
		return math.MinInt64
	}
	periods := (def.Capacity + def.RefillAmount - 1) / def.RefillAmount
	return bucketmath.AddSat(nowMs, -bucketmath.SatMul(periods, def.RefillPeriod.Milliseconds()))
}

// switchedStart returns the balance (millitokens) limit def of entityID
// on resource starts with at nowMs after the switches to it of sw: its
// capacity less the most an old definition had spent at its switch,
// refilled since for a rolling limit; for a calendar limit only the
// switches within its current period count. ok is false when nothing was
// spent.
func (rl *RateLimiter) switchedStart(ctx context.Context, entityID, resource string, def store.Limit, sw []limitSwitch, nowMs int64) (left int64, ok bool, err error) {
	full := bucketmath.SatMul(def.Capacity, 1000)
	left = full
	periodStart := int64(math.MinInt64)
	if def.IsCalendar() {
		start, _, _ := def.CalendarPeriodAt(time.UnixMilli(nowMs))
		periodStart = start.UnixMilli()
	}
	for _, s := range sw {
		if s.name != def.Name || s.atMs > nowMs || s.atMs < periodStart || s.inForce ||
			!spendCarries(s.from) || !switchesBucket(s.from, def) {
			continue
		}
		spent, err := rl.spentAt(ctx, entityID, resource, s.from, s.atMs)
		if err != nil {
			return 0, false, err
		}
		if spent <= 0 {
			continue
		}
		v := bucketmath.AddSat(full, -spent)
		if !def.IsCalendar() {
			st := bucketStateFromLimit(entityID, resource, def, s.atMs)
			st.TokensMilli = v
			v = st.RefilledAt(time.UnixMilli(nowMs)).TokensMilli
		}
		if v < left {
			left, ok = v, true
		}
	}
	return left, ok, nil
}

// switchedBucket returns the bucket item that holds limit l (rolling or
// calendar) of entityID on resource at now.
func switchedBucket(entityID, resource string, l store.Limit, now int64) (store.BucketKey, error) {
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	if l.IsCalendar() {
		bucket, _, _, err := ownBucket(l, resource, time.UnixMilli(now), 0) // a calendar limit: no slot generation
		if err != nil {
			return key, err
		}
		key.Resource = bucket
	}
	return key, nil
}

// spentAt returns what limit l (rolling or calendar) of entityID on
// resource has spent at now: its capacity less its balance refilled to
// now (millitokens); zero without a bucket.
func (rl *RateLimiter) spentAt(ctx context.Context, entityID, resource string, l store.Limit, now int64) (int64, error) {
	key, err := switchedBucket(entityID, resource, l, now)
	if err != nil {
		return 0, err
	}
	b, err := rl.store.getBucket(ctx, key)
	if err != nil || b == nil {
		return 0, err
	}
	s, ok := b.State(l.Name)
	if !ok {
		return 0, nil
	}
	s = s.RefilledAt(time.UnixMilli(now))
	return bucketmath.AddSat(s.CapacityMilli, -s.TokensMilli), nil
}
