// Layer 4, the mechanics: background commit, an adjustment written after
// Commit returned, with the next acquire of its item when one comes soon.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Background commit (Options.BackgroundCommit).
//
// A lease's Commit writes the difference between what the lease consumed
// and what its acquire took: for an LLM call estimated at 500 tokens that
// used 400, a second UpdateItem after the acquire's. With background
// commit on, Commit computes that adjustment as a synchronous Commit
// would (a refund cut by the lease's rule at Commit's time), queues it
// and returns at once. The adjustment then waits up to
// backgroundCommitDelay for the next write of the same bucket item by
// this limiter, and is applied before that write decides anything:
//
//   - a speculative acquire on DynamoDB takes it into its own UpdateItem
//     (a fold) when it is the only adjustment waiting: the write applies
//     the adjustment and takes the request, conditioned on the balance
//     after the adjustment covering the request and, for a refund, on the
//     refund fitting under the capacity before the request takes its
//     amount. That is exactly the adjustment followed by the acquire.
//     When that condition fails, nothing was written, and the adjustment
//     is written alone, then the acquire alone;
//   - every other read or write of the item by this limiter (an acquire
//     on another backend or on the read-then-write path, Available, a
//     commit, a rollback, an administrative write) writes the waiting
//     adjustments alone, in order, first.
//
// So this limiter answers as with synchronous commits: the same
// admissions, the same balances. Adjustments of one item are summed while
// the sum is exact (charges with charges, refunds with refunds, a refund
// after a charge; not a charge after a refund, whose capped refund must
// come first), saturating; an item's adjustments are written by one
// goroutine at a time, in order. When no write of the item comes in time,
// a goroutine of the limiter writes them alone.
//
// The other guarantees are a synchronous Commit's: an adjustment is
// applied at most once (a write that failed without an answer is not sent
// again, as no write of the limiter is), refunds are capped, Close waits
// for every queued adjustment, and a failure is logged (Warn "limiter:
// background commit failed") and reported to Metrics.StoreCall with the
// failed call. What it trades: Commit cannot return the write's error,
// other processes see the adjustment up to backgroundCommitDelay later,
// and a process that exits without Close loses the adjustments still
// queued.

// backgroundCommitDelay is how long a queued adjustment waits for the next
// read or write of its item by the limiter before it is written alone.
const backgroundCommitDelay = 5 * time.Millisecond

// commits holds the adjustments queued by Commit, per bucket item, in
// order, until they are written: alone when their delay ends, or before
// anything of this limiter reads or writes their item (folded into the
// acquire's speculative write when the repository can).
type commits struct {
	// r gives the background writes their store, goroutines and log.
	r *rules
	// delay is how long an adjustment waits for a write of its item
	// (backgroundCommitDelay; a test seam).
	delay   time.Duration
	mu      sync.Mutex
	pending map[store.BucketKey]*pendingCommit
	// closed is set by Close: Commit writes synchronously from then on.
	closed bool
	// failed counts the adjustments that failed or may not have applied.
	failed atomic.Int64
}

// pendingCommit is what waits for one item. It is in commits.pending while
// segs is not empty or a goroutine writes taken ones (busy).
type pendingCommit struct {
	// segs are the queued adjustments in order, each the sum of
	// consecutive commits whose sum is exact (see mergeable).
	segs  []store.BucketWrite
	timer *time.Timer // ends the delay (flush); nil when none runs
	// busy is closed when the goroutine writing taken segments is done;
	// nil when none is.
	busy chan struct{}
}

func newCommits(r *rules) *commits {
	return &commits{r: r, delay: backgroundCommitDelay, pending: make(map[store.BucketKey]*pendingCommit)}
}

// queue adds writes, a lease's WriteAdjusts (one per item), to what waits
// for their items, and starts each item's delay when none runs. It reports
// false, queueing nothing, once Close started.
func (c *commits) queue(writes []store.BucketWrite) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	for _, w := range writes {
		c.queueLocked(w)
	}
	return true
}

// queueLocked is queue of one write; c.mu must be held.
func (c *commits) queueLocked(w store.BucketWrite) {
	p := c.pending[w.Key]
	if p == nil {
		p = &pendingCommit{}
		c.pending[w.Key] = p
	}
	if n := len(p.segs); n > 0 && mergeable(p.segs[n-1], w) {
		p.segs[n-1] = mergeAdjust(p.segs[n-1], w)
	} else {
		p.segs = append(p.segs, cloneAdjust(w))
	}
	if p.timer == nil && c.r.bg.hold() {
		key := w.Key
		p.timer = time.AfterFunc(c.delay, func() {
			defer c.r.bg.release()
			c.flush(key)
		})
	}
}

// mergeable reports whether b, queued after a, can be summed into a with
// the same result as a then b. Charges add up, refunds add up (each capped
// at the capacity, as their sum is), and a refund after a charge nets out
// (the balance is at most the capacity); but a charge after a refund does
// not: the refund's cap applies before the charge. Refunds with different
// capacity hints (a limit change between them) stay apart, and so do
// adjustments of two incarnations of the item (see the incarnations in bucket.go).
func mergeable(a, b store.BucketWrite) bool {
	if a.Incarnation != b.Incarnation {
		return false
	}
	for _, lb := range b.Limits {
		for _, la := range a.Limits {
			if la.Name != lb.Name {
				continue
			}
			if la.ConsumedMilli < 0 && lb.ConsumedMilli > 0 {
				return false
			}
			if la.CapacityMilli != 0 && lb.CapacityMilli != 0 && la.CapacityMilli != lb.CapacityMilli {
				return false
			}
		}
	}
	return true
}

