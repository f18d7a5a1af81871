package limiter

import (
	"context"
	"errors"
	"time"
)

// This file is the storage contract between the limiter's algorithms
// (speculative and read-then-write acquire, leases) and a backend, in the
// spirit of database/sql/driver: [BucketStore] is the small set of bucket
// operations [RateLimiter] and [Lease] use, in domain terms — millitokens
// and milliseconds, no DynamoDB types. [*DynamoDBRepository] implements it
// in repository_buckets.go and repository_speculative.go, [*MemoryStore] in
// memory.go. The conformance tests (conformance_test.go) run the same
// behavioural tests against both.

// Outcomes of a conditional bucket write. A backend returns them (possibly
// wrapped) when nothing was written for that reason, so that the caller may
// re-read or retry (STYLE R20).
var (
	// ErrConditionFailed: a write's condition did not hold (the item
	// exists or is missing, the refill lock moved, a floor guard failed).
	ErrConditionFailed = errors.New("limiter: condition check failed")
	// ErrTransactionConflict: a multi-item write collided with another
	// transaction; the limiter retries it after 25, 50 and 100 ms.
	ErrTransactionConflict = errors.New("limiter: transaction conflict")
)

// BucketKey identifies one bucket item: the (entity, resource) pair and the
// shard (0 unless the bucket is sharded).
type BucketKey struct {
	EntityID string
	Resource string
	Shard    int
}

// StoredBucket is one bucket item as read from a backend. Backends return
// fresh values; the limiter does not modify them.
type StoredBucket struct {
	Key        BucketKey
	ShardCount int   // the (entity, resource)'s shard count, ≥ 1
	RefillMs   int64 // shared refill timestamp rf, epoch ms: the optimistic lock
	Cascade    bool  // denormalised from the entity
	ParentID   string
	TTL        int64 // epoch seconds; 0 when absent
	// States holds every limit of the item, the hidden wcu included, sorted
	// by limit name, each with LastRefillMs = RefillMs.
	States []BucketState
}

// state returns the stored state of limit name.
func (b *StoredBucket) state(name string) (BucketState, bool) {
	if b == nil {
		return BucketState{}, false
	}
	for _, s := range b.States {
		if s.LimitName == name {
			return s, true
		}
	}
	return BucketState{}, false
}

// WriteKind selects the shape of a bucket write (reference §5.5).
type WriteKind int

const (
	// WriteCreate puts a whole new item, conditioned on its absence.
	WriteCreate WriteKind = iota
	// WriteNormal refills and consumes under the rf optimistic lock.
	WriteNormal
	// WriteRetry consumes without refilling, guarded by tk >= consumed.
	WriteRetry
	// WriteAdjust adds deltas unconditionally (adjustments, rollbacks,
	// compensation).
	WriteAdjust
)

// TTLMode says what a write does to the item's ttl attribute.
type TTLMode int

// TTL modes of [BucketWrite] and [BucketStore.SyncBucket].
const (
	TTLUnchanged TTLMode = iota // leave ttl as it is (create: no ttl)
	TTLSet                      // set ttl = now + ttlSeconds
	TTLRemove                   // remove ttl (create: no ttl)
)

// LimitWrite is one limit's part of a bucket write. Amounts are millitokens.
type LimitWrite struct {
	Name string
	// ConsumedMilli is the amount taken (negative gives back). For
	// WriteAdjust it is the delta: tk -= delta, tc += delta.
	ConsumedMilli int64
	// RefillMilli is the refill credited by a normal write.
	RefillMilli int64
	// Initial is set when the item exists but lacks this limit (fix B1):
	// the write initialises tk/cp/ra/rp instead of adding to a missing tk.
	// Initial.TokensMilli is the balance before consumption.
	Initial *BucketState
}

// BucketWrite is one write to one bucket item. Its meaning by Kind:
//
//   - WriteCreate: create the item with States (the hidden wcu limit added
//     full when absent), RefillMs = NowMs, ShardCount, Cascade, ParentID and
//     the TTL; fails with ErrConditionFailed when the item exists.
//   - WriteNormal: requires RefillMs == ExpectedRefillMs; sets RefillMs =
//     NowMs; per limit adds RefillMilli − ConsumedMilli to the balance and
//     ConsumedMilli to the total consumed, and requires the balance to be ≥
//     ConsumedMilli − RefillMilli when that is positive. A limit with Initial
//     set must be absent from the item and is created from Initial with
//     balance Initial.TokensMilli − ConsumedMilli (capacity and refill kept
//     when already stored). RefreshEntity replaces Cascade/ParentID.
//   - WriteRetry: requires the item; per limit requires balance ≥
//     ConsumedMilli and takes it without refilling (Initial: a missing limit
//     starts at Initial.TokensMilli).
//   - WriteAdjust: requires the item; per limit takes ConsumedMilli (a
//     negative amount gives back) with no other condition: balances may go
//     negative.
//
// TTL applies to WriteCreate and WriteNormal: TTLSet sets it to NowMs/1000 +
// TTLSeconds, TTLRemove removes it.
type BucketWrite struct {
	Kind   WriteKind
	Key    BucketKey
	NowMs  int64
	Limits []LimitWrite

	// WriteCreate: the full item.
	States     []BucketState // post-consume states (wcu injected when absent)
	ShardCount int

	// WriteCreate and WriteNormal: denormalised entity fields. For a normal
	// write they are refreshed only when RefreshEntity is set (fix B8).
	Cascade       bool
	ParentID      string
	RefreshEntity bool

	// WriteNormal: the rf read before local processing.
	ExpectedRefillMs int64

	TTL        TTLMode
	TTLSeconds int64
}

