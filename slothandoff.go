// Layer 4, mechanics: a slot handed from a lease that ends to a Wait of
// the same limiter queued for the same slots.
//
// When a lease that holds in-flight slots ends (Commit, Rollback) and a
// Wait of its limiter is queued for some of the slots it holds (the same
// in-flight limit of the same item, the same amount), those slots go to
// that Wait instead of back to the store (which Wait: slotWaiters.handTo):
// the ending lease does not write their give-back, and the Wait's acquire
// does not write their take. The
// store's count of slots held does not change, so no cap is exceeded: the
// slots move from one call of the process to the next. On DynamoDB, where
// every acquire and commit of a cascade writes the organisation's item and
// that item's writes are the fleet's bound, a hand-off removes two writes
// of it per call.
//
// The Wait's acquire decides whether it takes the slots: its plan, resolved
// from the limits in force then, must charge every handed slot, with its
// amount, in the generations it would take (the current one and the
// next); it takes its other slots from the store as usual. Otherwise
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

// handed marks g as what the queues of Waits carry (slotsHanded).
func (*slotGift) handed() {}

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

// takeFrom makes plan p take the slots of g instead of charging them,
// when its items charge every one of them (take) in rl's current slot
// generation. A nil g (an acquire handed no slots) leaves p as it is.
func (g *slotGift) takeFrom(p *acquirePlan, rl *RateLimiter) {
	if g == nil || p.items == nil {
		return
	}
	if p.items = g.take(p.items, rl.slotGen()); len(p.items) != len(p.charged[0]) {
		p.charged[0] = p.charged[0][:0]
		for i := range p.items {
			p.charged[0] = append(p.charged[0], i)
		}
	}
	if len(p.items) == 0 {
		p.shape = shapeNone // the handed slots were all it charged
	}
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

// adoptGift makes lease, the lease of an acquire that was handed the
// slots of g, hold them, renew them and give them back as its own, when
// its plan took them (take) and it is a lease that holds anything. It
// reports whether it did; if not, the caller gives them back.
func (rl *RateLimiter) adoptGift(lease *Lease, g *slotGift) bool {
	if !g.used || lease == nil || lease.noop {
		return false
	}
	k := &slotKeeper{rl: rl, claims: g.claims, covered: -1 << 62, takenMs: g.takenMs}
	for _, e := range g.entries {
		_, gen, _ := slotOf(e.limit)
		k.covered = max(k.covered, gen)
	}
	if own := lease.slots; own != nil {
		// The acquire took slots of its own too: one keeper renews them
		// all, from the earlier coverage.
		lease.entries = append(lease.entries, own.halt()...)
		k.claims = append(slices.Clip(k.claims), own.claims...)
		k.covered, k.takenMs = min(k.covered, own.covered), min(k.takenMs, own.takenMs)
	}
	lease.entries = append(lease.entries, g.entries...)
	rl.startKeeper(lease, k)
	return true
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

// handTo hands slots of claims (the slots of a lease that ends) to a
// waiter queued on their items, and returns what it handed (gift(the
// slots it takes, wantedOf)), or nil. The waiter is the one waiting
// longest (since its first refusal) among those that need, besides the
// slots they share with claims, only items where this limiter's leases
// hold fewer slots than it would leave on the ending lease's own items
// (the calls of a key that holds few slots of its organisation take one
// from a key that holds many); else the one waiting longest among those
// that take every slot of claims (the next call of the same key); else the
// one waiting longest. When the one waiting longest takes none of them
// (a Wait with options, or of other amounts), nobody is handed any: the
// slots go back to the store and its queue is woken as usual. Within a
// process the keys of an organisation thus share its slots evenly, to one
// call, while slots go from call to call of one key.
func (s *slotWaiters) handTo(claims []slotClaim, gift func([]slotClaim) *slotGift) *slotGift {
	s.mu.Lock()
	var first, whole, even *slotWaiter
	before := func(a, b *slotWaiter) bool {
		return b == nil || a.since.Before(b.since) || a.since.Equal(b.since) && a.seq < b.seq
	}
	for _, c := range claims {
		for _, w := range s.q[slotWaitKey{c.key.EntityID, c.key.Resource}] {
			if w.gift != nil {
				continue
			}
			if before(w, first) {
				first = w
			}
			part := wantedOf(claims, w.want)
			if len(part) == 0 {
				continue
			}
			if len(part) == len(claims) {
				if before(w, whole) {
					whole = w
				}
			} else if before(w, even) && s.evener(claims, w.want) {
				even = w
			}
		}
	}
	to := even
	if to == nil {
		to = whole
	}
	if to == nil {
		to = first
	}
	var g *slotGift
	if first != nil && len(wantedOf(claims, first.want)) == 0 {
		// The longest-waiting Wait takes none of the slots (options,
		// other amounts): they go back to the store, and it is woken.
		to = nil
	}
	if to != nil {
		g = gift(wantedOf(claims, to.want))
		to.gift = g
		s.remove(to, to.keys)
	}
	s.mu.Unlock()
	if g != nil {
		to.wake()
	}
	return g
}

// evener reports whether a waiter taking the slots of want, handed those
// of claims it shares (the slots of a lease that ended, no longer counted
// in held), makes the slots this limiter's leases hold more even: on every
// item it takes slots of outside claims, the leases hold at least two
// fewer than on the items of claims it does not take (one fewer would
// only swap the two). s.mu must be held.
func (s *slotWaiters) evener(claims []slotClaim, want []slotRead) bool {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	var mine, theirs int64 = 0, -1
	for _, c := range claims {
		if !slices.ContainsFunc(want, func(r slotRead) bool { return r.key == c.key }) {
			theirs = max(theirs, s.held[c.key])
		}
	}
	for _, r := range want {
		if !slices.ContainsFunc(claims, func(c slotClaim) bool { return c.key == r.key }) {
			mine = max(mine, s.held[r.key])
		}
	}
	return mine+1 < theirs
}

// hold counts the slots of claims as held by a lease of the limiter (n =
// 1) or no longer (n = -1).
func (s *slotWaiters) hold(claims []slotClaim, n int64) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if s.held == nil {
		s.held = make(map[store.BucketKey]int64)
	}
	for _, c := range claims {
		if s.held[c.key] += n * c.amount; s.held[c.key] <= 0 {
			delete(s.held, c.key)
		}
	}
}
