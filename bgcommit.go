// Layer 4, the mechanics: background commit, an adjustment written after
// Commit returned, with the next acquire of its item when one comes soon.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Background commit (WithBackgroundCommit).
//
// A lease's Commit writes the difference between what the lease consumed
// and what its acquire took: for an LLM call estimated at 500 tokens that
// used 400, a second UpdateItem after the acquire's. With background
// commit on, Commit queues that adjustment and returns at once. The
// adjustment then waits up to backgroundCommitDelay for the next
// speculative write of the same bucket item (from this limiter), and goes
// out folded into it: one UpdateItem that takes the new request and
// applies the adjustment, its condition holding for the balance after the
// adjustment, a refund still conditioned on fitting under the capacity.
// When no such write comes in time, a goroutine of the limiter writes it
// alone, exactly as a synchronous Commit would.
//
// The guarantees are a synchronous Commit's: an adjustment is applied at
// most once (a write refused as a whole applied nothing and the
// adjustment waits again; a write that failed without an answer is not
// sent again, as no write of the limiter is), refunds are capped at the
// capacity, Close waits for every queued adjustment, and a failure is
// logged (Warn "limiter: background commit failed") and reported to
// Metrics.StoreCall with the failed call. What it trades: Commit cannot
// return the write's error, the bucket shows the adjustment up to
// backgroundCommitDelay later (to other processes, and to this limiter's
// read-then-write path), and a process that exits without Close loses the
// adjustments still queued.
//
// Only the DynamoDB repository folds; on other repositories the queued
// adjustment is written alone when its delay ends.

// backgroundCommitDelay is how long a queued adjustment waits for the next
// speculative write of its item before it is written alone.
const backgroundCommitDelay = 5 * time.Millisecond

// WithBackgroundCommit turns background commit on or off (off by
// default): Commit queues a lease's adjustment and returns at once; the
// adjustment is written within a few milliseconds, folded into the next
// acquire of the same bucket item when there is one (one write for both
// on DynamoDB), with a synchronous Commit's guarantees except that its
// error is logged and counted instead of returned. Close waits for the
// queued adjustments.
func WithBackgroundCommit(on bool) Option { return func(rl *RateLimiter) { rl.backgroundCommit = on } }

// commits holds the adjustments queued by Commit, per bucket item.
type commits struct {
	rl *RateLimiter
	// delay is how long an adjustment waits for a write of its item
	// (backgroundCommitDelay; a test seam).
	delay   time.Duration
	mu      sync.Mutex
	pending map[store.BucketKey]*pendingCommit
	// failed counts the adjustments that failed or may not have applied.
	failed atomic.Int64
}

// pendingCommit is the sum of the adjustments queued for one item.
type pendingCommit struct {
	delta Consume          // tokens
	caps  map[string]int64 // capacity hints, millitokens
	nowMs int64
	timer *time.Timer // ends the delay: flush
}

func newCommits(rl *RateLimiter) *commits {
	return &commits{rl: rl, delay: backgroundCommitDelay, pending: make(map[store.BucketKey]*pendingCommit)}
}

// queue adds w, a lease's WriteAdjust of whole tokens, to what waits for
// its item, and starts the item's delay when nothing waited.
func (c *commits) queue(w store.BucketWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[w.Key]
	if p == nil {
		p = &pendingCommit{delta: make(Consume, len(w.Limits)), caps: make(map[string]int64, len(w.Limits))}
		c.pending[w.Key] = p
		key := w.Key
		c.rl.bg.wg.Add(1)
		p.timer = time.AfterFunc(c.delay, func() {
			defer c.rl.bg.wg.Done()
			c.flush(key)
		})
	}
	for _, lw := range w.Limits {
		p.delta[lw.Name] += lw.ConsumedMilli / 1000
		if lw.CapacityMilli != 0 {
			p.caps[lw.Name] = lw.CapacityMilli
		}
	}
	p.nowMs = max(p.nowMs, w.NowMs)
}

// flushAll writes every queued adjustment now, each alone, and waits for
// them (Close).
func (c *commits) flushAll() {
	c.mu.Lock()
	var keys []store.BucketKey
	for key, p := range c.pending {
		if p.timer.Stop() {
			keys = append(keys, key) // its delay will not end: flush it here
		}
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.flush(key)
		c.rl.bg.wg.Done()
	}
}

// take implements commitQueue: the adjustment waiting for key, removed.
func (c *commits) take(key store.BucketKey) (store.BucketWrite, bool) {
	c.mu.Lock()
	p := c.pending[key]
	delete(c.pending, key)
	c.mu.Unlock()
	if p == nil {
		return store.BucketWrite{}, false
	}
	if p.timer.Stop() {
		c.rl.bg.wg.Done() // its delay will not end
	}
	w := adjustDeltaWrite(key, p.nowMs, p.delta, p.caps)
	return w, len(w.Limits) > 0
}

// requeue implements commitQueue: w waits again (its write was refused as
// a whole).
func (c *commits) requeue(w store.BucketWrite) { c.queue(w) }

// lost implements commitQueue: the write w was folded into failed without
// an answer; w may have applied and is not sent again.
func (c *commits) lost(w store.BucketWrite, err error) {
	c.fail(w.Key, fmt.Errorf("the write it was folded into failed, it may not have applied: %w", err))
}

// flush writes what waits for key, alone (its delay ended first).
func (c *commits) flush(key store.BucketKey) {
	w, ok := c.take(key)
	if !ok {
		return
	}
	ctx, cancel := detachedContext(context.Background())
	defer cancel()
	if err := c.rl.writeAdjust(ctx, w); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		c.fail(key, err)
	}
}

// fail counts and logs a background commit that failed.
func (c *commits) fail(key store.BucketKey, err error) {
	c.failed.Add(1)
	ctx := context.Background()
	if !c.rl.obs.logging(ctx, slog.LevelWarn) {
		return
	}
	c.rl.obs.log.LogAttrs(ctx, slog.LevelWarn, "limiter: background commit failed",
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource), slog.Any("error", err))
}

// commitLater implements leaseWriter: with background commit on, it
// queues writes (a committed lease's adjustments, whole tokens) and
// reports true; off, it does nothing and reports false.
func (rl *RateLimiter) commitLater(writes []store.BucketWrite) bool {
	if rl.commits == nil {
		return false
	}
	for _, w := range writes {
		rl.overLimitSeen(w)
		rl.commits.queue(w)
	}
	return true
}
