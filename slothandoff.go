// Layer 4, mechanics: a slot handed from a lease that ends to a Wait of
// the same limiter queued for the same slots.
//
// When a lease that holds in-flight slots ends (Commit, Rollback) and a
// Wait of its limiter is queued for exactly the slots it holds (the same
// in-flight limits of the same items, the same amounts), the slots go to
// that Wait instead of back to the store: the ending lease does not write
// their give-back, and the Wait's acquire does not write their take. The
// store's count of slots held does not change, so no cap is exceeded: the
// slots move from one call of the process to the next. On DynamoDB, where
// every acquire and commit of a cascade writes the organisation's item and
// that item's writes are the fleet's bound, a hand-off removes two writes
// of it per call.
//
// The Wait's acquire decides whether it takes the slots: its plan, resolved
// from the limits in force then, must charge exactly the handed slots in
// the generations it would take (the current one and the next); otherwise
// (a limit changed kind or amount, the generation moved on) it takes what
// its plan says and the handed slots are given back to the store. A Wait
// that ends without an acquire (its context, Close) gives them back too.
// The Wait's lease then renews and gives back the handed slots as its own.
//
// A process hands slots from call to call for at most one slot TTL after it
// took them from the store; the next lease to end gives them back to the
// store, where the Waits of other processes find them: a process does not
// keep the slots it holds for as long as it has Waits.

package limiter

