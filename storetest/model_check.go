package storetest

import (
	"cmp"
	"math/big"
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// The model test's checks of the limiter and the store against the
// reference (refModel).

// afterOp checks the store after an operation, and Available of entity
// (with the limits of override, or the stored ones) when entity is set.
func (m *modelRun) afterOp(entity string, override []store.Limit) {
	m.t.Helper()
	if m.skipChecks || !m.storeChecks {
		m.skipChecks = false
		return
	}
	m.checkStore()
	if entity != "" {
		m.checkAvailable(entity, override)
	}
}

// keys returns every bucket item the run may have written, sorted.
func (m *modelRun) keys() []store.BucketKey {
	var keys []store.BucketKey
	for _, e := range m.entities {
		keys = append(keys, m.key(e), m.wideKey(e))
	}
	for k := range m.ref.items {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b store.BucketKey) int {
		return cmp.Or(cmp.Compare(a.EntityID, b.EntityID), cmp.Compare(a.Resource, b.Resource))
	})
	return keys
}

// slackOf is what a stored balance of key's limit name may exceed the
// reference's by: the positive adjustments committed in the background
// that the limiter may not have written yet.
func (m *modelRun) slackOf(key store.BucketKey, name string) *big.Int {
	if s := m.slack[key][name]; s != nil {
		return s
	}
	return new(big.Int)
}

// checkStore compares every bucket item of the run with the reference. It
// reads them in one LoadBuckets, which returns what GetBucket returns for
// each key (missing ones absent) in one round trip.
func (m *modelRun) checkStore() {
	m.t.Helper()
	now := m.nowMs()
	keys := m.keys()
	_, stored, err := m.repo.LoadBuckets(m.ctx, nil, keys)
	if err != nil {
		m.fail("LoadBuckets of %d items: %v", len(keys), err)
	}
	for _, key := range keys {
		b := stored[key]
		it := m.ref.items[key]
		switch {
		case b == nil && it == nil:
			continue
		case b == nil:
			// A missing item (expired) is full when it is created again,
			// with totals from zero.
			for _, name := range it.names() {
				rb := it.limits[name]
				rb.refill(now)
				if m.checkBalances && rb.bal.Cmp(rb.capRat()) < 0 {
					m.fail("%s/%s vanished from the store (it would be created full: %s) while the exact bucket of %s holds %s",
						key.EntityID, key.Resource, milliString(big.NewInt(rb.p.capMilli)), name, ratString(rb.bal))
				}
			}
			for _, name := range it.names() {
				rb := it.limits[name]
				rb.tc.SetInt64(0)
				rb.tcMax.SetInt64(0)
			}
			it.vanished = true
			continue
		case it == nil:
			// An item no admitted acquire wrote (a refused cascade may
			// leave the child's, given back): it must be full and have
			// consumed nothing; the reference follows it.
			it = &refItem{key: key, limits: map[string]*refBucket{}}
			for _, s := range b.States {
				if view := implView(s, now); view.Cmp(big.NewInt(s.CapacityMilli)) != 0 || s.TotalConsumedMilli != 0 {
					m.fail("the store holds %s/%s, which no admitted acquire wrote, with %s=%s (consumed %s), want it full and unused",
						key.EntityID, key.Resource, s.LimitName, milliString(view), milliString(big.NewInt(s.TotalConsumedMilli)))
				}
				it.limits[s.LimitName] = newRefBucket(paramsOfState(s), now)
			}
			m.note("[%s appeared in the store, full]", key.EntityID)
			m.ref.items[key] = it
		}
		if b.ShardCount > 1 {
			m.fail("%s/%s has %d shards; the model reads shard 0 only", key.EntityID, key.Resource, b.ShardCount)
		}
		for _, name := range it.names() {
			m.checkLimit(key, name, b, it.limits[name], now)
		}
	}
}

