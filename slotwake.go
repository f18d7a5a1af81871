// Layer 2, waits for a slot: the Waits of this process refused by an
// in-flight limit queue per bucket item, a slot given back in this
// process goes to the first of them at once, and together they poll the
// store as often as one waiter would.

package limiter

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// maxSlotPoll bounds a slot waiter's poll interval, however many wait.
const maxSlotPoll = time.Second

// slotWaitKey is the bucket item whose in-flight limit refused a Wait.
type slotWaitKey struct{ entityID, resource string }

// slotWaiter is one Wait between two attempts: wake ends its sleep.
type slotWaiter struct {
	wake context.CancelFunc
}

// slotWaiters is the queue of the Waits of one limiter refused by each
// bucket item's in-flight limits. Safe for concurrent use.
type slotWaiters struct {
	mu sync.Mutex
	q  map[slotWaitKey][]*slotWaiter
}

// join queues w on every key and returns how many waiters the busiest
// of those queues holds, w included.
func (s *slotWaiters) join(w *slotWaiter, keys []slotWaitKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q == nil {
		s.q = make(map[slotWaitKey][]*slotWaiter)
	}
	n := 0
	for _, k := range keys {
		s.q[k] = append(s.q[k], w)
		n = max(n, len(s.q[k]))
	}
	return n
}

// leave takes w off the queues of keys.
func (s *slotWaiters) leave(w *slotWaiter, keys []slotWaitKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		q := slices.DeleteFunc(s.q[k], func(x *slotWaiter) bool { return x == w })
		if len(q) == 0 {
			delete(s.q, k)
		} else {
			s.q[k] = q
		}
	}
}

// release wakes the first n waiters of key, oldest first: n slots of its
// item were given back. A woken waiter tries again at once; one that
// another process beats queues again.
func (s *slotWaiters) release(key slotWaitKey, n int) {
	s.mu.Lock()
	q := s.q[key]
	n = min(n, len(q))
	woken := slices.Clone(q[:n])
	if n == len(q) {
		delete(s.q, key)
	} else if n > 0 {
		s.q[key] = slices.Delete(q, 0, n)
	}
	s.mu.Unlock()
	for _, w := range woken {
		w.wake()
	}
}

// slotWaitKeys returns the items of rle's violations when every one is an
// in-flight limit's (a slot comes back when a lease ends, which a Wait
// can learn of in this process), else nil.
func slotWaitKeys(rle *RateLimitExceededError) []slotWaitKey {
	var keys []slotWaitKey
	for _, v := range rle.Violations {
		if !v.Limit.IsInFlight() {
			return nil
		}
		k := slotWaitKey{v.EntityID, v.Resource}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// waitForSlot sleeps a Wait refused for want of a slot of keys' items:
// until a lease of this process gives one back (release), or until its
// poll, d (slotWaitPoll and its jitter) times the number of waiters of
// the busiest item, at most maxSlotPoll, so that the waiters of one
// process poll the store about as often as one would. It returns nil when
// woken or when the poll is due.
func (rl *RateLimiter) waitForSlot(ctx context.Context, keys []slotWaitKey, d time.Duration) error {
	sctx, wake := context.WithCancel(ctx)
	defer wake()
	w := &slotWaiter{wake: wake}
	n := rl.slotWaits.join(w, keys)
	defer rl.slotWaits.leave(w, keys)
	d = min(d*time.Duration(n), max(d, maxSlotPoll))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	err := rl.sleepUnlessClosed(sctx, d)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil && !errors.Is(err, ErrClosed) {
		return nil // woken by a slot given back
	}
	return err
}

// slotsGivenBack wakes the waiters of w's item for the slots w, an
// adjustment that applied, gave back: the most given back of any one
// generation of an in-flight limit.
func (rl *RateLimiter) slotsGivenBack(w store.BucketWrite) {
	n := int64(0)
	for _, l := range w.Limits {
		if l.ConsumedMilli >= 0 {
			continue
		}
		if _, _, ok := store.ParseSlotLimitName(l.Name); ok {
			n = max(n, -l.ConsumedMilli/1000)
		}
	}
	if n > 0 {
		rl.slotWaits.release(slotWaitKey{w.Key.EntityID, w.Key.Resource}, int(min(n, 1<<20)))
	}
}
