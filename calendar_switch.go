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
// of defaults (switch_carry.go).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// spendCarried is the spend of an old definition that the new limit keeps.
type spendCarried struct {
	limit      store.Limit
	spentMilli int64
}

// limitsInForce returns the limits an acquire of entityID on resource
// resolves now (through the config cache); nil when none are configured.
func (rl *RateLimiter) limitsInForce(ctx context.Context, entityID, resource string) ([]store.Limit, error) {
	limits, _, err := rl.limitsFor(ctx, entityID, resource, acquireOptions{})
	if errors.Is(err, ErrValidation) {
		return nil, nil // none in force (or none usable): nothing was spent
	}
	return limits, err
}

// spentBySwitches returns, for each limit of limits (in force for entityID
// on resource from now) whose definition in old (in force until now)
// switches buckets, what the old definition spent at now, when positive.
func (rl *RateLimiter) spentBySwitches(ctx context.Context, entityID, resource string, old, limits []store.Limit) ([]spendCarried, error) {
	if resource == DefaultResource {
		return nil, nil // its buckets are those of each resource: see the file comment
	}
	now := rl.nowMs()
	var out []spendCarried
	for _, l := range limits {
		if !spendCarries(l) {
			continue // nothing carries into a balance, nor into slots
		}
		i := slices.IndexFunc(old, func(o store.Limit) bool { return o.Name == l.Name })
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

// keepSpent makes the bucket of each switched limit of carry (stored
// already) hold at most its capacity less what the old definition spent:
// an acquire of nothing creates it when it is missing (as the next
// acquire would, full), then its balance is lowered.
func (rl *RateLimiter) keepSpent(ctx context.Context, entityID, resource string, carry []spendCarried) error {
	for _, c := range carry {
		if _, err := rl.acquire(ctx, entityID, resource, Consume{c.limit.Name: 0}, acquireOptions{}, nil); err != nil {
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
