// Layer 2, the contract: how the limiter calls its Repository, each call
// bounded, guarded and metered.

package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// storeOps are the repository operations of the limiter's algorithms:
// the required ones and the optional capabilities found on the repository,
// each bounded (storeBound), guarded by the circuit breaker (breaker),
// and timed and reported to Metrics.StoreCall when metrics are on. Every
// call the limiter makes on the repository for an acquire, a lease or a
// give-back passes here; the administrative methods call the repository
// with their caller's context as it is.
type storeOps struct {
	repo   Repository
	spec   store.SpeculativeStore // nil: the repository has no speculative path
	shards store.ShardStore       // nil: the repository does not shard
	batch  store.BatchStore       // nil: the repository has no atomic batch
	m      Metrics                // nil: nothing is reported
	// folder is the repository's speculative write with a pending
	// adjustment folded in (the DynamoDB repository's); nil: none.
	folder store.AdjustFolder
	// pending holds the background commits waiting to be written before
	// the next read or write of their item (Options.BackgroundCommit); nil
	// when they are off.
	pending commitQueue

	bound storeBound // the bound of each call (Options.StoreTimeout)
	brk   breaker    // the circuit breaker (Options.CircuitFailures)
}

// commitQueue holds the adjustments of background commits until they are
// written. settle writes those waiting for key before the caller reads or
// writes it (the caller leaves when ctx ends, the writes go on);
// speculativeConsume writes req after those waiting for its item (handled
// is false when none wait, and the caller writes req).
type commitQueue interface {
	settle(ctx context.Context, key store.BucketKey) error
	speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (res store.SpeculativeResult, handled bool, err error)
}

// pairWriter is implemented by a store on which each of a pair's
// conditional writes is cheaper than one atomic batch of both (DynamoDB,
// where a transaction costs twice the capacity and a round trip of its
// own): the acquire then writes a cascade's two items one by one.
type pairWriter interface {
	writesPairs()
}

// init sets s up on repo: calls bounded by timeout (none when ≤ 0), a
// breaker that opens when its window holds at least failures calls, half
// of them failed or more (never when failures ≤ 0), one pause counted
// once, for cooldown.
func (s *storeOps) init(repo Repository, m Metrics, timeout time.Duration, failures int, cooldown time.Duration) {
	s.repo, s.m = repo, m
	s.spec, _ = repo.(store.SpeculativeStore)
	s.shards, _ = repo.(store.ShardStore)
	s.batch, _ = repo.(store.BatchStore)
	s.folder, _ = repo.(store.AdjustFolder)
	s.bound.d, s.bound.slack = timeout, max(timeout/10, time.Millisecond)
	s.brk.failures = int32(min(max(failures, 0), 1<<30))
	s.brk.cooldown = cooldown
	s.brk.grace = max(timeout*3/5, 0)
	s.brk.window = max(circuitWindow, 10*timeout)
	s.brk.span = int64(timeout + s.bound.slack)
	s.brk.epoch = int64(s.bound.slack)
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

// callGuard is what enter hands to exit about one call.
type callGuard struct {
	e      *boundEpoch        // the epoch whose deadline bounds the call; nil: unbounded
	cancel context.CancelFunc // nil: nothing to release
	probe  bool               // the breaker's probe
}

// enter starts a store call made with ctx: it returns the call's bounded
// context, or [ErrCircuitOpen] at once when the breaker is open.
func (s *storeOps) enter(ctx context.Context) (context.Context, callGuard, error) {
	ok, probe := s.brk.admit()
	if !ok {
		return nil, callGuard{}, ErrCircuitOpen
	}
	c, e, cancel := s.bound.bind(ctx)
	return c, callGuard{e: e, cancel: cancel, probe: probe}, nil
}

// exit ends a call entered with ctx that returned err: it tells the
// breaker, and returns err, or a *storeTimeoutError when the bound passed.
func (s *storeOps) exit(ctx context.Context, g callGuard, err error) error {
	if g.cancel != nil {
		g.cancel()
	}
	o := callAnswered
	var started int64 // when the call's bound began: its epoch's start
	if g.e != nil {
		started = g.e.started
	}
	switch {
	case err == nil || answered(err):
	case g.e.expired():
		o = callTimedOut
		err = &storeTimeoutError{timeout: s.bound.d, cause: err}
	case ctx.Err() != nil:
		o = callGaveUp
	default:
		o = callFailed
	}
	s.brk.settle(g.probe, o, err, started)
	return err
}

func (s *storeOps) loadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	start := s.begin()
	out, err := s.repo.LoadConfigs(c, keys)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreLoadConfigs, start, err)
	return out, err
}

