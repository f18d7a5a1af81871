package crossbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestOwnBucketResourceRefused: the bucket of a prepaid balance
// (gpt-4o/usd.balance) and of a calendar period (gpt-4o/usd.m2026-11) are
// not resources a caller may charge, reset, lower or give limits to. Were
// they, an acquire on gpt-4o/usd.balance under the entity's _default_
// limits (a rolling PerDay usd) would give the balance the rolling limit's
// refill, a day later a million micro-dollars of credit nobody paid for,
// and a Reset of it would fill the balance to its capacity (10^15). Every
// such call is a *ValidationError matching ErrInvalidName, and the balance
// and the period's budget stay what they were.
func TestOwnBucketResourceRefused(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T00:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, []limiter.Limit{
			limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd"), limiter.PerCalendarMonth("eur", 500)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: limiter.DefaultResource}, []limiter.Limit{
			limiter.PerMinute("rpm", 1000), limiter.PerDay("usd", 1_000_000), limiter.PerDay("eur", 1_000_000)}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 100, ID: "pay-1"})
		require.NoError(t, err)
		lease, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 40, "eur": 400})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))

		for _, res := range []string{"gpt-4o/usd.balance", "gpt-4o/eur.m2026-11"} {
			_, err = rl.Acquire(ctx, "acct", res, limiter.Consume{"rpm": 1})
			require.ErrorIs(t, err, limiter.ErrInvalidName, "Acquire %s", res)
			_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "acct", Resource: res, Consume: limiter.Consume{"rpm": 1}}})
			require.ErrorIs(t, err, limiter.ErrInvalidName, "AcquireAll %s", res)
			require.ErrorIs(t, rl.Reset(ctx, "acct", res), limiter.ErrInvalidName, "Reset %s", res)
			require.ErrorIs(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: res}, []limiter.Limit{limiter.PerMinute("usd", 1_000_000)}), limiter.ErrInvalidName, "SetLimits %s", res)
			_, err = rl.LowerTokens(ctx, "acct", res, limiter.Consume{"usd": 0, "eur": 0})
			require.ErrorIs(t, err, limiter.ErrInvalidName, "LowerTokens %s", res)
			_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: res, Limit: "usd", Amount: 1, ID: "pay-2"})
			require.ErrorIs(t, err, limiter.ErrInvalidName, "TopUp %s", res)
		}
		clk.set(clk.now().Add(24 * time.Hour))
		avail, err := rl.Available(ctx, "acct", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(60), avail["usd"], "the balance: 100 paid, 40 spent")
		require.Equal(t, int64(100), avail["eur"], "November's budget: 500, 400 spent")

		// Resources that only look alike are ordinary resources.
		for _, res := range []string{"gpt-4o/usd.balances", "gpt-4o/usd.m2026", "usd.balance", "gpt-4o/usd.d2026-11-1x"} {
			_, err = rl.Acquire(ctx, "acct", res, limiter.Consume{"rpm": 1})
			require.NoError(t, err, res)
		}
	})
}
