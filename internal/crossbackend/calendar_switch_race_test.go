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
				rl := limiter.New(r, limiter.WithClock(clk.now), limiter.WithConfigCacheTTL(0))
				defer rl.Close()
				res := "race-" + tc.name
				defaults := func(l limiter.Limit) {
					t.Helper()
					require.NoError(t, rl.SetResourceDefaults(ctx, res, []limiter.Limit{l}))
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
