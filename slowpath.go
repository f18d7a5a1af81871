// Layer 4, mechanics: the read-then-write path of an acquire, and the writes
// of leases through group commit.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// maxConflictRetries bounds the retries of a write refused with a
// TransactionConflict (25, 50, 100 ms backoff).
const maxConflictRetries = 3

// conflictBackoff is the wait before conflict retry n (0-based).
func conflictBackoff(n int) time.Duration { return 25 * time.Millisecond << n }

// initialState returns the state a limit missing from g's bucket starts
// with: full (a prepaid balance empty), or what carrySwitches left it.
func (g entityGroup) initialState(resource string, l store.Limit, now int64) store.BucketState {
	s := bucketStateFromLimit(g.entityID, resource, l, now)
	if v, ok := g.startMilli[l.Name]; ok && v < s.TokensMilli {
		s.TokensMilli = v
	}
	return s
}

// maxRereads bounds how often an administrative write (a sync of stored
// limits, a lowered capacity) reads its bucket again after another writer
// changed it.
const maxRereads = 3

// slowAcquire is the read-then-write path of plan p: read the entity
// records and the buckets in one round trip, refill and consume locally
// (applying any limit change), and write the result under the
// refill-timestamp lock; read and decide again after a lost race
// (afterLostRace).
func (rl *RateLimiter) slowAcquire(ctx context.Context, p *acquirePlan) (*Lease, error) {
	for attempt := 0; ; attempt++ {
		lease, statuses, err := rl.slowAttempt(ctx, p)
		if !errors.Is(err, errReread) {
			return lease, err
		}
		again, wait, err := rl.afterLostRace(ctx, attempt)
		if err != nil {
			return nil, err
		}
		if !again {
			return nil, newRateLimitExceededError(contendedStatuses(statuses, wait))
		}
	}
}

// slowAttempt is one read and write of slowAcquire. It returns the
// statuses it decided on with errReread.
func (rl *RateLimiter) slowAttempt(ctx context.Context, p *acquirePlan) (*Lease, []LimitStatus, error) {
	entityID, resource, consume, child := p.entityID, p.resource, p.consume, p.child
	groups, err := rl.readGroups(ctx, entityID, resource)
	if err != nil {
		return nil, nil, err
	}
	groups[0].limits, groups[0].source, groups[0].switches = child.limits, child.source, child.switches
	if len(groups) > 1 {
		parent := &groups[1]
		pl, err := rl.parentLimits(ctx, parent.entityID, resource, p.o)
		if err != nil {
			return nil, nil, err
		}
		parent.limits, parent.source, parent.switches = pl.limits, pl.source, pl.switches
		if m := parent.meta; m != nil && m.Cascade && m.ParentID != "" && m.ParentID != parent.entityID && m.ParentID != entityID {
			return nil, nil, errCascadePath // the parent cascades too
		}
	}

	now := rl.nowMs()
	for i := range groups {
		if err := rl.carrySwitches(ctx, &groups[i], resource, nil, now); err != nil {
			return nil, nil, err
		}
	}
	lease := &Lease{rl: rl}
	var statuses []LimitStatus
	exceeded := false
	for _, g := range groups {
		entries, st, ex := consumeGroup(g, resource, consume, now)
		lease.entries = append(lease.entries, entries...)
		statuses = append(statuses, st...)
		exceeded = exceeded || ex
	}
	if exceeded {
		if err := rl.storeLimitChange(ctx, lease, groups); err != nil {
			return nil, nil, err
		}
		return nil, nil, newRateLimitExceededError(statuses)
	}
	if err := rl.commitInitial(ctx, lease, groups); err != nil {
		return nil, statuses, err
	}
	return lease, nil, nil
}

// storeLimitChange writes the new parameters of a limit change found by a
// refused request (consuming nothing), so that the new rate counts from
// now and a lowered capacity holds at once.
func (rl *RateLimiter) storeLimitChange(ctx context.Context, lease *Lease, groups []entityGroup) error {
	changed := false
	for _, e := range lease.entries {
		// Nothing was taken: neither the balance nor the total moves.
		e.state.TotalConsumedMilli = bucketmath.AddMilli(e.state.TotalConsumedMilli, -e.consumed)
		e.consumed = 0
		if e.paramsChanged {
			changed = true
		}
		// The balance as refilled, capped, before this request: the
		// refusal took nothing.
		e.state.TokensMilli = e.refilledMilli
	}
	if !changed {
		return nil
	}
	err := rl.commitInitial(ctx, lease, groups)
	if errors.Is(err, errReread) {
		return nil // someone else wrote first; the next acquire sees it
	}
	return err
}

