// Layer 4, mechanics: group commit, which merges concurrent writes to one
// bucket item into one conditional write.

package limiter

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Group commit: one write for many requests on one hot bucket item.
//
// A speculative acquire costs one conditional write, and a commit or
// rollback one unconditional one. When many goroutines of one process work
// on the same bucket item, those writes queue up behind each other in the
// store anyway (one item, one partition, serialised conditional writes).
// Group commit, the technique of database logs and of gubernator's request
// batching, sends them as one write instead:
//
//   - The first request for an item with no write in flight goes out alone,
//     at once: exactly the call made without group commit. Sequential use
//     therefore makes exactly the calls it makes without it.
//   - Requests for the item that arrive while a write is in flight queue,
//     and the queued requests go out together as a batch: the acquires as
//     ONE [store.SpeculativeStore.SpeculativeConsume] of their summed
//     consumption, then the adjustments (commits, rollbacks, give-backs)
//     as ONE [store.WriteAdjust] of their summed deltas. A caller in the
//     batch whose context can never end writes it (it waits for it
//     anyway), else a goroutine of the limiter; the callers wait.
//   - Up to two writes of an item are in flight at once (gcMaxInFlight),
//     so that one batch fills while the other travels. When a write
//     returns and no other is in flight, the queue goes out at once. When
//     the other is still in flight, the queue goes out as soon as it holds
//     half of the item's requests seen lately (the members just delivered,
//     those in flight, those queued): the members woken come back (a
//     commit, the next acquire) and the first half of them go out beside
//     the other write, without waiting for the rest; the other write's
//     return sends whatever is queued then. A hot item thus keeps two
//     batches of about half its callers each in flight, instead of one
//     batch that goes out only once all its members have come back (its
//     writer idle meanwhile) or a batch per return that catches only the
//     requests already queued.
//   - A combined speculative write takes one write-capacity token of the
//     DynamoDB backend for the whole batch: it is one write.
//
// # Why it never over-admits
//
// The combined write is conditioned, per limit, on the stored balance
// covering the batch's sum, in one atomic step, and it takes exactly that
// sum: the bucket moves as it would under the members' writes applied back
// to back, so every token admitted was in the bucket and total consumed
// (tc) grows by exactly the members' amounts. Two batches in flight are two
// such writes, each atomic, as two callers' solo writes would be. A batch's
// adjustments are written unconditionally, after its acquires, so that an
// adjustment never makes its own batch's conditional write fail; or, when
// they only give back and give back slots of an in-flight limit, before
// them (they can only make them fit), so that a slot given back is taken
// by the batch's acquires and its lease's end waits for no acquire. The
// contention test (TestContentionNoOverAdmission) runs with group commit on.
//
// # Why it never refuses a request that fits alone
//
// When the combined write is refused, nothing was written, and the refusal
// carries the item as it was. Each acquire is then decided on its own
// against that item: one that would not fit alone is refused exactly as a
// solo write on that item would have been (the same [store.SpeculativeResult],
// hence the same *[RateLimitExceededError], statuses and Retry-After, or the
// same fallback); the ones that fit go out again together, and after a few
// rounds the undecided ones retry with solo writes. A batch of one acquire
// gets the store's own result.
//
// # Cancellation and deadlines
//
// The shared write runs on a context detached from every caller's
// cancellation (each store call bounded by the store timeout), in a
// goroutine of the limiter or on a member's own goroutine only when that member's context
// can never end, so one member cannot cancel the others' write, and no
// caller waits past its own context: a caller whose context ends while its request is queued returns
// ctx.Err() and its request is dropped (nothing applied); an acquire whose
// context ends while its request is in flight returns ctx.Err() at once,
// and if the write then applies, its part is given back by an adjustment
// queued for the item (never lost, never counted twice). An adjustment in
// flight is always waited for, so that Commit and Rollback report exactly
// what was written.
//
// Group commit is per [RateLimiter]: limiters in one process do not batch
// with each other, and processes never do.

// gcKind is the kind of a queued request.
type gcKind int

const (
	gcConsume gcKind = iota // a speculative consume (an acquire)
	gcAdjust                // an unconditional adjustment (commit, rollback, give-back)
)

