package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zaelimiter/limiter/store"
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
	// store.SpeculativeOutcome is called once for each outcome counted by
	// [RateLimiter.SpeculativeStats], as it is counted: once per acquire
	// that tries the speculative path.
	SpeculativeOutcome(outcome store.SpeculativeOutcome)
	// StoreCall is called after every bucket operation and config load
	// the limiter and its leases make on the repository, with its latency
	// and error. An error matching [store.ErrConditionFailed] is a normal
	// outcome (a refused conditional write); [store.ErrTransactionConflict] is
	// retried. Administrative calls are not reported.
	StoreCall(ctx context.Context, op store.StoreOp, latency time.Duration, err error)
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
// Errors the limiter returns are not logged otherwise (the caller decides): rate
// limiting is not logged.
func WithLogger(logger *slog.Logger) Option {
	return func(rl *RateLimiter) { rl.obs.log = logger }
}

// WithMetrics makes the limiter report acquire outcomes and latencies,
// speculative outcomes and repository calls to m (see [Metrics]). Nil, the
// default, reports nothing and costs nothing.
func WithMetrics(m Metrics) Option {
	return func(rl *RateLimiter) { rl.obs.metrics = m }
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
		slog.String("on_unavailable", decision), slog.String("store", rl.repo.Name()),
		slog.Any("error", cause))
}

// specFallback counts a speculative outcome that hands over to the slow
// path (or doubles the shard count) and logs it with the bucket's key.
func (rl *RateLimiter) specFallback(key store.BucketKey, o store.SpeculativeOutcome) {
	rl.stats.count(o)
	level, msg := slog.LevelDebug, "limiter: speculative fallback"
	if o == store.SpecFallbackShardDoubled {
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

// logGiveBackFailed logs a give-back that failed: tokens taken by a write
// whose caller went away stay taken (under-admission, never more).
func (rl *RateLimiter) logGiveBackFailed(ctx context.Context, key store.BucketKey, err error) {
	if !rl.obs.logging(ctx, slog.LevelWarn) {
		return
	}
	rl.obs.log.LogAttrs(ctx, slog.LevelWarn, "limiter: give-back failed",
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource), slog.Any("error", err))
}

// logConflict logs a transaction-conflict retry.
func (rl *RateLimiter) logConflict(ctx context.Context, writes []store.BucketWrite, attempt int, backoff time.Duration) {
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

// storeOps are the repository operations of the limiter's algorithms:
// the required ones and the optional capabilities found on the repository,
// each timed and reported to Metrics.StoreCall when metrics are on.
type storeOps struct {
	repo   Repository
	spec   store.SpeculativeStore // nil: the repository has no speculative path
	shards store.ShardStore       // nil: the repository does not shard
	m      Metrics                // nil: nothing is reported
}

func newStoreOps(repo Repository, m Metrics) storeOps {
	s := storeOps{repo: repo, m: m}
	s.spec, _ = repo.(store.SpeculativeStore)
	s.shards, _ = repo.(store.ShardStore)
	return s
}

func (s *storeOps) done(ctx context.Context, op store.StoreOp, start time.Time, err error) {
	if s.m != nil {
		s.m.StoreCall(ctx, op, time.Since(start), err)
	}
}

// begin returns the start time of a metered call (zero when unmetered: no
// clock read).
func (s *storeOps) begin() time.Time {
	if s.m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (s *storeOps) loadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	start := s.begin()
	out, err := s.repo.LoadConfigs(ctx, keys)
	s.done(ctx, store.StoreLoadConfigs, start, err)
	return out, err
}

func (s *storeOps) loadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]Entity, map[store.BucketKey]*store.Bucket, error) {
	start := s.begin()
	metas, buckets, err := s.repo.LoadBuckets(ctx, entityIDs, keys)
	s.done(ctx, store.StoreLoadBuckets, start, err)
	return metas, buckets, err
}

func (s *storeOps) getBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	start := s.begin()
	b, err := s.repo.GetBucket(ctx, key)
	s.done(ctx, store.StoreGetBucket, start, err)
	return b, err
}

func (s *storeOps) writeBuckets(ctx context.Context, writes []store.BucketWrite) error {
	start := s.begin()
	err := s.repo.WriteBuckets(ctx, writes)
	s.done(ctx, store.StoreWriteBuckets, start, err)
	return err
}

func (s *storeOps) speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	start := s.begin()
	res, err := s.spec.SpeculativeConsume(ctx, req)
	s.done(ctx, store.StoreSpeculativeConsume, start, err)
	return res, err
}

func (s *storeOps) bumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	start := s.begin()
	n, err := s.shards.BumpShardCount(ctx, entityID, resource, current)
	s.done(ctx, store.StoreBumpShardCount, start, err)
	return n, err
}
