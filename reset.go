package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/zaelimiter/limiter/store"
)

// maxResetRounds bounds the rounds of Reset whose bucket items change
// (appear, vanish or lose a limit) between its read and its write.
const maxResetRounds = 3

// Reset fills the bucket of (entityID, resource) — every limit, on every
// shard — so that the next acquire starts from full capacity, as if the
// bucket had been idle for its whole refill time. The bucket keeps its
// parameters, totals and TTL; the parent's bucket is not touched. A bucket
// that does not exist is full already and is left missing. It reads the
// bucket and writes every shard in one atomic write, and records a
// bucket_reset audit event with the number of bucket items reset.
//
// Reset is the throttle's "reset" of other rate limiters; [RateLimiter.Available]
// is their "peek".
func (rl *RateLimiter) Reset(ctx context.Context, entityID, resource string) error {
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := store.ValidateResource(resource); err != nil {
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

// resetOnce reads the bucket's shards and writes a store.WriteReset to each that
// exists; it returns how many it wrote.
func (rl *RateLimiter) resetOnce(ctx context.Context, entityID, resource string) (int, error) {
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	first, err := rl.store.getBucket(ctx, key)
	if err != nil || first == nil {
		return 0, err
	}
	buckets := []*store.Bucket{first}
	if first.ShardCount > 1 {
		keys := make([]store.BucketKey, 0, first.ShardCount-1)
		for shard := 1; shard < first.ShardCount; shard++ {
			keys = append(keys, store.BucketKey{EntityID: entityID, Resource: resource, Shard: shard})
		}
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
	now := rl.nowMs()
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
