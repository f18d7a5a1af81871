package memorystore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/storetest"
)

// TestConformance runs the backend conformance suite on the memory store.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Repository { return memorystore.New() })
}

// clock is a settable test clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestBoundedHeap: 200,000 distinct entities each take one request while
// the clock moves on; buckets past their TTL (7 × their time to fill, 1 s
// here) are dropped, so the heap stays bounded instead of growing with
// every entity ever seen.
func TestBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200,000 buckets")
	}
	ctx := context.Background()
	clk := newClock()
	m := memorystore.New()
	rl := limiter.New(m, func(o *limiter.Options) { o.Clock = clk.now })
	lims := limiter.WithLimits(limiter.PerSecond("rps", 10), limiter.PerSecond("tps", 1000))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var base, peak uint64
	const n = 200_000
	for i := range n {
		lease, err := rl.Acquire(ctx, fmt.Sprintf("user-%d", i), "gpt", store.Consume{"rps": 1, "tps": 100}, lims)
		require.NoError(t, err, "acquire %d: %v", i, err)
		require.NoError(t, lease.Commit(ctx), "commit %d", i)
		clk.advance(time.Millisecond) // 1000 new entities per second; each refills in 100 ms
		switch {
		case i == 20_000:
			base = heap()
		case i > 20_000 && i%20_000 == 0:
			peak = max(peak, heap())
		}
	}
	live := m.BucketCount()
	t.Logf("buckets held %d of %d created; heap at 20k %d KiB, peak after %d KiB", live, n, base/1024, peak/1024)
	// About 7,000 buckets are unexpired at any time (7 s of traffic); the
	// sampling sweep keeps the expired ones within a small factor of that.
	require.LessOrEqual(t, live, 20_000, "buckets held, want a bounded number")
	require.LessOrEqual(t, peak, base+4<<20, "heap grew from %d bytes", base)
	got := m.Sweep(clk.now().UnixMilli())
	require.LessOrEqual(t, got, 7_001, "buckets after a full sweep, want only the last 7 s of traffic")
}

// TestEvictionKeepsSemantics: a bucket is dropped only after its TTL (7 ×
// its time to fill), when it has refilled, so the next acquire sees the
// same balance either way; until then it is kept, debts included.
func TestEvictionKeepsSemantics(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := memorystore.New()
	rl := limiter.New(m, func(o *limiter.Options) { o.Clock = clk.now })
	lims := limiter.WithLimits(limiter.PerMinute("rpm", 2))
	for range 2 {
		_, err := rl.Acquire(ctx, "a", "gpt", store.Consume{"rpm": 1}, lims)
		require.NoError(t, err)
	}
	_, err := rl.Acquire(ctx, "a", "gpt", store.Consume{"rpm": 1}, lims)
	require.ErrorIs(t, err, limiter.ErrRateLimited, "third acquire")
	// Refilled, but not expired: kept by a sweep.
	clk.advance(time.Minute)
	got := m.Sweep(clk.now().UnixMilli())
	require.EqualValues(t, 1, got, "unexpired bucket swept: %d", got)
	clk.advance(6*time.Minute + time.Second)
	got = m.Sweep(clk.now().UnixMilli())
	require.EqualValues(t, 0, got, "expired bucket kept: %d", got)
	avail, err := rl.Available(ctx, "a", "gpt", lims)
	require.NoError(t, err, "available after eviction")
	require.EqualValues(t, 2, avail["rpm"], "available after eviction = %v", avail)
}

// TestTransactionAtomic: a two-item write whose second condition fails
// changes neither item.
func TestTransactionAtomic(t *testing.T) {
	ctx := context.Background()
	m := memorystore.New()
	now := newClock().now().UnixMilli()
	st := store.BucketState{LimitName: "rpm", TokensMilli: 5000, LastRefillMs: now, CapacityMilli: 5000, RefillAmountMilli: 5000, RefillPeriodMs: 60_000}
	a := store.BucketWrite{Kind: store.WriteCreate, Key: store.BucketKey{EntityID: "a", Resource: "r"}, NowMs: now, States: []store.BucketState{st}}
	require.NoError(t, m.WriteBuckets(ctx, []store.BucketWrite{a}))
	adj := store.BucketWrite{Kind: store.WriteAdjust, Key: a.Key, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
	missing := store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "b", Resource: "r"}, Limits: adj.Limits}
	err := m.WriteBuckets(ctx, []store.BucketWrite{adj, missing})
	require.ErrorIs(t, err, store.ErrConditionFailed, "write to a missing item: %v", err)
	b, _ := m.GetBucket(ctx, a.Key)
	require.EqualValues(t, 5000, b.States[0].TokensMilli, "first item changed: %+v", b.States[0])
	require.Zero(t, b.States[0].TotalConsumedMilli, "first item changed: %+v", b.States[0])
	err = m.WriteBuckets(ctx, []store.BucketWrite{adj, adj})
	require.ErrorIs(t, err, store.ErrValidation, "two writes to one item")
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	err = m.WriteBuckets(ctxDone, []store.BucketWrite{adj})
	require.ErrorIs(t, err, context.Canceled, "cancelled")
}

// BenchmarkAcquire measures Acquire alone, and Acquire + Commit, on the
// memory store (speculative path: one locked update per bucket).
func BenchmarkAcquire(b *testing.B) {
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		b.Run(map[bool]string{false: "acquire", true: "acquire+commit"}[commit], func(b *testing.B) {
			rl := limiter.New(memorystore.New())
			err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "bench", Resource: "gpt-4"}, []limiter.Limit{limiter.PerSecond("rps", 1_000_000_000), limiter.PerSecond("tps", 1_000_000_000)})
			require.NoError(b, err)
			c := store.Consume{"rps": 1, "tps": 100}
			b.ReportAllocs()
			for b.Loop() {
				l, err := rl.Acquire(ctx, "bench", "gpt-4", c)
				require.NoError(b, err)
				if commit {
					err := l.Commit(ctx)
					require.NoError(b, err)
				}
			}
		})
	}
}

// TestAcquireAllocs guards the memory store's allocation budget: an Acquire
// with stored limits costs at most 5 allocations.
func TestAcquireAllocs(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "bench", Resource: "gpt-4"}, []limiter.Limit{limiter.PerSecond("rps", 1_000_000_000), limiter.PerSecond("tps", 1_000_000_000)})
	require.NoError(t, err)
	c := store.Consume{"rps": 1, "tps": 100}
	allocs := testing.AllocsPerRun(1000, func() {
		_, err := rl.Acquire(ctx, "bench", "gpt-4", c)
		require.NoError(t, err)
	})
	require.LessOrEqual(t, allocs, 5.0, "allocations per Acquire")
}
