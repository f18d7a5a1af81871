package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestLimitCaps: a cap lowers the limit it names, whether the limit comes
// from WithLimits or from the stored config, never raises one, never adds
// one, and leaves a cascade parent's limits alone.
func TestLimitCaps(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	newRL := func(t *testing.T) *limiter.RateLimiter {
		rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
		t.Cleanup(func() { _ = rl.Close() })
		return rl
	}
	primary := func(t *testing.T, err error) limiter.Limit {
		t.Helper()
		var denied *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &denied)
		return denied.Primary.Limit
	}

	t.Run("per-call limits", func(t *testing.T) {
		rl := newRL(t)
		perCall := limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000))
		// A cap above the per-call limit changes nothing: 1001 tokens are
		// refused by the per-call 1000.
		_, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 1001}, perCall,
			limiter.WithLimitCaps(limiter.PerMinute("rpm", 900), limiter.PerMinute("tpm", 1_000_000)))
		assert.Equal(t, limiter.PerMinute("tpm", 1000), primary(t, err))
		// A cap below it lowers it, capacity and refill.
		_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 501}, perCall,
			limiter.WithLimitCaps(limiter.PerMinute("tpm", 500)))
		assert.Equal(t, limiter.PerMinute("tpm", 500), primary(t, err))
		// A cap on a limit the call does not have adds nothing.
		lease, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 1}, perCall,
			limiter.WithLimitCaps(limiter.PerMinute("other", 1)))
		require.NoError(t, err)
		names := []string{}
		for _, s := range lease.Statuses() {
			names = append(names, s.Limit.Name)
		}
		assert.ElementsMatch(t, []string{"rpm", "tpm"}, names)
		require.NoError(t, lease.Commit(ctx))
	})

	t.Run("stored limits", func(t *testing.T) {
		rl := newRL(t)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "m"}, []limiter.Limit{limiter.PerMinute("tpm", 10_000).WithBurst(20_000)}))
		// The lower capacity and the lower rate, the stored limit's
		// period kept.
		_, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 15_001},
			limiter.WithLimitCaps(limiter.PerSecond("tpm", 50).WithBurst(15_000)))
		assert.Equal(t, limiter.Limit{Name: "tpm", Capacity: 15_000, RefillAmount: 3000, RefillPeriod: time.Minute}, primary(t, err))
		// A change of the stored limit applies with the cap: the lower
		// of the two, now the stored one.
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "m"}, []limiter.Limit{limiter.PerMinute("tpm", 100)}))
		rl.Admin().InvalidateCaches()
		_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 101},
			limiter.WithLimitCaps(limiter.PerSecond("tpm", 50).WithBurst(15_000)))
		assert.Equal(t, limiter.PerMinute("tpm", 100), primary(t, err))
	})

	t.Run("cascade parent left alone", func(t *testing.T) {
		rl := newRL(t)
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "P"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "C", ParentID: "P", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "m"}, []limiter.Limit{limiter.PerMinute("tpm", 1000)}))
		lease, err := rl.Acquire(ctx, "C", "m", limiter.Consume{"tpm": 100}, limiter.WithLimitCaps(limiter.PerMinute("tpm", 200)))
		require.NoError(t, err)
		caps := map[string]int64{}
		for _, s := range lease.Statuses() {
			caps[s.EntityID] = s.Limit.Capacity
		}
		assert.Equal(t, map[string]int64{"C": 200, "P": 1000}, caps)
		require.NoError(t, lease.Commit(ctx))
	})

	t.Run("available and invalid caps", func(t *testing.T) {
		rl := newRL(t)
		perCall := limiter.WithLimits(limiter.PerMinute("tpm", 1000))
		a, err := rl.Available(ctx, "k", "m", perCall, limiter.WithLimitCaps(limiter.PerMinute("tpm", 300)))
		require.NoError(t, err)
		assert.Equal(t, map[string]int64{"tpm": 300}, a)
		_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"tpm": 1}, perCall, limiter.WithLimitCaps(limiter.Limit{Name: "tpm"}))
		require.ErrorIs(t, err, limiter.ErrValidation)
	})
}