// consumeGroup refills and consumes locally, for every limit of g, the
// amount of consume (only positive amounts gate admission; zero refills).
// Limits missing from g's bucket start full; a limit stored with other
// parameters takes the resolved ones first (applyLimit).
func consumeGroup(g entityGroup, resource string, consume Consume, now int64) (entries []*leaseEntry, statuses []LimitStatus, exceeded bool) {
	for _, l := range g.limits {
		s, found := g.bucket.State(l.Name)
		if !found {
			s = g.initialState(resource, l, now)
		}
		stored := s // the deltas of the write are relative to it
		s, changed := applyLimit(s, l, now)
		capped := false
		if v, ok := g.capMilli[l.Name]; ok && found {
			// A switch back: what the other definition spent since
			// stays spent (carrySwitches).
			c := capState(s, v, now)
			capped = c.TokensMilli != s.TokensMilli || c.LastRefillMs != s.LastRefillMs
			s = c
		}
		e := &leaseEntry{
			key:                 store.BucketKey{EntityID: g.entityID, Resource: resource},
			inc:                 bucketIncarnation(g.bucket),
			limit:               l,
			originalTokensMilli: stored.TokensMilli,
			originalRfMs:        stored.LastRefillMs,
			missingLimit:        !found && g.bucket != nil,
			paramsChanged:       changed,
			capped:              capped,
		}
		amount := consume[l.Name]
		st := LimitStatus{EntityID: g.entityID, Resource: resource, LimitName: l.Name, Limit: Limit(l), Requested: amount}
		tk, _, ok := admit(&st, s, amount, now)
		e.refilledMilli = tk
		if ok {
			// The write sets the item's refill time to now (see
			// commitInitial), not to the drift-compensated time admit returns, which a
			// later refill of the lease's view would credit again.
			s.TokensMilli, s.LastRefillMs = tk, max(now, s.LastRefillMs)
			e.consumed = amount
			e.refilledMilli = bucketmath.AddMilli(tk, amount)
		}
		s.TotalConsumedMilli = bucketmath.AddMilli(s.TotalConsumedMilli, e.consumed)
		e.state = s
		exceeded = exceeded || st.Exceeded
		statuses = append(statuses, st)
		entries = append(entries, e)
	}
	return entries, statuses, exceeded
}

// readGroups reads the META record and shard-0 bucket of the entity and, when
// it cascades, of its parent. With the parent known from the entity cache
// this is one BatchGetItem; otherwise a second one follows for the parent.
func (rl *RateLimiter) readGroups(ctx context.Context, entityID, resource string) ([]entityGroup, error) {
	cache := rl.ents
	info, _ := cache.get(entityID)
	guess := info.cascadeParent(entityID)

	ids := []string{entityID}
	keys := []store.BucketKey{{EntityID: entityID, Resource: resource}}
	if guess != "" {
		ids = append(ids, guess)
		keys = append(keys, store.BucketKey{EntityID: guess, Resource: resource})
	}
	metas, buckets, err := rl.store.loadBuckets(ctx, ids, keys)
	if err != nil {
		return nil, fmt.Errorf("read buckets of %s/%s: %w", entityID, resource, err)
	}
	child := entityGroup{entityID: entityID, resource: resource, bucket: buckets[keys[0]]}
	parentID := ""
	if m, ok := metas[entityID]; ok {
		child.meta = &m
		cache.setEntity(entityID, true, m.Cascade, m.ParentID)
		if m.Cascade && m.ParentID != entityID {
			parentID = m.ParentID
		}
	} else {
		cache.setEntity(entityID, false, false, "")
	}
	groups := []entityGroup{child}
	if parentID == "" {
		return groups, nil
	}
	pkey := store.BucketKey{EntityID: parentID, Resource: resource}
	if parentID != guess {
		pm, pb, err := rl.store.loadBuckets(ctx, []string{parentID}, []store.BucketKey{pkey})
		if err != nil {
			return nil, fmt.Errorf("read buckets of %s/%s: %w", parentID, resource, err)
		}
		metas, buckets = pm, pb
	}
	parent := entityGroup{entityID: parentID, resource: resource, bucket: buckets[pkey]}
	if m, ok := metas[parentID]; ok {
		parent.meta = &m
		cache.setEntity(parentID, true, m.Cascade, m.ParentID)
	}
	return append(groups, parent), nil
}

