package crossbackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestCalendarSwitchKeepsSpend: a limit whose zone or kind changes keeps
// what the old definition spent at the instant of the change, on every
// backend (the Redis Cluster too), speculative writes on and off, with a frozen clock:
//
//   - a daily budget spent at 12:00 UTC, set again in Pacific/Kiritimati
//     (already the next day there), admits nothing until Kiritimati's
//     midnight, then its whole budget;
//   - PerDay drained (and 300 of another one spent) and replaced by
//     PerCalendarDay keeps 0 (700) until midnight;
//   - PerCalendarDay with 600 spent, replaced by PerDay, starts from 400;
//   - PerCalendarDay with 600 spent, switched to Prepaid and back, has
//     400 left (what the balance paid for is not charged to the budget);
//   - PerCalendarDay with 600 spent, deleted where the resource's
//     default is PerDay: 400 left;
//   - New York's day spent 250, moved to UTC where the same date runs:
//     750 left.
func TestCalendarSwitchKeepsSpend(t *testing.T) {
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	ny := newYork(t)
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		for _, spec := range []bool{true, false} {
			t.Run(fmt.Sprintf("speculative=%v", spec), func(t *testing.T) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-28T12:00:00Z")
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }, func(o *limiter.Options) { o.SpeculativeWrites = spec })
				defer rl.Close()
				set := func(e string, l limiter.Limit) {
					t.Helper()
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: e, Resource: "gpt-4o"}, []limiter.Limit{l}))
				}
				usd := func(e string) int64 { t.Helper(); return left(t, rl, e, "gpt-4o", "usd") }
				refused := func(e string, amount int64, msg string) {
					t.Helper()
					_, err := rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"usd": amount})
					require.ErrorIs(t, err, limiter.ErrRateLimited, msg)
				}
				name := func(s string) string { return fmt.Sprintf("%s-%v", s, spec) }

				// Zone change: the UTC day of the 28th is spent; in
				// Kiritimati (UTC+14) the 29th began at 10:00Z.
				t.Run("zone", func(t *testing.T) {
					e := name("zone")
					set(e, limiter.PerCalendarDay("usd", 1000))
					spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": 1000})
					set(e, limiter.PerCalendarDay("usd", 1000).InLocation(kiritimati))
					require.Equal(t, int64(0), usd(e), "moved to Kiritimati")
					refused(e, 1, "the day spent in UTC, moved to Kiritimati")
					defer clk.at("2026-11-28T12:00:00Z")
					clk.at("2026-11-29T09:59:59Z")
					refused(e, 1, "a second before Kiritimati's midnight")
					spendAt(t, rl, clk, "2026-11-29T10:00:00Z", e, limiter.Consume{"usd": 1000})
				})

				// Rolling to calendar.
				for _, c := range []struct {
					spent, left int64
				}{{1000, 0}, {300, 700}} {
					t.Run(fmt.Sprintf("rolling-%d", c.spent), func(t *testing.T) {
						defer clk.at("2026-11-28T12:00:00Z")
						e := name(fmt.Sprintf("rolling-%d", c.spent))
						set(e, limiter.PerDay("usd", 1000))
						spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": c.spent})
						set(e, limiter.PerCalendarDay("usd", 1000))
						require.Equal(t, c.left, usd(e), "PerDay with %d spent, replaced by PerCalendarDay", c.spent)
						refused(e, c.left+1, "more than the day left")
						clk.at("2026-11-28T23:59:59Z")
						refused(e, c.left+1, "a second before midnight")
						spendAt(t, rl, clk, "2026-11-29T00:00:00Z", e, limiter.Consume{"usd": 1000})
					})
				}

				// Calendar to rolling.
				t.Run("to-rolling", func(t *testing.T) {
					e := name("to-rolling")
					set(e, limiter.PerCalendarDay("usd", 1000))
					spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": 600})
					set(e, limiter.PerDay("usd", 1000))
					require.Equal(t, int64(400), usd(e), "PerCalendarDay with 600 spent, replaced by PerDay")
					refused(e, 401, "more than the day left")
				})

				// Calendar to prepaid and back.
				t.Run("prepaid-and-back", func(t *testing.T) {
					e := name("prepaid")
					set(e, limiter.PerCalendarDay("usd", 1000))
					spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": 600})
					set(e, limiter.Prepaid("usd"))
					_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: e, Resource: "gpt-4o", Limit: "usd", Amount: 50, ID: "pay-1"})
					require.NoError(t, err)
					require.Equal(t, int64(50), usd(e), "the balance: what was paid in")
					spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": 50})
					set(e, limiter.PerCalendarDay("usd", 1000))
					require.Equal(t, int64(400), usd(e), "back to PerCalendarDay")
					refused(e, 401, "more than the day left")
				})

				// DeleteLimits leaving a default of another kind in force.
				t.Run("delete-limits", func(t *testing.T) {
					e := name("deleted")
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "emb"}, []limiter.Limit{limiter.PerDay("usd", 1000)}))
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: e, Resource: "emb"}, []limiter.Limit{limiter.PerCalendarDay("usd", 1000)}))
					lease, err := rl.Acquire(ctx, e, "emb", limiter.Consume{"usd": 600})
					require.NoError(t, err)
					require.NoError(t, lease.Commit(ctx))
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: e, Resource: "emb"}))
					require.Equal(t, int64(400), left(t, rl, e, "emb", "usd"), "the day's 600 spent, under the default PerDay")
					_, err = rl.Acquire(ctx, e, "emb", limiter.Consume{"usd": 401})
					require.ErrorIs(t, err, limiter.ErrRateLimited)
				})

				// A zone where the same date runs: the same period bucket.
				t.Run("same-date", func(t *testing.T) {
					e := name("same-date")
					set(e, limiter.PerCalendarDay("usd", 1000).InLocation(ny))
					spendAt(t, rl, clk, "2026-11-28T12:00:00Z", e, limiter.Consume{"usd": 250})
					set(e, limiter.PerCalendarDay("usd", 1000))
					require.Equal(t, int64(750), usd(e), "New York's 28th, moved to UTC's")
				})
			})
		}
	})
}
