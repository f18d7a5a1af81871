package crossbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// TestPrepaidRefundAtDefaultCeiling: the ceiling of a prepaid limit
// (10^15 for limiter.Prepaid) caps top-ups, never the refunds of what
// leases hold: paid 1,000, 500 and 200 held, topped up to the ceiling,
// then one lease rolled back and the other committed at 50: the balance
// is 10^15 + 650, also 40 days later, and pays for acquires; a further
// top-up is refused. Speculative writes on and off.
func TestPrepaidRefundAtDefaultCeiling(t *testing.T) {
	const ceiling = store.DefaultPrepaidCapacity
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		for _, spec := range []bool{false, true} {
			ctx := context.Background()
			clk := &fakeClock{}
			clk.at("2026-01-05T00:00:00Z")
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.SpeculativeWrites = spec })
			key := "acct-slow"
			if spec {
				key = "acct-spec"
			}
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: key, Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd")}))
			_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: key, Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
			require.NoError(t, err)
			l1, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 500})
			require.NoError(t, err)
			l2, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 200})
			require.NoError(t, err)
			_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: key, Resource: "gpt-4o", Limit: "usd", Amount: ceiling - 300, ID: "pay-2"})
			require.NoError(t, err)
			require.Equal(t, ceiling, prepaidBalance(t, rl, key, "gpt-4o"))

			require.NoError(t, l1.Rollback(ctx))
			require.Equal(t, ceiling+500, prepaidBalance(t, rl, key, "gpt-4o"), "the rollback comes back in full")
			require.NoError(t, l2.Adjust(limiter.Consume{"usd": -150}))
			require.NoError(t, l2.Commit(ctx))
			require.Equal(t, ceiling+650, prepaidBalance(t, rl, key, "gpt-4o"), "paid 10^15 + 700, charged 50")

			clk.set(clk.now().Add(40 * 24 * time.Hour))
			require.Equal(t, ceiling+650, prepaidBalance(t, rl, key, "gpt-4o"), "40 days later")
			_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: key, Resource: "gpt-4o", Limit: "usd", Amount: 1, ID: "pay-3"})
			require.ErrorIs(t, err, limiter.ErrValidation, "top-ups stay under the ceiling")
			lease, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 651})
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
			require.Equal(t, ceiling-1, prepaidBalance(t, rl, key, "gpt-4o"))
			require.NoError(t, rl.Close())
		}
	})
}

// TestPrepaidOldBalanceBucketRaised: a balance bucket written with the
// earlier capacity of 10^15 (full at it) takes the largest capacity on its
// next acquire, its balance kept, so that a rollback after a top-up to
// the ceiling comes back in full there too.
func TestPrepaidOldBalanceBucketRaised(t *testing.T) {
	const ceiling = store.DefaultPrepaidCapacity
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		for _, spec := range []bool{false, true} {
			ctx := context.Background()
			clk := &fakeClock{}
			clk.at("2026-01-05T00:00:00Z")
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.SpeculativeWrites = spec })
			key := "old-slow"
			if spec {
				key = "old-spec"
			}
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: key, Resource: "gpt-4o"}, []limiter.Limit{limiter.Prepaid("usd")}))
			nowMs := clk.now().UnixMilli()
			require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{{
				Kind: store.WriteCreate, Key: store.BucketKey{EntityID: key, Resource: "gpt-4o/usd.balance"}, NowMs: nowMs, ShardCount: 1,
				States: []store.BucketState{{LimitName: "usd", TokensMilli: ceiling * 1000, LastRefillMs: nowMs, CapacityMilli: ceiling * 1000,
					RefillAmountMilli: 1000, RefillPeriodMs: store.CalendarBucketRefillPeriod.Milliseconds()}},
			}}))
			lease, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"usd": 500})
			require.NoError(t, err)
			_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: key, Resource: "gpt-4o", Limit: "usd", Amount: 500, ID: "pay-1"})
			require.NoError(t, err)
			require.NoError(t, lease.Rollback(ctx))
			require.Equal(t, ceiling+500, prepaidBalance(t, rl, key, "gpt-4o"))
			require.NoError(t, rl.Close())
		}
	})
}
