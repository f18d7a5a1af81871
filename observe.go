package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// This file holds the observability options: structured logging of the
// limiter's decisions ([WithLogger]) and a metrics hook ([WithMetrics]).
// Both are off by default and then cost one nil check per event.

// AcquireOutcome classifies how one [RateLimiter.Acquire] ended, for
// [Metrics.AcquireDone].
type AcquireOutcome int

// Outcomes of [RateLimiter.Acquire].
const (
	// AcquireAdmitted: a lease was returned.
	AcquireAdmitted AcquireOutcome = iota
	// AcquireRateLimited: a limit refused (*RateLimitExceededError).
	AcquireRateLimited
	// AcquireFailOpen: the backend failed and the on-unavailable mode was
	// allow, so a no-op lease was returned.
	AcquireFailOpen
	// AcquireUnavailable: the backend failed and the on-unavailable mode was
	// block (*UnavailableError).
	AcquireUnavailable
	// AcquireInvalid: the input was invalid or no limits are configured
	// (*ValidationError).
	AcquireInvalid
	// AcquireCanceled: the context was canceled or its deadline passed.
	AcquireCanceled
	numAcquireOutcomes
)

var acquireOutcomeNames = [numAcquireOutcomes]string{
	"admitted", "rate_limited", "fail_open", "unavailable", "invalid", "canceled",
}

// String returns the outcome's name, e.g. "rate_limited".
func (o AcquireOutcome) String() string {
	if o < 0 || o >= numAcquireOutcomes {
		return fmt.Sprintf("AcquireOutcome(%d)", int(o))
	}
	return acquireOutcomeNames[o]
}

// StoreOp names a [BucketStore] operation, for [Metrics.StoreCall].
type StoreOp int

// Bucket operations reported to [Metrics.StoreCall]. On [DynamoDBRepository]
// each is one DynamoDB request, except where noted.
const (
	// StoreLoadBuckets: [BucketStore.LoadBuckets], one BatchGetItem (more
	// when DynamoDB returns UnprocessedKeys).
	StoreLoadBuckets StoreOp = iota
	// StoreGetBucket: [BucketStore.GetBucket], one GetItem.
	StoreGetBucket
	// StoreWriteBuckets: [BucketStore.WriteBuckets], one PutItem or UpdateItem
	// for one item, one TransactWriteItems for several.
	StoreWriteBuckets
	// StoreSpeculativeConsume: [BucketStore.SpeculativeConsume], one
	// conditional UpdateItem.
	StoreSpeculativeConsume
	// StoreBumpShardCount: [BucketStore.BumpShardCount], one conditional
	// UpdateItem.
	StoreBumpShardCount
	// StoreSyncBucket: [BucketStore.SyncBucket], after a limit change.
	StoreSyncBucket
	numStoreOps
)

var storeOpNames = [numStoreOps]string{
	"LoadBuckets", "GetBucket", "WriteBuckets", "SpeculativeConsume", "BumpShardCount", "SyncBucket",
}

// String returns the [BucketStore] method's name, e.g. "SpeculativeConsume".
func (op StoreOp) String() string {
	if op < 0 || op >= numStoreOps {
		return fmt.Sprintf("StoreOp(%d)", int(op))
	}
	return storeOpNames[op]
}

// Metrics receives measurements from a [RateLimiter] configured with
// [WithMetrics]. Its methods are called synchronously on the request path,
// from many goroutines at once: they must be safe for concurrent use, fast,
// and must not block. The package otelmetrics implements it with
// OpenTelemetry instruments.
//
// Latencies are wall-clock durations measured with [time.Now], whatever
// clock [WithClock] sets for the bucket math.
type Metrics interface {
	// AcquireDone is called once per [RateLimiter.Acquire] (and so once per
	// attempt of [RateLimiter.Wait], and per [RateLimiter.Do]) when it
	// returns, with how it ended and how long it took, validation
	// included. ctx is the caller's.
	AcquireDone(ctx context.Context, outcome AcquireOutcome, latency time.Duration)
	// SpeculativeOutcome is called once for each outcome counted by
	// [RateLimiter.SpeculativeStats], as it is counted: once per acquire
	// that tries the speculative path.
	SpeculativeOutcome(outcome SpeculativeOutcome)
	// StoreCall is called after every bucket operation the limiter and
	// its leases make on the repository, with its latency and error. An
	// error matching [ErrConditionFailed] is a normal outcome (a refused
	// conditional write); [ErrTransactionConflict] is retried. Config
	// reads (served by the config cache) and administrative calls are not
	// reported.
	StoreCall(ctx context.Context, op StoreOp, latency time.Duration, err error)
}

// WithLogger makes the limiter log its decisions to logger (nil, the
// default, logs nothing and costs nothing):
//
//   - Debug "limiter: speculative fallback": the speculative path handed
//     over to the read-then-write path, with the outcome (e.g.
//     bucket_missing, refill_would_help).
//   - Info "limiter: shard count doubled": a bucket took more than about
//     1000 writes/s and its shard count was doubled.
//   - Info "limiter: transaction conflict, retrying": a multi-item write
//     collided and is retried after the logged backoff.
//   - Warn "limiter: backend unavailable": DynamoDB failed during an
//     acquire, with the on-unavailable decision (allow: a no-op lease;
//     block: an *UnavailableError) and the cause.
//   - Debug "limiter: wait": [RateLimiter.Wait] sleeps before retrying.
//
// Errors the limiter returns are not logged otherwise (STYLE R18): rate
// limiting is not logged.
func WithLogger(logger *slog.Logger) Option {
	return func(rl *RateLimiter) { rl.obs.log = logger }
}

