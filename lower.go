// Layer 4, mechanics: the writes of a bucket's balances from outside an
// acquire: LowerTokens, which lowers them to what an outside authority (an
// LLM provider's rate-limit headers) says is left, and Reset, which fills
// them.

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
// over-limit cache on ([Options.OverLimitCacheMaxWait]), a debt is also remembered
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
	return rl.lowerItem(ctx, store.BucketKey{EntityID: entityID, Resource: resource}, limits)
}

// lowerItem is LowerTokens of the bucket item key (validated): its
// balances lowered to at most limits, refilled to now.
func (rl *RateLimiter) lowerItem(ctx context.Context, key store.BucketKey, limits Consume) (bool, error) {
	entityID, resource := key.EntityID, key.Resource
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
	normal := store.BucketWrite{Kind: store.WriteNormal, Key: b.Key, NowMs: now, ExpectedRefillMs: b.RefillMs, Base: b, Incarnation: b.Incarnation}
	debt := store.BucketWrite{Kind: store.WriteAdjust, Key: b.Key, NowMs: now, Incarnation: b.Incarnation}
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

// maxResetRounds bounds the rounds of Reset whose bucket items change
// (appear, vanish or lose a limit) between its read and its write.
const maxResetRounds = 3

// Reset fills the bucket of (entityID, resource) — every limit, on every
// shard — so that the next acquire starts from full capacity, as if the
// bucket had been idle for its whole refill time, and with it the current
// period's bucket of each calendar limit of the entity on resource
// (resolved as an acquire resolves them), so that the period's whole
// budget is available again; earlier periods are left as they are. The
// buckets keep their parameters, totals and TTL; the parent's buckets are
// not touched. A bucket that does not exist is full already and is left
// missing. It reads the buckets and writes them all in one atomic write,
// and records a bucket_reset audit event with the number of bucket items
// reset.
//
// Reset is the throttle's "reset" of other rate limiters; [RateLimiter.Available]
// is their "peek".
func (rl *RateLimiter) Reset(ctx context.Context, entityID, resource string) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := store.ValidateChargedResource(resource); err != nil {
		return err
	}
	n := 0
	for round := 0; ; round++ {
		n, err = rl.resetOnce(ctx, entityID, resource)
		if !errors.Is(err, store.ErrConditionFailed) || round+1 >= maxResetRounds {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("reset %s/%s: %w", entityID, resource, err)
	}
	rl.overLimitSeen(store.BucketWrite{Key: store.BucketKey{EntityID: entityID, Resource: resource}})
	return rl.record(ctx, principal, store.AuditBucketReset, entityID, resource, map[string]any{"buckets_reset": int64(n)})
}

// resetOnce reads the bucket's shards and the current period buckets of
// its calendar limits and writes a store.WriteReset to each that exists;
// it returns how many it wrote.
func (rl *RateLimiter) resetOnce(ctx context.Context, entityID, resource string) (int, error) {
	now := rl.nowMs()
	keys, err := rl.currentPeriodKeys(ctx, entityID, resource, now)
	if err != nil {
		return 0, err
	}
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	first, err := rl.store.getBucket(ctx, key)
	if err != nil {
		return 0, err
	}
	var buckets []*store.Bucket
	if first != nil {
		buckets = append(buckets, first)
		for shard := 1; shard < first.ShardCount; shard++ {
			keys = append(keys, store.BucketKey{EntityID: entityID, Resource: resource, Shard: shard})
		}
	}
	if len(keys) > 0 {
		_, more, err := rl.store.loadBuckets(ctx, nil, keys)
		if err != nil {
			return 0, err
		}
		for _, k := range keys {
			if b := more[k]; b != nil {
				buckets = append(buckets, b)
			}
		}
	}
	if len(buckets) == 0 {
		return 0, nil
	}
	writes := make([]store.BucketWrite, len(buckets))
	for i, b := range buckets {
		w := store.BucketWrite{Kind: store.WriteReset, Key: b.Key, NowMs: now}
		for _, s := range b.States {
			w.Limits = append(w.Limits, store.LimitWrite{Name: s.LimitName})
		}
		writes[i] = w
	}
	return len(writes), rl.store.writeBuckets(ctx, writes)
}

// currentPeriodKeys returns the bucket keys of the periods containing nowMs
// of the calendar limits that (entityID, resource) resolves to; none when
// it has no limits.
func (rl *RateLimiter) currentPeriodKeys(ctx context.Context, entityID, resource string, nowMs int64) ([]store.BucketKey, error) {
	limits, _, _, err := rl.configs.resolve(ctx, entityID, resource)
	if err != nil {
		return nil, err
	}
	var keys []store.BucketKey
	for _, l := range limits {
		if !l.IsCalendar() {
			continue
		}
		bucket, _, err := l.CalendarBucket(resource, time.UnixMilli(nowMs))
		if err != nil {
			return nil, err
		}
		keys = append(keys, store.BucketKey{EntityID: entityID, Resource: bucket})
	}
	return keys, nil
}
