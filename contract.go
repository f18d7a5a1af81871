// Layer 2, the contract: how the limiter calls its Repository: each call
// metered, and a write that outlives its caller given back.

package limiter

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Writes that outlive their caller's wait.
//
// An Acquire returns within its context's deadline, whatever the store
// does: every write it makes waits for the store or for the context,
// whichever comes first. But a write that was sent may still apply after
// its caller gave up, and the tokens it takes must not stay taken for a
// lease nobody holds. So a write made for a caller whose context can end
// runs in a goroutine of the limiter, on a context detached from the
// caller's; when the caller gives up first, the goroutine waits for the
// outcome (within the store timeout, which bounds every store call) and
// gives back what was applied. A write that got no answer within the store
// timeout may have applied all the same: what it took stays taken
// (under-admission, never a double charge). [RateLimiter.Close] waits for
// these goroutines; none outlives it.

// storeOps are the repository operations of the limiter's algorithms:
// the required ones and the optional capabilities found on the repository,
// each bounded (storebound.go), guarded by the circuit breaker (breaker.go),
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
	folder adjustFolder
	// pending holds the background commits waiting to be written before
	// the next read or write of their item (WithBackgroundCommit); nil
	// when they are off.
	pending commitQueue

	bound storeBound // the bound of each call (WithStoreTimeout)
	brk   breaker    // the circuit breaker (WithCircuitBreaker)
}

// adjustFolder writes a pending adjustment and a speculative consume of the
// same item in one write, exactly as the adjustment followed by the
// consume would: when that write is refused (foldNotApplied), nothing was
// written and the result says nothing; the caller then writes the
// adjustment, then the consume.
type adjustFolder interface {
	speculativeConsumeAdjust(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite) (store.SpeculativeResult, foldOutcome, error)
}

// foldOutcome says what became of an adjustment folded into a speculative
// write.
type foldOutcome int

const (
	foldApplied    foldOutcome = iota // applied with the write
	foldNotApplied                    // nothing of it was applied
	foldUnknown                       // the write failed without an answer: it may have applied
)

// commitQueue holds the adjustments of background commits until they are
// written. settle writes those waiting for key before the caller reads or
// writes it (the caller leaves when ctx ends, the writes go on);
// speculativeConsume writes req after those waiting for its item (handled
// is false when none wait, and the caller writes req).
type commitQueue interface {
	settle(ctx context.Context, key store.BucketKey) error
	speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (res store.SpeculativeResult, handled bool, err error)
}

// init sets s up on repo: calls bounded by timeout (none when ≤ 0), a
// breaker that opens after failures consecutive failures (never when ≤ 0)
// for cooldown.
func (s *storeOps) init(repo Repository, m Metrics, timeout time.Duration, failures int, cooldown time.Duration) {
	s.repo, s.m = repo, m
	s.spec, _ = repo.(store.SpeculativeStore)
	s.shards, _ = repo.(store.ShardStore)
	s.batch, _ = repo.(store.BatchStore)
	s.folder, _ = repo.(adjustFolder)
	s.bound.d, s.bound.slack = timeout, max(timeout/10, time.Millisecond)
	s.brk.failures = int32(min(max(failures, 0), 1<<30))
	s.brk.cooldown = cooldown
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
	switch {
	case err == nil || answered(err):
	case g.e.expired():
		o = callFailed
		err = &storeTimeoutError{timeout: s.bound.d, cause: err}
	case ctx.Err() != nil:
		o = callGaveUp
	default:
		o = callFailed
	}
	s.brk.settle(g.probe, o, err)
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
func (s *storeOps) fold(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite) (store.SpeculativeResult, foldOutcome, error) {
	c, g, err := s.enter(ctx)
	if err != nil {
		return store.SpeculativeResult{Key: req.Key}, foldNotApplied, err
	}
	start := s.begin()
	res, outcome, err := s.folder.speculativeConsumeAdjust(c, req, adj)
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

// background runs the limiter's goroutines: writes whose caller may stop
// waiting, give-backs, background commits.
//
// A goroutine that makes a DynamoDB call grows its stack several times
// over (the SDK's call chain is deep), and a new goroutine starts small,
// so a goroutine per write spent about a tenth of an acquire's CPU copying
// stacks. The goroutines are therefore kept: one that ends its work parks
// and takes the next function handed to Go, the most recently parked first
// (its stack is the warmest). A sweep every workerIdle, armed while any is
// parked, tells those that stayed parked for a whole period to exit, so a
// goroutine idles between one and two periods; parking itself starts no
// timer. Close waits for the work (work reaching zero), then tells the
// parked goroutines to exit, and waits for them and the sweep. Work is
// counted under mu, not with a sync.WaitGroup, so that work handed over
// while Close waits (a give-back started by a write Close waits for) is
// waited for too, and work handed over after Close ended runs on the
// caller's goroutine: no goroutine of the limiter outlives Close.
type background struct {
	mu     sync.Mutex    // guards work, closed, idle, period and sweep
	work   int           // work handed to Go (or held with hold) and not ended
	workCh chan struct{} // closed when work drops to zero while wait waits; nil otherwise
	closed bool          // wait has ended: Go runs f inline
	idle   []*worker     // parked goroutines, in the order they parked
	period uint64        // sweeps so far
	sweep  *sweep        // the armed sweep; nil when none is

	running sync.WaitGroup // goroutines alive, and the armed sweep
}

// worker is a goroutine of background. Go hands it work on next (buffered:
// the hand-over never blocks); nil tells it to exit.
type worker struct {
	next chan func()
	// period is the sweep period in which it last parked.
	period uint64
}

// sweep is an armed sweep of background's parked goroutines.
type sweep struct{ t *time.Timer }

// workerIdle is the period of the sweep of parked goroutines.
const workerIdle = time.Second

// Go runs f in a goroutine of b (on the caller's goroutine once b's wait
// has ended).
func (b *background) Go(f func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		f()
		return
	}
	b.work++
	if n := len(b.idle); n > 0 {
		w := b.idle[n-1]
		b.idle[n-1] = nil
		b.idle = b.idle[:n-1]
		b.mu.Unlock()
		w.next <- f
		return
	}
	b.mu.Unlock()
	b.running.Add(1)
	go b.loop(&worker{next: make(chan func(), 1)}, f)
}

// hold counts work that runs outside Go (a timer's function) until
// release; it reports false, counting nothing, once b's wait has ended.
func (b *background) hold() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.work++
	return true
}

