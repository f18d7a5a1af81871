package limiter

import (
	"context"
	"sync"
)

// Group commit: one write for many requests on one hot bucket item.
//
// A speculative acquire costs one conditional UpdateItem, and a commit or
// rollback one unconditional one. When many goroutines of one process work
// on the same bucket item, those writes queue up behind each other in
// DynamoDB anyway (one item, one partition, serialised conditional writes).
// Group commit, the technique of database logs and of gubernator's request
// batching, sends them as one write instead:
//
//   - The first request for an item with no write in flight goes out alone,
//     at once, on the caller's context: exactly today's call. Sequential use
//     therefore makes exactly the calls it made before.
//   - Requests for the item that arrive while a write is in flight queue.
//     When the write returns, the queued requests go out as ONE write
//     carrying their sum: a [SpeculativeStore.SpeculativeConsume] of the summed
//     consumption and the summed adjustments when the batch holds an
//     acquire, else one [WriteAdjust] of the summed deltas. One of the
//     waiting callers issues it (no goroutine is started); the others wait.
//   - A combined speculative write takes one wcu token for the whole batch:
//     it is one write.
//
// # Why it never over-admits
//
// The combined write is conditioned, per limit, on the stored balance
// covering the batch's net sum (tk ≥ Σ consumed − Σ given back), in one
// atomic step, and it takes exactly that sum: the bucket moves as it would
// under the members' writes applied back to back (refunds first), so every
// token admitted was in the bucket and total consumed (tc) grows by exactly
// the members' amounts. The contention test (stress_test.go) runs with group
// commit on.
//
// # Why it never refuses a request that fits alone
//
// When the combined write is refused, nothing was written, and the refusal
// carries the item as it was (ALL_OLD). The batch's adjustments are then
// written on their own (one WriteAdjust), and each acquire is decided on its
// own against that item (with the adjustments applied to it): one that
// would not fit alone is refused exactly as a solo write on that item would
// have been (the same [SpeculativeResult], hence the same
// *[RateLimitExceededError], statuses and Retry-After, or the same
// fallback); one that would fit alone retries with its own solo write. A
// batch of one acquire and no adjustment gets the store's own result.
//
// # Cancellation
//
// The shared write runs on a context detached from the issuing caller's
// cancellation, with a timeout (refundTimeout), so one member cannot cancel
// the others' write. A caller whose context ends while its request is
// queued returns ctx.Err() and its request is dropped (nothing applied). An
// acquire whose context ends while its request is in flight returns
// ctx.Err() at once; if the write then applies, its part is given back by
// an adjustment queued for the item (never lost, never counted twice). An
// adjustment in flight is always waited for, so that Commit and Rollback
// report exactly what was written.
//
// Group commit is per [RateLimiter]: limiters in one process do not batch
// with each other, and processes never do.

// gcKind is the kind of a queued request.
type gcKind int

const (
	gcConsume gcKind = iota // a speculative consume (an acquire)
	gcAdjust                // an unconditional adjustment (commit, rollback, compensation)
)

// gcState is where a queued request is; guarded by groupCommit.mu.
type gcState int

const (
	gcQueued   gcState = iota // waiting for the next batch
	gcInFlight                // part of a batch being written
	gcLead                    // chosen to issue its batch's write
	gcDone                    // result set
	gcSolo                    // combined write refused; retry alone
)

// gcOp is one request in a group-commit queue.
type gcOp struct {
	kind  gcKind
	key   BucketKey
	delta Consume // consumed (gcConsume) or adjustment delta (gcAdjust), tokens
	nowMs int64

	wake chan struct{} // nil for an abandoned acquire's give-back (nobody waits)

	// Guarded by groupCommit.mu.
	state     gcState
	abandoned bool    // the caller's context ended while in flight
	batch     []*gcOp // gcLead: the batch to write

	// Set by the batch's writer before wake is signalled.
	res  SpeculativeResult
	err  error
	solo bool // the combined write was refused and this acquire fits alone
}

// gcSlot is the queue of one bucket item.
type gcSlot struct {
	busy  bool // a write for the item is in flight (or about to be)
	queue []*gcOp
}

// groupCommit batches the writes of one RateLimiter per bucket item.
type groupCommit struct {
	store *storeOps

	pool  sync.Pool  // idle *gcSlot values, so that an uncontended write allocates nothing
	mu    sync.Mutex // guards slots, their fields and the gcOp fields marked as such
	slots map[BucketKey]*gcSlot
}

func newGroupCommit(store *storeOps) *groupCommit {
	g := &groupCommit{store: store, slots: make(map[BucketKey]*gcSlot)}
	g.pool.New = func() any { return new(gcSlot) }
	return g
}

