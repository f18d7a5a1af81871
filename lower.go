// Layer 4, mechanics: LowerTokens, which lowers a bucket's balances to what
// an outside authority (an LLM provider's rate-limit headers) says is left.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// LowerTokens lowers the balances of (entityID, resource)'s bucket item to
// at most the amounts of limits (whole tokens per limit name), as refilled
// to now: what an outside authority — an LLM provider's rate-limit headers
// — says is really left. A negative amount is a debt that refill must pay
// off before anything is admitted again: every process's next acquire is
// refused with a RetryAfter that reaches the time it is paid off. Because
// the balance lives in the shared item, every process sees the change at
// once.
//
// It never raises a balance: a limit already at or below its amount, a
// limit the item does not hold and a missing item are left alone, and the
// result reports whether anything was written. It costs one read and one
// write conditioned on the item's refill timestamp (retried a few times
// when another write wins the race), plus one unconditional write for a
// debt, which is counted as consumption in the item's totals. Sharded
// items (see the aggregator's sharding) are left alone. With the
// over-limit cache on ([WithOverLimitCache]), a debt is also remembered
// there until it is paid off (at most the cache's maxWait).
func (rl *RateLimiter) LowerTokens(ctx context.Context, entityID, resource string, limits Consume) (bool, error) {
	if err := rl.enter(); err != nil {
		return false, err
	}
	defer rl.exit()
	if ctx == nil {
		return false, errNilContext
	}
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return false, err
	}
	if err := store.ValidateChargedResource(resource); err != nil {
		return false, err
	}
	if err := validateAmounts(limits, true); err != nil {
		return false, err
	}
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	for attempt := 0; ; attempt++ {
		b, err := rl.store.getBucket(ctx, key)
		if err != nil {
			return false, fmt.Errorf("lower tokens %s/%s: %w", entityID, resource, err)
		}
		if b == nil || b.ShardCount > 1 {
			return false, nil
		}
		now := rl.nowMs()
		lw := lowerWrites(b, limits, now)
		if lw.normal == nil && lw.debt == nil {
			return false, nil
		}
		if lw.normal != nil {
			err := rl.store.writeBuckets(ctx, []store.BucketWrite{*lw.normal})
			if (errors.Is(err, store.ErrConditionFailed) || errors.Is(err, store.ErrTransactionConflict)) && attempt+1 < maxRereads {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("lower tokens %s/%s: %w", entityID, resource, err)
			}
		}
		if lw.debt != nil {
			if err := rl.store.writeBuckets(ctx, []store.BucketWrite{*lw.debt}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return false, fmt.Errorf("lower tokens %s/%s: debt: %w", entityID, resource, err)
			}
			if lw.retryAfter > 0 {
				rl.overLimitRemember(lw.after, now, &RateLimitExceededError{RetryAfter: lw.retryAfter})
			}
		}
		return true, nil
	}
}

// lowered is what LowerTokens writes for one item.
type lowered struct {
	// normal refills every limit to now and sets each lowered one to its
	// amount (or to zero when the amount is a debt); nil when no balance is
	// above that.
	normal *store.BucketWrite
	// debt takes the debts below zero; nil when there are none.
	debt *store.BucketWrite
	// after is the item as the writes leave it, and retryAfter how long
	// until its longest debt is paid off.
	after      *store.Bucket
	retryAfter time.Duration
}

// lowerWrites computes the writes that lower b's balances to limits at now.
func lowerWrites(b *store.Bucket, limits Consume, now int64) lowered {
	var out lowered
	normal := store.BucketWrite{Kind: store.WriteNormal, Key: b.Key, NowMs: now, ExpectedRefillMs: b.RefillMs, Base: b}
	debt := store.BucketWrite{Kind: store.WriteAdjust, Key: b.Key, NowMs: now}
	after := *b
	after.States = make([]store.BucketState, len(b.States))
	after.RefillMs = now
	changed := false
	for i, s := range b.States {
		cur, _ := bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		w := store.LimitWrite{Name: s.LimitName, RefillMilli: cur - s.TokensMilli}
		next := cur
		if amount, ok := limits[s.LimitName]; ok {
			target := bucketmath.SatMul(amount, 1000)
			if cur > target {
				if floor := max(target, 0); cur > floor {
					w.RefillMilli = floor - s.TokensMilli
					next = floor
					changed = true
				}
				if target < next {
					debt.Limits = append(debt.Limits, store.LimitWrite{Name: s.LimitName, ConsumedMilli: next - target, CapacityMilli: s.CapacityMilli})
					next = target
					wait := bucketmath.RetryAfter(-target, s.RefillAmountMilli, s.RefillPeriodMs)
					out.retryAfter = max(out.retryAfter, wait)
				}
			}
		}
		normal.Limits = append(normal.Limits, w)
		st := s
		st.TokensMilli, st.LastRefillMs = next, now
		after.States[i] = st
	}
	if changed {
		out.normal = &normal
	}
	if len(debt.Limits) > 0 {
		out.debt = &debt
	}
	out.after = &after
	return out
}
