package crossbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestPrepaidBalanceKeptAboveLoweredCapacity: a prepaid limit's capacity
// is the ceiling of top-ups, not of the balance: lowered to 1,000 under a
// balance of 4,999, the balance stays, also 40 days later (the balance
// bucket's negligible refill once capped it at the capacity).
func TestPrepaidBalanceKeptAboveLoweredCapacity(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-01-05T00:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd")}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 5000, ID: "pay-1"})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd").WithBurst(1000)}))
		lease, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		require.Equal(t, int64(4999), prepaidBalance(t, rl, "acct", "gpt-4o"))
		clk.set(clk.now().Add(40 * 24 * time.Hour))
		require.Equal(t, int64(4999), prepaidBalance(t, rl, "acct", "gpt-4o"), "Available after 40 days")
		lease, err = rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		require.Equal(t, int64(4998), prepaidBalance(t, rl, "acct", "gpt-4o"), "paid money kept above a lowered capacity")
	})
}

// TestPrepaidRefundAfterTopUpToCapacity: a rollback gives its estimate
// back in full to a balance topped up to its capacity meanwhile: paid
// 1,900, charged 100, 1,800 left (refunds were capped at the capacity,
// which left 1,000).
func TestPrepaidRefundAfterTopUpToCapacity(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd").WithBurst(1000)}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		l1, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 600})
		require.NoError(t, err)
		l2, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 300})
		require.NoError(t, err)
		res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 900, ID: "pay-2"})
		require.NoError(t, err)
		require.Equal(t, limiter.TopUpResult{Applied: true}, res)
		require.Equal(t, int64(1000), prepaidBalance(t, rl, "acct", "gpt-4o"))
		require.NoError(t, l1.Rollback(ctx))
		require.NoError(t, l2.Adjust(limiter.Consume{"usd": -200}))
		require.NoError(t, l2.Commit(ctx))
		// Paid 1900, charged 100.
		require.Equal(t, int64(1800), prepaidBalance(t, rl, "acct", "gpt-4o"))
	})
}
