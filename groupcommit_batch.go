// Layer 4, mechanics: group commit's batch, written as one combined
// speculative write and one combined adjustment, and decided member by
// member when the combined write is refused.

package limiter

import (
	"context"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// gcMaxRounds bounds the combined writes of one batch after a refusal;
// the acquires still undecided then retry alone.
const gcMaxRounds = 4

// runBatch writes batch (requests for key) and delivers every member's
// result: the acquires first, then the adjustments. It runs in a goroutine
// of the limiter or on a member's goroutine whose context can never end,
// on a context detached from every caller's.
func (g *groupCommit) runBatch(s *gcSlot, key store.BucketKey, batch []*gcOp) {
	ctx, cancel := context.WithTimeout(context.Background(), refundTimeout)
	defer cancel()
	defer g.deliver(s, batch)

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
	if len(pending) > 0 {
		g.decide(ctx, key, pending, nowMs)
	}
	if len(adjusts) > 0 {
		err := g.writeAdjusts(ctx, key, nowMs, adjusts)
		for _, op := range adjusts {
			op.err = err
		}
	}
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
func (g *groupCommit) decide(ctx context.Context, key store.BucketKey, pending []*gcOp, nowMs int64) {
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
		res, err = g.store.speculativeConsume(ctx, store.SpeculativeRequest{Key: key, Consume: sum, Limits: limits, NowMs: nowMs})
	}
}

// writeAdjusts writes the summed deltas of a batch's adjustments as one
// store.WriteAdjust (nothing when every delta cancels out).
func (g *groupCommit) writeAdjusts(ctx context.Context, key store.BucketKey, nowMs int64, adjusts []*gcOp) error {
	sum := Consume{}
	var caps map[string]int64
	for _, op := range adjusts {
		addConsume(sum, op.delta)
		for name, c := range op.caps {
			if caps == nil {
				caps = make(map[string]int64)
			}
			caps[name] = c
		}
	}
	w := adjustDeltaWrite(key, nowMs, sum, caps)
	if len(w.Limits) == 0 {
		return nil
	}
	return g.store.writeBuckets(ctx, []store.BucketWrite{w})
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

// adjustDeltaWrite is the store.WriteAdjust of delta (tokens) on key, limits in
// sorted order, zero deltas left out, with the capacity hints caps.
func adjustDeltaWrite(key store.BucketKey, nowMs int64, delta Consume, caps map[string]int64) store.BucketWrite {
	w := store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: nowMs}
	for _, name := range consumeNames(delta) {
		if d := delta[name]; d != 0 {
			w.Limits = append(w.Limits, store.LimitWrite{Name: name, ConsumedMilli: bucketmath.SatMul(d, 1000), CapacityMilli: caps[name]})
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

// specRefusal returns why a speculative write of consume alone would be
// refused by b at nowMs, or store.RefusedNone when it would apply: the condition
// of [store.SpeculativeStore.SpeculativeConsume] (the item exists and is not
// expired, limits holds the stored parameters, every named limit exists,
// positive amounts fit in the balance without refill), plus the DynamoDB
// backend's write-capacity token.
func specRefusal(b *store.Bucket, consume Consume, limits []Limit, nowMs int64) store.RefusalReason {
	if b == nil {
		return store.RefusedBucketMissing
	}
	if b.Expired(nowMs) {
		return store.RefusedExpired
	}
	for _, l := range limits {
		s, ok := b.State(l.Name)
		if !ok {
			return store.RefusedLimitMissing
		}
		if !sameParams(s, l) {
			return store.RefusedLimitsChanged
		}
	}
	app := false
	for name, amount := range consume {
		s, ok := b.State(name)
		if !ok {
			return store.RefusedLimitMissing
		}
		if amount > 0 && s.TokensMilli < bucketmath.SatMul(amount, 1000) {
			app = true
		}
	}
	wcu := wcuSpent(b)
	switch {
	case app && wcu:
		return store.RefusedBothExhausted
	case wcu:
		return store.RefusedWriteCapacity
	case app:
		return store.RefusedLimitExhausted
	}
	return store.RefusedNone
}

// refusedResult is the result of a speculative write refused by b for
// reason at nowMs.
func refusedResult(key store.BucketKey, b *store.Bucket, reason store.RefusalReason, nowMs int64) store.SpeculativeResult {
	res := store.SpeculativeResult{Key: key, Bucket: b, Reason: reason}
	if reason == store.RefusedWriteCapacity || reason == store.RefusedBothExhausted {
		res.CapacityRefills = wcuRefills(b, nowMs)
	}
	return res
}
