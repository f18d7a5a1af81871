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
// definition, or whose new bucket exists already, starts as before. A
// record is kept for maxSwitchAge, the last maxSwitches of them.
//
// DeleteResourceDefaults records its switches in the system config, for
// the resource alone (the system defaults are what the resource's
// entities inherit then); DeleteLimits of an entity's DefaultResource
// config records its limits there too, for the entity alone, whichever
// defaults (a resource's or the system's) its resources inherit then.

// carrySwitches sets g.startMilli for each limit of g missing from its
// bucket (read already) that g.switches switched to: the balance the
// limit's new bucket starts with (see the comment above maxSwitches).
// base is the resource the limits are defined on, and cal the calendar
// limit whose period bucket g is (nil for the entity's bucket).
func (rl *RateLimiter) carrySwitches(ctx context.Context, g *entityGroup, base string, cal *Limit, nowMs int64) error {
	if g.switches.own == nil && g.switches.sys == nil {
		return nil
	}
	var sw []limitSwitch
	for _, l := range g.limits {
		if _, ok := g.bucket.State(l.Name); ok {
			continue
		}
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
		left, ok, err := rl.switchedStart(ctx, g.entityID, base, def, sw, nowMs)
		if err != nil {
			return fmt.Errorf("carry the spend of %s: %w", def.Name, err)
		}
		if ok {
			if g.startMilli == nil {
				g.startMilli = make(map[string]int64, 1)
			}
			g.startMilli[l.Name] = left
		}
	}
	return nil
}

// switchedStart returns the balance (millitokens) limit def of entityID
// on resource starts with at nowMs after the switches to it of sw: its
// capacity less the most an old definition had spent at its switch,
// refilled since for a rolling limit; for a calendar limit only the
// switches within its current period count. ok is false when nothing was
// spent.
func (rl *RateLimiter) switchedStart(ctx context.Context, entityID, resource string, def Limit, sw []limitSwitch, nowMs int64) (left int64, ok bool, err error) {
	full := bucketmath.SatMul(def.Capacity, 1000)
	left = full
	periodStart := int64(math.MinInt64)
	if def.IsCalendar() {
		start, _, _ := def.CalendarPeriodAt(time.UnixMilli(nowMs))
		periodStart = start.UnixMilli()
	}
	for _, s := range sw {
		if s.name != def.Name || s.atMs > nowMs || s.atMs < periodStart ||
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
func switchedBucket(entityID, resource string, l Limit, now int64) (store.BucketKey, error) {
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
func (rl *RateLimiter) spentAt(ctx context.Context, entityID, resource string, l Limit, now int64) (int64, error) {
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
