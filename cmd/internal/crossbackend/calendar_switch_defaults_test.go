package crossbackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestDefaultsSwitchKeepsSpend: a limit of a resource's defaults, of the
// system defaults or of an entity's DefaultResource config whose zone or
// kind changes keeps, for every entity that inherits it, what the old
// definition spent at the instant of the change, on every backend (the
// Redis Cluster too), speculative writes on and off, with a frozen clock:
//
//   - resource defaults: a daily budget spent (1,000 by one entity, 300
//     by another) at 12:00 UTC, set again in Pacific/Kiritimati (already
//     the next day there), leaves 0 and 700 until Kiritimati's midnight,
//     an entity that spent nothing 1,000;
//   - resource defaults: PerDay drained, replaced by PerCalendarDay, is
//     spent until midnight; PerCalendarDay with 600 spent, replaced by
//     PerDay, starts from 400 and refills at its rate;
//   - system defaults: the zone change, as for a resource;
//   - DeleteResourceDefaults giving way to system defaults in another
//     zone: the day spent stays spent;
//   - flipped back and forth between two zones (or between PerDay and
//     PerCalendarDay) within the day, an acquire after each switch: the
//     day spent in one stays spent in the other, also when both buckets
//     exist before the switch back (1 spent in each, then 998 and no
//     more), speculative writes on or off;
//   - an entity's DefaultResource config: the zone change, its deletion
//     giving way to a resource's default in another zone (for that entity
//     alone), and its first config set over a resource's PerDay default
//     that was drained.
func TestDefaultsSwitchKeepsSpend(t *testing.T) {
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	day := limiter.PerCalendarDay("usd", 1000)
	dayK := limiter.PerCalendarDay("usd", 1000).InLocation(kiritimati)
	for _, spec := range []bool{true, false} {
		t.Run(fmt.Sprintf("speculative=%v", spec), func(t *testing.T) {
			eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-28T12:00:00Z")
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }, func(o *limiter.Options) { o.SpeculativeWrites = spec })
				defer rl.Close()
				spend := func(t *testing.T, e, res string, amount int64) {
					t.Helper()
					lease, err := rl.Acquire(ctx, e, res, limiter.Consume{"usd": amount})
					require.NoError(t, err, "%s spends %d on %s", e, amount, res)
					require.NoError(t, lease.Commit(ctx))
				}
				refused := func(t *testing.T, e, res string, amount int64, msg string) {
					t.Helper()
					_, err := rl.Acquire(ctx, e, res, limiter.Consume{"usd": amount})
					require.ErrorIs(t, err, limiter.ErrRateLimited, msg)
				}
				usd := func(t *testing.T, e, res string) int64 { t.Helper(); return left(t, rl, e, res, "usd") }
				resDefaults := func(t *testing.T, res string, l limiter.Limit) {
					t.Helper()
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{l}))
				}

				t.Run("entity-default-deleted", func(t *testing.T) {
					// First: no system defaults yet, whose switch to the
					// resource's would carry g's spend too.
					res := "entity-default-deleted"
					resDefaults(t, res, day)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "g", Resource: limiter.DefaultResource}, []limiter.Limit{dayK}))
					spend(t, "g", res, 1000) // Kiritimati's 29th
					require.Equal(t, int64(1000), usd(t, "h", res), "h inherits the resource's day")
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "g", Resource: limiter.DefaultResource}))
					require.Equal(t, int64(0), usd(t, "g", res), "g's day spent in Kiritimati, under the resource's UTC day")
					refused(t, "g", res, 1, "g's day spent in Kiritimati, under the resource's UTC day")
					spend(t, "h", res, 1000) // another entity: nothing carried
				})

				t.Run("resource-zone", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					res := "zone"
					resDefaults(t, res, day)
					spend(t, "a", res, 1000)
					spend(t, "b", res, 300)
					resDefaults(t, res, dayK)
					require.Equal(t, int64(0), usd(t, "a", res), "a's UTC day, moved to Kiritimati")
					require.Equal(t, int64(700), usd(t, "b", res), "b's UTC day, moved to Kiritimati")
					require.Equal(t, int64(1000), usd(t, "c", res), "c spent nothing")
					refused(t, "a", res, 1, "a's day spent in UTC, moved to Kiritimati")
					refused(t, "b", res, 701, "more than b's day left")
					spend(t, "b", res, 700)
					refused(t, "b", res, 1, "b's day spent")
					spend(t, "c", res, 1000)
					clk.at("2026-11-29T09:59:59Z")
					refused(t, "a", res, 1, "a second before Kiritimati's midnight")
					clk.at("2026-11-29T10:00:00Z")
					spend(t, "a", res, 1000)
					spend(t, "b", res, 1000)
				})

				t.Run("flip-back-spent", func(t *testing.T) {
					// The attacker's sequence: a day spent in UTC, the
					// default flipped to Kiritimati, back to UTC and to
					// Kiritimati again, an acquire tried after each.
					res := "flip-spent"
					resDefaults(t, res, day)
					spend(t, "a", res, 1000)
					for i, l := range []limiter.Limit{dayK, day, dayK} {
						resDefaults(t, res, l)
						refused(t, "a", res, 1, fmt.Sprintf("switch %d: the day was spent", i+1))
						require.Equal(t, int64(0), usd(t, "a", res), "switch %d", i+1)
					}
				})

				t.Run("flip-back-both-buckets", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					// Both zones' buckets exist before the switch back:
					// each keeps what the other spent since.
					res := "flip-both"
					resDefaults(t, res, day)
					spend(t, "b", res, 1) // UTC's day: 999 left
					resDefaults(t, res, dayK)
					spend(t, "b", res, 1) // Kiritimati's day, from 999: 998 left
					resDefaults(t, res, day)
					require.Equal(t, int64(998), usd(t, "b", res), "back to UTC: Kiritimati's spend stays")
					refused(t, "b", res, 999, "back to UTC: 998 left, not UTC's 999")
					spend(t, "b", res, 998)
					refused(t, "b", res, 1, "the day spent")
					resDefaults(t, res, dayK)
					require.Equal(t, int64(0), usd(t, "b", res), "to Kiritimati again: UTC's spend stays")
					refused(t, "b", res, 1, "to Kiritimati again: the day spent in UTC")
					resDefaults(t, res, day)
					refused(t, "b", res, 1, "UTC again")
					resDefaults(t, res, dayK)
					clk.at("2026-11-29T09:59:59Z")
					refused(t, "b", res, 1, "a second before Kiritimati's midnight")
					clk.at("2026-11-29T10:00:00Z")
					spend(t, "b", res, 1000)
				})

				t.Run("flip-back-kind", func(t *testing.T) {
					// The same with a kind: PerDay (the entity's bucket)
					// and PerCalendarDay (the day's bucket) both exist
					// before the switch back.
					res := "flip-kind"
					rolling := limiter.PerDay("usd", 1000)
					resDefaults(t, res, rolling)
					spend(t, "k", res, 1)
					resDefaults(t, res, day)
					spend(t, "k", res, 1)
					resDefaults(t, res, rolling)
					refused(t, "k", res, 999, "back to PerDay: 998 left")
					spend(t, "k", res, 998)
					refused(t, "k", res, 1, "the day spent")
					resDefaults(t, res, day)
					refused(t, "k", res, 1, "to PerCalendarDay again: spent under PerDay")
					require.Equal(t, int64(0), usd(t, "k", res))
				})

				t.Run("resource-rolling-to-calendar", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					res := "to-calendar"
					resDefaults(t, res, limiter.PerDay("usd", 1000))
					spend(t, "a", res, 1000)
					resDefaults(t, res, day)
					require.Equal(t, int64(0), usd(t, "a", res), "PerDay drained, replaced by PerCalendarDay")
					refused(t, "a", res, 1, "PerDay drained, replaced by PerCalendarDay")
					clk.at("2026-11-28T23:59:59Z")
					refused(t, "a", res, 1, "a second before midnight")
					clk.at("2026-11-29T00:00:00Z")
					spend(t, "a", res, 1000)
				})

				t.Run("resource-calendar-to-rolling", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					res := "to-rolling"
					resDefaults(t, res, day)
					spend(t, "a", res, 600)
					resDefaults(t, res, limiter.PerDay("usd", 1000))
					require.Equal(t, int64(400), usd(t, "a", res), "PerCalendarDay with 600 spent, replaced by PerDay")
					refused(t, "a", res, 401, "more than the day left")
					// PerDay refills 1,000 a day: 100 in 2.4 hours.
					clk.at("2026-11-28T14:24:00Z")
					refused(t, "a", res, 501, "more than the day left and its refill")
					spend(t, "a", res, 500)
				})

				t.Run("delete-resource-defaults", func(t *testing.T) {
					res := "deleted"
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{day}))
					resDefaults(t, res, dayK)
					spend(t, "a", res, 1000) // Kiritimati's 29th
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: res}))
					// The system's UTC 28th: the day spent in Kiritimati is spent.
					require.Equal(t, int64(0), usd(t, "a", res), "the resource's day spent, under the system's")
					refused(t, "a", res, 1, "the resource's day spent, under the system's")
				})

				t.Run("system-zone", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					res := "system"
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{day}))
					spend(t, "a", res, 1000)
					spend(t, "b", res, 250)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{dayK}))
					refused(t, "a", res, 1, "a's UTC day under the system defaults, moved to Kiritimati")
					require.Equal(t, int64(750), usd(t, "b", res), "b's UTC day, moved to Kiritimati")
					refused(t, "b", res, 751, "more than b's day left")
					spend(t, "b", res, 750)
					clk.at("2026-11-29T10:00:00Z")
					spend(t, "a", res, 1000)
				})

				t.Run("entity-default-zone", func(t *testing.T) {
					defer clk.at("2026-11-28T12:00:00Z")
					res := "entity-default"
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.DefaultResource}, []limiter.Limit{day}))
					spend(t, "e", res, 1000)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.DefaultResource}, []limiter.Limit{dayK}))
					require.Equal(t, int64(0), usd(t, "e", res), "e's UTC day, moved to Kiritimati")
					refused(t, "e", res, 1, "e's UTC day, moved to Kiritimati")
					clk.at("2026-11-29T10:00:00Z")
					spend(t, "e", res, 1000)
				})

				t.Run("entity-default-over-resource-defaults", func(t *testing.T) {
					res := "inherited"
					resDefaults(t, res, limiter.PerDay("usd", 1000))
					spend(t, "f", res, 1000)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "f", Resource: limiter.DefaultResource}, []limiter.Limit{day}))
					require.Equal(t, int64(0), usd(t, "f", res), "the resource's PerDay drained, then f's own PerCalendarDay")
					refused(t, "f", res, 1, "the resource's PerDay drained, then f's own PerCalendarDay")
				})

				t.Run("flip-back-parent", func(t *testing.T) {
					// The parent inherits the switched default; the key's
					// own limit does not switch, so only the parent's
					// bucket predates the switch back.
					res := "flip-parent"
					_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "fp-org"})
					require.NoError(t, err)
					_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "fp-key", ParentID: "fp-org", Cascade: true})
					require.NoError(t, err)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "fp-key", Resource: res}, []limiter.Limit{limiter.PerMinute("rpm", 1_000_000)}))
					take := func(t *testing.T, amount int64) error {
						t.Helper()
						lease, err := rl.Acquire(ctx, "fp-key", res, limiter.Consume{"usd": amount, "rpm": 1})
						if err == nil {
							require.NoError(t, lease.Commit(ctx))
						}
						return err
					}
					rolling := limiter.PerDay("usd", 1000)
					resDefaults(t, res, rolling)
					require.NoError(t, take(t, 1))
					resDefaults(t, res, day)
					require.NoError(t, take(t, 1))
					resDefaults(t, res, rolling)
					require.ErrorIs(t, take(t, 999), limiter.ErrRateLimited, "back to PerDay: 998 left")
					require.NoError(t, take(t, 998))
					require.ErrorIs(t, take(t, 1), limiter.ErrRateLimited, "the day spent")
					resDefaults(t, res, day)
					require.ErrorIs(t, take(t, 1), limiter.ErrRateLimited, "to PerCalendarDay again: spent under PerDay")
				})

				t.Run("flip-back-entity-wide", func(t *testing.T) {
					// Last: a default on AllResources applies to every
					// entity's acquires. Its own name keeps the other
					// defaults out of the count.
					defer func() {
						require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: limiter.AllResources}))
					}()
					take := func(t *testing.T, res string, amount int64) error {
						t.Helper()
						lease, err := rl.Acquire(ctx, "w", res, limiter.Consume{"wusd": amount})
						if err == nil {
							require.NoError(t, lease.Commit(ctx))
						}
						return err
					}
					rolling := limiter.PerDay("wusd", 1000)
					calendar := limiter.PerCalendarDay("wusd", 1000)
					resDefaults(t, limiter.AllResources, rolling)
					require.NoError(t, take(t, "model-x", 1))
					resDefaults(t, limiter.AllResources, calendar)
					require.NoError(t, take(t, "model-y", 1))
					resDefaults(t, limiter.AllResources, rolling)
					require.ErrorIs(t, take(t, "model-x", 999), limiter.ErrRateLimited, "back to PerDay: 998 left")
					require.NoError(t, take(t, "model-z", 998))
					require.ErrorIs(t, take(t, "model-x", 1), limiter.ErrRateLimited, "the day spent")
					resDefaults(t, limiter.AllResources, calendar)
					require.ErrorIs(t, take(t, "model-y", 1), limiter.ErrRateLimited, "to PerCalendarDay again: spent under PerDay")
				})
			})
		})
	}
}
