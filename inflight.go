// Layer 4, mechanics: limits of calls in flight ([InFlight]).
//
// An in-flight limit of n slots admits at most n slots held at once per
// bucket, across every process. Its slots live in the item of the bucket
// itself, beside its rolling limits: time is cut into generations of half
// the slot TTL (E = TTL/2, g = floor(now/E)), and generation g of in-flight
// limit L is the limit L.slots.g of the (entity, resource) item, of
// capacity n with a negligible refill, whose tokens are the slots free in
// g. A lease covers the generations from its acquire through h, its
// coverage, and holds a slot in each: its acquire at g takes the slots of
// g and g+1 (h = g+1) in the same conditional write as the item's rolling
// limits, so a refusal of any of them takes nothing. The limit of the
// current generation thus counts every live lease exactly once, and its
// condition (tokens never below zero) is the cap. A goroutine owned by the
// lease renews the coverage when generation h starts by taking the slot
// in h+1, a whole E before h+1 starts, so a store slower than E/2 still
// keeps the slot; it stops when the lease ends, and every write it makes
// is bounded by the store's timeout. Commit and Rollback (and so Do's end,
// errors and panics included) stop it and give back the slots of every
// generation the lease covers that has not ended, in the same write as
// the lease's other adjustments. A process that dies stops renewing: its
// coverage ends at most 2E = TTL after its last write, and the generations
// after it never held its slots; nothing reaps. A live lease that cannot
// renew before its coverage ends (the store unreachable, the process
// paused) takes its slots again only if they are free, and otherwise stops
// renewing: its call is then over the cap until it ends.
//
// A generation's limit is created by the first write that needs it (the
// speculative write of a limit the item lacks is refused): on DynamoDB by
// one write of that item alone (addSlotGens; once per generation per item
// per process), elsewhere by the read-then-write path. Either removes from
// the item the limits of generations that ended before the previous one,
// so an item holds at most four generations of each in-flight limit.
//
// Cost: an acquire with an in-flight limit is an acquire of its item like
// any other: one conditional write on the fast path (one UpdateItem on
// DynamoDB, one script on Redis, one lock in memory; with cascade or
// entity-wide limits, the pair of single-item writes). Its commit gives
// the slots back in the commit's own write of the item. A lease held past
// E pays one conditional write per item per E (the items of its cascade
// in one round trip). Once per generation per item, a read and a write
// add the next generation. An item that holds slots keeps no TTL
// (holdsSlots). Clocks of the processes must agree well within E/2. A
// lease that ends while a Wait of its limiter waits for its slots hands
// them over, with neither a give-back nor a take written (slothandoff.go).

package limiter

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// slotClaim is one in-flight limit of one item a lease holds slots of.
type slotClaim struct {
	key    store.BucketKey
	limit  store.Limit // the in-flight limit
	amount int64
}

// slotKeeper renews the coverage of a lease's slots until the lease ends.
type slotKeeper struct {
	rl     *RateLimiter
	claims []slotClaim
	cancel context.CancelFunc
	start  *time.Timer   // starts run when the first renewal is due
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	covered int64         // the last generation the lease's slots cover
	entries []*leaseEntry // the slots taken by renewals
	lost    bool          // a renewal was refused: the lease's slots lapsed

	// takenMs is when the slots were taken from the store (epoch ms): a
	// process hands them from lease to lease for at most a slot TTL
	// after (slothandoff.go).
	takenMs int64
}

// keepSlots starts the keeper of lease when its items hold slot limits.
func (rl *RateLimiter) keepSlots(lease *Lease, items []*batchItem) {
	if lease == nil || lease.noop {
		return
	}
	k := &slotKeeper{rl: rl, covered: -1 << 62, takenMs: rl.nowMs()}
	for _, it := range items {
		for _, s := range it.group.limits {
			l, gen, ok := slotOf(s)
			if !ok || it.consume[s.Name] <= 0 {
				continue
			}
			k.covered = max(k.covered, gen)
			c := slotClaim{key: it.group.key(), limit: l, amount: it.consume[s.Name]}
			if !slices.ContainsFunc(k.claims, func(o slotClaim) bool { return o.key == c.key && o.limit.Name == l.Name }) {
				k.claims = append(k.claims, c)
			}
		}
	}
	if len(k.claims) == 0 {
		return
	}
	rl.startKeeper(lease, k)
}