// gcState is where a queued request is; guarded by groupCommit.mu.
type gcState int

const (
	gcQueued   gcState = iota // waiting for the next batch
	gcInFlight                // part of a batch being written
	gcDone                    // result set
	gcSolo                    // combined write refused; retry alone
)

// gcOp is one request in a group-commit queue.
type gcOp struct {
	kind   gcKind
	key    store.BucketKey
	delta  Consume       // consumed (gcConsume) or adjustment delta (gcAdjust), tokens
	limits []store.Limit // gcConsume: the limits the write is conditioned on
	caps   map[string]int64
	nowMs  int64
	// inc, for gcAdjust, is the incarnation of the item the adjustment
	// settles into (store.BucketWrite.Incarnation).
	inc int64
	// ttlExtend is, for gcAdjust, the TTL extension of its adjustment
	// (store.BucketWrite.TTLExtendSeconds).
	ttlExtend int64

	wake chan struct{} // nil for a give-back nobody waits for

	// Guarded by groupCommit.mu (state is read without it once wake was
	// received: nothing writes it after).
	state     gcState
	abandoned bool // an acquire whose caller's context ended while in flight

	// Set by the batch's writer before wake is signalled.
	res store.SpeculativeResult
	err error
}

// gcMaxInFlight is how many writes of one item may be in flight at once,
// unless the repository serialises them (store.SerialItemWriter).
const gcMaxInFlight = 2

// gcSlot is the queue of one bucket item.
type gcSlot struct {
	inFlight int // writes of the item in flight (or about to be)
	flying   int // requests in those writes
	// target, when a write is in flight and another may start: the queue
	// goes out once it holds this many requests (0: only when a write
	// returns).
	target int
	// pop is the most requests of the item seen at once lately (in
	// flight, queued and just delivered), less one per write since.
	pop   int
	queue []*gcOp
}

// groupCommit batches the writes of one RateLimiter per bucket item.
type groupCommit struct {
	store *storeOps
	bg    *background

	// maxInFlight is gcMaxInFlight, or 1 when the repository serialises
	// the writes of an item.
	maxInFlight int

	// nowMs is the limiter's clock, read when a batch's write goes out.
	nowMs func() int64

	pool  sync.Pool  // idle *gcSlot values, so that an uncontended write allocates nothing
	ops   sync.Pool  // idle *gcOp values with their wake channel, for queued requests
	mu    sync.Mutex // guards slots, their fields and the gcOp fields marked as such
	slots map[store.BucketKey]*gcSlot
}

func newGroupCommit(ops *storeOps, bg *background, nowMs func() int64) *groupCommit {
	g := &groupCommit{store: ops, bg: bg, maxInFlight: gcMaxInFlight, nowMs: nowMs, slots: make(map[store.BucketKey]*gcSlot)}
	if _, ok := ops.repo.(store.SerialItemWriter); ok {
		g.maxInFlight = 1
	}
	g.pool.New = func() any { return new(gcSlot) }
	g.ops.New = func() any { return &gcOp{wake: make(chan struct{}, 1)} }
	return g
}

// consume is [store.SpeculativeStore.SpeculativeConsume] through the batcher.
func (g *groupCommit) consume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	return g.submit(ctx, gcOp{kind: gcConsume, key: req.Key, delta: req.Consume, limits: req.Limits, nowMs: req.NowMs})
}

// adjust writes w (a single-item store.WriteAdjust) through the batcher. Deltas
// that are not whole tokens bypass it.
func (g *groupCommit) adjust(ctx context.Context, w store.BucketWrite) error {
	op := gcOp{kind: gcAdjust, key: w.Key, delta: make(Consume, len(w.Limits)), nowMs: w.NowMs, inc: w.Incarnation, ttlExtend: w.TTLExtendSeconds}
	for _, lw := range w.Limits {
		if lw.ConsumedMilli%1000 != 0 || lw.Initial != nil || lw.RefillMilli != 0 || lw.Params != nil {
			_, err := detached(g.bg, ctx, true, func(ctx context.Context) (struct{}, error) {
				return struct{}{}, g.store.writeBuckets(ctx, []store.BucketWrite{w})
			}, nil)
			return err
		}
		op.delta[lw.Name] += lw.ConsumedMilli / 1000
		if lw.CapacityMilli != 0 {
			if op.caps == nil {
				op.caps = make(map[string]int64, len(w.Limits))
			}
			op.caps[lw.Name] = lw.CapacityMilli
		}
	}
	_, err := g.submit(ctx, op)
	return err
}

