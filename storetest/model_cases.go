package storetest

import (
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The model test's focused sequences: the measured ways a limiter has
// admitted more than an exact bucket, replayed in every mode so that they
// are exercised on every run, not only when a random sequence happens on
// them. Each runs on an entity of its own with per-call limits.

// modelCase is one focused sequence; applies, when set, picks the modes
// it runs in (all by default); a long one runs only in the long size.
type modelCase struct {
	name    string
	applies func(modelMode) bool
	long    bool
	run     func(m *modelRun)
}

// maxAmount is the largest amount an acquire or adjustment takes, in
// tokens (its millitokens fit in int64).
const maxAmount = (1<<63 - 1) / 1000

var modelCases = []modelCase{
	// One token taken, then an idle minute refills the bucket to its
	// capacity: a burst at one instant gets exactly the capacity, however
	// the fast path keeps the refill timestamp. Only admissions are
	// checked, so that the count shows.
	{name: "IdleBurst", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 10))}
		m.mustCommit(m.acquire(k, store.Consume{"rpm": 1}, lim))
		m.idle(time.Minute)
		m.checkBalances = false
		for range 20 {
			ml := m.acquire(k, store.Consume{"rpm": 1}, lim)
			if ml == nil {
				break
			}
			m.commit(ml)
		}
	}},
	// The same after an idle minute, observed in the balance: right after
	// 99 of a full bucket of 100 are taken, 1 is left.
	{name: "IdleTake", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 100))}
		m.mustCommit(m.acquire(k, store.Consume{"rpm": 1}, lim))
		m.idle(time.Minute)
		m.mustCommit(m.acquire(k, store.Consume{"rpm": 99}, lim))
		m.mustCommit(m.acquire(k, store.Consume{"rpm": 1}, lim))
	}},
	// A refund larger than the lease took gives back what it took.
	{name: "RefundBeyondLease", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("tpm", 10_000))}
		m.mustCommit(m.acquire(k, store.Consume{"tpm": 9000}, lim))
		ml := m.mustAcquire(k, store.Consume{"tpm": 500}, lim)
		m.adjust(ml, store.Consume{"tpm": -1_000_500}, false)
		m.commit(ml)
		m.mustCommit(m.acquire(k, store.Consume{"tpm": 1000}, lim))
		if ml := m.acquire(k, store.Consume{"tpm": 1}, lim); ml != nil {
			m.commit(ml)
		}
	}},
	// Release beyond the lease, on a cascade: each bucket gets back what
	// the lease took from it.
	{name: "ReleaseBeyondLeaseCascade", run: func(m *modelRun) {
		p, c := m.resource+"-p", m.resource+"-c"
		m.entity(p, "")
		m.entity(c, p)
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 10)), store.Limit(limiter.PerMinute("tpm", 1000))}
		m.mustCommit(m.acquire(p, store.Consume{"rpm": 5, "tpm": 600}, lim))
		ml := m.mustAcquire(c, store.Consume{"rpm": 1, "tpm": 300}, lim)
		m.adjust(ml, store.Consume{"tpm": 5000, "rpm": 3}, true)
		m.commit(ml)
		m.mustCommit(m.acquire(c, store.Consume{"rpm": 1, "tpm": 100}, lim))
	}},
	// A refused acquire writes nothing it took: here the parent refuses
	// a child whose item does not exist yet, while the parent's limits
	// change (stored at the entity default level, so that the acquire
	// applies the change). The child's item, if the refusal creates it,
	// is full and has consumed nothing.
	{name: "RefusedCascadeWrites", run: func(m *modelRun) {
		p, c := m.resource+"-p", m.resource+"-c"
		m.entity(p, "")
		m.entity(c, p)
		m.mustCommit(m.acquire(p, store.Consume{"rpm": 10}, []store.Limit{store.Limit(limiter.PerMinute("rpm", 10))}))
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 20))}
		m.setLimits(p, store.DefaultResource, lim)
		m.setLimits(c, store.DefaultResource, lim)
		if ml := m.acquire(c, store.Consume{"rpm": 5}, nil); ml != nil {
			m.commit(ml)
		}
	}},
	// A lease takes a whole bucket; a minute later others take the
	// refilled capacity; the lease's rollback gives nothing back, since
	// the refill has already paid for what it held.
	{name: "RollbackAfterRefill", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 100))}
		held := m.mustAcquire(k, store.Consume{"rpm": 100}, lim)
		m.idle(time.Minute)
		m.mustCommit(m.acquire(k, store.Consume{"rpm": 100}, lim))
		m.rollback(held)
		if ml := m.acquire(k, store.Consume{"rpm": 100}, lim); ml != nil {
			m.commit(ml)
		}
	}},
	// An overrun committed after the bucket refilled: the debt counts
	// against the refilled balance, so a burst after it gets one less
	// than the capacity (a write that takes the overrun from the stored
	// balance and leaves the refill timestamp lets the cap absorb it).
	{name: "OverrunAfterRefill", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 10))}
		ml := m.mustAcquire(k, store.Consume{"rpm": 1}, lim)
		m.idle(time.Minute)
		m.adjust(ml, store.Consume{"rpm": 1}, false)
		m.checkBalances = false
		m.commit(ml)
		for range 12 {
			ml := m.acquire(k, store.Consume{"rpm": 1}, lim)
			if ml == nil {
				break
			}
			m.commit(ml)
		}
	}},
	// Refund after part of the refill: a lease of 80 of 100 refunds 80
	// six seconds later (10 refilled meanwhile: the rule gives 70), and
	// an acquire of 50 follows at once — with background commit the
	// refund may be folded into it. Exact: 20 + 10 + 70, capped at 100,
	// less 50.
	{name: "RefundThenAcquire", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 100))}
		ml := m.mustAcquire(k, store.Consume{"rpm": 80}, lim)
		m.idle(6 * time.Second)
		m.adjust(ml, store.Consume{"rpm": -80}, false)
		m.skipChecks = true
		m.commit(ml)
		if ml := m.acquire(k, store.Consume{"rpm": 50}, lim); ml != nil {
			m.commit(ml)
		}
	}},
	// An overrun committed (in the background or not) is owed before the
	// next acquire: a lease of 10 ends at 100, and an acquire of 80 that
	// follows at once is refused.
	{name: "OverrunThenAcquire", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("rpm", 100))}
		ml := m.mustAcquire(k, store.Consume{"rpm": 10}, lim)
		m.adjust(ml, store.Consume{"rpm": 90}, false)
		m.skipChecks = true
		m.commit(ml)
		if ml := m.acquire(k, store.Consume{"rpm": 80}, lim); ml != nil {
			m.commit(ml)
		}
	}},
	// A limit change refills at the old rate up to the change: a bucket
	// emptied under 1 token a minute, 59 ms later raised to 1,000 a
	// second, holds under one millitoken, not the 59 tokens the new rate
	// would give the time the old one had not yet paid out.
	{name: "LimitChangeRemainder", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		slow := []store.Limit{modelLimit("tpm", 1000, 1, time.Minute)}
		fast := []store.Limit{modelLimit("tpm", 1000, 1000, time.Second)}
		m.mustCommit(m.acquire(k, store.Consume{"tpm": 1000}, slow))
		m.idle(59 * time.Millisecond)
		if ml := m.acquire(k, store.Consume{"tpm": 1}, fast); ml != nil {
			m.commit(ml)
		}
	}},
	// Lease.Consumed saturates: 1,001 adjustments of the largest amount.
	{name: "ConsumedSaturates", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("tpm", 1000))}
		ml := m.mustAcquire(k, store.Consume{"tpm": 1}, lim)
		for range 1001 {
			m.adjust(ml, store.Consume{"tpm": maxAmount}, false)
		}
		m.rollback(ml)
	}},
	// Two leases each end the largest amount over their estimate: the
	// bucket's debt saturates (it stays readable and in debt).
	{name: "DebtSaturates", run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("tpm", 1000))}
		a := m.mustAcquire(k, store.Consume{"tpm": 1}, lim)
		b := m.mustAcquire(k, store.Consume{"tpm": 1}, lim)
		m.adjust(a, store.Consume{"tpm": maxAmount}, false)
		m.adjust(b, store.Consume{"tpm": maxAmount}, false)
		m.commit(a)
		m.commit(b)
		m.idle(time.Hour)
		if ml := m.acquire(k, store.Consume{"tpm": 1}, lim); ml != nil {
			m.commit(ml)
		}
	}},
	// Background commits of one item are summed before they are written:
	// 1,010 leases that each end the largest amount over their estimate
	// leave the bucket in debt (saturated), never full. The commits are
	// queued faster than a background write's delay only on a fast
	// enough machine, so a slow one may not exercise the sum. Long size
	// only: 1,010 acquires take seconds on DynamoDB Local.
	{name: "BackgroundSumSaturates", long: true, applies: func(md modelMode) bool { return md.spec && md.bg && md.group }, run: func(m *modelRun) {
		k := m.resource + "-k"
		m.entity(k, "")
		lim := []store.Limit{store.Limit(limiter.PerMinute("tpm", 2000))}
		m.storeChecks = false
		for range 1010 {
			m.mustAcquire(k, store.Consume{"tpm": 1}, lim)
			m.idle(2 * time.Millisecond) // the DynamoDB backend's write ceiling refills
		}
		for _, ml := range m.leases {
			m.adjust(ml, store.Consume{"tpm": maxAmount}, false)
		}
		for len(m.leases) > 0 {
			m.commit(m.leases[0])
		}
		m.storeChecks = true
	}},
}

// mustAcquire is acquire, failing the test when the limiter refuses.
func (m *modelRun) mustAcquire(entity string, c store.Consume, override []store.Limit) *modelLease {
	m.t.Helper()
	ml := m.acquire(entity, c, override)
	if ml == nil {
		m.fail("acquire %v on %s refused where the exact bucket admits it", c, entity)
	}
	return ml
}

// mustCommit commits ml, which must have been admitted.
func (m *modelRun) mustCommit(ml *modelLease) {
	m.t.Helper()
	if ml == nil {
		m.fail("acquire refused where the exact bucket admits it")
	}
	m.commit(ml)
}
