package limiter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestMemoryBoundedHeap: 200,000 distinct entities each take one request
// while the clock moves on; buckets that refilled are dropped, so the heap
// stays bounded instead of growing with every entity ever seen.
func TestMemoryBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 200,000 buckets")
	}
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	m := NewMemory(func(o *MemoryOptions) { o.Now = clock.now })
	rl := New(m, WithClock(clock.now))
	lims := WithLimits(PerSecond("rps", 10), PerSecond("tps", 1000))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var base, peak uint64
	const n = 200_000
	for i := range n {
		lease, err := rl.Acquire(ctx, fmt.Sprintf("user-%d", i), "gpt", Consume{"rps": 1, "tps": 100}, lims)
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Millisecond) // 1000 new entities per second; each refills in 100 ms
		switch {
		case i == 20_000:
			base = heap()
		case i > 20_000 && i%20_000 == 0:
			peak = max(peak, heap())
		}
	}
	live := m.BucketCount(false)
	t.Logf("buckets held %d of %d created; entity hints %d; heap at 20k %d KiB, peak after %d KiB",
		live, n, m.EntityCache().Len(), base/1024, peak/1024)
	// About 100 buckets are live at any time (100 ms of traffic); the
	// sampling sweep keeps the rest within a small factor of that.
	if live > 2_000 {
		t.Fatalf("%d buckets held, want a bounded number", live)
	}
	if m.EntityCache().Len() > DefaultMemoryMaxEntityHints {
		t.Fatalf("entity cache holds %d", m.EntityCache().Len())
	}
	if peak > base+4<<20 {
		t.Fatalf("heap grew from %d to %d bytes", base, peak)
	}
	if got := m.BucketCount(true); got > 200 {
		t.Fatalf("after a full sweep %d buckets, want only the last 100 ms of traffic", got)
	}
}

// TestMemoryEvictionKeepsSemantics: a dropped bucket is one that had
// refilled, so the next acquire sees the same balance either way.
func TestMemoryEvictionKeepsSemantics(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	m := NewMemory(func(o *MemoryOptions) { o.Now = clock.now })
	rl := New(m, WithClock(clock.now))
	lims := WithLimits(PerMinute("rpm", 2))
	for range 2 {
		if _, err := rl.Acquire(ctx, "a", "gpt", Consume{"rpm": 1}, lims); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rl.Acquire(ctx, "a", "gpt", Consume{"rpm": 1}, lims); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("third acquire: %v", err)
	}
	// Half refilled: not idle, kept by a sweep.
	clock.advance(30 * time.Second)
	if got := m.BucketCount(true); got != 1 {
		t.Fatalf("half-refilled bucket swept: %d", got)
	}
	clock.advance(30 * time.Second)
	if got := m.BucketCount(true); got != 0 {
		t.Fatalf("full bucket kept: %d", got)
	}
	avail, err := rl.Available(ctx, "a", "gpt", lims)
	if err != nil || avail["rpm"] != 2 {
		t.Fatalf("available after eviction %v %v", avail, err)
	}
}

// TestMemoryTransactionAtomic: a two-item write whose second condition
// fails changes neither item.
func TestMemoryTransactionAtomic(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	m := NewMemory(func(o *MemoryOptions) { o.Now = clock.now })
	now := clock.now().UnixMilli()
	st := bucketStateFromLimit("a", "r", PerMinute("rpm", 5), now)
	a := BucketWrite{Kind: WriteCreate, Key: BucketKey{EntityID: "a", Resource: "r"}, NowMs: now, States: []BucketState{st}}
	if err := m.WriteBuckets(ctx, []BucketWrite{a}); err != nil {
		t.Fatal(err)
	}
	adj := BucketWrite{Kind: WriteAdjust, Key: a.Key, Limits: []LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
	missing := BucketWrite{Kind: WriteAdjust, Key: BucketKey{EntityID: "b", Resource: "r"}, Limits: adj.Limits}
	err := m.WriteBuckets(ctx, []BucketWrite{adj, missing})
	if !errors.Is(err, ErrConditionFailed) {
		t.Fatalf("write to a missing item: %v", err)
	}
	b, _ := m.GetBucket(ctx, a.Key)
	if b.States[0].TokensMilli != 5000 || b.States[0].TotalConsumedMilli != 0 {
		t.Fatalf("first item changed: %+v", b.States[0])
	}
	if err := m.WriteBuckets(ctx, []BucketWrite{adj, adj}); !errors.Is(err, ErrValidation) {
		t.Fatalf("two writes to one item: %v", err)
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.WriteBuckets(ctxDone, []BucketWrite{adj}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// BenchmarkMemoryAcquire measures Acquire alone, and Acquire + Commit, on
// the memory store (speculative path: one locked update per bucket).
func BenchmarkMemoryAcquire(b *testing.B) {
	ctx := context.Background()
	for _, commit := range []bool{false, true} {
		b.Run(map[bool]string{false: "acquire", true: "acquire+commit"}[commit], func(b *testing.B) {
			m := NewMemory()
			rl := New(m)
			if err := rl.SetLimits(ctx, "bench", "gpt-4", []Limit{PerSecond("rps", 1_000_000_000), PerSecond("tps", 1_000_000_000)}); err != nil {
				b.Fatal(err)
			}
			c := Consume{"rps": 1, "tps": 100}
			b.ReportAllocs()
			for b.Loop() {
				l, err := rl.Acquire(ctx, "bench", "gpt-4", c)
				if err != nil {
					b.Fatal(err)
				}
				if commit {
					if err := l.Commit(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestMemoryAcquireAllocs guards the memory store's allocation budget: an
// Acquire with stored limits costs at most 5 allocations.
func TestMemoryAcquireAllocs(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	rl := New(m)
	if err := rl.SetLimits(ctx, "bench", "gpt-4", []Limit{PerSecond("rps", 1_000_000_000), PerSecond("tps", 1_000_000_000)}); err != nil {
		t.Fatal(err)
	}
	c := Consume{"rps": 1, "tps": 100}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := rl.Acquire(ctx, "bench", "gpt-4", c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("%.1f allocations per Acquire, want ≤ 5", allocs)
	}
}