// submit runs one request: alone and at once when no write for its item is
// in flight (no allocation but the store's when the caller's context can
// never end: the uncontended path costs what it costs without group
// commit), else queued into the next batch. When the caller's context ends
// before the result is known it returns ctx.Err() (see the cancellation
// rules above).
func (g *groupCommit) submit(ctx context.Context, req gcOp) (store.SpeculativeResult, error) {
	g.mu.Lock()
	s := g.slots[req.key]
	if s == nil {
		s = g.pool.Get().(*gcSlot)
		g.slots[req.key] = s
	}
	if s.inFlight == 0 {
		s.inFlight, s.flying = 1, 1
		g.mu.Unlock()
		if ctx.Done() == nil || req.kind == gcAdjust {
			// The caller waits for the write anyway: write it inline (an
			// adjustment's context is detached from its request's).
			return g.inline(s, &req, ctx)
		}
		op := new(gcOp)
		*op = req
		return g.solo(ctx, s, op)
	}
	op := g.ops.Get().(*gcOp)
	wake := op.wake
	*op = req
	op.wake = wake
	s.queue = append(s.queue, op)
	var batch []*gcOp
	if s.inFlight < g.maxInFlight && s.target > 0 && len(s.queue) >= s.target {
		batch = g.takeLocked(s)
	}
	g.mu.Unlock()
	if batch != nil {
		if ctx.Done() == nil {
			// The caller waits for its batch anyway: write it here.
			g.runBatch(s, req.key, batch)
			g.handOff(req.key, s, len(batch))
		} else {
			g.goFlight(req.key, s, batch)
		}
	}

	if ctx.Done() == nil {
		<-op.wake
	} else {
		select {
		case <-op.wake:
		case <-ctx.Done():
			g.mu.Lock()
			switch {
			case op.state == gcQueued:
				s.queue = removeOp(s.queue, op)
				g.mu.Unlock()
				return store.SpeculativeResult{Key: op.key}, ctx.Err()
			case op.state == gcInFlight && op.kind == gcConsume:
				op.abandoned = true
				g.mu.Unlock()
				return store.SpeculativeResult{Key: op.key}, ctx.Err()
			}
			// Done, or an adjustment in flight: wait (its calls are bounded).
			g.mu.Unlock()
			<-op.wake
		}
	}
	// Woken: the writer set op's state before waking it, and nothing
	// writes it after, so it is read without g.mu.
	if op.state == gcSolo {
		return g.alone(ctx, op)
	}
	// Delivered: nothing else refers to op any more.
	res, err := op.res, op.err
	*op = gcOp{wake: op.wake}
	g.ops.Put(op)
	return res, err
}

// inline writes op, the only request for its item, on the caller's
// goroutine, then hands the queue over to a goroutine of the limiter when
// it should go out (see ended).
// Nothing retains op: it stays on the caller's stack.
func (g *groupCommit) inline(s *gcSlot, op *gcOp, ctx context.Context) (store.SpeculativeResult, error) {
	g.write(ctx, op)
	g.handOff(op.key, s, 1)
	return op.res, op.err
}

// solo writes op, the only request for its item, in a goroutine of the
// limiter, which then writes the queue when it should go out; the
// caller returns when its context ends, and an acquire that then applies
// is given back.
func (g *groupCommit) solo(ctx context.Context, s *gcSlot, op *gcOp) (store.SpeculativeResult, error) {
	if err := ctx.Err(); err != nil {
		g.handOff(op.key, s, 1)
		return store.SpeculativeResult{Key: op.key}, err
	}
	done := make(chan struct{})
	g.bg.Go(func() { g.soloWrite(ctx, s, op, done) })

	select {
	case <-done:
		return op.res, op.err
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-done:
			g.mu.Unlock()
			return op.res, op.err
		default:
		}
		if op.kind == gcConsume {
			op.abandoned = true
			g.mu.Unlock()
			return store.SpeculativeResult{Key: op.key}, ctx.Err()
		}
		g.mu.Unlock()
		<-done // an adjustment: wait (its calls are bounded)
		return op.res, op.err
	}
}