// ttlFor decides the TTL handling of a group's bucket written at nowMs
// with entries (the acquire's; nil for a write that takes nothing):
// the period bucket of a calendar limit expires at its expireAtMs, whatever
// its config's level (no acquire reads a past period again); other buckets
// of entity-level config never expire, nor do buckets that hold in-flight
// slots (holdsSlots); others expire after the
// time-to-fill times the repository's multiplier, or later for a bucket
// that is full again only later (groupFullAtMs, debtTTLSeconds), so that its
// deletion never forgives what it owes. A multiplier of zero or less
// (Options.BucketTTLPeriods) sets no TTL.
func (rl *RateLimiter) ttlFor(g entityGroup, entries []*leaseEntry, nowMs int64) (store.TTLMode, int64) {
	if g.expireAtMs > 0 {
		if rl.ttlMultiplier <= 0 {
			return store.TTLUnchanged, 0
		}
		return store.TTLSet, max((g.expireAtMs-nowMs+999)/1000, 1) // whole seconds, rounded up, at least 1
	}
	if g.source == SourceEntity || rl.holdsSlots(g, nowMs) {
		return store.TTLRemove, 0
	}
	secs := bucketTTLSeconds(g.limits, rl.ttlMultiplier)
	if secs <= 0 {
		return store.TTLUnchanged, 0
	}
	return store.TTLSet, debtTTLSeconds(secs, g.limits, nowMs, groupFullAtMs(g, entries))
}

// groupFullAtMs returns when every limit of g's bucket is full again after
// the lease's entries on it (math.MinInt64 when all are full): the latest
// full time of the stored states (limits the acquire did not take from
// may be in debt) and of the entries' states after their consumption.
func groupFullAtMs(g entityGroup, entries []*leaseEntry) int64 {
	at := int64(math.MinInt64)
	if g.bucket != nil {
		for _, s := range g.bucket.States {
			at = max(at, bucketmath.FullAtMs(s.TokensMilli, g.bucket.RefillMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs))
		}
	}
	for _, e := range entries {
		s := e.state
		at = max(at, bucketmath.FullAtMs(s.TokensMilli, s.LastRefillMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs))
	}
	return at
}

// groupEntries returns the entries of lease on the item of each group, in
// the order of groups.
func groupEntries(lease *Lease, groups []entityGroup) [][]*leaseEntry {
	out := make([][]*leaseEntry, len(groups))
	for _, e := range lease.entries {
		for i, g := range groups {
			if e.key == g.key() {
				out[i] = append(out[i], e)
			}
		}
	}
	return out
}

