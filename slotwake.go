// Layer 1, the queue of waits for a slot: the Waits of a limiter refused
// by an in-flight limit queue per bucket item, and a slot given back by
// a lease of the same limiter goes to the first of them at once (see
// RateLimiter.waitForSlot and RateLimiter.slotsGivenBack).

package limiter

import (
	"context"
	"slices"
	"sync"
	"time"
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

// waiting reports whether a waiter is queued on key.
func (s *slotWaiters) waiting(key slotWaitKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q[key]) > 0
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