// soloWrite is the goroutine of solo: it writes op on a context detached
// from ctx's cancellation, closes done unless the caller gave up (then an
// applied acquire is given back), and hands the item over.
func (g *groupCommit) soloWrite(ctx context.Context, s *gcSlot, op *gcOp, done chan struct{}) {
	wctx, cancel := detachedContext(ctx)
	g.write(wctx, op)
	cancel()
	g.mu.Lock()
	switch {
	case op.abandoned:
		g.giveBackLocked(s, op)
	case len(s.queue) == 0 && s.inFlight == 1:
		// Nothing waits for the item: free it before waking the caller,
		// whose next request (often for the same item) then writes by
		// itself instead of queueing behind this goroutine.
		g.releaseLocked(op.key, s)
		close(done)
		g.mu.Unlock()
		return
	default:
		close(done)
	}
	g.mu.Unlock()
	g.flight(op.key, s, nil, 1)
}

// alone writes an acquire that the combined write could not decide with a
// solo write of its own, outside the queue.
func (g *groupCommit) alone(ctx context.Context, op *gcOp) (store.SpeculativeResult, error) {
	req := store.SpeculativeRequest{Key: op.key, Consume: op.delta, Limits: op.limits, NowMs: op.nowMs}
	return detached(g.bg, ctx, false, func(ctx context.Context) (store.SpeculativeResult, error) {
		return g.store.speculativeConsume(ctx, req)
	}, func(res store.SpeculativeResult, err error) {
		if err == nil && res.Applied {
			g.bg.Go(func() { g.giveBack(op, res) })
		}
	})
}

// write makes op's own store call.
func (g *groupCommit) write(ctx context.Context, op *gcOp) {
	if op.kind == gcConsume {
		op.res, op.err = g.store.speculativeConsume(ctx, store.SpeculativeRequest{Key: op.key, Consume: op.delta, Limits: op.limits, NowMs: op.nowMs})
		return
	}
	w := adjustDeltaWrite(op.key, op.nowMs, op.delta, op.caps, op.inc)
	w.TTLExtendSeconds = op.ttlExtend
	op.err = g.store.writeBuckets(ctx, []store.BucketWrite{w})
}

// giveBackLocked queues the give-back of op, an acquire whose caller went
// away, when its write applied. The item's slot must have that write
// still counted in flight (it just ended), so that ended sends the queue;
// g.mu must be held.
func (g *groupCommit) giveBackLocked(s *gcSlot, op *gcOp) {
	if op.kind != gcConsume || op.err != nil || !op.res.Applied {
		return
	}
	s.queue = append(s.queue, giveBackOp(op, op.res))
}

// giveBack submits the give-back of op, an applied acquire whose caller
// went away, and waits for it. It runs in a goroutine of the limiter.
func (g *groupCommit) giveBack(op *gcOp, res store.SpeculativeResult) {
	g.submit(context.Background(), *giveBackOp(op, res))
}

// giveBackOp is the adjustment that returns what op, an applied acquire
// whose write answered res, took.
func giveBackOp(op *gcOp, res store.SpeculativeResult) *gcOp {
	give := make(Consume, len(op.delta))
	for name, v := range op.delta {
		give[name] = -v
	}
	return &gcOp{kind: gcAdjust, key: op.key, delta: give, caps: capacities(op.limits), nowMs: op.nowMs, inc: incarnationOf(res)}
}

// goFlight runs flight in a goroutine of the limiter, when batch is not
// nil.
func (g *groupCommit) goFlight(key store.BucketKey, s *gcSlot, batch []*gcOp) {
	if batch != nil {
		g.bg.Go(func() { g.flight(key, s, batch, 0) })
	}
}