// commitInitial makes the lease's consumption durable (write-on-enter:
// before the call the lease guards): a create or a normal write per group,
// atomically when there are two; the retry path when the optimistic lock
// was lost. It returns errReread when the attempt lost the race (nothing
// was written).
func (rl *RateLimiter) commitInitial(ctx context.Context, lease *Lease, groups []entityGroup) error {
	if len(lease.entries) == 0 {
		return nil // an empty limit list checks and writes nothing
	}
	now := rl.nowMs()
	changed := false // a limit's parameters or capped balance change with this write
	writes := make([]store.BucketWrite, 0, len(groups))
	byGroup := groupEntries(lease, groups)
	for i, g := range groups {
		entries := byGroup[i]
		if len(entries) == 0 {
			continue
		}
		w := store.BucketWrite{Key: entries[0].key, NowMs: now}
		w.TTL, w.TTLSeconds = rl.ttlFor(g, entries, now)
		if g.meta != nil {
			w.Cascade, w.ParentID, w.RefreshEntity = g.meta.Cascade, g.meta.ParentID, true
		}
		if g.bucket == nil {
			w.Kind = store.WriteCreate
			w.ShardCount = 1
			// The item's incarnation, drawn anew for each attempt: a
			// create that loses the race to another is refused, and the
			// retry's condition on this incarnation sends it to read the
			// winner's item.
			w.Incarnation = newIncarnation()
			for _, e := range entries {
				w.States = append(w.States, e.state)
				e.inc = w.Incarnation
			}
		} else {
			w.Kind = store.WriteNormal
			w.ExpectedRefillMs = g.bucket.RefillMs
			w.Incarnation = g.bucket.Incarnation
			// The refill time never moves back: a clock behind the one
			// that last refilled the item refilled nothing (the balances
			// were computed with no time elapsed), and setting the earlier
			// time would let the next refill credit that interval again.
			w.NowMs = max(now, g.bucket.RefillMs)
			for _, e := range entries {
				lw := store.LimitWrite{Name: e.limit.Name, ConsumedMilli: e.consumed * 1000}
				if e.missingLimit {
					full := g.initialState(w.Key.Resource, e.limit, now)
					lw.Initial = &full
				} else {
					lw.RefillMilli = e.state.TokensMilli - e.originalTokensMilli + lw.ConsumedMilli
				}
				if e.paramsChanged {
					p := e.state
					lw.Params = &p
					changed = true
				}
				changed = changed || e.capped
				w.Limits = append(w.Limits, lw)
			}
			w.Base = g.bucket // the DynamoDB backend refills its wcu limit from it
		}
		writes = append(writes, w)
	}
	err := rl.writeWithConflictRetry(ctx, writes, lease)
	if errors.Is(err, store.ErrConditionFailed) {
		if changed {
			// The retry path consumes from the stored balances, without
			// refilling: it would apply neither new parameters nor the
			// cap a switch back leaves (a bucket that predates the switch
			// back holds what the other definition's spend should have
			// taken, and the retry would take from that). Read again
			// instead: the next attempt caps the balance it reads.
			return errReread
		}
		err = rl.retryInitial(ctx, lease, groups, byGroup)
	}
	if err != nil {
		return err
	}
	for _, e := range lease.entries {
		e.initialConsumed = e.consumed
	}
	return nil
}

// retryInitial is the retry path after a lost optimistic lock: consume
// without refilling, guarded by tk >= consumed (and by the items
// existing). When that is refused too, the attempt lost the race:
// errReread.
//
// A group whose item the initial write created is created again when the
// initial write had another item too: the transaction may have been
// refused by that other item alone (a busy parent), and a retry of the
// create would find no item to take from and read everything again. When
// the create itself lost to another, its condition refuses it again and
// the attempt reads again, as before.
func (rl *RateLimiter) retryInitial(ctx context.Context, lease *Lease, groups []entityGroup, byGroup [][]*leaseEntry) error {
	now := rl.nowMs()
	var writes []store.BucketWrite
	several := 0
	for _, entries := range byGroup {
		if len(entries) > 0 {
			several++
		}
	}
	for i, g := range groups {
		if g.bucket == nil && several > 1 {
			w, ok := rl.createAgain(g, byGroup[i], now)
			if !ok {
				return errReread
			}
			if len(w.States) > 0 {
				writes = append(writes, w)
			}
			continue
		}
		w := store.BucketWrite{Kind: store.WriteRetry, NowMs: now}
		for _, e := range byGroup[i] {
			if e.consumed <= 0 {
				continue
			}
			w.Key, w.Incarnation = e.key, e.inc
			lw := store.LimitWrite{Name: e.limit.Name, ConsumedMilli: e.consumed * 1000}
			if e.missingLimit {
				full := g.initialState(e.key.Resource, e.limit, now)
				lw.Initial = &full
			}
			w.Limits = append(w.Limits, lw)
		}
		if len(w.Limits) > 0 {
			writes = append(writes, w)
		}
	}
	err := rl.writeWithConflictRetry(ctx, writes, lease)
	if errors.Is(err, store.ErrConditionFailed) {
		return errReread
	}
	return err
}