// mergeAdjust returns a with b added, per limit, saturating; limits in
// sorted order.
func mergeAdjust(a, b store.BucketWrite) store.BucketWrite {
	for _, lb := range b.Limits {
		i := slices.IndexFunc(a.Limits, func(l store.LimitWrite) bool { return l.Name == lb.Name })
		if i < 0 {
			a.Limits = append(a.Limits, lb)
			continue
		}
		la := &a.Limits[i]
		la.ConsumedMilli = bucketmath.AddSat(la.ConsumedMilli, lb.ConsumedMilli)
		if la.CapacityMilli == 0 {
			la.CapacityMilli = lb.CapacityMilli
		}
	}
	slices.SortFunc(a.Limits, func(x, y store.LimitWrite) int { return strings.Compare(x.Name, y.Name) })
	a.NowMs = max(a.NowMs, b.NowMs)
	a.TTLExtendSeconds = bucketmath.AddSat(a.TTLExtendSeconds, b.TTLExtendSeconds)
	return a
}

// cloneAdjust returns w with a limits slice of its own.
func cloneAdjust(w store.BucketWrite) store.BucketWrite {
	w.Limits = slices.Clone(w.Limits)
	slices.SortFunc(w.Limits, func(x, y store.LimitWrite) int { return strings.Compare(x.Name, y.Name) })
	return w
}

// claim takes the adjustments waiting for key, once no other goroutine
// writes earlier ones of key (or ctx ends), and marks key busy until
// release is called. It returns nil segs (and a nil release) when none
// wait.
func (c *commits) claim(ctx context.Context, key store.BucketKey) (segs []store.BucketWrite, release func(), err error) {
	c.mu.Lock()
	for {
		p := c.pending[key]
		if p == nil {
			c.mu.Unlock()
			return nil, nil, nil
		}
		if p.busy == nil {
			segs, p.segs = p.segs, nil
			if p.timer != nil {
				if p.timer.Stop() {
					c.r.bg.release() // its delay will not end
				}
				p.timer = nil
			}
			busy := make(chan struct{})
			p.busy = busy
			c.mu.Unlock()
			return segs, func() {
				c.mu.Lock()
				close(busy)
				p.busy = nil
				if len(p.segs) == 0 {
					delete(c.pending, key)
				}
				c.mu.Unlock()
			}, nil
		}
		busy := p.busy
		c.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		c.mu.Lock()
	}
}

// waiting reports whether adjustments wait for key, or are being written.
func (c *commits) waiting(key store.BucketKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[key] != nil
}

// settle implements commitQueue: it writes the adjustments waiting for
// key, in order, before the caller reads or writes the item. The caller
// leaves when ctx ends; the writes go on in the background.
func (c *commits) settle(ctx context.Context, key store.BucketKey) error {
	if !c.waiting(key) {
		return nil
	}
	_, err := detached(&c.r.bg, ctx, true, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.flushKey(ctx, key)
	}, nil)
	return err
}

// speculativeConsume implements commitQueue: when adjustments wait for
// req's item, it writes req after them, as a synchronous Commit followed
// by the acquire would: folded into one write when the repository folds
// and a single adjustment waits, and that write applies; else the
// adjustments alone, in order, then req alone. handled is false when none
// wait (the caller writes req).
func (c *commits) speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (res store.SpeculativeResult, handled bool, err error) {
	segs, release, err := c.claim(ctx, req.Key)
	if err != nil {
		return store.SpeculativeResult{Key: req.Key}, true, err
	}
	if segs == nil {
		return res, false, nil
	}
	defer release()
	ops := &c.r.store
	if len(segs) == 1 && ops.folder != nil {
		res, outcome, err := ops.fold(ctx, req, segs[0])
		switch outcome {
		case store.FoldApplied:
			return res, true, err
		case store.FoldUnknown:
			c.fail(req.Key, fmt.Errorf("the write it was folded into failed, it may not have applied: %w", err))
			return res, true, err
		}
	}
	c.write(ctx, segs)
	res, err = ops.consumeOnly(ctx, req)
	return res, true, err
}

// write writes segs, adjustments of one item, alone and in order. A
// failure is counted and logged; an item that no longer exists has
// nothing to adjust.
func (c *commits) write(ctx context.Context, segs []store.BucketWrite) {
	for _, w := range segs {
		if err := c.r.store.writeOnly(ctx, []store.BucketWrite{w}); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			c.fail(w.Key, err)
		}
	}
}

// flushKey writes what waits for key, alone; it fails only when ctx ends
// while another goroutine writes earlier adjustments of key.
func (c *commits) flushKey(ctx context.Context, key store.BucketKey) error {
	segs, release, err := c.claim(ctx, key)
	if segs == nil {
		return err
	}
	defer release()
	c.write(ctx, segs)
	return nil
}

// flush writes what waits for key, alone (its delay ended first).
func (c *commits) flush(key store.BucketKey) {
	// Each store call is bounded by the store timeout (storeOps).
	if err := c.flushKey(context.Background(), key); err != nil {
		c.fail(key, err)
	}
}

// close makes later commits synchronous, writes every queued adjustment
// now, each item's in order, and waits for them (Close).
func (c *commits) close() {
	c.mu.Lock()
	c.closed = true
	keys := make([]store.BucketKey, 0, len(c.pending))
	for key := range c.pending {
		keys = append(keys, key)
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.flush(key)
	}
}

// fail counts and logs a background commit that failed.
func (c *commits) fail(key store.BucketKey, err error) {
	c.failed.Add(1)
	ctx := context.Background()
	if !c.r.obs.logging(ctx, slog.LevelWarn) {
		return
	}
	c.r.obs.log.LogAttrs(ctx, slog.LevelWarn, "limiter: background commit failed",
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource), slog.Any("error", err))
}
