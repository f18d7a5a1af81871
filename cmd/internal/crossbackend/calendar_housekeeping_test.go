package crossbackend_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// spendAt acquires and commits consume for (entityID, gpt-4o) at t.
func spendAt(t *testing.T, rl *limiter.RateLimiter, clk *fakeClock, at, entityID string, consume limiter.Consume) {
	t.Helper()
	clk.at(at)
	lease, err := rl.Acquire(context.Background(), entityID, "gpt-4o", consume)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(context.Background()))
}

// periodTokens returns the balance of limit usd in the period bucket
// resource of entityID.
func periodTokens(t *testing.T, repo limiter.Repository, entityID, resource string) int64 {
	t.Helper()
	b, err := repo.GetBucket(context.Background(), store.BucketKey{EntityID: entityID, Resource: resource})
	require.NoError(t, err)
	require.NotNil(t, b, resource)
	s, ok := b.State("usd")
	require.True(t, ok, resource)
	return s.Tokens()
}

// TestCalendarResetFillsPeriod: Reset fills the current period's bucket of
// the entity's calendar limits with its bucket, also when the entity's
// limits are all calendar limits (no bucket of its own), and leaves
// earlier periods as they are.
func TestCalendarResetFillsPeriod(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		budget := limiter.PerCalendarMonth("usd", 1000)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "mixed", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerHour("rph", 100), budget}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "money-only", Resource: "gpt-4o"}, []limiter.Limit{budget}))

		for _, id := range []string{"mixed", "money-only"} {
			spendAt(t, rl, clk, "2026-10-15T12:00:00Z", id, limiter.Consume{"usd": 500})
			consume := limiter.Consume{"usd": 900}
			if id == "mixed" {
				consume["rph"] = 30
			}
			spendAt(t, rl, clk, "2026-11-10T12:00:00Z", id, consume)
			avail, err := rl.Available(ctx, id, "gpt-4o")
			require.NoError(t, err)
			require.Equal(t, int64(100), avail["usd"], id)

			require.NoError(t, rl.Reset(ctx, id, "gpt-4o"))
			avail, err = rl.Available(ctx, id, "gpt-4o")
			require.NoError(t, err)
			require.Equal(t, int64(1000), avail["usd"], "%s: the current period after Reset", id)
			if id == "mixed" {
				require.Equal(t, int64(100), avail["rph"], "%s: the rolling bucket after Reset", id)
			}
			require.Equal(t, int64(500), periodTokens(t, repo, id, "gpt-4o/usd.m2026-10"), "%s: October after Reset", id)
		}
	})
}

