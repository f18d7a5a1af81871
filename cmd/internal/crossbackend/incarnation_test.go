package crossbackend_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
)

// The tests of this file check that an entity deleted and created again
// with the same id is a new entity: nothing acquired before the delete
// settles into it, on every backend.

// eachBackendAndCluster runs f as eachBackend does, and on the package's
// three-master Redis Cluster.
func eachBackendAndCluster(t *testing.T, f func(t *testing.T, repo limiter.Repository)) {
	eachBackend(t, f)
	t.Run("redis-cluster", func(t *testing.T) {
		repo, err := redisstore.New(redisserver.ClusterClient(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
		require.NoError(t, err)
		f(t, repo)
	})
}

// left returns what entityID has left of limit name on resource.
func left(t *testing.T, rl *limiter.RateLimiter, entityID, resource, name string, opts ...limiter.AcquireOption) int64 {
	t.Helper()
	av, err := rl.Available(context.Background(), entityID, resource, opts...)
	require.NoError(t, err)
	v, ok := av[name]
	require.True(t, ok, "%s has no %s on %s: %v", entityID, name, resource, av)
	return v
}

// TestIncarnationLeaseBeforeDelete: leases acquired before DeleteEntity
// (a rolling budget and a calendar one) are rolled back, adjusted and
// committed after the entity was created again and spent: the new
// entity's balances stay what it spent left them (40 of 1,000 after 960,
// not 140; 990 of the day's budget after 10, not 1,000). On the
// speculative and the read-then-write path, with background commit on
// and off.
func TestIncarnationLeaseBeforeDelete(t *testing.T) {
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		for _, mode := range []struct{ spec, background bool }{{true, false}, {false, false}, {true, true}} {
			t.Run(fmt.Sprintf("speculative=%v/background=%v", mode.spec, mode.background), func(t *testing.T) {
				ctx := context.Background()
				clk := &fakeClock{}
				clk.at("2026-11-10T12:00:00Z")
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 },
					func(o *limiter.Options) { o.SpeculativeWrites = mode.spec }, func(o *limiter.Options) { o.BackgroundCommit = mode.background })
				defer rl.Close()
				e := fmt.Sprintf("key-%v-%v", mode.spec, mode.background)
				create := func() {
					t.Helper()
					_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: e})
					require.NoError(t, err)
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: e, Resource: "gpt-4o"}, []limiter.Limit{limiter.PerDay("tpm", 1000), limiter.PerCalendarDay("usd", 1000)}))
				}
				create()
				rollback, err := rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"tpm": 100, "usd": 100})
				require.NoError(t, err)
				commit, err := rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"tpm": 100, "usd": 100})
				require.NoError(t, err)

				require.NoError(t, rl.Admin().DeleteEntity(ctx, e))
				create()
				spendAt(t, rl, clk, "2026-11-10T12:00:00Z", e, limiter.Consume{"tpm": 960, "usd": 10})
				require.Equal(t, int64(40), left(t, rl, e, "gpt-4o", "tpm"))
				require.Equal(t, int64(990), left(t, rl, e, "gpt-4o", "usd"))

				require.NoError(t, rollback.Rollback(ctx), "a lease of the deleted entity rolls back as one of an expired bucket")
				require.Equal(t, int64(40), left(t, rl, e, "gpt-4o", "tpm"), "the old lease's rollback")
				require.Equal(t, int64(990), left(t, rl, e, "gpt-4o", "usd"), "the old lease's rollback")
				require.NoError(t, commit.Adjust(limiter.Consume{"tpm": 30, "usd": 30}))
				require.NoError(t, commit.Commit(ctx))
				// The next acquire writes a background commit first (folded
				// into its write where the backend folds).
				spendAt(t, rl, clk, "2026-11-10T12:00:01Z", e, limiter.Consume{"tpm": 1, "usd": 1})
				require.Equal(t, int64(39), left(t, rl, e, "gpt-4o", "tpm"), "the old lease's commit")
				require.Equal(t, int64(989), left(t, rl, e, "gpt-4o", "usd"), "the old lease's commit")

				// A lease of the new entity settles as ever.
				lease, err := rl.Acquire(ctx, e, "gpt-4o", limiter.Consume{"tpm": 9, "usd": 9})
				require.NoError(t, err)
				require.Equal(t, int64(30), left(t, rl, e, "gpt-4o", "tpm"))
				require.NoError(t, lease.Rollback(ctx))
				require.Equal(t, int64(39), left(t, rl, e, "gpt-4o", "tpm"), "the new lease's rollback")
				require.Equal(t, int64(989), left(t, rl, e, "gpt-4o", "usd"), "the new lease's rollback")
			})
		}
	})
}

