// Layer 4, mechanics: a limit that changes kind, calendar period or zone
// keeps what the old one spent.
//
// A budget changed in the middle of its period keeps what the period
// spent: a capacity change does so by itself (the limit stays in its
// bucket and is capped to the new capacity). A change of kind (rolling,
// calendar, prepaid), of calendar period or of zone moves the limit to
// other buckets: a rolling limit lives in the entity's bucket, a calendar
// limit in the bucket of each period of its zone (the period containing an
// instant in one zone may have ended, or not begun, in another), a
// prepaid limit in its balance. SetLimits carries the spend over, at the
// instant t of the change, for each limit name whose definition switches:
//
//   - spent is what the old definition spent at t: its capacity less its
//     balance at t (rolling: the entity's bucket, refilled to t; calendar:
//     the bucket of its period containing t), in millitokens; zero when it
//     has no bucket; more than the capacity when it is in debt. A prepaid
//     balance is money paid in, not a budget: it has spent nothing.
//   - the new definition then holds at most its capacity less spent at t
//     (rolling: the entity's bucket, which refills from there at its rate;
//     calendar: the bucket of its period containing t, whose later periods
//     start full), lowered as LowerTokens lowers (a debt when spent
//     exceeds the capacity). A prepaid balance holds what was paid in:
//     nothing carries into it.
//
// So a daily budget spent at 12:00 UTC and moved to a zone where the next
// day has begun keeps that day spent until the zone's next midnight;
// PerDay drained and replaced by PerCalendarDay is spent until midnight;
// PerCalendarDay replaced by PerDay starts from what the day left. A
// calendar limit switched to prepaid and back finds its period's bucket
// as the switch left it (what the balance paid for in between is not
// charged to the budget).
//
// The spend is carried at once for the limits of one resource of the
// entity: SetLimits with a resource, and DeleteLimits of a resource that
// leaves defaults of another kind or zone in force, which update the
// entity's buckets. A change of defaults (the entity's limits for
// DefaultResource, the resource's or the system's) applies to every
// entity that inherits them, each at its next acquire: see the switches
// of defaults below.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// spendCarried is the spend of an old definition that the new limit keeps.
type spendCarried struct {
	limit      Limit
	spentMilli int64
}

// limitsInForce returns the limits an acquire of entityID on resource
// resolves now (through the config cache); nil when none are configured.
func (rl *RateLimiter) limitsInForce(ctx context.Context, entityID, resource string) ([]Limit, error) {
	limits, _, err := rl.limitsFor(ctx, entityID, resource, acquireOptions{})
	if errors.Is(err, ErrValidation) {
		return nil, nil // none in force (or none usable): nothing was spent
	}
	return limits, err
}

// spentBySwitches returns, for each limit of limits (in force for entityID
// on resource from now) whose definition in old (in force until now)
// switches buckets, what the old definition spent at now, when positive.
func (rl *RateLimiter) spentBySwitches(ctx context.Context, entityID, resource string, old, limits []Limit) ([]spendCarried, error) {
	if resource == DefaultResource {
		return nil, nil // its buckets are those of each resource: see the file comment
	}
	now := rl.nowMs()
	var out []spendCarried
	for _, l := range limits {
		if !spendCarries(l) {
			continue // nothing carries into a balance, nor into slots
		}
		i := slices.IndexFunc(old, func(o Limit) bool { return o.Name == l.Name })
		if i < 0 || !spendCarries(old[i]) || !switchesBucket(old[i], l) {
			continue
		}
		spent, err := rl.spentAt(ctx, entityID, resource, old[i], now)
		if err != nil {
			return nil, err
		}
		if spent > 0 {
			out = append(out, spendCarried{limit: l, spentMilli: spent})
		}
	}
	return out, nil
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

// keepSpent makes the bucket of each switched limit of carry (stored
// already) hold at most its capacity less what the old definition spent:
// an acquire of nothing creates it when it is missing (as the next
// acquire would, full), then its balance is lowered.
func (rl *RateLimiter) keepSpent(ctx context.Context, entityID, resource string, carry []spendCarried) error {
	for _, c := range carry {
		if _, err := rl.acquire(ctx, entityID, resource, Consume{c.limit.Name: 0}, acquireOptions{}); err != nil {
			return fmt.Errorf("keep the spend of %s: %w", c.limit.Name, err)
		}
		key, err := switchedBucket(entityID, resource, c.limit, rl.nowMs())
		if err != nil {
			return err
		}
		left := bucketmath.AddSat(bucketmath.SatMul(c.limit.Capacity, 1000), -c.spentMilli)
		if _, err := rl.lowerItem(ctx, key, Consume{c.limit.Name: bucketmath.FloorDiv(left, 1000)}); err != nil {
			return fmt.Errorf("keep the spend of %s: %w", c.limit.Name, err)
		}
	}
	return nil
}

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
func (rl *RateLimiter) carrySwitches(ctx context.Context, g *entityGroup, base string, cal *Limit, nowMs int64) error {
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
func switchedBack(sw []limitSwitch, def Limit, nowMs int64) bool {
	since := carryHorizon(def, nowMs)
	away := int64(math.MaxInt64)
	for _, s := range sw {
		if s.name == def.Name && s.atMs >= since && s.atMs <= nowMs && !switchesBucket(s.from, def) {
			away = min(away, s.atMs)
		}
	}
	if away == math.MaxInt64 {
		return false
	}
	// A switch back within the same millisecond counts too: the cap is
	// harmless where none was needed.
	for _, s := range sw {
		if s.name == def.Name && s.atMs >= away && s.atMs <= nowMs && spendCarries(s.from) && switchesBucket(s.from, def) {
			return true
		}
	}
	return false
}

// carryHorizon returns the earliest instant (ms) whose spend limit def
// still feels at nowMs: the start of its current period for a calendar
// limit; for a rolling one, nowMs less the time it takes to refill from
// empty.
func carryHorizon(def Limit, nowMs int64) int64 {
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

// capState returns s with its balance, refilled to now, at most capMilli
// (s as it is when it holds no more).
func capState(s store.BucketState, capMilli, now int64) store.BucketState {
	r := s
	r.TokensMilli, _ = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	if r.TokensMilli <= capMilli {
		return s
	}
	r.LastRefillMs = max(s.LastRefillMs, now)
	r.TokensMilli = capMilli
	return r
}

// switchedBackIn reports whether any limit of limits (as resolved, with
// the switches s of its configs) was switched back within the time its
// spend counts (switchedBack): the acquire must then read its buckets
// (the speculative write would charge a bucket that predates the switch
// back as it stands). Without switch records it costs nothing.
func switchedBackIn(s switchSet, limits []Limit, nowMs int64) bool {
	if s.own == nil && s.sys == nil {
		return false
	}
	sw := s.list()
	if len(sw) == 0 {
		return false
	}
	for _, l := range limits {
		if spendCarries(l) && switchedBack(sw, l, nowMs) {
			return true
		}
	}
	return false
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