// RefusalReason says why a speculative write was refused.
type RefusalReason string

// Refusal reasons of [SpeculativeResult].
const (
	RefusedNone           RefusalReason = ""
	RefusedBucketMissing  RefusalReason = "bucket_missing"      // no such item
	RefusedLimitExhausted RefusalReason = "app_limit_exhausted" // a requested limit is short
	RefusedWCUExhausted   RefusalReason = "wcu_exhausted"       // the wcu token is spent
	RefusedBothExhausted  RefusalReason = "both_exhausted"      // both of the above
	RefusedLimitMissing   RefusalReason = "limit_missing"       // a requested limit is not in the item
	RefusedExpired        RefusalReason = "bucket_expired"      // the item's TTL has passed
)

// SpeculativeResult is the outcome of one speculative write.
type SpeculativeResult struct {
	Key BucketKey
	// Applied reports that the write applied.
	Applied bool
	// Bucket is the item after the write when applied, before it when
	// refused; nil when the item does not exist.
	Bucket *StoredBucket
	// Reason says why the write was refused.
	Reason RefusalReason
}

// BucketStore is the contract of a backend's bucket operations. Every
// method must be safe for concurrent use, and every write must be atomic:
// it applies whole or not at all, and a write of several items applies all
// of them or none. Amounts are millitokens (tokens × 1000), times epoch
// milliseconds. Limit names are the caller's plus the hidden wcu limit
// ([WCULimitName]: capacity 1000, refill 1000 per second), which a backend
// adds to every bucket it creates.
type BucketStore interface {
	// LoadBuckets reads, as one snapshot where the backend can, the entities
	// entityIDs and the bucket items keys. Missing ones are absent from the
	// maps.
	LoadBuckets(ctx context.Context, entityIDs []string, keys []BucketKey) (map[string]Entity, map[BucketKey]*StoredBucket, error)
	// GetBucket reads one bucket item; nil (and no error) when missing.
	GetBucket(ctx context.Context, key BucketKey) (*StoredBucket, error)
	// WriteBuckets applies writes atomically (see [BucketWrite] for the
	// semantics of each kind). When a condition fails nothing is written
	// and the error matches [ErrConditionFailed]; a multi-item write that
	// collides with a concurrent one may fail with [ErrTransactionConflict].
	WriteBuckets(ctx context.Context, writes []BucketWrite) error
	// SpeculativeConsume takes consume (tokens; positive amounts must fit in
	// the stored balance without refill, other named limits must exist) and
	// one wcu token from key, without refilling, in one conditional step:
	// the item must exist and not be expired at nowMs. It reports a refusal
	// in the result (Applied false, the item as it was, the reason), never
	// as an error.
	SpeculativeConsume(ctx context.Context, key BucketKey, consume Consume, nowMs int64) (SpeculativeResult, error)
	// BumpShardCount doubles the shard count of (entityID, resource) from
	// current, on shard 0, unless it changed meanwhile, and returns the
	// count in force.
	BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error)
	// SyncBucket updates the shard-0 bucket's limit parameters (a limit new
	// to the item starts full), its TTL, and removes the stale limits,
	// after a config change. A missing bucket is not an error.
	SyncBucket(ctx context.Context, entityID, resource string, limits []Limit, ttl TTLMode, ttlSeconds int64, stale []string) error
	// ResolveLimits resolves stored limits through the config hierarchy:
	// entity > entity _default_ > resource > system, the first level with
	// any limits. Limits is nil when no level has any.
	ResolveLimits(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, error)
	// ResolveOnUnavailable returns the stored system on_unavailable mode
	// (block when unset or unreadable); it never fails.
	ResolveOnUnavailable(ctx context.Context) OnUnavailable
	// BucketTTLMultiplier is the TTL multiplier of buckets without
	// entity-level config (≤ 0 disables bucket TTL).
	BucketTTLMultiplier() int64
	// EntityCache is the backend's entity cache, shared by every limiter
	// on it. The backend updates it when it creates (SetEntity) or deletes
	// (Forget) an entity and when it doubles a shard count (SetShards).
	EntityCache() *EntityCache
	// StoreName names the backing store (the table), for error context.
	StoreName() string
	// Clock is the backend's clock.
	Clock() func() time.Time
}