// TestIncarnationReissuedKey: an API key id reissued to another tenant.
// A lease of the key under tenant A, rolled back after the key was
// deleted and created again under tenant B, gives back to A (which it
// charged) and nothing to the new key or to B.
func TestIncarnationReissuedKey(t *testing.T) {
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		budget := []limiter.Limit{limiter.PerDay("tpm", 1000)}
		for _, tenant := range []string{"tenant-a", "tenant-b"} {
			_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: tenant})
			require.NoError(t, err)
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: tenant, Resource: "gpt-4o"}, budget))
		}
		issue := func(tenant string) {
			t.Helper()
			_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: tenant, Cascade: true})
			require.NoError(t, err)
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: "gpt-4o"}, budget))
		}
		issue("tenant-a")
		old, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"tpm": 100})
		require.NoError(t, err)
		require.Equal(t, int64(900), left(t, rl, "tenant-a", "gpt-4o", "tpm"))

		require.NoError(t, rl.Admin().DeleteEntity(ctx, "key"))
		issue("tenant-b")
		spendAt(t, rl, clk, "2026-11-10T12:00:00Z", "key", limiter.Consume{"tpm": 300})
		require.NoError(t, old.Rollback(ctx))
		require.Equal(t, int64(1000), left(t, rl, "tenant-a", "gpt-4o", "tpm"), "tenant A gets back what the lease took from it")
		require.Equal(t, int64(700), left(t, rl, "tenant-b", "gpt-4o", "tpm"), "tenant B")
		require.Equal(t, int64(700), left(t, rl, "key", "gpt-4o", "tpm"), "the reissued key")
	})
}

// TestIncarnationUncreatedEntity: buckets of an id that was never created
// (limits given with the acquire) work as before, and a delete of the id
// makes them new ones too.
func TestIncarnationUncreatedEntity(t *testing.T) {
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		lim := limiter.WithLimits(limiter.PerDay("tpm", 1000))
		old, err := rl.Acquire(ctx, "anon", "gpt-4o", limiter.Consume{"tpm": 100}, lim)
		require.NoError(t, err)
		require.NoError(t, rl.Admin().DeleteEntity(ctx, "anon"))
		lease, err := rl.Acquire(ctx, "anon", "gpt-4o", limiter.Consume{"tpm": 960}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		require.NoError(t, old.Rollback(ctx))
		require.Equal(t, int64(40), left(t, rl, "anon", "gpt-4o", "tpm", lim), "the rollback of a lease from before the delete")

		lease, err = rl.Acquire(ctx, "anon", "gpt-4o", limiter.Consume{"tpm": 10}, lim)
		require.NoError(t, err)
		require.Equal(t, int64(30), left(t, rl, "anon", "gpt-4o", "tpm", lim))
		require.NoError(t, lease.Rollback(ctx))
		require.Equal(t, int64(40), left(t, rl, "anon", "gpt-4o", "tpm", lim), "the rollback of a lease of the bucket")
	})
}

// TestIncarnationPrepaid: a delete keeps the records of applied top-ups on
// every backend: a top-up id applied before the delete is a duplicate
// after it (with the same amount; a conflict with another), so that one
// payment is never credited twice. A lease of the deleted entity's
// balance refunds nothing into the new entity's.
func TestIncarnationPrepaid(t *testing.T) {
	eachBackendAndCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
		defer rl.Close()
		create := func() {
			t.Helper()
			_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "payer"})
			require.NoError(t, err)
			require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "payer", Resource: "emb"}, []limiter.Limit{limiter.Prepaid("credit")}))
		}
		create()
		res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "payer", Resource: "emb", Limit: "credit", Amount: 100, ID: "pay-1"})
		require.NoError(t, err)
		require.True(t, res.Applied)
		old, err := rl.Acquire(ctx, "payer", "emb", limiter.Consume{"credit": 60})
		require.NoError(t, err)

		require.NoError(t, rl.Admin().DeleteEntity(ctx, "payer"))
		create()
		res, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "payer", Resource: "emb", Limit: "credit", Amount: 100, ID: "pay-1"})
		require.NoError(t, err)
		require.False(t, res.Applied, "pay-1 was applied before the delete")
		_, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "payer", Resource: "emb", Limit: "credit", Amount: 70, ID: "pay-1"})
		require.ErrorIs(t, err, limiter.ErrTopUpConflict)
		res, err = rl.TopUp(ctx, limiter.TopUpRequest{Entity: "payer", Resource: "emb", Limit: "credit", Amount: 30, ID: "pay-2"})
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.NoError(t, old.Rollback(ctx))
		require.Equal(t, int64(30), left(t, rl, "payer", "emb", "credit"), "the new balance: pay-2 only")
	})
}