// checkLimit compares one limit of a stored item with the reference.
func (m *modelRun) checkLimit(key store.BucketKey, name string, b *store.Bucket, rb *refBucket, now int64) {
	m.t.Helper()
	s, ok := b.State(name)
	if !ok {
		m.fail("%s/%s: the store lost limit %s", key.EntityID, key.Resource, name)
	}
	stored := paramsOfState(s)
	if want, ok := m.expect[key]; ok {
		i := slices.IndexFunc(want, func(l store.Limit) bool { return l.Name == name })
		if i >= 0 && stored != paramsOf(want[i]) {
			m.fail("%s/%s: limit %s is stored as %s, want %s (the limits the operation resolved)",
				key.EntityID, key.Resource, name, stored, paramsOf(want[i]))
		}
	}
	if stored != rb.p {
		// A change the limiter applied (a limit stored for the entity
		// is written to its bucket at once): follow it.
		m.note("[%s.%s follows the store's %s]", key.EntityID, name, stored)
		rb.change(stored, now)
	}
	rb.refill(now)
	if !m.checkBalances {
		return
	}
	view := new(big.Rat).SetInt(implView(s, now))
	slack := m.slackOf(key, name)
	bound := new(big.Rat).Add(rb.bal, new(big.Rat).SetInt(slack))
	if bound.Cmp(new(big.Rat).SetInt(new(big.Int).Quo(minInt64, big.NewInt(2)))) < 0 {
		// A debt near or beyond int64: the store saturates where the
		// reference may not (each sum of an operation saturates), and
		// refills from the saturated value; it must stay in debt.
		bound.SetInt64(-1)
	}
	if view.Cmp(bound) > 0 {
		extra := ""
		if slack.Sign() > 0 {
			extra = " plus " + milliString(slack) + " committed in the background"
		}
		m.fail("%s/%s %s: the store holds %s refilled to now (stored %s at +%dms), the exact bucket %s%s",
			key.EntityID, key.Resource, name, ratString(view), milliString(big.NewInt(s.TokensMilli)),
			s.LastRefillMs-Epoch.UnixMilli(), ratString(rb.bal), extra)
	}
	if m.bgPending {
		return
	}
	tc := big.NewInt(s.TotalConsumedMilli)
	if lo := clampInt64(rb.tc); tc.Cmp(lo) < 0 {
		m.fail("%s/%s %s: total consumed %s, below %s: the refunds exceed the rule (or the counter wrapped)",
			key.EntityID, key.Resource, name, milliString(tc), milliString(lo))
	}
	if hi := clampInt64(rb.tcMax); tc.Cmp(hi) > 0 {
		m.fail("%s/%s %s: total consumed %s, above %s, what was taken without any refund (or the counter wrapped)",
			key.EntityID, key.Resource, name, milliString(tc), milliString(hi))
	}
}

// checkAvailable compares RateLimiter.Available with the reference,
// which takes the limits the call resolves on a copy of its buckets.
func (m *modelRun) checkAvailable(entity string, override []store.Limit) {
	m.t.Helper()
	if !m.checkBalances {
		return
	}
	m.checkAvailableOf(m.key(entity), m.limitsFor(entity, override), override)
	if override == nil {
		if wide := m.wideFor(entity, nil); len(wide) > 0 {
			m.checkAvailableOf(m.wideKey(entity), wide, nil)
		}
	}
}

// checkAvailableOf is checkAvailable of one bucket, key, whose limits
// the call resolves.
func (m *modelRun) checkAvailableOf(key store.BucketKey, limits, override []store.Limit) {
	m.t.Helper()
	entity := key.EntityID
	avail, err := m.rl.Available(m.ctx, entity, key.Resource, acquireOpts(override)...)
	if err != nil {
		m.fail("available: %v", err)
	}
	now := m.nowMs()
	for _, l := range limits {
		got, ok := avail[l.Name]
		if !ok {
			m.fail("available %s: no %s in %v", entity, l.Name, avail)
		}
		var bound *big.Int
		if rb := m.ref.items[key].bucket(l.Name); rb == nil {
			bound = big.NewInt(l.Capacity)
		} else {
			hyp := rb.clone()
			hyp.change(paramsOf(l), now)
			hyp.bal.Add(hyp.bal, new(big.Rat).SetInt(m.slackOf(key, l.Name)))
			bound = floorRat(new(big.Rat).Quo(hyp.bal, big.NewRat(1000, 1)))
			if hyp.bal.Cmp(new(big.Rat).SetInt(minInt64)) < 0 {
				bound = big.NewInt(-1) // saturated debt (see checkLimit)
			}
		}
		if big.NewInt(got).Cmp(clampInt64(bound)) > 0 {
			m.fail("Available(%s) %s = %d, the exact bucket holds %s", entity, l.Name, got, bound)
		}
	}
}

// bucket returns the reference bucket of a limit, nil when the item or
// the limit does not exist.
func (it *refItem) bucket(name string) *refBucket {
	if it == nil {
		return nil
	}
	return it.limits[name]
}

// checkConsumed compares Lease.Consumed with what the lease took: equal
// to the sum of its amounts while no refund was asked (in millitokens,
// an int64, so the sum is clamped there), never above it.
func (m *modelRun) checkConsumed(ml *modelLease) {
	m.t.Helper()
	got := ml.lease.Consumed()
	taken := map[string]*big.Int{}
	refunds := map[string]bool{}
	for _, e := range ml.entries {
		if taken[e.name] == nil {
			taken[e.name] = new(big.Int)
		}
		taken[e.name].Add(taken[e.name], e.taken)
		refunds[e.name] = refunds[e.name] || e.refundAsked
	}
	for name, sum := range taken {
		// The lease holds millitokens in an int64: the sum saturates
		// there, and Consumed reports it in whole tokens.
		hi := new(big.Int).Quo(clampInt64(sum), big.NewInt(1000))
		g := big.NewInt(got[name])
		switch {
		case !refunds[name] && g.Cmp(hi) != 0:
			m.fail("L%d Consumed()[%s] = %s, want %s (what it took; no refund asked)", ml.id, name, g, hi)
		case g.Cmp(hi) > 0:
			m.fail("L%d Consumed()[%s] = %s, above %s (what it took)", ml.id, name, g, hi)
		}
	}
}
