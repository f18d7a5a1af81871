// Layer 1, the queue of waits for a slot: the Waits of a limiter refused
// by an in-flight limit queue per bucket item, and a slot given back by
// a lease of the same limiter goes to the first of them at once (see
// RateLimiter.waitForSlot and RateLimiter.slotsGivenBack); and the views
// of free slots that the polls of those Waits read on DynamoDB, shared by
// the waiters of the limiter (slotViews).

package limiter

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// maxSlotPoll bounds a slot waiter's poll interval, however many wait.
const maxSlotPoll = time.Second

// slotWaitKey is the bucket item whose in-flight limit refused a Wait.
type slotWaitKey struct{ entityID, resource string }

// slotWaiter is one Wait between two attempts: wake ends its sleep.
type slotWaiter struct {
	wake context.CancelFunc
	// want are the slots the Wait takes (nil: it takes no handed slots),
	// keys the queues it is on, and gift the slots handed to it
	// (slothandoff.go), all guarded by slotWaiters.mu.
	want   []slotRead
	keys   []slotWaitKey
	gift   slotsHanded
	queued bool   // on the queues
	seq    uint64 // its arrival in the queues
	// since is when the Wait was first refused.
	since time.Time
}

// slotWaiters is the queue of the Waits of one limiter refused by each
// bucket item's in-flight limits. Safe for concurrent use.
type slotWaiters struct {
	mu  sync.Mutex
	q   map[slotWaitKey][]*slotWaiter
	seq uint64 // the last waiter's arrival
	// queued counts the waiters on the queues, read without mu by the
	// leases that end (anyWaiting).
	queued atomic.Int64

	// held counts per item the slots the limiter's live leases hold,
	// under heldMu (taken after mu where both are), which every lease of
	// an in-flight limit takes twice: not the queues' lock.
	heldMu sync.Mutex
	held   map[store.BucketKey]int64
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
	s.seq++
	w.keys, w.seq, w.queued = keys, s.seq, true
	s.queued.Add(1)
	for _, k := range keys {
		s.q[k] = append(s.q[k], w)
		n = max(n, len(s.q[k]))
	}
	return n
}

// anyWaiting reports whether any Wait is queued.
func (s *slotWaiters) anyWaiting() bool { return s.queued.Load() > 0 }

// waiting reports whether a waiter is queued on key.
func (s *slotWaiters) waiting(key slotWaitKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q[key]) > 0
}

// slotsHanded is what a lease that ended handed a waiter: its slots (a
// *slotGift, slothandoff.go), which the queues only carry.
type slotsHanded interface{ handed() }

// leave takes w off the queues of keys and returns the slots handed to
// it, if any: the caller takes them or gives them back.
func (s *slotWaiters) leave(w *slotWaiter, keys []slotWaitKey) slotsHanded {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(w, keys)
	g := w.gift
	w.gift = nil
	return g
}

// remove takes w off the queues of keys. s.mu must be held.
func (s *slotWaiters) remove(w *slotWaiter, keys []slotWaitKey) {
	if w.queued {
		w.queued = false
		s.queued.Add(-1)
	}
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

// slotViewKey is one in-flight limit of one bucket item.
type slotViewKey struct {
	key  store.BucketKey
	name string
}

// slotView is what the waiters of a limiter know of the free slots of an
// in-flight limit of an item: the slots free in both generations an
// acquire takes (the fewer of the two), as last read, less those claimed
// since by waiters that went on to write.
type slotView struct {
	readAt  time.Time // when the last read returned (the machine's clock)
	reading bool      // a read is under way
	gen     int64     // the current generation then
	free    int64     // slots free as read (math.MaxInt64: the item holds no generation)
	used    int64     // claimed since the read, or claimed before it and in flight then
	flying  int64     // claimed by acquires that have not returned
	wroteAt time.Time // when a Wait for the slots last wrote
}

// slotViews holds the slotViews of the items a limiter's Waits poll, and
// per (entity, resource) the slots its last refused Wait without options
// takes (recalled). Safe for concurrent use.
type slotViews struct {
	mu     sync.Mutex
	m      map[slotViewKey]*slotView
	recall map[store.BucketKey]recalledReads
}

// recalledReads are the slots a refused Wait takes, remembered at at.
type recalledReads struct {
	reads []slotRead
	at    time.Time
}

// remember keeps reads, the slots of a Wait of key refused at now.
func (s *slotViews) remember(key store.BucketKey, reads []slotRead, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recall == nil {
		s.recall = make(map[store.BucketKey]recalledReads)
	}
	if len(s.recall) >= slotViewsSweep {
		for k, r := range s.recall {
			if now.Sub(r.at) >= maxSlotPoll {
				delete(s.recall, k)
			}
		}
	}
	s.recall[key] = recalledReads{reads: reads, at: now}
}

// recalled returns the slots of the last refused Wait of key remembered.
func (s *slotViews) recalled(key store.BucketKey) []slotRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recall[key].reads
}

// slotViewsSweep is how many views the limiter keeps before it drops the
// stale ones that no acquire claims.
const slotViewsSweep = 1024

// view returns the view of k, created (with wroteAt now) when missing,
// after a sweep of the idle ones when there are slotViewsSweep. s.mu must
// be held.
func (s *slotViews) view(k slotViewKey, now time.Time) *slotView {
	if v := s.m[k]; v != nil {
		return v
	}
	if s.m == nil {
		s.m = make(map[slotViewKey]*slotView)
	}
	if len(s.m) >= slotViewsSweep {
		for k, v := range s.m {
			if v.flying == 0 && !v.reading && now.Sub(v.readAt) >= maxSlotPoll && now.Sub(v.wroteAt) >= maxSlotPoll {
				delete(s.m, k)
			}
		}
	}
	v := &slotView{wroteAt: now}
	s.m[k] = v
	return v
}