// handOff is called on a caller's goroutine when the write of n requests
// for key it made has returned: it starts the next batch in a goroutine of
// the limiter when the queue should go out (see ended). When the item
// takes one write at a time, a queue is handed over to a goroutine of the
// limiter as it is, which first lets the members just woken queue too (see
// flight).
func (g *groupCommit) handOff(key store.BucketKey, s *gcSlot, n int) {
	if g.maxInFlight == 1 {
		g.mu.Lock()
		queued := len(s.queue) > 0
		g.mu.Unlock()
		if queued {
			g.bg.Go(func() { g.flight(key, s, nil, n) })
			return
		}
	}
	g.goFlight(key, s, g.ended(key, s, n))
}

// flight writes batch, a batch of key's requests, if not nil, and
// delivers the results; then it writes the batches ended hands over after
// each write (n is the size of the write that ended before, when batch is
// nil). It runs in a goroutine of the limiter.
func (g *groupCommit) flight(key store.BucketKey, s *gcSlot, batch []*gcOp, n int) {
	if batch != nil {
		g.runBatch(s, key, batch)
		n = len(batch)
	}
	for {
		if g.maxInFlight == 1 {
			// One write at a time: before the next batch, let the
			// goroutines that are runnable run first (the write still
			// counted in flight): the members just delivered come back at
			// once (a commit, the next acquire) and join the queue.
			// Without this the queue went out with the requests that had
			// arrived during the write, the members queued behind it, and
			// batches alternated between a few requests and most of them.
			runtime.Gosched()
		}
		if batch = g.ended(key, s, n); batch == nil {
			return
		}
		g.runBatch(s, key, batch)
		n = len(batch)
	}
}

// ended is called when a write of key carrying n requests has returned
// (its members delivered). It returns the next batch to write, if the
// queue should go out now, or nil; or frees the idle item.
func (g *groupCommit) ended(key store.BucketKey, s *gcSlot, n int) []*gcOp {
	g.mu.Lock()
	defer g.mu.Unlock()
	s.inFlight--
	s.flying -= n
	// The requests of this item seen lately: the members just delivered
	// (most come back: a commit, the next acquire), those in flight and
	// those queued. Half of them go out beside the write in flight.
	s.pop = max(s.pop-1, n+s.flying+len(s.queue))
	target := (s.pop + 1) / 2
	if len(s.queue) == 0 {
		if s.inFlight == 0 {
			g.releaseLocked(key, s)
			return nil
		}
		s.target = target
		return nil
	}
	if s.inFlight > 0 && len(s.queue) < target {
		s.target = target
		return nil
	}
	batch := g.takeLocked(s)
	if s.inFlight < g.maxInFlight {
		s.target = target
	}
	return batch
}

// takeLocked takes the next batch off s's queue and counts it in flight.
// g.mu must be held.
func (g *groupCommit) takeLocked(s *gcSlot) []*gcOp {
	batch, rest := takeBatch(s.queue)
	s.queue = rest
	if rest == nil {
		// The next queue is about as long: grow it once.
		s.queue = make([]*gcOp, 0, len(batch))
	}
	for _, op := range batch {
		op.state = gcInFlight
	}
	s.inFlight++
	s.flying += len(batch)
	s.target = 0
	return batch
}

// releaseLocked frees s, the idle slot of key. g.mu must be held.
func (g *groupCommit) releaseLocked(key store.BucketKey, s *gcSlot) {
	delete(g.slots, key)
	*s = gcSlot{}
	g.pool.Put(s)
}

// takeBatch splits queue into the next batch and the rest: requests are
// taken in order while no limit's running sum would leave ±maxAmount (so
// that sums never saturate) and every acquire has the first acquire's
// limits. The first request is always taken.
func takeBatch(queue []*gcOp) (batch, rest []*gcOp) {
	// Usually the amounts are small: while their magnitudes add up to at
	// most maxAmount no sum can leave ±maxAmount, and no sum is kept.
	var bound int64
	var sum Consume // the running sums, once the magnitudes passed maxAmount
	var limits []store.Limit
	seenConsume := false
	for i, op := range queue {
		if op.kind == gcConsume {
			if seenConsume && !slices.Equal(op.limits, limits) {
				return queue[:i:i], append([]*gcOp(nil), queue[i:]...)
			}
			seenConsume, limits = true, op.limits
		}
		if sum == nil {
			for _, v := range op.delta {
				bound += max(v, -v) // at most 2·maxAmount: no overflow
				if bound > maxAmount {
					sum = Consume{}
					for _, prev := range queue[:i] {
						addConsume(sum, prev.delta)
					}
					break
				}
			}
			if sum == nil {
				continue
			}
		}
		for name, v := range op.delta {
			if t := sum[name] + v; i > 0 && (t > maxAmount || t < -maxAmount) {
				return queue[:i:i], append([]*gcOp(nil), queue[i:]...)
			}
		}
		addConsume(sum, op.delta)
	}
	return queue, nil
}