// TestCalendarPeriodBucketTTL: a period bucket expires one day after the
// end of the period that follows it, whatever level its limit is stored
// at, while the entity's own bucket keeps no TTL; Options.BucketTTLPeriods 0 sets
// none.
func TestCalendarPeriodBucketTTL(t *testing.T) {
	ny := newYork(t)
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "ttl-e", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerHour("rph", 100), limiter.PerCalendarMonth("usd", 1000).InLocation(ny)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{limiter.PerCalendarDay("usd", 1000)}))
		spendAt(t, rl, clk, "2026-11-10T12:00:00Z", "ttl-e", limiter.Consume{"rph": 1, "usd": 5})
		spendAt(t, rl, clk, "2026-11-10T12:00:00Z", "ttl-d", limiter.Consume{"usd": 5})

		ttl := func(entityID, resource string) int64 {
			t.Helper()
			b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: entityID, Resource: resource})
			require.NoError(t, err)
			require.NotNil(t, b, resource)
			return b.TTL
		}
		// November in New York: December ends at 2027-01-01T05:00Z.
		require.Equal(t, mustTime("2027-01-02T05:00:00Z").Unix(), ttl("ttl-e", "gpt-4o/usd.m2026-11"))
		require.Zero(t, ttl("ttl-e", "gpt-4o"), "the entity's own bucket")
		// 2026-11-10 (UTC): the 11th ends at 2026-11-12T00:00Z.
		require.Equal(t, mustTime("2026-11-13T00:00:00Z").Unix(), ttl("ttl-d", "gpt-4o/usd.d2026-11-10"))

		// A later write sets the same expiry.
		spendAt(t, rl, clk, "2026-11-20T08:30:00.500Z", "ttl-e", limiter.Consume{"rph": 1, "usd": 5})
		require.Equal(t, mustTime("2027-01-02T05:00:00Z").Unix(), ttl("ttl-e", "gpt-4o/usd.m2026-11"))

		off := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }, func(o *limiter.Options) { o.BucketTTLPeriods = 0 })
		defer off.Close()
		spendAt(t, off, clk, "2026-11-10T12:00:00Z", "ttl-off", limiter.Consume{"usd": 5})
		require.Zero(t, ttl("ttl-off", "gpt-4o/usd.d2026-11-10"), "Options.BucketTTLPeriods 0")

		// A prepaid balance is money: it takes no period's expiry, also
		// when its limit is a resource default (whose buckets expire after
		// their time to fill, for a balance a century). The read-then-write
		// path sets the expiry.
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "emb"}, []limiter.Limit{limiter.Prepaid("credit")}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "ttl-p", Resource: "emb", Limit: "credit", Amount: 100, ID: "t1"})
		require.NoError(t, err)
		slow := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.SpeculativeWrites = false })
		defer slow.Close()
		lease, err := slow.Acquire(ctx, "ttl-p", "emb", limiter.Consume{"credit": 5})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		if got := ttl("ttl-p", "emb/credit.balance"); got != 0 {
			require.GreaterOrEqual(t, got, mustTime("2126-01-01T00:00:00Z").Unix(), "the balance's expiry")
		}
	})
}

// TestCalendarBudgetChangedMidPeriod: a calendar budget changed in the
// middle of its period keeps what the period spent: lowered from 500 to
// 400 after 100 spent, 300 are left (not 400: the period would spend 500
// of a 400 budget); raised to 600 after 400 spent, 200 are left (not 0).
// Speculative writes on and off.
func TestCalendarBudgetChangedMidPeriod(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		for _, spec := range []bool{true, false} {
			t.Run(fmt.Sprintf("speculative=%v", spec), func(t *testing.T) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-10T12:00:00Z")
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }, func(o *limiter.Options) { o.SpeculativeWrites = spec })
				defer rl.Close()
				e := fmt.Sprintf("mid-%v", spec)
				set := func(budget int64) {
					t.Helper()
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: e, Resource: "gpt-4o"}, []limiter.Limit{limiter.PerCalendarMonth("usd", budget)}))
				}
				left := func() int64 {
					t.Helper()
					av, err := rl.Available(ctx, e, "gpt-4o")
					require.NoError(t, err)
					return av["usd"]
				}
				set(500)
				spendAt(t, rl, clk, "2026-11-10T12:00:00Z", e, limiter.Consume{"usd": 100})
				require.Equal(t, int64(400), left())

				set(400)
				require.Equal(t, int64(300), left(), "lowered to 400 after 100 spent")
				_, err := rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"usd": 301})
				require.ErrorIs(t, err, limiter.ErrRateLimited, "301 of a budget with 300 left")
				spendAt(t, rl, clk, "2026-11-10T12:00:01Z", e, limiter.Consume{"usd": 300})
				require.Equal(t, int64(0), left())

				set(600)
				require.Equal(t, int64(200), left(), "raised to 600 after 400 spent")
				spendAt(t, rl, clk, "2026-11-10T12:00:02Z", e, limiter.Consume{"usd": 200})
				_, err = rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"usd": 1})
				require.ErrorIs(t, err, limiter.ErrRateLimited, "600 spent of 600")
			})
		}
	})
}
