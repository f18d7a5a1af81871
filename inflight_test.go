package limiter_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// inFlightLimiter returns a memory-backed limiter with slot TTL ttl.
func inFlightLimiter(t *testing.T, ttl time.Duration) *limiter.RateLimiter {
	t.Helper()
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.SlotTTL = ttl })
	t.Cleanup(func() { _ = rl.Close() })
	return rl
}

// TestInFlightNeverAboveCap runs 64 goroutines through Wait on a cap of 8:
// the count of calls in flight, kept by the test, never exceeds 8, and
// reaches it.
func TestInFlightNeverAboveCap(t *testing.T) {
	rl := inFlightLimiter(t, 2*time.Second)
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 8), limiter.PerSecond("rps", 1_000_000))
	var inFlight, peak, calls atomic.Int64
	deadline := time.Now().Add(400 * time.Millisecond)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				lease, err := rl.Wait(ctx, "k", "m", limiter.Consume{"calls": 1, "rps": 1}, opt)
				if err != nil {
					t.Error(err)
					return
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				inFlight.Add(-1)
				calls.Add(1)
				if err := lease.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(8), peak.Load(), "peak of calls in flight")
	require.Greater(t, calls.Load(), int64(64))
	free, err := rl.Available(ctx, "k", "m", opt)
	require.NoError(t, err)
	require.Equal(t, int64(8), free["calls"], "every slot is back")
}

// TestInFlightAbandonedLeaseFreesWithinTTL abandons a lease (no Commit,
// renewal stopped, as a process killed): its slot is free again within the
// slot TTL, and not before the other lease's would be refused.
func TestInFlightAbandonedLeaseFreesWithinTTL(t *testing.T) {
	const ttl = 400 * time.Millisecond
	rl := inFlightLimiter(t, ttl)
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 1))
	lease, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
	require.NoError(t, err)
	start := time.Now()
	limiter.AbandonSlots(lease)
	_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
	for {
		l2, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
		if err == nil {
			require.LessOrEqual(t, time.Since(start), ttl+100*time.Millisecond, "slot freed within the TTL")
			require.NoError(t, l2.Commit(ctx))
			return
		}
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		require.Less(t, time.Since(start), 2*ttl, "slot of an abandoned lease never came back")
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInFlightLongLeaseKeepsSlot holds a lease for five slot TTLs: its
// renewals keep its slot (every other acquire is refused), and its Commit
// gives it back at once.
func TestInFlightLongLeaseKeepsSlot(t *testing.T) {
	t.Parallel() // real time, mostly asleep; a store of its own
	const ttl = 600 * time.Millisecond
	rl := inFlightLimiter(t, ttl)
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 1))
	lease, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
	require.NoError(t, err)
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		var rle *limiter.RateLimitExceededError
		require.True(t, errors.As(err, &rle))
		require.Equal(t, 20*time.Millisecond, rle.RetryAfter)
	}
	require.NoError(t, lease.Commit(ctx))
	l2, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
	require.NoError(t, err)
	require.NoError(t, l2.Rollback(ctx))
	free, err := rl.Available(ctx, "k", "m", opt)
	require.NoError(t, err)
	require.Equal(t, int64(1), free["calls"])
}

// TestInFlightLeaseEnds gives the slot back on every end of a lease:
// Rollback, Do's error and panic; Adjust of the slots is refused, and the
// lease reports its slot under the in-flight limit's name.
func TestInFlightLeaseEnds(t *testing.T) {
	rl := inFlightLimiter(t, time.Second)
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 2))
	free := func() int64 {
		a, err := rl.Available(ctx, "k", "m", opt)
		require.NoError(t, err)
		return a["calls"]
	}
	lease, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
	require.NoError(t, err)
	require.Equal(t, int64(1), free())
	// The lease shows its slot as the in-flight limit's, once, whatever
	// generations hold it.
	require.Equal(t, map[string]int64{"calls": 1}, lease.Consumed())
	st := lease.Statuses()
	require.Len(t, st, 1)
	require.Equal(t, limiter.InFlight("calls", 2), st[0].Limit)
	require.Equal(t, "m", st[0].Resource)
	require.Equal(t, int64(1), st[0].Held)
	require.ErrorIs(t, lease.Adjust(limiter.Consume{"calls": 1}), limiter.ErrValidation)
	require.ErrorIs(t, lease.Release(limiter.Consume{"calls": 1}), limiter.ErrValidation)
	require.NoError(t, lease.Rollback(ctx))
	require.Equal(t, int64(2), free())

	boom := errors.New("boom")
	err = rl.Do(ctx, "k", "m", limiter.Consume{"calls": 2}, func(ctx context.Context, _ *limiter.Lease) error {
		require.Equal(t, int64(0), free())
		return boom
	}, opt)
	require.ErrorIs(t, err, boom)
	require.Equal(t, int64(2), free())

	require.Panics(t, func() {
		_ = rl.Do(ctx, "k", "m", limiter.Consume{"calls": 1}, func(context.Context, *limiter.Lease) error { panic("boom") }, opt)
	})
	require.Equal(t, int64(2), free())

	_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"calls": 3}, opt)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
}