// createAgain returns the create of g's item at now, for the retry of an
// initial write that created it and was refused: the states of entries,
// which the acquire decided, created with the incarnation drawn for them. That is exact only
// when every limit of it started full and would start so at now too (a
// full limit's state does not depend on when it is created); otherwise ok
// is false and the attempt reads again.
func (rl *RateLimiter) createAgain(g entityGroup, entries []*leaseEntry, now int64) (w store.BucketWrite, ok bool) {
	if len(entries) == 0 {
		return w, true
	}
	w = store.BucketWrite{Kind: store.WriteCreate, Key: entries[0].key, NowMs: now, ShardCount: 1, Incarnation: entries[0].inc}
	w.TTL, w.TTLSeconds = rl.ttlFor(g, entries, now)
	if g.meta != nil {
		w.Cascade, w.ParentID, w.RefreshEntity = g.meta.Cascade, g.meta.ParentID, true
	}
	for _, e := range entries {
		s := e.state
		start := g.initialState(e.key.Resource, e.limit, now)
		if e.inc != w.Incarnation || e.paramsChanged || e.capped || e.originalTokensMilli < s.CapacityMilli ||
			start.TokensMilli != e.originalTokensMilli || start.CapacityMilli != s.CapacityMilli ||
			start.RefillAmountMilli != s.RefillAmountMilli || start.RefillPeriodMs != s.RefillPeriodMs {
			return w, false
		}
		s.LastRefillMs = now
		w.States = append(w.States, s)
	}
	return w, true
}

// writeWithConflictRetry writes, retrying a TransactionConflict up to
// maxConflictRetries times with 25/50/100 ms backoff. Each write waits for
// the store or for ctx; when ctx ends first, the write goes on and, if it
// applies, what it took for lease is given back.
func (rl *RateLimiter) writeWithConflictRetry(ctx context.Context, writes []store.BucketWrite, lease *Lease) error {
	if len(writes) == 0 {
		return nil
	}
	for attempt := 0; ; attempt++ {
		_, err := detached(&rl.bg, ctx, false, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, rl.store.writeBuckets(ctx, writes)
		}, func(_ struct{}, err error) {
			if err == nil {
				rl.giveBackLease(writes, lease)
			}
		})
		if !errors.Is(err, store.ErrTransactionConflict) || attempt >= maxConflictRetries {
			return err
		}
		rl.logConflict(ctx, writes, attempt, conflictBackoff(attempt))
		if err := rl.sleep(ctx, conflictBackoff(attempt)); err != nil {
			return err
		}
	}
}

// giveBackLease gives back what writes (an acquire's initial write, applied
// after its caller gave up) took for lease: each entry's consumption on its
// bucket.
func (rl *RateLimiter) giveBackLease(writes []store.BucketWrite, lease *Lease) {
	for _, w := range writes {
		give := make(Consume)
		var limits []store.Limit
		for _, e := range lease.entries {
			if e.key == w.Key {
				give[e.limit.Name] += e.consumed
				limits = append(limits, e.limit)
			}
		}
		rl.giveBack(w.Key, w.Incarnation, give, limits)
	}
}

// giveBack returns consume, taken from key (of incarnation inc) by a write
// whose caller went away, in the background.
func (rl *RateLimiter) giveBack(key store.BucketKey, inc int64, consume Consume, limits []store.Limit) {
	w := giveBackWrite(key, inc, 0, consume, limits)
	if len(w.Limits) == 0 {
		return
	}
	rl.bg.Go(func() {
		ctx, cancel := detachedContext(context.Background())
		defer cancel()
		if err := rl.writeAdjust(ctx, w); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			rl.logGiveBackFailed(ctx, key, fmt.Errorf("give back %s/%s: %w", key.EntityID, key.Resource, err))
		}
	})
}

// writeAdjust writes one single-item store.WriteAdjust (commit, rollback,
// compensation), through group commit when it is on. It clears the
// over-limit cache entry of the item.
func (rl *RateLimiter) writeAdjust(ctx context.Context, w store.BucketWrite) error {
	rl.overLimitSeen(w)
	var err error
	if rl.gc == nil {
		err = rl.store.writeBuckets(ctx, []store.BucketWrite{w})
	} else {
		err = rl.gc.adjust(ctx, w)
	}
	if err == nil {
		rl.slotsGivenBack(w)
	}
	return err
}

// slotsGivenBack wakes the waiters of w's item for the slots w, an
// adjustment that applied, gave back: the most given back of any one
// generation of an in-flight limit.
func (rl *RateLimiter) slotsGivenBack(w store.BucketWrite) {
	if n := rl.slotViews.givenBack(w, rl.nowMs(), rl.slotGenMs()); n > 0 {
		rl.slotWaits.release(slotWaitKey{w.Key.EntityID, w.Key.Resource}, int(min(n, 1<<20)))
	}
}

