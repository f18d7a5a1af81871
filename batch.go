// Layer 4, mechanics: AcquireAll, several (entity, resource) pairs in one
// atomic step.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// AcquireRequest is one request of [RateLimiter.AcquireAll]: take Consume
// from the (EntityID, Resource) bucket, and from each ancestor's the
// entity cascades to (see [MaxCascadeLevels]), and from the entity-wide
// bucket ([AllResources]) of each of them with entity-wide limits.
// Resource may not be AllResources.
type AcquireRequest struct {
	EntityID string
	Resource string
	Consume  Consume
	// Limits, when not nil, are used for this request instead of the
	// stored config, as [WithLimits] does for one Acquire (an empty,
	// non-nil list checks nothing). Nil means the stored limits, or the
	// [WithLimits] option of the call.
	Limits []Limit
}

// MaxAcquireAllItems bounds the bucket items one AcquireAll may charge
// (each request's bucket, and its ancestors' with cascade): DynamoDB
// writes at most 100 items in one transaction.
const MaxAcquireAllItems = 100

// batchItem is one bucket item charged by AcquireAll: its group (limits,
// and the bucket and entity record once read) and what the requests
// charging it take from it together.
type batchItem struct {
	group   entityGroup
	consume Consume
	// cal is the calendar limit whose period bucket the item is, or the
	// prepaid limit whose balance it is (nil for an ordinary bucket), and
	// nextMs the start of the next period (0 for a balance).
	cal    *Limit
	nextMs int64
	// base is the resource the item's limit is defined on (the resource
	// of the request, or AllResources): its own bucket's resource for a
	// rolling limit, not for a calendar one.
	base string
}