// settle writes the background commits waiting for keys first.
func (s *storeOps) settle(ctx context.Context, keys ...store.BucketKey) error {
	for _, key := range keys {
		if err := s.pending.settle(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

func (s *storeOps) loadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]Entity, map[store.BucketKey]*store.Bucket, error) {
	if s.pending != nil {
		if err := s.settle(ctx, keys...); err != nil {
			return nil, nil, err
		}
	}
	c, g, err := s.enter(ctx)
	if err != nil {
		return nil, nil, err
	}
	start := s.begin()
	metas, buckets, err := s.repo.LoadBuckets(c, entityIDs, keys)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreLoadBuckets, start, err)
	return metas, buckets, err
}

func (s *storeOps) getBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	if s.pending != nil {
		if err := s.settle(ctx, key); err != nil {
			return nil, err
		}
	}
	c, g, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	start := s.begin()
	b, err := s.repo.GetBucket(c, key)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreGetBucket, start, err)
	return b, err
}

// getEntity reads an entity's record (the cascade of an acquire). It is
// not reported to Metrics.StoreCall.
func (s *storeOps) getEntity(ctx context.Context, id string) (Entity, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return Entity{}, err
	}
	e, err := s.repo.GetEntity(c, id)
	return e, s.exit(ctx, g, err)
}

func (s *storeOps) writeBuckets(ctx context.Context, writes []store.BucketWrite) error {
	if s.pending != nil {
		for _, w := range writes {
			if err := s.settle(ctx, w.Key); err != nil {
				return err
			}
		}
	}
	return s.writeOnly(ctx, writes)
}

// writeOnly is writeBuckets without settling background commits first.
func (s *storeOps) writeOnly(ctx context.Context, writes []store.BucketWrite) error {
	c, g, err := s.enter(ctx)
	if err != nil {
		return err
	}
	start := s.begin()
	err = s.exit(ctx, g, s.repo.WriteBuckets(c, writes))
	s.done(ctx, store.StoreWriteBuckets, start, err)
	return err
}

func (s *storeOps) speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	if s.pending != nil {
		if res, handled, err := s.pending.speculativeConsume(ctx, req); handled {
			return res, err
		}
	}
	return s.consumeOnly(ctx, req)
}

// consumeOnly is speculativeConsume without background commits.
func (s *storeOps) consumeOnly(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return store.SpeculativeResult{Key: req.Key}, err
	}
	start := s.begin()
	res, err := s.spec.SpeculativeConsume(c, req)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreSpeculativeConsume, start, err)
	return res, err
}

// fold is the folder's write of req with adj folded in.
func (s *storeOps) fold(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite) (store.SpeculativeResult, store.FoldOutcome, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return store.SpeculativeResult{Key: req.Key}, store.FoldNotApplied, err
	}
	start := s.begin()
	res, outcome, err := s.folder.SpeculativeConsumeAdjust(c, req, adj)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreSpeculativeConsume, start, err)
	return res, outcome, err
}

// speculativeConsumeAll is the atomic speculative batch of AcquireAll. It
// is not reported to Metrics.StoreCall.
func (s *storeOps) speculativeConsumeAll(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.batch.SpeculativeConsumeAll(c, reqs)
	return res, s.exit(ctx, g, err)
}

func (s *storeOps) bumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return current, err
	}
	start := s.begin()
	n, err := s.shards.BumpShardCount(c, entityID, resource, current)
	err = s.exit(ctx, g, err)
	s.done(ctx, store.StoreBumpShardCount, start, err)
	return n, err
}

// answered reports whether err is an answer of a working store: a refused
// conditional write or transaction, invalid input, a missing or existing
// entity, an unsupported call, a refusal for want of permission, or any
// error of an HTTP status 4xx (DynamoDB's throttling and validation
// errors; matched by the HTTPStatusCode method of the AWS SDK's response
// errors, so that the core needs no SDK import).
func answered(err error) bool {
	for _, known := range [...]error{store.ErrConditionFailed, store.ErrTransactionConflict, ErrValidation,
		ErrEntityNotFound, ErrEntityExists, ErrUnsupported, ErrRateLimited, ErrTableNotFound} {
		if errors.Is(err, known) {
			return true
		}
	}
	if isAccessDenied(err) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		code := status.HTTPStatusCode()
		return code >= 400 && code < 500
	}
	return false
}

// isAccessDenied reports whether err is a refusal for want of permission:
// it matches [ErrAccessDenied], or carries the error code
// AccessDeniedException (an AWS SDK API error, matched by its ErrorCode
// method so that the core needs no SDK import).
func isAccessDenied(err error) bool {
	if errors.Is(err, ErrAccessDenied) {
		return true
	}
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && coded.ErrorCode() == "AccessDeniedException"
}