// errReread reports that an attempt lost the race for its items (or found
// a limit changed under it while changing it): read them again.
var errReread = errors.New("limiter: bucket items changed between the read and the write")

// raceBackoff is the jittered wait after attempt n (0-based) lost a race.
func (rl *RateLimiter) raceBackoff(n int) time.Duration {
	d := min(raceBackoffBase<<min(n, 16), raceBackoffMax)
	half := d / 2
	return half + time.Duration(rl.intN(int(half/time.Microsecond)+1))*time.Microsecond
}

// afterLostRace is called when attempt n (0-based) lost a race. It waits
// the backoff and reports true when another attempt may follow; false
// with the backoff as wait when the attempts are spent or ctx's deadline
// comes before the backoff ends; ctx's error when it ended during the wait.
func (rl *RateLimiter) afterLostRace(ctx context.Context, n int) (again bool, wait time.Duration, err error) {
	wait = rl.raceBackoff(n)
	if n+1 >= maxRaceAttempts {
		return false, wait, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return false, wait, nil
	}
	if err := rl.sleep(ctx, wait); err != nil {
		return false, wait, err
	}
	return true, wait, nil
}

// coalesce is called by an acquire about to take the read-then-write path
// on key after the speculative path fell back. When another acquire of
// this limiter is on that path for key, it waits for it to end (lead is
// false; ctx's error when ctx ended first), and the caller tries the
// speculative path again. Otherwise the caller leads: it must call
// slowFlights.leave when its read-then-write acquire ends.
func (rl *RateLimiter) coalesce(ctx context.Context, key store.BucketKey) (lead bool, err error) {
	wait := rl.slowFlights.join(key)
	if wait == nil {
		return true, nil
	}
	select {
	case <-wait:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// holdsSlots reports whether the item of g, written at nowMs, holds or
// takes the slots of a generation that has not ended before the previous
// one: such an item keeps no TTL, since deleting it would forget the
// slots held (the speculative writes that take slots do not move a TTL).
func (rl *RateLimiter) holdsSlots(g entityGroup, nowMs int64) bool {
	cur := bucketmath.FloorDiv(nowMs, rl.slotGenMs())
	for _, l := range g.limits {
		if _, _, ok := slotOf(l); ok {
			return true
		}
	}
	if g.bucket != nil {
		for _, st := range g.bucket.States {
			if _, gen, ok := store.ParseSlotLimitName(st.LimitName); ok && gen >= cur-1 {
				return true
			}
		}
	}
	return false
}

// bucketTTLSeconds is the time to fill the slowest limit from empty, times
// multiplier, computed in float64 and truncated to whole seconds.
// It returns 0 (no TTL) when multiplier ≤ 0 or there are no limits.
func bucketTTLSeconds(limits []store.Limit, multiplier int64) int64 {
	if multiplier <= 0 || len(limits) == 0 {
		return 0
	}
	worst := 0.0
	for _, l := range limits {
		worst = max(worst, float64(l.Capacity)/float64(l.RefillAmount)*float64(l.RefillPeriodSeconds()))
	}
	if ttl := worst * float64(multiplier); ttl < maxBucketTTLSeconds {
		return int64(ttl)
	}
	return maxBucketTTLSeconds
}

// debtTTLSeconds returns the TTL (seconds after nowMs) of a bucket of
// limits whose idle TTL is secs and which is full again at fullAtMs: no
// earlier than one time to fill (of the slowest limit) after fullAtMs, so
// that the backend never deletes a bucket in debt, which an acquire would
// create full again.
func debtTTLSeconds(secs int64, limits []store.Limit, nowMs, fullAtMs int64) int64 {
	if fullAtMs <= nowMs {
		return secs
	}
	// The sum cannot overflow: ceilSeconds of an int64 of ms is below
	// MaxInt64/1000 + 1 and margin at most maxBucketTTLSeconds.
	margin := bucketTTLSeconds(limits, 1)
	return max(secs, min(ceilSeconds(fullAtMs-nowMs)+margin, maxBucketTTLSeconds))
}
