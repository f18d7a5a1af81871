package crossbackend_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// racingRepo runs race once, just before its first write of the system
// config (the whole config put, or the write in place of a
// store.SystemConfigWriter).
type racingRepo struct {
	limiter.Repository
	once sync.Once
	race func()
}

func (r *racingRepo) PutConfig(ctx context.Context, key store.ConfigKey, c store.Config) error {
	if key == store.SystemConfig() {
		r.once.Do(r.race)
	}
	return r.Repository.PutConfig(ctx, key, c)
}

func (r *racingRepo) SetSystemConfig(ctx context.Context, prev, next store.Config) (bool, error) {
	r.once.Do(r.race)
	return store.Unwrap(r.Repository).(store.SystemConfigWriter).SetSystemConfig(ctx, prev, next)
}

// TestSystemDefaultsKeepConcurrentSwitch: SetSystemDefaults and the
// switch records that DeleteLimits of an entity's DefaultResource config
// adds to the system config, one landing between the other's read of the
// system config and its write, keep both, on every backend (the Redis
// Cluster too): e1 spent its PerDay 500 under its own defaults, which
// gave way to the system's PerCalendarDay 1,000, and has 500 left of that
// day, not 1,000.
//
//   - records-meanwhile: the system defaults are stored; DeleteLimits
//     lands within SetSystemDefaults (which wrote over its record);
//   - defaults-meanwhile: no system defaults are stored yet;
//     SetSystemDefaults lands within DeleteLimits (whose write of the
//     records alone wrote over the defaults).
func TestSystemDefaultsKeepConcurrentSwitch(t *testing.T) {
	day := limiter.PerCalendarDay("usd", 1000)
	for _, name := range []string{"records-meanwhile", "defaults-meanwhile"} {
		t.Run(name, func(t *testing.T) {
			eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-28T12:00:00Z")
				opts := []func(*limiter.Options){func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }}
				rl := limiter.New(repo, opts...)
				defer rl.Close()
				if name == "records-meanwhile" {
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{day}))
				}
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e1", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerDay("usd", 500)}))
				lease, err := rl.Acquire(ctx, "e1", "chat", limiter.Consume{"usd": 500})
				require.NoError(t, err)
				require.NoError(t, lease.Commit(ctx))

				setDefaults := func(rl *limiter.RateLimiter) {
					require.NoError(t, rl.Admin().SetSystemDefaults(ctx, []limiter.Limit{day}, limiter.OnUnavailableAllow))
				}
				deleteLimits := func(rl *limiter.RateLimiter) {
					require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "e1", Resource: limiter.DefaultResource}))
				}
				outer, inner := setDefaults, deleteLimits
				if name == "defaults-meanwhile" {
					outer, inner = deleteLimits, setDefaults
				}
				raced := false
				hooked := limiter.New(&racingRepo{Repository: repo, race: func() { raced = true; inner(rl) }}, opts...)
				defer hooked.Close()
				outer(hooked)
				require.True(t, raced)

				limits, mode, err := rl.Admin().SystemDefaults(ctx)
				require.NoError(t, err)
				require.Equal(t, []limiter.Limit{day}, limits)
				require.Equal(t, limiter.OnUnavailableAllow, mode)
				require.Equal(t, int64(500), left(t, rl, "e1", "chat", "usd"), "e1's PerDay spend carries into the system's day")
				lease, err = rl.Acquire(ctx, "e1", "chat", limiter.Consume{"usd": 500})
				require.NoError(t, err)
				require.NoError(t, lease.Commit(ctx))
				_, err = rl.Acquire(ctx, "e1", "chat", limiter.Consume{"usd": 1})
				require.ErrorIs(t, err, limiter.ErrRateLimited, "e1 spent 1,000 of the day")
			})
		})
	}
}

// TestDeleteSystemDefaultsKeepsSwitches: the switch records the system
// config holds for an entity or a resource outlive DeleteSystemDefaults,
// on every backend (the Redis Cluster too): e1 drained its own
// DefaultResource PerDay 1,000 and, once that config was deleted,
// inherits the resource's PerCalendarDay 1,000 with nothing left of the
// day; deleting the system defaults (which e1 never used) leaves it so.
func TestDeleteSystemDefaultsKeepsSwitches(t *testing.T) {
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-28T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		res := "chat"
		require.NoError(t, rl.Admin().SetSystemDefaults(ctx, []limiter.Limit{limiter.PerMinute("rpm", 100)}, limiter.OnUnavailableAllow))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: res}, []limiter.Limit{limiter.PerCalendarDay("usd", 1000)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e1", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerDay("usd", 1000)}))
		lease, err := rl.Acquire(ctx, "e1", res, limiter.Consume{"usd": 1000})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "e1", Resource: limiter.DefaultResource}))
		require.Equal(t, int64(0), left(t, rl, "e1", res, "usd"), "the day spent under PerDay")

		require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{}))
		limits, mode, err := rl.Admin().SystemDefaults(ctx)
		require.NoError(t, err)
		require.Empty(t, limits)
		require.Equal(t, limiter.OnUnavailable(""), mode)
		require.Equal(t, int64(0), left(t, rl, "e1", res, "usd"), "the day spent under PerDay, system defaults deleted")
		_, err = rl.Acquire(ctx, "e1", res, limiter.Consume{"usd": 1})
		require.ErrorIs(t, err, limiter.ErrRateLimited, "the day was spent")
	})
}