// writeDue reports whether no Wait for the slots of reads wrote for
// slotPollWriteEvery; if so, this one will, now.
func (s *slotViews) writeDue(reads []slotRead, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	due := false
	for _, r := range reads {
		due = due || now.Sub(s.view(r.slotViewKey, now).wroteAt) >= slotPollWriteEvery
	}
	if due {
		for _, r := range reads {
			s.m[r.slotViewKey].wroteAt = now
		}
	}
	return due
}

// claim decides, from views read since slotWaitPoll before now in
// generation gen, whether the request of reads may write: every limit
// has its amount free, less the claims since the read. If so the amounts
// are claimed (release gives them back once the acquire returned). stale
// reports that a view is older, and no read of it is under way: the items
// must be read first (read). While one is, the request waits for the next
// poll.
func (s *slotViews) claim(reads []slotRead, now time.Time, gen int64) (ok, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok = true
	for _, r := range reads {
		v := s.view(r.slotViewKey, now)
		switch {
		case v.reading:
			return false, false
		case v.readAt.IsZero() || v.gen != gen || now.Sub(v.readAt) >= slotWaitPoll:
			stale = true
		case v.free != math.MaxInt64 && bucketmath.AddSat(v.free, -v.used) < r.amount:
			ok = false
		}
	}
	if stale {
		return false, true
	}
	if ok {
		for _, r := range reads {
			v := s.m[r.slotViewKey]
			v.used = bucketmath.AddSat(v.used, r.amount)
			v.flying = bucketmath.AddSat(v.flying, r.amount)
			v.wroteAt = now
		}
	}
	return ok, false
}

// freshView marks the views of reads freshView from now on, unless one is already:
// it reports whether this caller reads them (then it must call store).
func (s *slotViews) freshView(reads []slotRead, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reads {
		if s.view(r.slotViewKey, now).reading {
			return false
		}
	}
	for _, r := range reads {
		s.m[r.slotViewKey].reading = true
	}
	return true
}

// rememberView records what the read of reads returned at now, in generation
// gen: buckets (a missing item holds every slot free), or nothing when
// the read failed (buckets nil).
func (s *slotViews) rememberView(reads []slotRead, buckets map[store.BucketKey]*store.Bucket, now time.Time, gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reads {
		v := s.view(r.slotViewKey, now)
		v.reading = false
		if buckets == nil {
			continue
		}
		free := int64(math.MaxInt64)
		for _, g := range []int64{gen, gen + 1} {
			if st, ok := buckets[r.key].State(store.SlotLimitName(r.name, g)); ok {
				free = min(free, bucketmath.FloorDiv(st.TokensMilli, 1000))
			}
		}
		// The claims in flight may have been written before the read or
		// after: they are counted as after.
		v.readAt, v.gen, v.free, v.used = now, gen, free, v.flying
	}
}

// unclaim ends the claims of reads: their acquire returned.
func (s *slotViews) unclaim(reads []slotRead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reads {
		if v := s.m[r.slotViewKey]; v != nil {
			v.flying = max(v.flying-r.amount, 0)
		}
	}
}

// slotGens remembers, per item, the last generation whose slot limits the
// item is known to hold (at most slotGensSize items, each for a
// generation), so that addSlotGens writes an item once per generation.
type slotGens struct {
	mu   sync.Mutex
	gens *lru.Cache[store.BucketKey, int64]
}

// slotGensSize bounds the items slotGens remembers.
const slotGensSize = 10_000

// known reports whether key is known to hold the limits of generation gen.
func (s *slotGens) known(key store.BucketKey, gen int64, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gens == nil {
		return false
	}
	g, ok := s.gens.Get(key, now)
	return ok && g >= gen
}

// learn records that key holds the limits of generation gen.
func (s *slotGens) learn(key store.BucketKey, gen int64, now time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gens == nil {
		s.gens = lru.New[store.BucketKey, int64](slotGensSize, ttl)
	}
	if g, ok := s.gens.Get(key, now); !ok || g < gen {
		s.gens.Add(key, gen, now)
	}
}

// slotRead is an in-flight limit of one bucket item that a Wait's request
// takes slots of, as its last refusal showed it.
type slotRead struct {
	slotViewKey
	amount int64 // slots the request takes
}

// slotReadKeys returns the items of reads.
func slotReadKeys(reads []slotRead) []slotWaitKey {
	var keys []slotWaitKey
	for _, r := range reads {
		if k := (slotWaitKey{r.key.EntityID, r.key.Resource}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// slotPollWriteEvery is how often at least the Waits of a limiter for
// slots that poll by reading write all the same: a raised capacity shows
// in the item only once a write has stored it.
const slotPollWriteEvery = 5 * time.Second

// givenBack records the slots that w, an adjustment of a lease of this
// limiter that applied at nowMs, gave back of the in-flight limits of the
// current generation (generations of genMs) of its item, and returns the
// most given back of any one generation: the slots its waiters may take.
func (s *slotViews) givenBack(w store.BucketWrite, nowMs, genMs int64) int64 {
	cur := bucketmath.FloorDiv(nowMs, genMs)
	most := int64(0)
	for _, l := range w.Limits {
		if l.ConsumedMilli >= 0 {
			continue
		}
		name, gen, ok := store.ParseSlotLimitName(l.Name)
		if !ok {
			continue
		}
		n := -l.ConsumedMilli / 1000
		most = max(most, n)
		if gen == cur {
			s.mu.Lock()
			if v := s.m[slotViewKey{w.Key, name}]; v != nil {
				v.used = bucketmath.AddSat(v.used, -n)
			}
			s.mu.Unlock()
		}
	}
	return most
}
