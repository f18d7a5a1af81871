package limiter

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// TestInFlightGenerationsModel runs seeded acquires, commits, rollbacks,
// abandoned leases (a process that died) and clock steps across many
// generation boundaries (slot TTL 2 s, a generation 1 s, steps of up to
// 0.7 s) on DynamoDB Local and memory, on the fast and read-then-write
// paths, against an exact model: at generation g the slots held are the
// live leases' and those of abandoned leases whose coverage reaches g, and
// an acquire is admitted exactly when fewer than the cap are held. At the
// end every slot is free and the item holds at most four generations'
// limits.
func TestInFlightGenerationsModel(t *testing.T) {
	t.Parallel()
	const (
		cap   = 3
		ttl   = 2 * time.Second
		genMs = int64(ttl/time.Millisecond) / 2
	)
	run := func(t *testing.T, repo Repository, clock *fakeClock, spec bool, seed uint64) {
		rl := New(repo, func(o *Options) { o.Clock = clock.now }, func(o *Options) { o.SlotTTL = ttl }, func(o *Options) { o.SpeculativeWrites = spec })
		// The keepers read the fake clock every few ms rather than
		// sleeping the real time to a renewal the clock already passed.
		rl.slotPoll = 2 * time.Millisecond
		defer func() { _ = rl.Close() }()
		ctx := context.Background()
		opt := WithLimits(PerMinute("rpm", 1_000_000), InFlight("calls", cap))
		call := Consume{"rpm": 1, "calls": 1}
		rnd := rand.New(rand.NewPCG(seed, 47))
		var live []*Lease
		var abandoned []int64 // the last generation each abandoned lease covers
		gen := func() int64 { return clock.now().UnixMilli() / genMs }
		held := func() int {
			n := len(live)
			for _, c := range abandoned {
				if c >= gen() {
					n++
				}
			}
			return n
		}
		covered := func(l *Lease) int64 {
			l.slots.mu.Lock()
			defer l.slots.mu.Unlock()
			return l.slots.covered
		}
		// settle waits until every live lease's keeper has renewed up to
		// the generation after the current one, as a live process does.
		settle := func() {
			for _, l := range live {
				require.Eventually(t, func() bool { return covered(l) > gen() }, 5*time.Second, time.Millisecond, "renewal at generation %d", gen())
			}
		}
		admitted := 0
		for step := range 200 {
			switch op := rnd.IntN(20); {
			case op < 8:
				want := held() < cap
				l, err := rl.Acquire(ctx, "k", "m", call, opt)
				if want {
					require.NoError(t, err, "step %d: %d slots held of %d", step, held(), cap)
					live = append(live, l)
					admitted++
				} else {
					require.ErrorIs(t, err, ErrRateLimited, "step %d: %d slots held of %d", step, held(), cap)
				}
			case op < 13 && len(live) > 0:
				i := rnd.IntN(len(live))
				if op < 12 {
					require.NoError(t, live[i].Commit(ctx))
				} else {
					require.NoError(t, live[i].Rollback(ctx))
				}
				live = slices.Delete(live, i, i+1)
			case op < 14 && len(live) > 0:
				i := rnd.IntN(len(live))
				abandoned = append(abandoned, covered(live[i]))
				AbandonSlots(live[i])
				live = slices.Delete(live, i, i+1)
			default:
				clock.advance(time.Duration(rnd.IntN(700)) * time.Millisecond)
				settle()
			}
		}
		require.Greater(t, admitted, 25)
		for _, l := range live {
			require.NoError(t, l.Commit(ctx))
		}
		live = nil
		clock.advance(2 * ttl)
		l, err := rl.Acquire(ctx, "k", "m", call, opt)
		require.NoError(t, err)
		require.NoError(t, l.Commit(ctx))
		free, err := rl.Available(ctx, "k", "m", opt)
		require.NoError(t, err)
		require.Equal(t, int64(cap), free["calls"], "every slot is free")
		b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "m"})
		require.NoError(t, err)
		gens := 0
		for _, st := range b.States {
			if _, _, ok := store.ParseSlotLimitName(st.LimitName); ok {
				gens++
			}
		}
		require.LessOrEqual(t, gens, 4, "generations the item keeps")
		require.Zero(t, b.TTL, "an item holding slots keeps no TTL")
	}
	for _, spec := range []bool{true, false} {
		name := map[bool]string{true: "speculative", false: "read-then-write"}[spec]
		t.Run("dynamodb/"+name, func(t *testing.T) {
			env := newTestEnv(t)
			run(t, env.repo, env.clock, spec, 1)
		})
		t.Run("memory/"+name, func(t *testing.T) {
			for seed := range uint64(2) {
				run(t, newMemory(), &fakeClock{t: epoch}, spec, seed)
			}
		})
	}
}
