// Layer 4, mechanics: the batch path: the items of an acquire's plan in
// one atomic step, the store's speculative batch (shapeBatch) or a read
// of every item then one atomic write (shapeExact), and the end of every
// plan of items (ownBucketFinish).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// exactItems is the read-then-write of a plan's items (shapeExact, and
// the fallback of the pair and the speculative batch): read every item,
// decide, and write them all in one atomic write (slowAll); read and
// decide again after a lost race (afterLostRace). statuses are per item.
func (rl *RateLimiter) exactItems(ctx context.Context, items []*batchItem) (*Lease, [][]LimitStatus, error) {
	for attempt := 0; ; attempt++ {
		lease, statuses, err := rl.slowAll(ctx, items)
		if !errors.Is(err, errReread) {
			lease, err = rl.ownBucketFinish(items, lease, statuses, err)
			return lease, statuses, err
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
			return nil, statuses, newRateLimitExceededError(all)
		}
	}
}

// ownBucketFinish ends a batch with period or balance buckets (and with
// in-flight slots: slotsFinish): the statuses of such a bucket are shown
// as its calendar or prepaid limit's (calendarStatuses), a refusal is
// rebuilt from them (the RetryAfter of a spent budget is the time until
// the next period, of a short balance BalanceRetryAfter), and the lease's
// entries on these buckets hold their calendar or prepaid limit (for its
// statuses and refunds: no refill). A batch without such limits passes as
// it is.
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

// speculativeAll is the batch's fast path: one atomic conditional write of
// every item. decided is false when the read-then-write path must decide
// (an item is missing, expired or holds other limits, or a refill would
// cover what is short).
func (rl *RateLimiter) speculativeAll(ctx context.Context, items []*batchItem) (*Lease, [][]LimitStatus, bool, error) {
	now := rl.nowMs()
	reqs := make([]store.SpeculativeRequest, len(items))
	for i, it := range items {
		reqs[i] = it.write(now)
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
			for i, r := range reqs {
				rl.giveBack(r.Key, incarnationOf(results[i]), r.Consume, r.Limits)
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
		st, ex, decides := refusedItem(results[i], it, now)
		if !decides {
			return nil, nil, false, nil
		}
		statuses[i] = st
		all = append(all, st...)
		exceeded = exceeded || ex
	}
	if !exceeded {
		return nil, nil, false, nil
	}
	return nil, statuses, true, newRateLimitExceededError(all)
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
			return nil, statuses, err // lost a race: exactItems reads again
		}
		return nil, nil, err
	}
	rl.dropEndedSlots(ctx, groups)
	return lease, statuses, nil
}