import (
	"context"
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// slotGift is the slots of a lease that ended, handed to a Wait.
type slotGift struct {
	claims []slotClaim
	// entries are the lease's slot entries of the generations that had
	// not ended when it was handed.
	entries []*leaseEntry
	// takenMs is when the slots were taken from the store (epoch ms).
	takenMs int64
	// used is set by the acquire whose plan took the slots (take).
	used bool
}

// wantedOf returns the claims of claims that a Wait taking the slots of
// want takes too: the same in-flight limit of the same item, the same
// amount.
func wantedOf(claims []slotClaim, want []slotRead) []slotClaim {
	var part []slotClaim
	for _, c := range claims {
		if slices.Contains(want, slotRead{slotViewKey{c.key, c.limit.Name}, c.amount}) {
			part = append(part, c)
		}
	}
	return part
}

// handOffSlots hands slots of ls, a lease that ends (its keeper k halted,
// its entries of ended generations dropped; cur the current generation),
// to the Wait of the limiter queued longest on their items, when that Wait
// takes some of them (slotWaiters.handTo): ls then no longer holds those
// and writes no give-back of them; it gives back the others.
func (rl *RateLimiter) handOffSlots(ls *Lease, k *slotKeeper, cur int64) {
	if k.lost || rl.nowMs()-k.takenMs >= 2*rl.slotGenMs() || rl.gate.life.Err() != nil || !rl.slotWaits.anyWaiting() {
		return
	}
	for _, c := range k.claims {
		for _, gen := range []int64{cur, cur + 1} {
			i := slices.IndexFunc(ls.entries, func(e *leaseEntry) bool {
				l, g, ok := slotOf(e.limit)
				return ok && g == gen && e.key == c.key && l.Name == c.limit.Name
			})
			if i < 0 || ls.entries[i].consumed != c.amount || ls.entries[i].durable() != ls.entries[i].held() {
				return // not covered through the next generation, or changed
			}
		}
	}
	// handed are the entries handed over: the gift is the Wait's as soon
	// as handTo returns.
	var handed []*leaseEntry
	gift := rl.slotWaits.handTo(k.claims, func(part []slotClaim) *slotGift {
		for _, e := range ls.entries {
			l, gen, ok := slotOf(e.limit)
			if ok && gen >= cur && slices.ContainsFunc(part, func(c slotClaim) bool { return c.key == e.key && c.limit.Name == l.Name }) {
				handed = append(handed, e)
			}
		}
		return &slotGift{claims: part, entries: slices.Clone(handed), takenMs: k.takenMs}
	})
	if gift == nil {
		return
	}
	ls.entries = slices.DeleteFunc(ls.entries, func(e *leaseEntry) bool { return slices.Contains(handed, e) })
}

// slotClaimKeys returns the items of claims.
func slotClaimKeys(claims []slotClaim) []slotWaitKey {
	var keys []slotWaitKey
	for _, c := range claims {
		if k := (slotWaitKey{c.key.EntityID, c.key.Resource}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// withSlotGift makes an acquire's plan take the slots of g instead of
// charging them (see slotGift.take).
func withSlotGift(g *slotGift) AcquireOption {
	return func(o *acquireOptions) { o.gift = g }
}

// take removes from items, the plan of one acquire in generation gen, the
// slots g holds, when the plan charges every one of them (the same
// in-flight limit of the same item with the same amount, in generations
// gen and gen+1, both held by g), and marks g used; items left without a
// limit are dropped. The plan's other slots stay: the acquire takes them.
// When the plan does not charge all of g's slots, items are returned as
// they are.
func (g *slotGift) take(items []*batchItem, gen int64) []*batchItem {
	covered := func(it *batchItem, l store.Limit) bool {
		base, lg, ok := slotOf(l)
		return ok && it.consume[l.Name] > 0 && slices.ContainsFunc(g.entries, func(e *leaseEntry) bool {
			eb, eg, _ := slotOf(e.limit)
			return e.key == it.group.key() && eg == lg && eb.Name == base.Name && e.consumed == it.consume[l.Name]
		})
	}
	n := 0
	for _, it := range items {
		for _, l := range it.group.limits {
			if _, lg, _ := slotOf(l); (lg == gen || lg == gen+1) && covered(it, l) {
				n++
			}
		}
	}
	if n != 2*len(g.claims) {
		return items
	}
	g.used = true
	g.entries = slices.DeleteFunc(slices.Clone(g.entries), func(e *leaseEntry) bool { _, eg, _ := slotOf(e.limit); return eg < gen })
	out := make([]*batchItem, 0, len(items))
	for _, it := range items {
		var limits []store.Limit
		consume := make(Consume, len(it.consume))
		for _, l := range it.group.limits {
			if covered(it, l) {
				continue
			}
			limits = append(limits, l)
			if v, ok := it.consume[l.Name]; ok {
				consume[l.Name] = v
			}
		}
		if len(limits) == 0 {
			continue
		}
		c := *it
		c.group.limits, c.consume = limits, consume
		out = append(out, &c)
	}
	return out
}

// acquireGift is the acquire of a Wait handed the slots of g: its plan
// takes them (take) when it charges exactly them, and its lease then
// holds them, renews them and gives them back as its own. Slots its plan
// did not take, or that its acquire could not use (refused, failed, a
// no-op lease), are given back to the store.
func (rl *RateLimiter) acquireGift(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption, g *slotGift) (*Lease, error) {
	lease, err := rl.Acquire(ctx, entityID, resource, consume, append(slices.Clip(opts), withSlotGift(g))...)
	if err == nil && g.used && lease != nil && !lease.noop {
		k := &slotKeeper{rl: rl, claims: g.claims, covered: -1 << 62, takenMs: g.takenMs}
		for _, e := range g.entries {
			_, gen, _ := slotOf(e.limit)
			k.covered = max(k.covered, gen)
		}
		if own := lease.slots; own != nil {
			// The acquire took slots of its own too: one keeper renews
			// them all, from the earlier coverage.
			lease.entries = append(lease.entries, own.halt()...)
			k.claims = append(slices.Clip(k.claims), own.claims...)
			k.covered, k.takenMs = min(k.covered, own.covered), min(k.takenMs, own.takenMs)
		}
		lease.entries = append(lease.entries, g.entries...)
		rl.startKeeper(lease, k)
		return lease, nil
	}
	rl.giveBackGift(ctx, g)
	return lease, err
}

// giveBackGift gives the slots of g back to the store: a Wait that was
// handed them did not use them.
func (rl *RateLimiter) giveBackGift(ctx context.Context, g *slotGift) {
	if g == nil || len(g.entries) == 0 {
		return
	}
	ls := &Lease{rl: rl, entries: g.entries}
	if err := ls.Commit(context.WithoutCancel(ctx)); err != nil {
		rl.logGiveBackFailed(ctx, g.claims[0].key, err)
	}
}