// WithMetrics makes the limiter report acquire outcomes and latencies,
// speculative outcomes and bucket-store calls to m (see [Metrics]). Nil, the
// default, reports nothing and costs nothing. Store calls are measured by
// wrapping the repository; [RateLimiter.Repository] still returns the one
// passed to [New].
func WithMetrics(m Metrics) Option {
	return func(rl *RateLimiter) {
		rl.obs.metrics = m
		base := rl.Repository()
		if m == nil {
			rl.repo = base
			rl.stats.hook = nil
			return
		}
		rl.repo = &meteredRepo{Repository: base, m: m}
		rl.stats.hook = m.SpeculativeOutcome
	}
}

// observer holds the optional logger and metrics of a RateLimiter.
type observer struct {
	log     *slog.Logger // nil: no logging
	metrics Metrics      // nil: no metrics
}

// logging reports whether a record at level would be written.
func (o *observer) logging(ctx context.Context, level slog.Level) bool {
	return o.log != nil && o.log.Enabled(ctx, level)
}

// acquireOutcome classifies the result of Acquire.
func acquireOutcome(ctx context.Context, lease *Lease, err error) AcquireOutcome {
	switch {
	case err == nil && lease.Noop():
		return AcquireFailOpen
	case err == nil:
		return AcquireAdmitted
	case errors.Is(err, ErrRateLimited):
		return AcquireRateLimited
	case errors.Is(err, ErrValidation):
		return AcquireInvalid
	case errors.Is(err, ErrUnavailable):
		return AcquireUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return AcquireCanceled
	default:
		return AcquireUnavailable
	}
}

// logUnavailable logs an on-unavailable decision.
func (rl *RateLimiter) logUnavailable(ctx context.Context, entityID, resource string, mode OnUnavailable, cause error) {
	if !rl.obs.logging(ctx, slog.LevelWarn) {
		return
	}
	decision := "block"
	if mode == OnUnavailableAllow {
		decision = "allow"
	}
	rl.obs.log.LogAttrs(ctx, slog.LevelWarn, "limiter: backend unavailable",
		slog.String("entity_id", entityID), slog.String("resource", resource),
		slog.String("on_unavailable", decision), slog.String("store", rl.repo.StoreName()),
		slog.Any("error", cause))
}

// specFallback counts a speculative outcome that hands over to the slow
// path (or doubles the shard count) and logs it with the bucket's key.
func (rl *RateLimiter) specFallback(key BucketKey, o SpeculativeOutcome) {
	rl.stats.count(o)
	level, msg := slog.LevelDebug, "limiter: speculative fallback"
	if o == SpecFallbackShardDoubled {
		level, msg = slog.LevelInfo, "limiter: shard count doubled"
	}
	ctx := context.Background()
	if !rl.obs.logging(ctx, level) {
		return
	}
	rl.obs.log.LogAttrs(ctx, level, msg,
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource),
		slog.Int("shard", key.Shard), slog.String("outcome", o.String()))
}

// logConflict logs a transaction-conflict retry.
func (rl *RateLimiter) logConflict(ctx context.Context, writes []BucketWrite, attempt int, backoff time.Duration) {
	if !rl.obs.logging(ctx, slog.LevelInfo) {
		return
	}
	keys := make([]string, len(writes))
	for i, w := range writes {
		keys[i] = fmt.Sprintf("%s/%s#%d", w.Key.EntityID, w.Key.Resource, w.Key.Shard)
	}
	rl.obs.log.LogAttrs(ctx, slog.LevelInfo, "limiter: transaction conflict, retrying",
		slog.Any("buckets", keys), slog.Int("retry", attempt+1), slog.Duration("backoff", backoff))
}

// meteredRepo reports every bucket operation to Metrics.StoreCall.
type meteredRepo struct {
	Repository
	m Metrics
}

func (r *meteredRepo) done(ctx context.Context, op StoreOp, start time.Time, err error) {
	r.m.StoreCall(ctx, op, time.Since(start), err)
}

func (r *meteredRepo) LoadBuckets(ctx context.Context, entityIDs []string, keys []BucketKey) (map[string]Entity, map[BucketKey]*StoredBucket, error) {
	start := time.Now()
	metas, buckets, err := r.Repository.LoadBuckets(ctx, entityIDs, keys)
	r.done(ctx, StoreLoadBuckets, start, err)
	return metas, buckets, err
}

func (r *meteredRepo) GetBucket(ctx context.Context, key BucketKey) (*StoredBucket, error) {
	start := time.Now()
	b, err := r.Repository.GetBucket(ctx, key)
	r.done(ctx, StoreGetBucket, start, err)
	return b, err
}

func (r *meteredRepo) WriteBuckets(ctx context.Context, writes []BucketWrite) error {
	start := time.Now()
	err := r.Repository.WriteBuckets(ctx, writes)
	r.done(ctx, StoreWriteBuckets, start, err)
	return err
}

func (r *meteredRepo) SpeculativeConsume(ctx context.Context, key BucketKey, consume Consume, nowMs int64) (SpeculativeResult, error) {
	start := time.Now()
	res, err := r.Repository.SpeculativeConsume(ctx, key, consume, nowMs)
	r.done(ctx, StoreSpeculativeConsume, start, err)
	return res, err
}

func (r *meteredRepo) BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	start := time.Now()
	n, err := r.Repository.BumpShardCount(ctx, entityID, resource, current)
	r.done(ctx, StoreBumpShardCount, start, err)
	return n, err
}

func (r *meteredRepo) SyncBucket(ctx context.Context, entityID, resource string, limits []Limit, ttl TTLMode, ttlSeconds int64, stale []string) error {
	start := time.Now()
	err := r.Repository.SyncBucket(ctx, entityID, resource, limits, ttl, ttlSeconds, stale)
	r.done(ctx, StoreSyncBucket, start, err)
	return err
}