// release ends work counted by hold; b.mu must not be held.
func (b *background) release() {
	b.mu.Lock()
	b.releaseLocked()
	b.mu.Unlock()
}

func (b *background) releaseLocked() {
	b.work--
	if b.work == 0 && b.workCh != nil {
		close(b.workCh)
		b.workCh = nil
	}
}

// loop runs f, then what Go hands w, until w is told to exit.
func (b *background) loop(w *worker, f func()) {
	defer b.running.Done()
	for f != nil {
		f()
		// Parked as the work is marked done, so that wait, once the work
		// is done, finds every goroutine parked.
		b.mu.Lock()
		w.period = b.period
		b.idle = append(b.idle, w)
		if b.sweep == nil {
			sw := new(sweep)
			b.running.Add(1)
			sw.t = time.AfterFunc(workerIdle, func() { b.sweepIdle(sw) })
			b.sweep = sw
		}
		b.releaseLocked()
		b.mu.Unlock()
		f = <-w.next
	}
}

// sweepIdle tells the goroutines parked since before the previous sweep
// to exit, and arms the next sweep while any stays parked. A sweep that
// Close disarmed as it fired does nothing.
func (b *background) sweepIdle(sw *sweep) {
	defer b.running.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sweep != sw {
		return
	}
	b.period++
	n := 0
	for n < len(b.idle) && b.idle[n].period+1 < b.period {
		b.idle[n].next <- nil
		n++
	}
	b.idle = slices.Delete(b.idle, 0, n)
	if len(b.idle) == 0 {
		b.sweep = nil
		return
	}
	b.running.Add(1)
	sw.t.Reset(workerIdle)
}

// wait waits until the work handed to Go has ended and every goroutine of
// b has exited; work handed to Go afterwards runs inline. It is called
// once, by Close.
func (b *background) wait() {
	b.mu.Lock()
	for b.work > 0 {
		ch := make(chan struct{})
		b.workCh = ch
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
	b.closed = true
	for _, w := range b.idle {
		w.next <- nil
	}
	b.idle = nil
	if b.sweep != nil && b.sweep.t.Stop() {
		b.running.Done() // the armed sweep will not run
	}
	b.sweep = nil
	b.mu.Unlock()
	b.running.Wait()
}

// detachedContext returns a context with ctx's values and no
// cancellation (ctx itself when it can never end). Each store call made
// with it is bounded by the store timeout (storeOps); the cancel function
// releases nothing and is there for the callers' defer.
func detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	return &detachedCtx{parent: ctx}, func() {}
}

// detached runs op and returns its result, or ctx's error as soon as ctx
// is done. In that case op goes on, detached from ctx, and late is called
// with its outcome once it ends (late may be nil). A context that can never
// end runs op inline, on ctx. When ctx is done before op starts, op is not
// run at all, unless must is set (a give-back, which must happen whoever
// waits for it): then it runs in the background.
func detached[T any](b *background, ctx context.Context, must bool, op func(ctx context.Context) (T, error), late func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return op(ctx)
	}
	var zero T
	if err := ctx.Err(); err != nil {
		if must {
			b.Go(func() {
				dctx, cancel := detachedContext(ctx)
				v, err := op(dctx)
				cancel()
				if late != nil {
					late(v, err)
				}
			})
		}
		return zero, err
	}
	type outcome struct {
		v   T
		err error
	}
	var (
		mu        sync.Mutex // guards abandoned and the send on done
		abandoned bool
		done      = make(chan outcome, 1)
	)
	b.Go(func() {
		dctx, cancel := detachedContext(ctx)
		v, err := op(dctx)
		cancel()
		mu.Lock()
		gone := abandoned
		if !gone {
			done <- outcome{v, err}
		}
		mu.Unlock()
		if gone && late != nil {
			late(v, err)
		}
	})
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case o := <-done:
			return o.v, o.err // it ended as ctx did: take its answer
		default:
		}
		abandoned = true
		return zero, ctx.Err()
	}
}
