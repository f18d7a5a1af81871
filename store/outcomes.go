package store

import "fmt"

// SpeculativeOutcome classifies what happened to an acquire on the
// speculative fast path.
type SpeculativeOutcome int

// Outcomes counted by [limiter.RateLimiter.SpeculativeStats].
const (
	// SpecSuccess: served by one conditional write per bucket, no read.
	SpecSuccess SpeculativeOutcome = iota
	// SpecFastRejection: refused from the old item without any write
	// applied, because refill would not help.
	SpecFastRejection
	// SpecShardRetrySuccess: served after retrying on another shard.
	SpecShardRetrySuccess
	// SpecParentOnlyPath: the child was served speculatively, the parent by
	// the parent-only slow path.
	SpecParentOnlyPath
	// SpecFallbackBucketMissing: fell back because the bucket item does not
	// exist (yet).
	SpecFallbackBucketMissing
	// SpecFallbackExpired: fell back because the bucket's TTL has passed.
	SpecFallbackExpired
	// SpecFallbackLimitMissing: fell back because a requested limit is not
	// in the bucket (config changed).
	SpecFallbackLimitMissing
	// SpecFallbackRefillWouldHelp: fell back to refill (tokens short now,
	// enough after refill).
	SpecFallbackRefillWouldHelp
	// SpecFallbackWCUExhausted: fell back because the bucket's write
	// capacity token was spent but refills in time.
	SpecFallbackWCUExhausted
	// SpecFallbackShardDoubled: the partition takes more than 1000
	// writes/s; its shard count was doubled and the acquire fell back.
	SpecFallbackShardDoubled
	// SpecFallbackParent: the parent's write was refused in a way the
	// parent-only path could not settle; the child was compensated and
	// the acquire fell back to the full slow path.
	SpecFallbackParent
	// SpecFallbackLimitsChanged: fell back because the item stores a
	// limit with other parameters than the ones resolved (a limit
	// change, which the slow path writes).
	SpecFallbackLimitsChanged
	// SpecFallbackRefillDue: fell back because the backend could not take
	// the request exactly in one step: a limit may have refilled to its
	// capacity ([RefillDue]) and the backend could not write the refilled
	// state (see [RefusedRefillDue]).
	SpecFallbackRefillDue
	numSpecOutcomes
)

var specOutcomeNames = [numSpecOutcomes]string{
	"success", "fast_rejection", "shard_retry_success", "parent_only_path",
	"bucket_missing", "bucket_expired", "limit_missing", "refill_would_help",
	"wcu_exhausted", "shard_doubled", "parent_fallback", "limits_changed",
	"refill_due",
}

// String returns the outcome's name, e.g. "bucket_missing".
func (o SpeculativeOutcome) String() string {
	if o < 0 || o >= numSpecOutcomes {
		return fmt.Sprintf("SpeculativeOutcome(%d)", int(o))
	}
	return specOutcomeNames[o]
}

// SpeculativeStats counts speculative-path outcomes since the limiter was
// created: the fast-path hit rate is Counts[SpecSuccess] / Attempts.
type SpeculativeStats struct {
	// Attempts is the number of acquires that tried the fast path.
	Attempts int64
	// Counts holds one counter per outcome. An acquire refused by one
	// item of a cascade while its write to the other applied may run
	// again, when that item, read once more, now covers it: each round's
	// outcome is counted.
	Counts [numSpecOutcomes]int64
}

// Fallbacks returns the number of attempts that went on to the slow path.
func (s SpeculativeStats) Fallbacks() int64 {
	var n int64
	for o := SpecFallbackBucketMissing; o < numSpecOutcomes; o++ {
		n += s.Counts[o]
	}
	return n
}

// StoreOp names a [Repository] operation, for [Metrics.StoreCall].
type StoreOp int

// Repository operations reported to [Metrics.StoreCall]. On
// [limiter.DynamoDBRepository] each is one DynamoDB request, except where noted.
const (
	// StoreLoadBuckets: [Repository.LoadBuckets], one BatchGetItem (more
	// when DynamoDB returns UnprocessedKeys).
	StoreLoadBuckets StoreOp = iota
	// StoreGetBucket: [Repository.GetBucket], one GetItem.
	StoreGetBucket
	// StoreWriteBuckets: [Repository.WriteBuckets], one PutItem or
	// UpdateItem for one item, one TransactWriteItems for several.
	StoreWriteBuckets
	// StoreSpeculativeConsume: [SpeculativeStore.SpeculativeConsume], one
	// conditional UpdateItem in steady state (two when the bucket may have
	// refilled to its capacity and the repository keeps no item of it,
	// more while concurrent writes change the item).
	StoreSpeculativeConsume
	// StoreBumpShardCount: [ShardStore.BumpShardCount], one conditional
	// UpdateItem.
	StoreBumpShardCount
	// StoreLoadConfigs: [Repository.LoadConfigs] on a config cache miss,
	// one BatchGetItem.
	StoreLoadConfigs
	numStoreOps
)

var storeOpNames = [numStoreOps]string{
	"LoadBuckets", "GetBucket", "WriteBuckets", "SpeculativeConsume", "BumpShardCount", "LoadConfigs",
}

// String returns the repository method's name, e.g. "SpeculativeConsume".
func (op StoreOp) String() string {
	if op < 0 || op >= numStoreOps {
		return fmt.Sprintf("StoreOp(%d)", int(op))
	}
	return storeOpNames[op]
}