// startKeeper makes k, whose claims and coverage are set, the keeper of
// lease's slots.
func (rl *RateLimiter) startKeeper(lease *Lease, k *slotKeeper) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel, k.done = cancel, make(chan struct{})
	rl.slotWaits.hold(k.claims, 1)
	lease.slots = k
	// Most leases end before their first renewal is due: the keeper's
	// goroutine starts only then.
	k.start = time.AfterFunc(k.untilRenewal(), func() { k.run(ctx) })
}

// untilRenewal is how long until the renewal of the last covered
// generation is due (at most the limiter's slotPoll when set), 0 when it
// is.
func (k *slotKeeper) untilRenewal() time.Duration {
	k.mu.Lock()
	h := k.covered
	k.mu.Unlock()
	wait := time.Duration(h*k.rl.slotGenMs()-k.rl.nowMs()) * time.Millisecond
	if p := k.rl.slotPoll; p > 0 && wait > p {
		// The renewal does nothing before the coverage ends: the keeper
		// then reads the clock again.
		wait = p
	}
	return max(wait, 0)
}

// run renews the coverage when the last covered generation starts, so
// that the next one is written a whole generation before it starts (a
// slow store has that long), until ctx is cancelled, the limiter closes
// or a renewal is refused. A process that dies just after a renewal holds
// its slots two generations more: one slot TTL.
func (k *slotKeeper) run(ctx context.Context) {
	defer close(k.done)
	genMs := k.rl.slotGenMs()
	for {
		k.mu.Lock()
		h := k.covered
		k.mu.Unlock()
		if wait := k.untilRenewal(); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-k.rl.gate.life.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		// A renewal under way when the lease ends runs to its end (within
		// a generation), so that the slots it took are in the lease's
		// entries when Commit gives them back.
		switch err := k.renew(context.WithoutCancel(ctx), h, genMs); {
		case err == nil:
		case errors.Is(err, ErrRateLimited) || errors.Is(err, ErrClosed) || ctx.Err() != nil:
			return
		default:
			// The store failed: try again soon, until the coverage ends
			// (then the renewal takes the slots again, conditionally).
			t := time.NewTimer(time.Duration(max(genMs/10, 1)) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// renew takes the lease's slots in the generations after h through the one
// after the current one: one conditional write per item, all in one round
// trip.
func (k *slotKeeper) renew(ctx context.Context, h, genMs int64) error {
	if err := k.rl.enter(); err != nil {
		return err
	}
	defer k.rl.exit()
	now := k.rl.nowMs()
	g := bucketmath.FloorDiv(now, genMs)
	if h > g {
		return nil
	}
	var items []*batchItem
	for _, c := range k.claims {
		i := slices.IndexFunc(items, func(it *batchItem) bool { return it.group.key() == c.key })
		if i < 0 {
			i = len(items)
			items = append(items, &batchItem{
				group:   entityGroup{entityID: c.key.EntityID, resource: c.key.Resource, source: SourceOverride},
				consume: Consume{},
				base:    c.key.Resource,
			})
		}
		it := items[i]
		for gen := max(h+1, g); gen <= g+1; gen++ {
			s := c.limit.InFlightSlotLimit(gen)
			it.group.limits = append(it.group.limits, s)
			it.consume[s.Name] = c.amount
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(genMs)*time.Millisecond)
	defer cancel()
	lease, err := k.rl.chargeSlots(wctx, items)
	k.mu.Lock()
	defer k.mu.Unlock()
	if errors.Is(err, ErrRateLimited) {
		k.lost = true
	}
	if err != nil {
		return err
	}
	for _, e := range lease.entries {
		e.acquiredMs = now
		if _, _, ok := slotOf(e.limit); ok {
			k.entries = append(k.entries, e)
		}
	}
	k.covered = g + 1
	return nil
}

// halt stops the keeper, after the renewal under way if any, and returns
// the entries of the slots its renewals took.
func (k *slotKeeper) halt() []*leaseEntry {
	k.cancel()
	if !k.start.Stop() {
		<-k.done // the keeper ran or runs: wait for its end
	}
	k.rl.slotWaits.hold(k.claims, -1)
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.entries
	k.entries = nil
	return out
}

// chargeSlots takes the slots of items (renewals: each item's limits are
// the generations' limits it takes) in one round trip: the pair path or
// the store's speculative batch, else the read-then-write batch. That one
// writes every limit the item stores, with nothing taken of the others,
// so that moving the item's refill time refills them too.
func (rl *RateLimiter) chargeSlots(ctx context.Context, items []*batchItem) (*Lease, error) {
	switch rl.itemsShape(items, true) {
	case shapePair:
		lease, _, decided, err := rl.speculativePair(ctx, items)
		if !decided && err == nil && rl.addSlotGens(ctx, items) {
			lease, _, decided, err = rl.speculativePair(ctx, items)
		}
		if decided || err != nil {
			return lease, err
		}
	case shapeBatch:
		lease, _, decided, err := rl.speculativeAll(ctx, items)
		if decided || err != nil {
			return lease, err
		}
	}
	keys := make([]store.BucketKey, len(items))
	for i, it := range items {
		keys[i] = it.group.key()
	}
	for attempt := 0; ; attempt++ {
		_, buckets, err := rl.store.loadBuckets(ctx, nil, keys)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			it.group.limits = withStoredLimits(it.group.limits, buckets[keys[i]])
		}
		lease, statuses, err := rl.slowAll(ctx, items)
		if !errors.Is(err, errReread) {
			return lease, err
		}
		again, _, err := rl.afterLostRace(ctx, attempt)
		if err != nil {
			return nil, err
		}
		if !again {
			var all []LimitStatus
			for _, st := range statuses {
				all = append(all, st...)
			}
			return nil, newRateLimitExceededError(all)
		}
	}
}

// withStoredLimits returns limits (the generations' limits a renewal
// takes) and, for every other limit b stores that is not a generation's
// limit, that limit with its stored parameters.
func withStoredLimits(limits []store.Limit, b *store.Bucket) []store.Limit {
	var out []store.Limit
	for _, l := range limits {
		if _, _, ok := slotOf(l); ok {
			out = append(out, l)
		}
	}
	if b == nil {
		return out
	}
	for _, st := range b.States {
		if _, _, ok := store.ParseSlotLimitName(st.LimitName); ok || slices.ContainsFunc(out, func(l store.Limit) bool { return l.Name == st.LimitName }) {
			continue
		}
		out = append(out, store.Limit{
			Name: st.LimitName, Capacity: st.CapacityMilli / 1000, RefillAmount: st.RefillAmountMilli / 1000,
			RefillPeriod: time.Duration(st.RefillPeriodMs) * time.Millisecond,
		})
	}
	return out
}

// endSlots stops the lease's slot keeper and adds the slots its renewals
// took to the lease's entries. The slots of generations that have ended
// are left out of the lease: no limit counts them any more, and the item
// may no longer hold them. Slots handed to a Wait (handOffSlots) leave
// the lease too. With release set, every other slot is set to be
// given back at the next write (Commit).
func (ls *Lease) endSlots(release bool) {
	if ls.slots != nil {
		k := ls.slots
		ls.entries = append(ls.entries, k.halt()...)
		ls.slots = nil
		cur := bucketmath.FloorDiv(k.rl.nowMs(), k.rl.slotGenMs())
		ls.entries = slices.DeleteFunc(ls.entries, func(e *leaseEntry) bool {
			_, gen, ok := slotOf(e.limit)
			return ok && gen < cur
		})
		k.rl.handOffSlots(ls, k, cur)
	}
	if !release {
		return
	}
	for _, e := range ls.entries {
		if _, _, ok := slotOf(e.limit); ok {
			e.deltaMilli = -bucketmath.SatMul(e.consumed, 1000)
		}
	}
}

// checkSlotNames refuses a change of an in-flight amount after the
// acquire: slots are taken only by the acquire's conditional write.
func (ls *Lease) checkSlotNames(c Consume) error {
	for _, e := range ls.entries {
		l, _, ok := slotOf(e.limit)
		if _, named := c[l.Name]; ok && named {
			return store.NewValidationError(ErrValidation, "consume", l.Name,
				"in-flight slots are taken by the acquire and given back when the lease ends; they cannot be adjusted")
		}
	}
	return nil
}

// shownSlot returns how the lease shows entry e to its caller: a
// generation's limit as its in-flight limit, and only the earliest
// generation the lease holds of it in e's item (show false for the
// others); any other limit as it is.
func (ls *Lease) shownSlot(e *leaseEntry) (l store.Limit, show bool) {
	l, gen, ok := slotOf(e.limit)
	if !ok {
		return e.limit, true
	}
	for _, o := range ls.entries {
		if ol, og, ok := slotOf(o.limit); ok && o.key == e.key && ol.Name == l.Name && og < gen {
			return l, false
		}
	}
	return l, true
}

// slotsFinish ends an acquire whose items hold slot limits: the statuses
// of a generation's limit are shown as its in-flight limit's (one per
// item: the generation with the fewest free slots), a refusal waits a
// slot poll and is rebuilt from them, and the lease's keeper is started.
// An acquire without slots passes as it is.
func (rl *RateLimiter) slotsFinish(items []*batchItem, lease *Lease, statuses [][]LimitStatus, err error) (*Lease, error) {
	if !slices.ContainsFunc(items, func(it *batchItem) bool {
		return slices.ContainsFunc(it.group.limits, func(l store.Limit) bool { _, _, ok := slotOf(l); return ok })
	}) {
		return lease, err
	}
	if statuses != nil {
		for i := range statuses {
			statuses[i] = slotStatuses(statuses[i])
		}
		if rle := (*RateLimitExceededError)(nil); errors.As(err, &rle) {
			var all []LimitStatus
			for _, st := range statuses {
				all = append(all, st...)
			}
			err = newRateLimitExceededError(all)
		}
	}
	rl.keepSlots(lease, items)
	return lease, err
}

// slotStatuses shows the statuses of generations' limits as their
// in-flight limits': one per in-flight limit and item, the one with the
// fewest slots free (an exceeded one first), waiting a slot poll.
func slotStatuses(statuses []LimitStatus) []LimitStatus {
	out := statuses[:0]
	for _, st := range statuses {
		l, _, ok := slotOf(store.Limit(st.Limit))
		if !ok {
			out = append(out, st)
			continue
		}
		st.LimitName, st.Limit = l.Name, Limit(l)
		if st.Exceeded {
			st.RetryAfter = slotWaitPoll
		}
		i := slices.IndexFunc(out, func(o LimitStatus) bool {
			return o.Limit.InFlight && o.LimitName == l.Name && o.EntityID == st.EntityID && o.Resource == st.Resource
		})
		switch {
		case i < 0:
			out = append(out, st)
		case st.Exceeded && !out[i].Exceeded, st.Exceeded == out[i].Exceeded && st.Available < out[i].Available:
			out[i] = st
		}
	}
	return out
}

// dropEndedSlots removes from the items of groups, as read before an
// acquire's write, the limits of generations that ended before the
// previous one (one write per item that holds any): no lease counts on
// them, and the item must not grow a limit per generation. A failure is
// left for the next such write.
func (rl *RateLimiter) dropEndedSlots(ctx context.Context, groups []entityGroup) {
	now := rl.nowMs()
	cur := bucketmath.FloorDiv(now, rl.slotGenMs())
	for _, g := range groups {
		if g.bucket == nil {
			continue
		}
		var ended []string
		for _, st := range g.bucket.States {
			if _, gen, ok := store.ParseSlotLimitName(st.LimitName); ok && gen < cur-1 {
				ended = append(ended, st.LimitName)
			}
		}
		if len(ended) > 0 {
			_ = rl.store.writeBuckets(ctx, []store.BucketWrite{{Kind: store.WriteSync, Key: g.key(), NowMs: now, Remove: ended}})
		}
	}
}

// createSlotItem creates the missing item of it as the read-then-write
// path would before taking from it (its limits at their initial state,
// the entity's cascade settings from metas, its TTL), taking nothing: one
// conditional create of that item alone. It reports whether the item
// exists now.
func (rl *RateLimiter) createSlotItem(ctx context.Context, it *batchItem, metas map[string]Entity, nowMs int64) bool {
	g := it.group
	if m, ok := metas[g.entityID]; ok {
		g.meta = &m
	}
	if err := rl.carrySwitches(ctx, &g, it.base, it.cal, nowMs); err != nil {
		return false
	}
	w := store.BucketWrite{Kind: store.WriteCreate, Key: g.key(), NowMs: nowMs, ShardCount: 1, Incarnation: newIncarnation()}
	for _, l := range g.limits {
		w.States = append(w.States, g.initialState(g.resource, l, nowMs))
	}
	w.TTL, w.TTLSeconds = rl.ttlFor(g, nil, nowMs)
	if g.meta != nil {
		w.Cascade, w.ParentID, w.RefreshEntity = g.meta.Cascade, g.meta.ParentID, true
	}
	err := rl.store.writeBuckets(ctx, []store.BucketWrite{w})
	return err == nil || errors.Is(err, store.ErrConditionFailed)
}

// addSlotGens prepares the items of an acquire whose single-item writes
// were not decided, on a store whose single-item writes are cheaper than
// its atomic batch (DynamoDB): each item that holds slot limits and is not
// known to hold its generations' is read, and the limits it lacks are
// added to it (full), with the limits of generations that ended before
// the previous one removed, by one WriteSync of that item alone, which
// concurrent writers of the item do not cancel (the read-then-write path
// would write both items of a cascade in one transaction, which they do);
// a missing item is created alone (createSlotItem).
// It reports whether the writes may now be tried again: some item holds
// slot limits, and every such item exists and holds its generations'.
func (rl *RateLimiter) addSlotGens(ctx context.Context, items []*batchItem) bool {
	genMs := rl.slotGenMs()
	at := rl.now()
	cur := bucketmath.FloorDiv(at.UnixMilli(), genMs)
	ttl := time.Duration(genMs) * time.Millisecond
	any := false
	for _, it := range items {
		key := it.group.key()
		var slots []store.Limit
		top := int64(-1 << 62)
		for _, l := range it.group.limits {
			if _, gen, ok := slotOf(l); ok {
				slots = append(slots, l)
				top = max(top, gen)
			}
		}
		if len(slots) == 0 {
			continue
		}
		any = true
		if rl.slotItems.known(key, top, at) {
			continue
		}
		// One acquire of the limiter prepares an item at a time; the
		// others wait for it (at the start of a busy generation, each
		// would read and write the item).
		if wait := rl.slotGenFlights.join(key); wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return false
			}
			if rl.slotItems.known(key, top, at) {
				continue
			}
			return false
		}
		ok := rl.addSlotGen(ctx, it, slots, cur, at)
		if ok {
			rl.slotItems.learn(key, top, at, ttl)
		}
		rl.slotGenFlights.leave(key)
		if !ok {
			return false
		}
	}
	return any
}

// addSlotGen is addSlotGens of item it: slots are the generations'
// limits it takes, cur the current generation at at. It reports whether
// the item exists now and holds them.
func (rl *RateLimiter) addSlotGen(ctx context.Context, it *batchItem, slots []store.Limit, cur int64, at time.Time) bool {
	key := it.group.key()
	metas, buckets, err := rl.store.loadBuckets(ctx, []string{key.EntityID}, []store.BucketKey{key})
	if err != nil {
		return false
	}
	b := buckets[key]
	if b == nil {
		return rl.createSlotItem(ctx, it, metas, at.UnixMilli())
	}
	// An item that holds slots keeps no TTL (holdsSlots).
	w := store.BucketWrite{Kind: store.WriteSync, Key: key, NowMs: at.UnixMilli(), TTL: store.TTLRemove}
	for _, l := range slots {
		if _, ok := b.State(l.Name); !ok {
			full := bucketStateFromLimit(key.EntityID, key.Resource, l, at.UnixMilli())
			w.Limits = append(w.Limits, store.LimitWrite{Name: l.Name, Initial: &full})
		}
	}
	for _, st := range b.States {
		if _, gen, ok := store.ParseSlotLimitName(st.LimitName); ok && gen < cur-1 {
			w.Remove = append(w.Remove, st.LimitName)
		}
	}
	if len(w.Limits) > 0 || len(w.Remove) > 0 || b.TTL != 0 {
		if err := rl.store.writeBuckets(ctx, []store.BucketWrite{w}); err != nil {
			return false
		}
	}
	return true
}

// The polls of a Wait refused for want of a slot, on DynamoDB: a read of
// the items, shared by the waiters of the limiter, and the acquire's
// writes only by as many waiters as it shows slots free.

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
	reads := inFlightRequested(rle)
	if len(reads) > 0 && len(opts) == 0 {
		rl.slotViews.remember(store.BucketKey{EntityID: entityID, Resource: resource}, reads, time.Now())
	}
	return reads
}

// inFlightRequested returns the in-flight limits rle shows requested, per
// item, with their amounts.
func inFlightRequested(rle *RateLimitExceededError) []slotRead {
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
	if !rl.slotViews.freshView(reads, time.Now()) {
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
		rl.slotViews.rememberView(reads, nil, now, gen)
		return true, nil
	}
	rl.slotViews.rememberView(reads, buckets, now, gen)
	if ok, _ := rl.slotViews.claim(reads, now, gen); ok {
		return true, reads
	}
	return false, nil
}
