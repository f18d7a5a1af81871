package crossbackend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// sweeper is a backend that deletes expired items on demand at a given
// time (the memory store), as DynamoDB's TTL and Redis's expiry do on
// their own.
type sweeper interface{ Sweep(nowMs int64) int }

// bucketTTL returns the TTL (epoch seconds) of (entityID, resource).
func bucketTTL(t *testing.T, repo limiter.Repository, entityID, resource string) int64 {
	t.Helper()
	b, err := repo.GetBucket(context.Background(), store.BucketKey{EntityID: entityID, Resource: resource})
	require.NoError(t, err)
	require.NotNil(t, b)
	return b.TTL
}

// TestDebtOutlivesIdleTTL: a lease committed far over its estimate leaves
// the bucket at −10× its capacity; its TTL must not fall before the bucket
// has refilled to capacity, so that the debt is not forgiven by the
// backend deleting the idle item and an acquire creating it full again.
// rpm 10/min of a resource default: the idle TTL is 7 × 60 s = 420 s; the
// debt of 100 is repaid 600 s after the commit (full after 660 s). At
// 500 s, past the idle TTL, an acquire must still be refused. With
// background commits on and off, speculative writes on and off.
func TestDebtOutlivesIdleTTL(t *testing.T) {
	for _, c := range []struct {
		name              string
		background, specu bool
	}{{"sync-speculative", false, true}, {"sync-slow", false, false}, {"background", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, repo limiter.Repository) {
				ctx := context.Background()
				clk := &fakeClock{}
				t0 := mustTime("2026-11-10T12:00:00Z")
				clk.set(t0)
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 },
					func(o *limiter.Options) { o.BackgroundCommit = c.background }, func(o *limiter.Options) { o.SpeculativeWrites = c.specu })
				defer rl.Close()
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 10)}))

				lease, err := rl.Acquire(ctx, "debtor", "gpt-4o", limiter.Consume{"rpm": 1})
				require.NoError(t, err)
				require.NoError(t, lease.Adjust(limiter.Consume{"rpm": 109}))
				require.NoError(t, lease.Commit(ctx))

				avail, err := rl.Available(ctx, "debtor", "gpt-4o")
				require.NoError(t, err)
				require.Equal(t, int64(-100), avail["rpm"], "the debt")
				fullAt := t0.Add(660 * time.Second).Unix()
				require.GreaterOrEqual(t, bucketTTL(t, repo, "debtor", "gpt-4o"), fullAt, "the TTL falls before the debt is repaid")

				clk.set(t0.Add(500 * time.Second))
				if s, ok := repo.(sweeper); ok {
					s.Sweep(clk.now().UnixMilli())
				}
				_, err = rl.Acquire(ctx, "debtor", "gpt-4o", limiter.Consume{"rpm": 1})
				var rle *limiter.RateLimitExceededError
				require.True(t, errors.As(err, &rle), "an acquire at 500 s, 100 still owed: %v", err)
				avail, err = rl.Available(ctx, "debtor", "gpt-4o")
				require.NoError(t, err)
				require.Less(t, avail["rpm"], int64(0), "still in debt at 500 s")
			})
		})
	}
}

// TestDebtTTLKeptByOtherLimitWrite: a write that takes from another limit
// of the item (tpm) while rpm is in debt must not bring the TTL back to
// the idle TTL from its time: the TTL stays at or after the time rpm is
// full again.
func TestDebtTTLKeptByOtherLimitWrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		t0 := mustTime("2026-11-10T12:00:00Z")
		clk.set(t0)
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 }, func(o *limiter.Options) { o.SpeculativeWrites = false })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)}))

		lease, err := rl.Acquire(ctx, "debtor", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 1})
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(limiter.Consume{"rpm": 109}))
		require.NoError(t, lease.Commit(ctx))
		fullAt := t0.Add(660 * time.Second).Unix()

		clk.set(t0.Add(10 * time.Second))
		lease, err = rl.Acquire(ctx, "debtor", "gpt-4o", limiter.Consume{"tpm": 5})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		require.GreaterOrEqual(t, bucketTTL(t, repo, "debtor", "gpt-4o"), fullAt, "a write of tpm cut the TTL of rpm's debt")
	})
}

// TestDebtOnEntityBucketKeepsNoTTL: a commit far over the estimate on a
// bucket of entity-level limits (which never expire) gives it no TTL that
// could delete it: none, or (DynamoDB, when it cannot know the item has
// none) one at least a century away.
func TestDebtOnEntityBucketKeepsNoTTL(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		t0 := mustTime("2026-11-10T12:00:00Z")
		clk.set(t0)
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "own", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 10)}))
		lease, err := rl.Acquire(ctx, "own", "gpt-4o", limiter.Consume{"rpm": 1})
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(limiter.Consume{"rpm": 109}))
		require.NoError(t, lease.Commit(ctx))
		avail, err := rl.Available(ctx, "own", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(-100), avail["rpm"])
		if ttl := bucketTTL(t, repo, "own", "gpt-4o"); ttl != 0 {
			require.GreaterOrEqual(t, ttl, t0.AddDate(99, 0, 0).Unix(), "an entity-level bucket's TTL")
		}
	})
}