// removeOp returns queue without op.
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

// runBatch writes batch (requests for key) and delivers every member's
// result: the acquires first, then the adjustments (the adjustments first
// when they give back slots: givesBackSlots). It runs in a goroutine
// of the limiter or on a member's goroutine whose context can never end,
// on a context detached from every caller's.
func (g *groupCommit) runBatch(s *gcSlot, key store.BucketKey, batch []*gcOp) {
	ctx, cancel := detachedContext(context.Background())
	defer cancel()
	undelivered := batch
	defer func() { g.deliver(s, undelivered) }()

	var nowMs int64
	consumes := 0
	for _, op := range batch {
		if op.kind == gcConsume {
			consumes++
		}
		nowMs = max(nowMs, op.nowMs)
	}
	pending, adjusts := batch, []*gcOp(nil)
	if consumes < len(batch) {
		pending = make([]*gcOp, 0, consumes)
		adjusts = make([]*gcOp, 0, len(batch)-consumes)
		for _, op := range batch {
			if op.kind == gcConsume {
				pending = append(pending, op)
			} else {
				adjusts = append(adjusts, op)
			}
		}
	}
	if len(pending) > 0 && givesBackSlots(adjusts) {
		// Slots given back go out first, and their callers are answered
		// at once: the acquires of the batch may take those slots, and
		// the end of a lease does not wait for the acquires (a refused
		// combined write is decided again, one more write of the item,
		// which a full in-flight limit makes common).
		g.writeAdjusts(ctx, key, nowMs, adjusts)
		g.deliver(s, adjusts)
		undelivered, adjusts = pending, nil
	}
	if len(pending) > 0 {
		g.decide(ctx, key, pending, nowMs)
	}
	if len(adjusts) > 0 {
		g.writeAdjusts(ctx, key, nowMs, adjusts)
	}
}

// givesBackSlots reports whether adjusts give back the slots of an
// in-flight limit and take nothing: written before the acquires of their
// batch, they can only make those fit.
func givesBackSlots(adjusts []*gcOp) bool {
	slots := false
	for _, op := range adjusts {
		for name, v := range op.delta {
			if v > 0 {
				return false
			}
			if _, _, ok := store.ParseSlotLimitName(name); ok && v < 0 {
				slots = true
			}
		}
	}
	return slots
}

