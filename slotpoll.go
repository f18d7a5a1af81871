// Layer 4, mechanics: the polls of a Wait refused for want of a slot, on
// DynamoDB: a read of the items, shared by the waiters of the limiter, and
// the acquire's writes only by as many waiters as it shows slots free.

package limiter

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// slotRead is an in-flight limit of one bucket item that a Wait's request
// takes slots of, as its last refusal showed it.
type slotRead struct {
	slotViewKey
	amount int64 // slots the request takes
}

// slotReads returns, when the polls of a Wait of (entityID, resource)
// refused with rle read before they write (pollsByRead) and every
// violation of rle is an in-flight limit's, the in-flight limits of every
// item the request takes slots of (those that refused and those that did
// not); else nil. Without opts they are remembered for the next Wait of
// (entityID, resource) (queuedSlotReads).
func (rl *RateLimiter) slotReads(entityID, resource string, rle *RateLimitExceededError, opts []AcquireOption) []slotRead {
	if !rl.pollsByRead() || slotWaitKeys(rle) == nil {
		return nil
	}
	var reads []slotRead
	for _, st := range rle.Statuses {
		if !store.Limit(st.Limit).IsInFlight() || st.Requested <= 0 {
			continue
		}
		r := slotRead{slotViewKey{store.BucketKey{EntityID: st.EntityID, Resource: st.Resource}, st.LimitName}, st.Requested}
		if !slices.Contains(reads, r) {
			reads = append(reads, r)
		}
	}
	if len(reads) > 0 && len(opts) == 0 {
		rl.slotViews.remember(store.BucketKey{EntityID: entityID, Resource: resource}, reads, time.Now())
	}
	return reads
}

// queuedSlotReads returns the slots a Wait of consume on (entityID,
// resource) without options takes, as the last refusal of such a Wait
// showed them, when Waits of this limiter are queued for some of them
// now: the Wait then polls as they do (slotPollWrites), behind them,
// instead of writing at once. Else nil.
func (rl *RateLimiter) queuedSlotReads(entityID, resource string, consume Consume, opts []AcquireOption) []slotRead {
	if !rl.pollsByRead() || len(opts) > 0 {
		return nil
	}
	reads := rl.slotViews.recalled(store.BucketKey{EntityID: entityID, Resource: resource})
	for _, r := range reads {
		if consume[r.name] != r.amount {
			return nil
		}
	}
	if !slices.ContainsFunc(reads, func(r slotRead) bool {
		return rl.slotWaits.waiting(slotWaitKey{r.key.EntityID, r.key.Resource})
	}) {
		return nil
	}
	return reads
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

// slotPollWrites decides whether a Wait for the slots of reads (nil: it
// waits for no slot) writes now, and returns the slots it claimed
// (slotViews.release them once the acquire returned): when reads is nil;
// when no Wait of the limiter for those slots wrote for
// slotPollWriteEvery (so that a change of the limits, which no read
// shows, is found within that time); else when slotsLookFree says so.
func (rl *RateLimiter) slotPollWrites(ctx context.Context, reads []slotRead) (bool, []slotRead) {
	if reads == nil || rl.slotViews.writeDue(reads, time.Now()) {
		return true, nil
	}
	return rl.slotsLookFree(ctx, reads)
}

// pollsByRead reports whether a Wait refused for want of a slot polls by
// reading the items before it writes: on DynamoDB, where a refused
// conditional write costs as much as one that applies (a write of the
// item, serialised with every other write of it), and an acquire of a
// cascade that one item refuses also writes the other item and gives
// that back, while a read of both items is one cheap call that writes
// nothing. Elsewhere a refused acquire is one script or one lock, as
// cheap as a read: the poll is the acquire.
func (rl *RateLimiter) pollsByRead() bool { return rl.pairWrites }

// slotPollWriteEvery is how often at least the Waits of a limiter for
// slots that poll by reading write all the same: a raised capacity shows
// in the item only once a write has stored it.
const slotPollWriteEvery = 5 * time.Second

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

// read marks the views of reads read from now on, unless one is already:
// it reports whether this caller reads them (then it must call store).
func (s *slotViews) read(reads []slotRead, now time.Time) bool {
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

// store records what the read of reads returned at now, in generation
// gen: buckets (a missing item holds every slot free), or nothing when
// the read failed (buckets nil).
func (s *slotViews) store(reads []slotRead, buckets map[store.BucketKey]*store.Bucket, now time.Time, gen int64) {
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

// release ends the claims of reads: their acquire returned.
func (s *slotViews) release(reads []slotRead) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reads {
		if v := s.m[r.slotViewKey]; v != nil {
			v.flying = max(v.flying-r.amount, 0)
		}
	}
}

// givenBack records that a lease of this limiter gave back n slots of
// limit name of key's item.
func (s *slotViews) givenBack(key store.BucketKey, name string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.m[slotViewKey{key, name}]; v != nil {
		v.used = bucketmath.AddSat(v.used, -n)
	}
}

// slotsLookFree decides whether a Wait whose last refusal was for want of
// the slots of reads writes now: when the items, as read by the
// limiter's waiters within the last slot poll (or now, one GetItem or
// one BatchGetItem, unless another waiter's read of them is under way),
// hold the slots it takes free in the two generations an acquire takes
// them in, less the slots other waiters of the limiter claimed since. It
// then claims them: call release with the result once the acquire
// returned. It reports true, so that the acquire decides, when it cannot
// tell: the limiter is closed, the circuit breaker open, or the read
// failed.
func (rl *RateLimiter) slotsLookFree(ctx context.Context, reads []slotRead) (free bool, claimed []slotRead) {
	gen := rl.slotGen()
	if ok, stale := rl.slotViews.claim(reads, time.Now(), gen); !stale {
		if ok {
			return true, reads
		}
		return false, nil
	}
	if rl.store.brk.rejecting() || rl.enter() != nil {
		return true, nil
	}
	defer rl.exit()
	if !rl.slotViews.read(reads, time.Now()) {
		return false, nil // another waiter reads them: the next poll sees it
	}
	var keys []store.BucketKey
	for _, r := range reads {
		if !slices.Contains(keys, r.key) {
			keys = append(keys, r.key)
		}
	}
	var buckets map[store.BucketKey]*store.Bucket
	var err error
	if len(keys) == 1 {
		var b *store.Bucket
		if b, err = rl.store.getBucket(ctx, keys[0]); err == nil {
			buckets = map[store.BucketKey]*store.Bucket{keys[0]: b}
		}
	} else {
		_, buckets, err = rl.store.loadBuckets(ctx, nil, keys)
	}
	now := time.Now()
	if err != nil {
		rl.slotViews.store(reads, nil, now, gen)
		return true, nil
	}
	rl.slotViews.store(reads, buckets, now, gen)
	if ok, _ := rl.slotViews.claim(reads, now, gen); ok {
		return true, reads
	}
	return false, nil
}

// slotGen returns the current generation of in-flight slots.
func (rl *RateLimiter) slotGen() int64 { return bucketmath.FloorDiv(rl.nowMs(), rl.slotGenMs()) }