// TestInFlightCascadeNeverAboveCaps runs 64 goroutines on 6 keys of one
// organisation, 8 calls in flight per key and 32 per organisation
// (stored limits, cascade): the test's own counts never exceed 8 per key
// nor 32 in all, and reach 32.
func TestInFlightCascadeNeverAboveCaps(t *testing.T) {
	rl := inFlightLimiter(t, 2*time.Second)
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org"})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "m"}, []limiter.Limit{limiter.InFlight("calls", 32)}))
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	for _, k := range keys {
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: k, ParentID: "org", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: k, Resource: "m"}, []limiter.Limit{limiter.InFlight("calls", 8), limiter.PerMinute("rpm", 1_000_000)}))
	}
	var total, peak atomic.Int64
	perKey := make([]atomic.Int64, len(keys))
	var keyPeak atomic.Int64
	raise := func(p *atomic.Int64, n int64) {
		for cur := p.Load(); n > cur && !p.CompareAndSwap(cur, n); cur = p.Load() {
		}
	}
	deadline := time.Now().Add(800 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g % len(keys)
			for time.Now().Before(deadline) {
				lease, err := rl.Wait(ctx, keys[i], "m", limiter.Consume{"calls": 1, "rpm": 1})
				if err != nil {
					t.Error(err)
					return
				}
				raise(&peak, total.Add(1))
				raise(&keyPeak, perKey[i].Add(1))
				time.Sleep(30 * time.Millisecond)
				perKey[i].Add(-1)
				total.Add(-1)
				if err := lease.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, keyPeak.Load(), int64(8), "calls in flight on one key")
	require.LessOrEqual(t, peak.Load(), int64(32), "calls in flight in the organisation")
	require.Equal(t, int64(32), peak.Load(), "the organisation's cap is reached")
	free, err := rl.Available(ctx, "org", "m")
	require.NoError(t, err)
	require.Equal(t, int64(32), free["calls"], "every slot is back")
	lif, err := rl.LimitsInForce(ctx, "k0", "m")
	require.NoError(t, err)
	var inForce []string
	for _, l := range lif {
		if store.Limit(l.Limit).IsInFlight() {
			inForce = append(inForce, l.EntityID+" "+l.Limit.String())
		}
	}
	require.Equal(t, []string{"k0 {calls 8 in-flight}", "org {calls 32 in-flight}"}, inForce)
}

// TestInFlightThroughput keeps 64 goroutines calling through Wait on a
// cap of 8 calls in flight, calls of 50–150 ms, for 2 s (memory): the
// slot-time used is at least 85 % of cap × elapsed (waiters poll every
// 20 ms, so a slot given back stays idle a few ms). It logs the share.
func TestInFlightThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("2 s")
	}
	rl := inFlightLimiter(t, 10*time.Second)
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 8))
	var busy atomic.Int64 // ns of calls held
	start := time.Now()
	deadline := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				lease, err := rl.Wait(ctx, "k", "m", limiter.Consume{"calls": 1}, opt)
				if err != nil {
					t.Error(err)
					return
				}
				d := time.Duration(50+(g*7+i*13)%101) * time.Millisecond
				if rest := time.Until(deadline); d > rest {
					d = max(rest, 0)
				}
				began := time.Now()
				time.Sleep(d)
				busy.Add(int64(time.Since(began)))
				require.NoError(t, lease.Commit(ctx))
				if !time.Now().Before(deadline) {
					return
				}
			}
		}()
	}
	wg.Wait()
	share := float64(busy.Load()) / float64(8*deadline.Sub(start))
	t.Logf("slot-time used: %.1f %% of 8 × %v", 100*share, deadline.Sub(start))
	require.GreaterOrEqual(t, share, 0.85)
	require.LessOrEqual(t, share, 1.02, "more than 8 calls at once")
}