// AcquireAll takes every request's amounts, or none: either every request
// is admitted and the returned [Lease] holds all of them (Commit, Adjust
// and Rollback work on it as on the lease of one Acquire), or the error is
// a *[RateLimitExceededError] and nothing was taken from any bucket — a
// refusal of one request costs the others nothing. The statuses are per
// request, in order: the limits of its bucket (then its ancestors', with
// cascade), with Available the whole tokens there before the batch,
// refilled to now. Requests that charge one bucket item (the same key
// twice, or children of one parent) are checked against it together, with
// their amounts summed; they must resolve the same limits for it.
//
// On a repository that is a [store.BatchStore] (every backend of this
// module: one TransactWriteItems on DynamoDB, one script on Redis, one
// lock in memory) and with speculative writes on, it costs one round trip
// when every bucket covers its amounts without a refill. Otherwise it
// reads every bucket at once and writes them all in one atomic
// [Repository.WriteBuckets] (one BatchGetItem and one TransactWriteItems
// on DynamoDB). The
// over-limit cache and group commit are not used. Errors follow
// [RateLimiter.Acquire]: with the allow on-unavailable mode an
// unavailable backend gives a no-op lease.
func (rl *RateLimiter) AcquireAll(ctx context.Context, reqs []AcquireRequest, opts ...AcquireOption) (*Lease, [][]LimitStatus, error) {
	if ctx == nil {
		return nil, nil, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	if len(reqs) == 0 {
		return &Lease{rl: rl}, nil, nil
	}
	for _, r := range reqs {
		if err := store.ValidateIdentifier(r.EntityID, "entity_id"); err != nil {
			return nil, nil, err
		}
		if err := store.ValidateAcquiredResource(r.Resource); err != nil {
			return nil, nil, err
		}
		if err := validateAmounts(r.Consume, false); err != nil {
			return nil, nil, err
		}
		if r.Limits != nil {
			if err := validateLimits(r.Limits); err != nil {
				return nil, nil, err
			}
		}
	}
	if err := rl.enter(); err != nil {
		return nil, nil, err
	}
	defer rl.exit()
	start := rl.nowMs()
	var (
		lease    *Lease
		statuses [][]LimitStatus
		decided  bool
		dctx     = ctx
	)
	if rl.store.brk.rejecting() {
		err = ErrCircuitOpen
	} else {
		var cancel context.CancelFunc
		if dctx, cancel = rl.decisionContext(ctx, o); cancel != nil {
			decided = true
			defer cancel()
		}
		if lease, statuses, err = rl.acquireAll(dctx, reqs, o, false); err == nil || errors.Is(err, ErrRateLimited) {
			if err == nil {
				lease.stamp(start)
			}
			return lease, statuses, err
		}
	}
	if allow, err := rl.decide(ctx, dctx, decided, err, o, reqs[0].EntityID, reqs[0].Resource); !allow {
		return nil, nil, err
	}
	return &Lease{rl: rl, noop: true}, nil, nil
}

// acquireAll plans the batch, tries the store's atomic speculative batch,
// and falls back to reading and writing every item.
//
// pair is set for an acquire of one request (batchAcquire): a plan of one
// or two items may then take the pair path (speculativePair) instead of
// the atomic batch.
func (rl *RateLimiter) acquireAll(ctx context.Context, reqs []AcquireRequest, o acquireOptions, pair bool) (*Lease, [][]LimitStatus, error) {
	items, charged, err := rl.planBatch(ctx, reqs, o)
	if err != nil {
		return nil, nil, err
	}
	if len(items) == 0 {
		return &Lease{rl: rl}, make([][]LimitStatus, len(reqs)), nil
	}
	per := func(statuses [][]LimitStatus) [][]LimitStatus {
		if statuses == nil {
			return nil
		}
		out := make([][]LimitStatus, len(reqs))
		for i, idx := range charged {
			for _, it := range idx {
				out[i] = append(out[i], statuses[it]...)
			}
		}
		return out
	}
	if o.readFirst {
		// A switch back: the buckets are read first (switchedBackIn).
	} else if pair && rl.onPairPath(items) {
		lease, statuses, decided, err := rl.speculativePair(ctx, items)
		if !decided && err == nil && rl.addSlotGens(ctx, items) {
			// The generations' limits the items lacked are in them now.
			lease, statuses, decided, err = rl.speculativePair(ctx, items)
		}
		if decided || err != nil {
			lease, err = rl.ownBucketFinish(items, lease, statuses, err)
			return lease, per(statuses), err
		}
	} else if rl.store.batch != nil && rl.speculative {
		lease, statuses, decided, err := rl.speculativeAll(ctx, items)
		if decided || err != nil {
			lease, err = rl.ownBucketFinish(items, lease, statuses, err)
			return lease, per(statuses), err
		}
	}
	for attempt := 0; ; attempt++ {
		lease, statuses, err := rl.slowAll(ctx, items)
		if !errors.Is(err, errReread) {
			lease, err = rl.ownBucketFinish(items, lease, statuses, err)
			return lease, per(statuses), err
		}
		again, wait, err := rl.afterLostRace(ctx, attempt)
		if err != nil {
			return nil, nil, err
		}
		if !again {
			var all []LimitStatus
			for i, st := range statuses {
				statuses[i] = contendedStatuses(st, wait)
				all = append(all, statuses[i]...)
			}
			return nil, per(statuses), newRateLimitExceededError(all)
		}
	}
}

// planBatch resolves each request's limits (and its parent's) and merges
// the requests into bucket items. charged lists, per request, the items it
// charges.
func (rl *RateLimiter) planBatch(ctx context.Context, reqs []AcquireRequest, o acquireOptions) ([]*batchItem, [][]int, error) {
	var items []*batchItem
	index := map[store.BucketKey]int{}
	charged := make([][]int, len(reqs))
	add := func(i int, entityID, resource string, limits []Limit, rs resolved, base string, consume Consume, cal *Limit, nextMs int64) error {
		key := store.BucketKey{EntityID: entityID, Resource: resource}
		if n, ok := index[key]; ok {
			it := items[n]
			if !slices.Equal(it.group.limits, limits) {
				return store.NewValidationError(ErrValidation, "requests", entityID+"/"+resource,
					"two requests charge this bucket with different limits")
			}
			for name, v := range consume {
				it.consume[name] = addTokensSat(it.consume[name], v)
			}
			if !slices.Contains(charged[i], n) {
				charged[i] = append(charged[i], n)
			}
			return nil
		}
		if len(items) >= MaxAcquireAllItems {
			return store.NewValidationError(ErrValidation, "requests", fmt.Sprint(len(reqs)),
				fmt.Sprintf("more than %d bucket items in one batch", MaxAcquireAllItems))
		}
		index[key] = len(items)
		charged[i] = append(charged[i], len(items))
		g := entityGroup{entityID: entityID, resource: resource, limits: limits, source: rs.source, switches: rs.switches}
		if cal != nil {
			// A period's or a generation's bucket expires; a balance never.
			g.expireAtMs = kindOf(*cal).expireAt(*cal, nextMs)
		}
		items = append(items, &batchItem{
			group:   g,
			consume: namedIn(consume, limits),
			cal:     cal,
			nextMs:  nextMs,
			base:    base,
		})
		return nil
	}
	// addAll adds the items of one entity's limits: one bucket, or with
	// calendar or prepaid limits the rolling bucket and their own buckets.
	now := rl.now()
	addAll := func(i int, entityID, resource string, rs resolved, consume Consume) error {
		if !hasOwnBucket(rs.limits) {
			return add(i, entityID, resource, rs.limits, rs, resource, consume, nil, 0)
		}
		return ownBucketItems(entityID, resource, rs.limits, consume, now, rl.slotGenMs(),
			func(res string, ls []Limit, c Consume, cal *Limit, nextMs int64) error {
				return add(i, entityID, res, ls, rs, resource, c, cal, nextMs)
			})
	}
	for i, r := range reqs {
		ro := o
		if r.Limits != nil {
			ro.limits, ro.override = r.Limits, true
		}
		levels, err := rl.planChain(ctx, r.EntityID, r.Resource, ro)
		if err != nil {
			return nil, nil, err
		}
		if err := checkPlanNames(levels, r.EntityID, r.Resource, r.Consume); err != nil {
			return nil, nil, err
		}
		// Each entity of the chain: its (entity, resource) bucket, then
		// its entity-wide bucket.
		for _, lv := range levels {
			if len(lv.res.limits) > 0 {
				if err := addAll(i, lv.entityID, r.Resource, lv.res, r.Consume); err != nil {
					return nil, nil, err
				}
			}
			if len(lv.wide.limits) > 0 {
				if err := addAll(i, lv.entityID, AllResources, lv.wide, r.Consume); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return items, charged, nil
}

// ownBucketFinish ends a batch with period or balance buckets (and with
// in-flight slots: slotsFinish): the statuses of such a bucket are shown
// as its calendar or prepaid limit's (calendarStatuses), a refusal is rebuilt from them (the RetryAfter of a
// spent budget is the time until the next period, of a short balance
// BalanceRetryAfter), and the lease's entries on these buckets hold their
// calendar or prepaid limit (for its statuses and refunds: no refill). A
// batch without such limits passes as it is.
func (rl *RateLimiter) ownBucketFinish(items []*batchItem, lease *Lease, statuses [][]LimitStatus, err error) (*Lease, error) {
	lease, err = rl.slotsFinish(items, lease, statuses, err)
	if !slices.ContainsFunc(items, func(it *batchItem) bool { return it.cal != nil }) {
		return lease, err
	}
	if statuses != nil {
		nowMs := rl.nowMs()
		for i, it := range items {
			if it.cal != nil && i < len(statuses) {
				calendarStatuses(statuses[i], it.cal, it.nextMs, nowMs)
			}
		}
		if rle := (*RateLimitExceededError)(nil); errors.As(err, &rle) {
			var all []LimitStatus
			for _, st := range statuses {
				all = append(all, st...)
			}
			err = newRateLimitExceededError(all)
		}
	}
	if lease == nil {
		return nil, err
	}
	for _, it := range items {
		if it.cal == nil {
			continue
		}
		for _, e := range lease.entries {
			if e.key.EntityID == it.group.entityID && e.key.Resource == it.group.resource && e.limit.Name == it.cal.Name {
				e.limit = *it.cal
			}
		}
	}
	return lease, err
}

// namedIn returns the amounts of c whose names limits have: what a
// bucket of the plan is charged (a name is charged in every bucket that
// has a limit of that name, and only there).
func namedIn(c Consume, limits []Limit) Consume {
	out := make(Consume, len(limits))
	for _, l := range limits {
		if v, ok := c[l.Name]; ok {
			out[l.Name] = v
		}
	}
	return out
}

// addTokensSat returns a+b saturated at the range of amounts.
func addTokensSat(a, b int64) int64 { return min(max(bucketmath.AddSat(a, b), -maxAmount), maxAmount) }

// speculativeAll is the batch's fast path: one atomic conditional write of
// every item. decided is false when the read-then-write path must decide
// (an item is missing, expired or holds other limits, or a refill would
// cover what is short).
func (rl *RateLimiter) speculativeAll(ctx context.Context, items []*batchItem) (*Lease, [][]LimitStatus, bool, error) {
	now := rl.nowMs()
	reqs := make([]store.SpeculativeRequest, len(items))
	for i, it := range items {
		reqs[i] = store.SpeculativeRequest{Key: it.group.key(), Consume: it.consume, Limits: it.group.limits, NowMs: now}
	}
	if rl.store.pending != nil {
		// Background commits of these items are written first.
		for _, r := range reqs {
			if err := rl.store.settle(ctx, r.Key); err != nil {
				return nil, nil, false, err
			}
		}
	}
	results, err := detached(&rl.bg, ctx, false, func(ctx context.Context) ([]store.SpeculativeResult, error) {
		return rl.store.speculativeConsumeAll(ctx, reqs)
	}, func(results []store.SpeculativeResult, err error) {
		if err == nil && len(results) > 0 && results[0].Applied {
			for i, it := range items {
				rl.giveBack(reqs[i].Key, incarnationOf(results[i]), it.consume, it.group.limits)
			}
		}
	})
	if err != nil {
		return nil, nil, false, err
	}
	statuses := make([][]LimitStatus, len(items))
	if len(results) > 0 && results[0].Applied {
		lease := &Lease{rl: rl}
		for i, it := range items {
			var entries []*leaseEntry
			entries, statuses[i] = appliedItem(results[i], it, now)
			lease.entries = append(lease.entries, entries...)
		}
		return lease, statuses, true, nil
	}
	// Refused: decide from the items as they were, refilled to now, the
	// way the read-then-write path would.
	var all []LimitStatus
	exceeded := false
	for i, it := range items {
		switch results[i].Reason {
		case store.RefusedBucketMissing, store.RefusedExpired, store.RefusedLimitMissing, store.RefusedLimitsChanged, store.RefusedRefillDue:
			return nil, nil, false, nil
		}
		g := it.group
		g.bucket = results[i].Bucket
		_, st, ex := consumeGroup(g, g.resource, it.consume, now)
		statuses[i] = st
		all = append(all, st...)
		exceeded = exceeded || ex
	}
	if !exceeded {
		return nil, nil, false, nil
	}
	return nil, statuses, true, newRateLimitExceededError(all)
}

// appliedItem returns the lease entries of item it, whose speculative
// write res applied at now, and its statuses: Available is what the item
// held before the write, refilled to now.
func appliedItem(res store.SpeculativeResult, it *batchItem, now int64) ([]*leaseEntry, []LimitStatus) {
	entries := specEntries(res, it.consume, it.group.limits)
	var statuses []LimitStatus
	for _, e := range entries {
		before := e.state
		before.TokensMilli = bucketmath.AddMilli(before.TokensMilli, e.consumed)
		statuses = append(statuses, LimitStatus{
			EntityID: e.key.EntityID, Resource: e.key.Resource, LimitName: e.limit.Name, Limit: e.limit,
			Available: calculateAvailable(before, now), Requested: e.consumed,
		})
	}
	return entries, statuses
}

// slowAll reads every item and its entity record in one round trip,
// refills and consumes locally, and writes every item in one atomic write
// under the refill-timestamp locks.
func (rl *RateLimiter) slowAll(ctx context.Context, items []*batchItem) (*Lease, [][]LimitStatus, error) {
	var ids []string
	keys := make([]store.BucketKey, len(items))
	for i, it := range items {
		keys[i] = it.group.key()
		if !slices.Contains(ids, it.group.entityID) {
			ids = append(ids, it.group.entityID)
		}
	}
	metas, buckets, err := rl.store.loadBuckets(ctx, ids, keys)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire all: read buckets: %w", err)
	}
	now := rl.nowMs()
	lease := &Lease{rl: rl}
	groups := make([]entityGroup, len(items))
	statuses := make([][]LimitStatus, len(items))
	var all []LimitStatus
	exceeded := false
	for i, it := range items {
		g := it.group
		g.bucket = buckets[keys[i]]
		if m, ok := metas[g.entityID]; ok {
			g.meta = &m
		}
		if err := rl.carrySwitches(ctx, &g, it.base, it.cal, now); err != nil {
			return nil, nil, err
		}
		groups[i] = g
		entries, st, ex := consumeGroup(g, g.resource, it.consume, now)
		lease.entries = append(lease.entries, entries...)
		statuses[i] = st
		all = append(all, st...)
		exceeded = exceeded || ex
	}
	if exceeded {
		if err := rl.storeLimitChange(ctx, lease, groups); err != nil {
			return nil, nil, err
		}
		return nil, statuses, newRateLimitExceededError(all)
	}
	if err := rl.commitInitial(ctx, lease, groups); err != nil {
		if errors.Is(err, errReread) {
			return nil, statuses, err // lost a race: acquireAll reads again
		}
		return nil, nil, err
	}
	rl.dropEndedSlots(ctx, groups)
	return lease, statuses, nil
}

// batchAcquire is an acquire on the batch path, an AcquireAll of every
// bucket it charges, all or nothing: when its limits (the entity's or an
// ancestor's) hold a calendar or prepaid limit, the rolling bucket and
// each charged period or balance bucket; when its chain has entity-wide
// limits, their buckets too; when its cascade charges more than the
// parent, the bucket of every entity of the chain. A plan of one or two
// items may take the pair path (see onPairPath), more are one atomic
// step.
func (rl *RateLimiter) batchAcquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (*Lease, error) {
	lease, _, err := rl.acquireAll(ctx, []AcquireRequest{{EntityID: entityID, Resource: resource, Consume: consume}}, o, true)
	return lease, err
}
