// Layer 4, mechanics: the read-then-write path's answers to contention:
// lost races read again, and concurrent fallbacks on one item coalesce.

package limiter

import (
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Lost races on the read-then-write path.
//
// An attempt reads the items, decides on what it read, and writes under
// the refill-timestamp lock. When another writer changed an item in
// between, the lock is lost and the retry write follows (consume without
// refilling, guarded by the stored balances). When that is refused too —
// another writer took the balance the read showed, or created or removed an
// item meanwhile — the attempt lost a race: nothing was written, and what
// it read is stale, so it says nothing about a shortage. The acquire then
// waits a jittered backoff and reads and decides again, up to
// maxRaceAttempts attempts within its context's deadline. Only a decision
// on what was read refuses for want of tokens, with the Retry-After that
// read gives. An acquire that loses every attempt (or whose deadline comes
// first) is refused with the next backoff as its Retry-After: the items are
// too contended to serve it now.

// maxRaceAttempts bounds the attempts of one read-then-write acquire whose
// writes keep losing races to other writers.
const maxRaceAttempts = 8

// The backoff before attempt n+1 after attempt n lost a race: a random
// duration in [d/2, d], d = raceBackoffBase·2ⁿ, at most raceBackoffMax.
const (
	raceBackoffBase = 5 * time.Millisecond
	raceBackoffMax  = 160 * time.Millisecond
)

// contendedStatuses are the statuses of an acquire that lost every race
// for its items, from its last attempt's: every limit it asked for is
// marked exceeded, none with a Retry-After below wait.
func contendedStatuses(statuses []LimitStatus, wait time.Duration) []LimitStatus {
	out := make([]LimitStatus, len(statuses))
	for i, st := range statuses {
		if st.Requested > 0 {
			st.Exceeded = true
			st.RetryAfter = max(st.RetryAfter, wait)
		}
		out[i] = st
	}
	return out
}

// Coalesced fallbacks.
//
// When many acquires of one limiter on one bucket item fall back from the
// speculative path at once — the item does not exist yet, or it must be
// refilled — each would read the items and write them under the
// refill-timestamp lock, all but one losing the race (a stampede of
// transactions on the same items, each slower than the last). Instead one
// of them (the leader) takes the read-then-write path, and the others wait
// for it to end, then try the speculative path again: the leader has
// created or refilled the items, so their writes usually apply (batched by
// group commit). One that falls back again takes the read-then-write path
// itself. A follower waits at most until its context ends.

// slowFlights holds the read-then-write acquires in flight of one limiter,
// per bucket item (shard 0 of the acquire's entity and resource).
type slowFlights struct {
	mu sync.Mutex
	m  map[store.BucketKey]*slowFlight
}

// slowFlight is one read-then-write acquire in flight.
type slowFlight struct {
	done    chan struct{} // closed when it ends
	waiters int           // acquires waiting for it; guarded by slowFlights.mu
}

// join returns nil when no read-then-write acquire on key is in flight:
// the caller's now is, until it calls leave. Otherwise it returns a
// channel closed when the one in flight ends.
func (f *slowFlights) join(key store.BucketKey) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[key]; ok {
		fl.waiters++
		return fl.done
	}
	if f.m == nil {
		f.m = make(map[store.BucketKey]*slowFlight)
	}
	f.m[key] = &slowFlight{done: make(chan struct{})}
	return nil
}

// leave ends the caller's read-then-write acquire on key and wakes the
// acquires waiting for it.
func (f *slowFlights) leave(key store.BucketKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.m[key].done)
	delete(f.m, key)
}

// waiting returns how many acquires wait for the one in flight on key.
func (f *slowFlights) waiting(key store.BucketKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[key]; ok {
		return fl.waiters
	}
	return 0
}