// consume is [SpeculativeStore.SpeculativeConsume] through the batcher.
func (g *groupCommit) consume(ctx context.Context, key BucketKey, c Consume, nowMs int64) (SpeculativeResult, error) {
	return g.submit(ctx, gcConsume, key, c, nowMs)
}

// adjust writes w (a single-item WriteAdjust) through the batcher. Deltas
// that are not whole tokens bypass it.
func (g *groupCommit) adjust(ctx context.Context, w BucketWrite) error {
	delta := make(Consume, len(w.Limits))
	for _, lw := range w.Limits {
		if lw.ConsumedMilli%1000 != 0 || lw.Initial != nil || lw.RefillMilli != 0 {
			return g.store.writeBuckets(ctx, []BucketWrite{w})
		}
		delta[lw.Name] += lw.ConsumedMilli / 1000
	}
	_, err := g.submit(ctx, gcAdjust, w.Key, delta, w.NowMs)
	return err
}

// submit runs one request: alone and at once when no write for its item is
// in flight (no allocation but the store's: the uncontended path costs
// what it costs without group commit), else queued into the next batch.
// When the caller's context ends before the result is known it returns
// ctx.Err() (see the cancellation rules above).
func (g *groupCommit) submit(ctx context.Context, kind gcKind, key BucketKey, delta Consume, nowMs int64) (SpeculativeResult, error) {
	g.mu.Lock()
	s := g.slots[key]
	if s == nil {
		s = g.pool.Get().(*gcSlot)
		g.slots[key] = s
	}
	if !s.busy {
		s.busy = true
		g.mu.Unlock()
		op := gcOp{kind: kind, key: key, delta: delta, nowMs: nowMs}
		g.runSolo(ctx, &op)
		g.handOff(ctx, key, s)
		return op.res, op.err
	}
	op := &gcOp{kind: kind, key: key, delta: delta, nowMs: nowMs, wake: make(chan struct{}, 1)}
	s.queue = append(s.queue, op)
	g.mu.Unlock()

	select {
	case <-op.wake:
	case <-ctx.Done():
		g.mu.Lock()
		switch {
		case op.state == gcQueued:
			s.queue = removeOp(s.queue, op)
			g.mu.Unlock()
			return SpeculativeResult{Key: key}, ctx.Err()
		case op.state == gcInFlight && op.kind == gcConsume:
			op.abandoned = true
			g.mu.Unlock()
			return SpeculativeResult{Key: key}, ctx.Err()
		}
		// Leading a batch, done, or an adjustment in flight: wait.
		g.mu.Unlock()
		<-op.wake
	}
	g.mu.Lock()
	state, batch := op.state, op.batch
	g.mu.Unlock()
	switch state {
	case gcLead:
		g.runBatch(ctx, key, batch)
		g.handOff(ctx, key, s)
		if op.solo {
			g.runSolo(ctx, op)
		}
	case gcSolo:
		g.runSolo(ctx, op)
	}
	return op.res, op.err
}

// runSolo writes op alone, on ctx: the call the limiter makes without group
// commit.
func (g *groupCommit) runSolo(ctx context.Context, op *gcOp) {
	if op.kind == gcConsume {
		op.res, op.err = g.store.speculativeConsume(ctx, op.key, op.delta, op.nowMs)
		return
	}
	op.err = g.store.writeBuckets(ctx, []BucketWrite{adjustDeltaWrite(op.key, op.nowMs, op.delta)})
}

// handOff is called by the goroutine whose write for key just returned: it
// hands the queued requests, as one batch, to one of their callers, or
// marks the item idle when nothing is queued. A batch in which nobody waits
// (only give-backs of abandoned acquires) is written by the caller itself.
func (g *groupCommit) handOff(ctx context.Context, key BucketKey, s *gcSlot) {
	for {
		g.mu.Lock()
		if len(s.queue) == 0 {
			delete(g.slots, key)
			*s = gcSlot{}
			g.pool.Put(s)
			g.mu.Unlock()
			return
		}
		batch, rest := takeBatch(s.queue)
		s.queue = rest
		var leader *gcOp
		for _, op := range batch {
			op.state = gcInFlight
			if leader == nil && op.wake != nil {
				leader = op
			}
		}
		if leader != nil {
			leader.state, leader.batch = gcLead, batch
			g.mu.Unlock()
			leader.wake <- struct{}{}
			return
		}
		g.mu.Unlock()
		g.runBatch(ctx, key, batch)
	}
}

// takeBatch splits queue into the next batch and the rest: requests are
// taken in order while no limit's running sum would leave ±maxAmount (so
// that sums never saturate). The first request is always taken.
func takeBatch(queue []*gcOp) (batch, rest []*gcOp) {
	sum := Consume{}
	for i, op := range queue {
		for name, v := range op.delta {
			if t := sum[name] + v; i > 0 && (t > maxAmount || t < -maxAmount) {
				return queue[:i:i], append([]*gcOp(nil), queue[i:]...)
			}
		}
		for name, v := range op.delta {
			sum[name] += v
		}
	}
	return queue, nil
}

