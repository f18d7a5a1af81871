package crossbackend_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// prepaidBalance reads the balance of prepaid limit "usd" of entity on resource.
func prepaidBalance(t *testing.T, rl *limiter.RateLimiter, entity, resource string) int64 {
	t.Helper()
	avail, err := rl.Available(context.Background(), entity, resource)
	require.NoError(t, err)
	return avail["usd"]
}

// TestTopUpIDPerResource: one top-up id is one top-up per resource: the
// same id on resources a, a/b and b (whose balances live on a/usd.balance,
// a/b/usd.balance and b/usd.balance) applies on each.
func TestTopUpIDPerResource(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		for _, r := range []string{"a", "a/b", "b"} {
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: r}, []limiter.Limit{limiter.Prepaid("usd")}))
			res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: r, Limit: "usd", Amount: 10, ID: "pay-1"})
			require.NoError(t, err)
			require.True(t, res.Applied, r)
			require.Equal(t, int64(10), prepaidBalance(t, rl, "acct", r))
		}
	})
}

// TestPrepaidConcurrentTopUpsAndLeases: ten top-ups, each sent by three
// callers at once, race 16 goroutines of acquires of 50 that roll back,
// commit 30 or commit 60: each id applies once, and the balance ends at
// exactly what was paid less what was committed.
func TestPrepaidConcurrentTopUpsAndLeases(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000), limiter.Prepaid("usd")}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 500, ID: "seed"})
		require.NoError(t, err)
		var charged, applied atomic.Int64
		applied.Store(500)
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			for dup := 0; dup < 3; dup++ {
				wg.Go(func() {
					res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 100, ID: fmt.Sprintf("pay-%d", i)})
					if err != nil {
						t.Error(err)
						return
					}
					if res.Applied {
						applied.Add(100)
					}
				})
			}
		}
		for g := 0; g < 16; g++ {
			wg.Go(func() {
				for j := 0; j < 8; j++ {
					lease, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 50})
					if err != nil {
						continue
					}
					switch (g + j) % 3 {
					case 0:
						_ = lease.Rollback(ctx)
					case 1:
						_ = lease.Adjust(limiter.Consume{"usd": -20})
						if lease.Commit(ctx) == nil {
							charged.Add(30)
						}
					default:
						_ = lease.Adjust(limiter.Consume{"usd": 10})
						if lease.Commit(ctx) == nil {
							charged.Add(60)
						}
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(1500), applied.Load())
		require.Equal(t, applied.Load()-charged.Load(), prepaidBalance(t, rl, "acct", "gpt-4o"))
	})
}
