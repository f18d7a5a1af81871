// Layer 4, mechanics: the pair path. An acquire whose plan charges one or
// two bucket items (an (entity, resource) bucket and the entity-wide
// bucket, or a calendar period's or a prepaid balance's bucket) writes
// each item with its own conditional write, both at once, instead of one
// atomic batch, on a repository where that is cheaper (DynamoDB: two
// parallel UpdateItems cost half the write units of a TransactWriteItems
// of the same items, and less time). It has the cascade pair's semantics:
// an acquire is admitted when both writes applied; when one is refused,
// the other is given back before the acquire answers.

package limiter

import (
	"context"
	"errors"

	"github.com/zaelimiter/limiter/store"
)

// speculativePair is the fast path of a plan of one or two items
// (shapePair, see itemsShape): one conditional write per item, in one round trip, with
// the results of speculativeAll: decided is false when the read-then-write
// batch must decide (an item is missing, expired or holds other limits,
// or a refill would cover what is short). Nothing stays taken unless the
// lease is returned.
//
// When one item refuses for want of tokens while the write to the other
// applied (and was given back), the refusal may be owed to what
// concurrent acquires held of the refusing item for a moment, each
// refused in turn by the item this one held: as on the cascade's pair,
// the acquire pauses briefly, reads the refusing item, and runs again
// when it now covers the request (at most mixedRetries times).
func (rl *RateLimiter) speculativePair(ctx context.Context, items []*batchItem) (*Lease, [][]LimitStatus, bool, error) {
	for round := 0; ; round++ {
		lease, statuses, decided, refused, err := rl.pairOnce(ctx, items)
		if refused < 0 || round >= mixedRetries {
			return lease, statuses, decided, err
		}
		if !rl.pairAgain(ctx, items[refused]) {
			return lease, statuses, decided, err
		}
	}
}

// pairOnce is one round of speculativePair. refused is the index of the
// item whose refusal decided a mixed outcome (the other item's write
// applied and was given back), else -1.
func (rl *RateLimiter) pairOnce(ctx context.Context, items []*batchItem) (lease *Lease, statuses [][]LimitStatus, decided bool, refused int, err error) {
	now := rl.nowMs()
	var reqs [pairItems]store.SpeculativeRequest
	for i, it := range items {
		reqs[i] = it.write(now)
	}
	var results [pairItems]store.SpeculativeResult
	if len(items) == 1 {
		results[0], err = rl.specConsume(ctx, reqs[0])
	} else {
		results[0], results[1], err = rl.consumePair(ctx, reqs[0], reqs[1])
	}
	if err != nil {
		return nil, nil, false, -1, err // consumePair gave back what applied
	}
	res := results[:len(items)]
	statuses = make([][]LimitStatus, len(items))
	applied := 0
	for _, r := range res {
		if r.Applied {
			applied++
		}
	}
	if applied == len(items) {
		lease = &Lease{rl: rl}
		for i, it := range items {
			var entries []*leaseEntry
			entries, statuses[i] = appliedItem(res[i], it, now)
			lease.entries = append(lease.entries, entries...)
		}
		return lease, statuses, true, -1, nil
	}
	// A refusal: what applied is given back before anything is decided.
	var undo []error
	for i, r := range res {
		if r.Applied {
			undo = append(undo, rl.undo(ctx, r, reqs[i].Consume, reqs[i].Limits))
		}
	}
	if err := errors.Join(undo...); err != nil {
		return nil, nil, false, -1, err
	}
	// Decide from the refused items as they were, refilled to now, the
	// way the read-then-write batch would; an applied item shows what it
	// held before its write.
	var all []LimitStatus
	refused = -1
	for i, it := range items {
		if res[i].Applied {
			_, statuses[i] = appliedItem(res[i], it, now)
			all = append(all, statuses[i]...)
			continue
		}
		st, ex, decides := refusedItem(res[i], it, now)
		if !decides {
			return nil, nil, false, -1, nil
		}
		statuses[i] = st
		all = append(all, st...)
		if ex && refused < 0 {
			refused = i
		}
	}
	if refused < 0 {
		return nil, nil, false, -1, nil
	}
	if applied == 0 {
		refused = -1 // no write of this acquire held the refusing item's tokens from others
	}
	return nil, statuses, true, refused, newRateLimitExceededError(all)
}

// pairAgain decides whether an acquire refused by it after a mixed
// outcome runs again: after pauseThenRead, when the item now covers its
// amounts.
func (rl *RateLimiter) pairAgain(ctx context.Context, it *batchItem) bool {
	b := rl.pauseThenRead(ctx, it.group.key())
	if b == nil {
		return false
	}
	ok, _ := wouldRefillSatisfy(b.States, it.consume, rl.nowMs())
	return ok
}