// decide writes the acquires pending (all with the same limits) as one
// combined write. When it is refused, the acquires are decided in queue
// order against the item the store returned: the ones that would not fit
// alone are refused as a solo write on that item would be; the longest run
// of the others whose sum fits goes out as the next combined write, and
// what is left is decided on the item that write returns. Every decision
// is thus made on a state the store reported, as a solo write at that
// point would be. After gcMaxRounds writes the undecided acquires retry
// alone.
//
// Each write is decided at the limiter's time as it goes out (never
// before nowMs, the latest of the batch's): the batch was queued behind
// the item's previous write, and a write decided at the time its members
// asked would refill the item to a time other writers have passed
// meanwhile, which a write that refills is refused for (see fullWrite).
// What it admits is what the bucket holds when the write applies, no
// later than that time. A member the combined writes leave out is decided
// on the item returned at the time it asked, as its own write would be.
func (g *groupCommit) decide(ctx context.Context, key store.BucketKey, pending []*gcOp, nowMs int64) {
	nowMs = g.sendMs(nowMs)
	limits := pending[0].limits
	written := pending
	total := Consume{}
	for _, op := range written {
		addConsume(total, op.delta)
	}
	res, err := g.store.speculativeConsume(ctx, store.SpeculativeRequest{Key: key, Consume: total, Limits: limits, NowMs: nowMs})
	for round := 1; ; round++ {
		if err != nil {
			for _, op := range pending {
				op.res, op.err = store.SpeculativeResult{Key: key}, err
			}
			return
		}
		if res.Applied {
			for _, op := range written {
				op.res = res
			}
			pending = pending[len(written):]
			if len(pending) == 0 {
				return
			}
		} else if round == 1 && len(pending) == 1 {
			pending[0].res = res // the store's own answer to this request alone
			return
		}
		// Decide the pending acquires on the state the store returned.
		b := res.Bucket
		var fit, later []*gcOp
		sum := Consume{}
		trial := Consume{}
		for _, op := range pending {
			if reason := specRefusal(b, op.delta, limits, op.nowMs); reason != store.RefusedNone {
				op.res = refusedResult(key, b, reason, op.nowMs)
				continue
			}
			clear(trial)
			addConsume(trial, sum)
			addConsume(trial, op.delta)
			if len(later) == 0 && specRefusal(b, trial, limits, nowMs) == store.RefusedNone {
				addConsume(sum, op.delta)
				fit = append(fit, op)
			} else {
				later = append(later, op)
			}
		}
		if len(fit) == 0 || round >= gcMaxRounds {
			g.mu.Lock()
			for _, op := range append(fit, later...) {
				op.state = gcSolo
			}
			g.mu.Unlock()
			return
		}
		pending, written = append(fit, later...), fit
		nowMs = g.sendMs(nowMs)
		res, err = g.store.speculativeConsume(ctx, store.SpeculativeRequest{Key: key, Consume: sum, Limits: limits, NowMs: nowMs})
	}
}

// sendMs is the time a write decided at nowMs or later goes out at: the
// limiter's clock, unless it reads earlier (a clock that stepped back).
func (g *groupCommit) sendMs(nowMs int64) int64 {
	return max(nowMs, g.nowMs())
}

// writeAdjusts writes the summed deltas of a batch's adjustments as one
// store.WriteAdjust per incarnation of the item they settle into (one
// but around a delete of the entity; nothing when every delta cancels
// out), and sets each adjustment's error to its write's.
func (g *groupCommit) writeAdjusts(ctx context.Context, key store.BucketKey, nowMs int64, adjusts []*gcOp) {
	for i, first := range adjusts {
		if slices.ContainsFunc(adjusts[:i], func(op *gcOp) bool { return op.inc == first.inc }) {
			continue // written with the first of its incarnation
		}
		sum := Consume{}
		var caps map[string]int64
		ext := int64(0)
		for _, op := range adjusts[i:] {
			if op.inc != first.inc {
				continue
			}
			addConsume(sum, op.delta)
			ext = bucketmath.AddSat(ext, op.ttlExtend)
			for name, c := range op.caps {
				if caps == nil {
					caps = make(map[string]int64)
				}
				caps[name] = c
			}
		}
		var err error
		if w := adjustDeltaWrite(key, nowMs, sum, caps, first.inc); len(w.Limits) > 0 {
			w.TTLExtendSeconds = ext
			err = g.store.writeBuckets(ctx, []store.BucketWrite{w})
		}
		for _, op := range adjusts[i:] {
			if op.inc == first.inc {
				op.err = err
			}
		}
	}
}

// deliver wakes every waiting member of a written batch (after unlocking,
// so that they do not wake into a held lock), and queues the give-back of
// an applied acquire whose caller went away. s has this write in flight.
func (g *groupCommit) deliver(s *gcSlot, batch []*gcOp) {
	g.mu.Lock()
	n := 0
	for _, op := range batch {
		if op.abandoned {
			g.giveBackLocked(s, op)
			continue
		}
		if op.wake == nil {
			continue
		}
		if op.state != gcSolo {
			op.state = gcDone
		}
		batch[n] = op
		n++
	}
	g.mu.Unlock()
	for _, op := range batch[:n] {
		op.wake <- struct{}{}
	}
}
