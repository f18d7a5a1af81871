package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestInFlightCascadeRedis: 64 goroutines on 6 keys of one organisation,
// 8 calls in flight per key and 32 per organisation (stored, cascade) on
// redis-server, calls of 20-60 ms for 1.5 s: the test's own counts never
// exceed 8 per key nor 32 in all, reach 32, and every slot is back at the
// end. It logs the organisation's slot-time share.
func TestInFlightCascadeRedis(t *testing.T) {
	rl := limiter.New(newStore(t), func(o *limiter.Options) { o.SlotTTL = 10 * time.Second })
	t.Cleanup(func() { _ = rl.Close() })
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org"})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "m"}, []limiter.Limit{limiter.InFlight("calls", 32)}))
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	for _, k := range keys {
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: k, ParentID: "org", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: k, Resource: "m"}, []limiter.Limit{limiter.InFlight("calls", 8)}))
	}
	var total, peak, keyPeak, busy atomic.Int64
	perKey := make([]atomic.Int64, len(keys))
	raise := func(p *atomic.Int64, n int64) {
		for cur := p.Load(); n > cur && !p.CompareAndSwap(cur, n); cur = p.Load() {
		}
	}
	start := time.Now()
	deadline := start.Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := g % len(keys)
			for i := 0; time.Now().Before(deadline); i++ {
				lease, err := rl.Wait(ctx, keys[k], "m", limiter.Consume{"calls": 1})
				if err != nil {
					t.Error(err)
					return
				}
				raise(&peak, total.Add(1))
				raise(&keyPeak, perKey[k].Add(1))
				began := time.Now()
				time.Sleep(time.Duration(20+(g*7+i*11)%41) * time.Millisecond)
				busy.Add(int64(time.Since(began)))
				perKey[k].Add(-1)
				total.Add(-1)
				if err := lease.Commit(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("organisation's slots busy %.1f %% of 32 × %v", 100*float64(busy.Load())/float64(32*elapsed), elapsed.Round(time.Millisecond))
	require.LessOrEqual(t, keyPeak.Load(), int64(8), "calls in flight on one key")
	require.LessOrEqual(t, peak.Load(), int64(32), "calls in flight in the organisation")
	require.Equal(t, int64(32), peak.Load(), "the organisation's cap is reached")
	free, err := rl.Available(ctx, "org", "m")
	require.NoError(t, err)
	require.Equal(t, int64(32), free["calls"], "every slot is back")
}
