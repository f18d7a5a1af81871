package storetest

import (
	"math/rand/v2"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The model test's random sequences: a parent, a child that cascades to
// it and an entity alone, on one resource, with limits rpm and tpm drawn
// from small menus (capacities unlike refill amounts, periods of one to
// three minutes), per call or stored at any level.

// modelLimit builds a limit or panics (the menus are constants).
func modelLimit(name string, capacity, refill int64, period time.Duration) store.Limit {
	l := limiter.Limit{Name: name, Capacity: capacity, RefillAmount: refill, RefillPeriod: period}
	err := l.Validate()
	if err != nil {
		panic(err)
	}
	return store.Limit(l)
}

var (
	rpmMenu = []store.Limit{
		store.Limit(limiter.PerMinute("rpm", 10)),
		store.Limit(limiter.PerMinute("rpm", 20)),
		modelLimit("rpm", 30, 10, time.Minute),
		modelLimit("rpm", 5, 5, 2*time.Minute),
	}
	tpmMenu = []store.Limit{
		store.Limit(limiter.PerMinute("tpm", 1000)),
		store.Limit(limiter.PerMinute("tpm", 10_000)),
		modelLimit("tpm", 5000, 3000, time.Minute),
		modelLimit("tpm", 2000, 700, 3*time.Minute),
	}
)

func pickLimits(rng *rand.Rand) []store.Limit {
	return []store.Limit{rpmMenu[rng.IntN(len(rpmMenu))], tpmMenu[rng.IntN(len(tpmMenu))]}
}

// capOf returns the capacity of limit name in limits (1 when absent).
func capOf(limits []store.Limit, name string) int64 {
	for _, l := range limits {
		if l.Name == name {
			return l.Capacity
		}
	}
	return 1
}

// maxOpenLeases bounds the leases a random sequence holds at once.
const maxOpenLeases = 4

// random runs a random sequence of steps operations.
func (m *modelRun) random(steps int) {
	m.t.Helper()
	rng := rand.New(rand.NewPCG(m.seed, 0x2e5ea17))
	parent, child, solo := m.resource+"-p", m.resource+"-c", m.resource+"-s"
	m.entity(parent, "")
	m.entity(child, parent)
	m.entity(solo, "")
	m.setLimits("", "", pickLimits(rng))
	m.override = pickLimits(rng)
	pickEntity := func() string {
		switch r := rng.IntN(10); {
		case r < 5:
			return child
		case r < 8:
			return solo
		default:
			return parent
		}
	}
	pickLease := func() *modelLease { return m.leases[rng.IntN(len(m.leases))] }
	// The entity-wide limits are drawn from a stream of their own, so
	// that the other operations of a seed stay those it drew before
	// entity-wide buckets existed.
	wide := rand.New(rand.NewPCG(m.seed, 0x3a11))
	entities := []string{parent, child, solo}
	for m.step < steps {
		if m.wide && wide.IntN(12) == 0 {
			m.pickWideChange(wide, entities[wide.IntN(len(entities))])
			continue
		}
		r := rng.IntN(100)
		if len(m.leases) == 0 && r >= 24 && r < 60 {
			r = 0 // nothing to adjust or finish: acquire
		}
		if len(m.leases) >= maxOpenLeases && r < 24 {
			r = 50 // enough open: commit one
		}
		switch {
		case r < 24:
			entity := pickEntity()
			override := m.pickOverride(rng)
			m.acquire(entity, m.pickAmounts(rng, m.limitsFor(entity, override)), override)
		case r < 34:
			ml := pickLease()
			m.adjust(ml, m.pickAdjustment(rng, ml, true), false)
		case r < 39:
			ml := pickLease()
			m.adjust(ml, m.pickAdjustment(rng, ml, false), true)
		case r < 42:
			ml := pickLease()
			m.consume(ml, m.pickAdjustment(rng, ml, false))
		case r < 54:
			m.commit(pickLease())
		case r < 60:
			m.rollback(pickLease())
		case r < 66:
			entity := pickEntity()
			override := m.pickOverride(rng)
			limits := m.limitsFor(entity, override)
			var adj []doAdjustment
			for range rng.IntN(3) {
				c := store.Consume{}
				name := limits[rng.IntN(len(limits))].Name
				c[name] = 1 + rng.Int64N(capOf(limits, name)/2+1)
				release := rng.IntN(2) == 0
				if !release && rng.IntN(2) == 0 {
					c[name] = -c[name]
				}
				adj = append(adj, doAdjustment{c: c, release: release})
			}
			m.do(entity, m.pickAmounts(rng, limits), override, adj, rng.IntN(4) == 0)
		case r < 82:
			m.idle(pickIdle(rng))
		case r < 86:
			m.begin("per-call limits now %s", limitsString(m.override))
			m.override = pickLimits(rng)
			m.note("→ %s", limitsString(m.override))
		case r < 93:
			m.pickLimitChange(rng, pickEntity())
		default:
			if len(m.leases) > 0 {
				m.commit(pickLease())
			} else {
				m.quiesce()
			}
		}
	}
}

// pickOverride returns the per-call limits half the time, else nil (the
// stored limits).
func (m *modelRun) pickOverride(rng *rand.Rand) []store.Limit {
	if rng.IntN(2) == 0 {
		return m.override
	}
	return nil
}

// pickAmounts draws an acquire's amounts: mostly one request and a part
// of the token capacity, sometimes nothing, sometimes more than fits.
func (m *modelRun) pickAmounts(rng *rand.Rand, limits []store.Limit) store.Consume {
	c := store.Consume{}
	switch r := rng.IntN(10); {
	case r < 2:
		c["rpm"] = 0
	case r < 9:
		c["rpm"] = 1
	default:
		c["rpm"] = 2 + rng.Int64N(capOf(limits, "rpm"))
	}
	tc := capOf(limits, "tpm")
	switch r := rng.IntN(20); {
	case r < 2:
		c["tpm"] = 0
	case r < 14:
		c["tpm"] = 1 + rng.Int64N(tc/4)
	case r < 19:
		c["tpm"] = tc/4 + rng.Int64N(tc)
	default:
		c["tpm"] = tc + 1 + rng.Int64N(tc)
	}
	return c
}

// pickAdjustment draws an adjustment of one or both limits of ml: with
// signed, either sign (an estimate too low or too high), else a
// non-negative amount (Release, Consume). A refund is now and then far
// more than the lease took.
func (m *modelRun) pickAdjustment(rng *rand.Rand, ml *modelLease, signed bool) store.Consume {
	c := store.Consume{}
	for _, name := range []string{"rpm", "tpm"} {
		if rng.IntN(3) == 0 {
			continue
		}
		var capacity int64 = 1
		for _, e := range ml.entries {
			if e.name == name {
				capacity = e.p.capMilli / 1000
			}
		}
		v := 1 + rng.Int64N(capacity/2+1)
		if rng.IntN(20) == 0 {
			v = 1_000_000 + rng.Int64N(1000)
		}
		if signed && rng.IntN(2) == 0 {
			v = -v
		}
		c[name] = v
	}
	if len(c) == 0 {
		c["tpm"] = 1
	}
	return c
}

// pickIdle draws an idle period: none, milliseconds, seconds, minutes,
// or hours (many refill periods).
func pickIdle(rng *rand.Rand) time.Duration {
	switch r := rng.IntN(20); {
	case r < 5:
		return 0
	case r < 8:
		return time.Duration(1+rng.IntN(50)) * time.Millisecond
	case r < 12:
		return time.Duration(50+rng.IntN(5000)) * time.Millisecond
	case r < 16:
		return time.Duration(5000+rng.IntN(55_000)) * time.Millisecond
	case r < 19:
		return time.Duration(60_000+rng.IntN(540_000)) * time.Millisecond
	default:
		return time.Duration(600_000+rng.IntN(3*3600_000)) * time.Millisecond
	}
}

// pickWideChange stores or deletes the limits of entity's entity-wide
// bucket (AllResources), with the names of the per-resource limits: both
// are charged. The resource defaults of AllResources, one config per
// namespace that the sequences sharing a repository would share, are not
// drawn.
func (m *modelRun) pickWideChange(rng *rand.Rand, entity string) {
	if rng.IntN(3) == 0 {
		m.setLimits(entity, store.AllResources, nil)
		return
	}
	m.setLimits(entity, store.AllResources, pickLimits(rng))
}

// pickLimitChange stores or deletes limits at a random level.
func (m *modelRun) pickLimitChange(rng *rand.Rand, entity string) {
	limits := pickLimits(rng)
	switch rng.IntN(7) {
	case 0, 1:
		m.setLimits(entity, m.resource, limits)
	case 2:
		m.setLimits(entity, store.DefaultResource, limits)
	case 3:
		m.setLimits("", m.resource, limits)
	case 4:
		m.setLimits("", "", limits)
	case 5:
		m.setLimits(entity, m.resource, nil)
	default:
		if rng.IntN(2) == 0 {
			m.setLimits(entity, store.DefaultResource, nil)
		} else {
			m.setLimits("", m.resource, nil)
		}
	}
}
