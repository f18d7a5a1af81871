package limiter

import (
	"context"
	"errors"
	"time"
)

// This file declares the bucket-level operations RateLimiter and Lease need
// from their backend, in domain terms. *DynamoDBRepository implements them in
// repository_buckets.go; request shapes are built in schema_writes.go.

// Internal outcomes of a conditional write. Nothing was written when either
// is returned, so the caller may re-read or retry (STYLE R20).
var (
	errConditionFailed     = errors.New("limiter: condition check failed")
	errTransactionConflict = errors.New("limiter: transaction conflict")
)

// bucketKey identifies one bucket item.
type bucketKey struct {
	entityID string
	resource string
	shard    int
}

// storedBucket is one bucket item as read from the table.
type storedBucket struct {
	key        bucketKey
	shardCount int
	rf         int64 // shared refill timestamp, epoch ms
	cascade    bool
	parentID   string
	ttl        int64 // epoch seconds; 0 when absent
	// states holds every limit of the item, the hidden wcu included, sorted
	// by limit name.
	states []BucketState
}

// state returns the stored state of limit name.
func (b *storedBucket) state(name string) (BucketState, bool) {
	if b == nil {
		return BucketState{}, false
	}
	for _, s := range b.states {
		if s.LimitName == name {
			return s, true
		}
	}
	return BucketState{}, false
}

// writeKind selects the shape of a bucket write (reference §5.5).
type writeKind int

const (
	// writeCreate puts a whole new item, conditioned on its absence.
	writeCreate writeKind = iota
	// writeNormal refills and consumes under the rf optimistic lock.
	writeNormal
	// writeRetry consumes without refilling, guarded by tk >= consumed.
	writeRetry
	// writeAdjust adds deltas unconditionally (adjustments, rollbacks,
	// compensation).
	writeAdjust
)

// ttlMode says what a write does to the item's ttl attribute.
type ttlMode int

const (
	ttlUnchanged ttlMode = iota // leave ttl as it is (create: no ttl)
	ttlSet                      // set ttl = now + ttlSeconds
	ttlRemove                   // remove ttl (create: no ttl)
)

// limitWrite is one limit's part of a bucket write. Amounts are millitokens.
type limitWrite struct {
	name string
	// consumedMilli is the amount taken (negative gives back). For
	// writeAdjust it is the delta: tk -= delta, tc += delta.
	consumedMilli int64
	// refillMilli is the refill credited by a normal write.
	refillMilli int64
	// initial is set when the item exists but lacks this limit (fix B1):
	// the write initialises tk/cp/ra/rp instead of adding to a missing tk.
	// initial.TokensMilli is the balance before consumption.
	initial *BucketState
}

// bucketWrite is one write to one bucket item.
type bucketWrite struct {
	kind   writeKind
	key    bucketKey
	nowMs  int64
	limits []limitWrite

	// writeCreate: the full item.
	states     []BucketState // post-consume states (wcu injected when absent)
	shardCount int

	// writeCreate and writeNormal: denormalised entity fields. For a normal
	// write they are refreshed only when refreshEntity is set (fix B8).
	cascade       bool
	parentID      string
	refreshEntity bool

	// writeNormal: the rf read before local processing.
	expectedRf int64

	ttl        ttlMode
	ttlSeconds int64
}

// specFailure says why a speculative write was refused.
type specFailure string

const (
	specOK            specFailure = ""
	specBucketMissing specFailure = "bucket_missing"
	specAppExhausted  specFailure = "app_limit_exhausted"
	specWCUExhausted  specFailure = "wcu_exhausted"
	specBothExhausted specFailure = "both_exhausted"
	specLimitMissing  specFailure = "limit_missing"
	specExpired       specFailure = "bucket_expired"
)

// bucketStore is what the limiter needs from its backend for buckets.
type bucketStore interface {
	// loadBuckets reads, in one round trip, the META records of entityIDs and
	// the bucket items of keys. Missing ones are absent from the maps.
	loadBuckets(ctx context.Context, entityIDs []string, keys []bucketKey) (map[string]Entity, map[bucketKey]*storedBucket, error)
	// getBucket reads one bucket item (nil when missing).
	getBucket(ctx context.Context, key bucketKey) (*storedBucket, error)
	// writeBuckets applies writes atomically: one item with the single-item
	// API, several with one TransactWriteItems. It returns errConditionFailed
	// or errTransactionConflict when nothing was written for those reasons.
	writeBuckets(ctx context.Context, writes []bucketWrite) error
	// speculativeConsume tries one conditional write that takes consume and
	// a wcu token from key without reading first.
	speculativeConsume(ctx context.Context, key bucketKey, consume Consume, nowMs int64) (specResult, error)
	// bumpShardCount doubles a bucket's shard count from current (on shard
	// 0) and returns the count in force.
	bumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error)
	// resolveLimits resolves stored limits through the config hierarchy (nil
	// limits when no level has any).
	resolveLimits(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, error)
	// resolveOnUnavailable returns the system on_unavailable mode; it never fails.
	resolveOnUnavailable(ctx context.Context) OnUnavailable
	// syncBucket updates the shard-0 bucket's limit parameters, TTL and
	// stale limits after a config change (a missing bucket is skipped).
	syncBucket(ctx context.Context, entityID, resource string, limits []Limit, ttl ttlMode, ttlSeconds int64, stale []string) error
	// bucketTTLMultiplier is the TTL multiplier for non-entity-config buckets
	// (≤ 0 disables bucket TTL).
	bucketTTLMultiplier() int64
	// entities is the entity cache shared by the repository's namespace.
	entities() *entityCache
	// tableName names the table, for error context.
	tableName() string
	// clock is the repository's clock.
	clock() func() time.Time
}
