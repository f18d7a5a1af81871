package crossbackend_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// lockLosingRepo fails its first refill-locked write (store.WriteNormal)
// after armed is set with store.ErrConditionFailed, writing nothing: the
// lock lost to another writer, as when one wrote the item between the
// acquire's read and its write.
type lockLosingRepo struct {
	limiter.Repository
	armed atomic.Bool
}

func (r *lockLosingRepo) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	for _, w := range writes {
		if w.Kind == store.WriteNormal && r.armed.CompareAndSwap(true, false) {
			return store.ErrConditionFailed
		}
	}
	return r.Repository.WriteBuckets(ctx, writes)
}

// TestDefaultsSwitchBackLostRace: an acquire after a default was switched
// back within its period, whose bucket predates the switch back, loses
// its refill-timestamp lock and writes again: that write keeps the cap
// the switches leave, on every backend (the Redis Cluster too). A day of
// 1,000: 1 spent under one definition, 500 under the other, back to the
// first: 499 are left, and after they are taken through the lost race
// nothing is (before, the retry took them from the bucket as it stood,
// 999, and the next acquire found 499 more).
//
//   - zone: PerCalendarDay in UTC and in Pacific/Kiritimati;
//   - kind: PerDay and PerCalendarDay.
func TestDefaultsSwitchBackLostRace(t *testing.T) {
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	day := limiter.PerCalendarDay("usd", 1000)
	for _, tc := range []struct {
		name        string
		first, then limiter.Limit
	}{
		{"zone", day, day.InLocation(kiritimati)},
		{"kind", limiter.PerDay("usd", 1000), day},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-28T12:00:00Z")
				r := &lockLosingRepo{Repository: repo}
				rl := limiter.New(r, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
				defer rl.Close()
				res := "race-" + tc.name
				defaults := func(l limiter.Limit) {
					t.Helper()
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{l}))
				}
				spend := func(amount int64) error {
					t.Helper()
					lease, err := rl.Acquire(ctx, "b", res, limiter.Consume{"usd": amount})
					if err == nil {
						require.NoError(t, lease.Commit(ctx))
					}
					return err
				}
				defaults(tc.first)
				require.NoError(t, spend(1))
				defaults(tc.then)
				require.NoError(t, spend(500))
				defaults(tc.first)
				require.Equal(t, int64(499), left(t, rl, "b", res, "usd"), "back: 1 and 500 spent")
				r.armed.Store(true)
				require.NoError(t, spend(499))
				require.False(t, r.armed.Load(), "the acquire did not lose its lock")
				require.ErrorIs(t, spend(1), limiter.ErrRateLimited, "the day spent: 1, 500 and 499")
				require.Equal(t, int64(0), left(t, rl, "b", res, "usd"))
			})
		})
	}
}

// TestDeletedDefaultsKeepTheirSwitches: the switch records of a config
// of defaults outlive its deletion, on every backend (the Redis Cluster
// too). A day of 1,000: 1 spent in UTC, the defaults moved to
// Pacific/Kiritimati and 998 spent there, then the config deleted, which
// gives the UTC day back to the entity (the day's bucket exists, from
// before the move): 1 is left, not the 999 that bucket holds.
//
//   - resource: a resource's defaults, deleted, give way to the system
//     defaults in UTC;
//   - entity-default: an entity's DefaultResource config, first set
//     over the resource's UTC default, deleted.
func TestDeletedDefaultsKeepTheirSwitches(t *testing.T) {
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	day := limiter.PerCalendarDay("usd", 1000)
	dayK := day.InLocation(kiritimati)
	for _, name := range []string{"resource", "entity-default"} {
		t.Run(name, func(t *testing.T) {
			eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-28T12:00:00Z")
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
				defer rl.Close()
				res := "chat"
				spend := func(amount int64) error {
					t.Helper()
					lease, err := rl.Acquire(ctx, "b", res, limiter.Consume{"usd": amount})
					if err == nil {
						require.NoError(t, lease.Commit(ctx))
					}
					return err
				}
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{day}))
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{day}))
				require.NoError(t, spend(1))
				if name == "resource" {
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{dayK}))
				} else {
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "b", Resource: limiter.DefaultResource}, []limiter.Limit{dayK}))
				}
				require.NoError(t, spend(998))
				if name == "resource" {
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: res}))
				} else {
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "b", Resource: limiter.DefaultResource}))
				}
				require.Equal(t, int64(1), left(t, rl, "b", res, "usd"), "back in UTC: 1 and 998 spent")
				require.ErrorIs(t, spend(2), limiter.ErrRateLimited, "back in UTC: 1 left")
				require.NoError(t, spend(1))
				require.ErrorIs(t, spend(1), limiter.ErrRateLimited, "the day spent")
			})
		})
	}
}