func removeOp(queue []*gcOp, op *gcOp) []*gcOp {
	for i, o := range queue {
		if o == op {
			return append(queue[:i:i], queue[i+1:]...)
		}
	}
	return queue
}

// gcMaxRounds bounds the combined writes of one batch after a refusal;
// the acquires still undecided then retry alone.
const gcMaxRounds = 4

// runBatch writes batch (requests for key) as one write and delivers every
// member's result. It runs on a context detached from ctx's cancellation.
//
// When the combined write is refused, the acquires are decided in queue
// order against the item the store returned (with the batch's adjustments
// applied): the ones that would not fit alone are refused as a solo write
// on that item would be; the longest run of the others whose sum fits goes
// out as the next combined write (with the adjustments), and what is left
// is decided on the item that write returns (ALL_NEW). Every decision is
// thus made on a state the store reported, as a solo write at that point
// would be. After gcMaxRounds writes the undecided acquires retry alone.
func (g *groupCommit) runBatch(ctx context.Context, key BucketKey, batch []*gcOp) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	defer g.deliver(key, batch)

	var pending, adjusts []*gcOp
	adjustSum := Consume{}
	var nowMs int64
	for _, op := range batch {
		if op.kind == gcConsume {
			pending = append(pending, op)
		} else {
			adjusts = append(adjusts, op)
			addConsume(adjustSum, op.delta)
		}
		nowMs = max(nowMs, op.nowMs)
	}
	setAdjustErr := func(err error) {
		for _, op := range adjusts {
			op.err = err
		}
		adjusts = nil
	}
	if len(pending) == 0 {
		setAdjustErr(g.writeAdjust(ctx, key, nowMs, adjustSum))
		return
	}

	written := pending
	total := Consume{}
	addConsume(total, adjustSum)
	for _, op := range written {
		addConsume(total, op.delta)
	}
	res, err := g.store.speculativeConsume(ctx, key, total, nowMs)
	for round := 1; ; round++ {
		if err != nil {
			for _, op := range pending {
				op.res, op.err = SpeculativeResult{Key: key}, err
			}
			setAdjustErr(err)
			return
		}
		if res.Applied {
			for _, op := range written {
				op.res = res
			}
			setAdjustErr(nil)
			pending = pending[len(written):]
			if len(pending) == 0 {
				return
			}
		} else if round == 1 && len(pending) == 1 && len(adjusts) == 0 {
			pending[0].res = res // the store's own answer to this request alone
			return
		}
		// Decide the pending acquires on the state the store returned.
		b := res.Bucket
		if len(adjusts) > 0 {
			b = withAdjustments(b, adjustSum)
		}
		var fit, later []*gcOp
		sum := Consume{}
		trial := Consume{}
		for _, op := range pending {
			if reason := specRefusal(b, op.delta, op.nowMs); reason != RefusedNone {
				op.res = refusedResult(key, b, reason, op.nowMs)
				continue
			}
			clear(trial)
			addConsume(trial, sum)
			addConsume(trial, op.delta)
			if len(later) == 0 && specRefusal(b, trial, nowMs) == RefusedNone {
				addConsume(sum, op.delta)
				fit = append(fit, op)
			} else {
				later = append(later, op)
			}
		}
		if len(fit) == 0 || round >= gcMaxRounds {
			for _, op := range append(fit, later...) {
				op.solo = true
			}
			if len(adjusts) > 0 {
				setAdjustErr(g.writeAdjust(ctx, key, nowMs, adjustSum))
			}
			return
		}
		pending, written = append(fit, later...), fit
		clear(total)
		addConsume(total, adjustSum)
		addConsume(total, sum)
		if len(adjusts) == 0 {
			clear(total)
			addConsume(total, sum)
		}
		res, err = g.store.speculativeConsume(ctx, key, total, nowMs)
	}
}

// writeAdjust writes the summed adjustment delta of a batch (nothing when
// every delta cancels out).
func (g *groupCommit) writeAdjust(ctx context.Context, key BucketKey, nowMs int64, delta Consume) error {
	w := adjustDeltaWrite(key, nowMs, delta)
	if len(w.Limits) == 0 {
		return nil
	}
	return g.store.writeBuckets(ctx, []BucketWrite{w})
}

