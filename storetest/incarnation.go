package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// runContractIncarnation checks store.Bucket.Incarnation: a create stores
// the write's, reads and speculative writes return it, and every write that
// requires one (normal, retry, adjustment, and a folded adjustment) is
// refused, writing nothing, on an item of another incarnation, including
// an item created again after a delete and an item that has none.
func runContractIncarnation(t *testing.T, newRepo func(t *testing.T) store.Repository) {
	ctx := context.Background()
	t.Run("Incarnation", func(t *testing.T) {
		repo := newRepo(t)
		k := store.BucketKey{EntityID: "inc", Resource: "gpt"}
		const first, second = 0x1234_5678_9abc, 0x0fed_cba9_8765
		w := store.BucketWrite{Kind: store.WriteCreate, Key: k, NowMs: nowMs, ShardCount: 1, States: []store.BucketState{state("rpm", 10, 5)}, Incarnation: first}
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{w}))
		b, err := repo.GetBucket(ctx, k)
		require.NoError(t, err)
		require.EqualValues(t, first, b.Incarnation, "the create's incarnation, read back")
		if spec, ok := repo.(store.SpeculativeStore); ok {
			res, err := spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1}, NowMs: nowMs})
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.EqualValues(t, first, res.Bucket.Incarnation, "a speculative write returns the incarnation")
			undo := store.BucketWrite{Kind: store.WriteAdjust, Key: k, NowMs: nowMs, Incarnation: first, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: -1000}}}
			require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{undo}))
		}
		wantBalances(t, repo, k, "rpm=5000/0")

		adjust := func(inc int64) store.BucketWrite {
			return store.BucketWrite{Kind: store.WriteAdjust, Key: k, NowMs: nowMs, Incarnation: inc, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 2000}}}
		}
		refund := func(inc int64) store.BucketWrite {
			return store.BucketWrite{Kind: store.WriteAdjust, Key: k, NowMs: nowMs, Incarnation: inc, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: -2000, CapacityMilli: 10_000}}}
		}
		retry := func(inc int64) store.BucketWrite {
			return store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: nowMs, Incarnation: inc, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
		}
		normal := func(inc int64) store.BucketWrite {
			b, err := repo.GetBucket(ctx, k)
			require.NoError(t, err)
			return store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: b.RefillMs, ExpectedRefillMs: b.RefillMs, Incarnation: inc, Base: b,
				Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
		}
		refused := func(what string, w store.BucketWrite, want string) {
			t.Helper()
			err := repo.WriteBuckets(ctx, []store.BucketWrite{w})
			require.ErrorIs(t, err, store.ErrConditionFailed, "%s of another incarnation", what)
			wantBalances(t, repo, k, want)
		}
		for _, inc := range []int64{second, 0} {
			refused("a charge", adjust(inc), "rpm=5000/0")
			refused("a refund", refund(inc), "rpm=5000/0")
			refused("a retry", retry(inc), "rpm=5000/0")
			refused("a normal write", normal(inc), "rpm=5000/0")
		}
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{adjust(first)}))
		wantBalances(t, repo, k, "rpm=3000/2000")

		// Deleted with its entity and created again: another incarnation.
		_, err = repo.DeleteEntity(ctx, k.EntityID)
		require.NoError(t, err)
		w.Incarnation = second
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{w}))
		refused("a refund of the deleted item", refund(first), "rpm=5000/0")
		refused("a charge of the deleted item", adjust(first), "rpm=5000/0")
		if folder, ok := repo.(store.AdjustFolder); ok {
			req := store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1}, NowMs: nowMs,
				Limits: []store.Limit{{Name: "rpm", Capacity: 10, RefillAmount: 10, RefillPeriod: time.Minute}}}
			res, outcome, err := folder.SpeculativeConsumeAdjust(ctx, req, refund(first))
			require.NoError(t, err)
			require.Equal(t, store.FoldNotApplied, outcome, "a fold of the deleted item's refund: %+v", res)
			wantBalances(t, repo, k, "rpm=5000/0")
		}
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{refund(second)}))
		wantBalances(t, repo, k, "rpm=7000/-2000")

		// An item created without one (by the Python original) takes the
		// writes that require none, and only those.
		_, err = repo.DeleteEntity(ctx, k.EntityID)
		require.NoError(t, err)
		w.Incarnation = 0
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{w}))
		refused("a charge of an incarnation", adjust(second), "rpm=5000/0")
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{adjust(0)}))
		wantBalances(t, repo, k, "rpm=3000/2000")
	})
}