// deliver wakes every waiting member of a written batch, and queues the
// give-back of an applied acquire whose caller went away.
func (g *groupCommit) deliver(key BucketKey, batch []*gcOp) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, op := range batch {
		if op.abandoned {
			if op.res.Applied && op.err == nil {
				give := make(Consume, len(op.delta))
				for name, v := range op.delta {
					give[name] = -v
				}
				s := g.slots[key] // busy: the caller of deliver still holds it
				s.queue = append(s.queue, &gcOp{kind: gcAdjust, key: key, delta: give, nowMs: op.nowMs})
			}
			continue
		}
		if op.wake == nil {
			continue
		}
		if op.state == gcLead {
			continue // its caller is the one writing: it reads the result itself
		}
		op.state = gcDone
		if op.solo {
			op.state = gcSolo
		}
		op.wake <- struct{}{}
	}
}

// adjustDeltaWrite is the WriteAdjust of delta (tokens) on key, limits in
// sorted order, zero deltas left out.
func adjustDeltaWrite(key BucketKey, nowMs int64, delta Consume) BucketWrite {
	w := BucketWrite{Kind: WriteAdjust, Key: key, NowMs: nowMs}
	for _, name := range delta.names() {
		if d := delta[name]; d != 0 {
			w.Limits = append(w.Limits, LimitWrite{Name: name, ConsumedMilli: satMul(d, 1000)})
		}
	}
	return w
}

// addConsume adds c to sum, per limit.
func addConsume(sum, c Consume) {
	for name, v := range c {
		sum[name] += v
	}
}

// withAdjustments returns a copy of b with delta (tokens) taken from the
// balances of the limits it holds, as a WriteAdjust would.
func withAdjustments(b *Bucket, delta Consume) *Bucket {
	if b == nil {
		return nil
	}
	out := *b
	out.States = append([]BucketState(nil), b.States...)
	for i := range out.States {
		if d := delta[out.States[i].LimitName]; d != 0 {
			s := &out.States[i]
			s.TokensMilli = addMilli(s.TokensMilli, -d)
			s.TotalConsumedMilli = addMilli(s.TotalConsumedMilli, d)
		}
	}
	return &out
}

// specRefusal returns why a speculative write of consume alone would be
// refused by b at nowMs, or RefusedNone when it would apply: the condition
// of [SpeculativeStore.SpeculativeConsume] (the item exists and is not
// expired, every named limit exists, positive amounts fit in the balance
// without refill), plus the DynamoDB backend's write-capacity token.
func specRefusal(b *Bucket, consume Consume, nowMs int64) RefusalReason {
	if b == nil {
		return RefusedBucketMissing
	}
	if b.Expired(nowMs) {
		return RefusedExpired
	}
	app := false
	for name, amount := range consume {
		s, ok := b.State(name)
		if !ok {
			return RefusedLimitMissing
		}
		if amount > 0 && s.TokensMilli < satMul(amount, 1000) {
			app = true
		}
	}
	wcu := wcuSpent(b)
	switch {
	case app && wcu:
		return RefusedBothExhausted
	case wcu:
		return RefusedWriteCapacity
	case app:
		return RefusedLimitExhausted
	}
	return RefusedNone
}

// refusedResult is the result of a speculative write refused by b for
// reason at nowMs.
func refusedResult(key BucketKey, b *Bucket, reason RefusalReason, nowMs int64) SpeculativeResult {
	res := SpeculativeResult{Key: key, Bucket: b, Reason: reason}
	if reason == RefusedWriteCapacity || reason == RefusedBothExhausted {
		res.CapacityRefills = wcuRefills(b, nowMs)
	}
	return res
}

// WithGroupCommit turns group commit on or off (see groupcommit.go): while
// a write for a bucket item is in flight, this limiter's later acquires,
// commits and rollbacks for the same item queue and go out as one write
// carrying their sum. It never admits more than the requests one at a time
// would, and never refuses a request that would fit alone. It is on by
// default; sequential use makes exactly the calls it makes without it.
func WithGroupCommit(on bool) Option { return func(rl *RateLimiter) { rl.noGroupCommit = !on } }

// specConsume is the speculative write of the fast path, through group
// commit when it is on.
func (rl *RateLimiter) specConsume(ctx context.Context, key BucketKey, consume Consume, nowMs int64) (SpeculativeResult, error) {
	if rl.gc == nil {
		return rl.store.speculativeConsume(ctx, key, consume, nowMs)
	}
	return rl.gc.consume(ctx, key, consume, nowMs)
}

// writeAdjust writes one single-item WriteAdjust (commit, rollback,
// compensation), through group commit when it is on. It clears the
// over-limit cache entry of the item.
func (rl *RateLimiter) writeAdjust(ctx context.Context, w BucketWrite) error {
	rl.overLimitSeen(w)
	if rl.gc == nil {
		return rl.store.writeBuckets(ctx, []BucketWrite{w})
	}
	return rl.gc.adjust(ctx, w)
}
