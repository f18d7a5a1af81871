package limiter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// TestGroupCommitAdjustsPerIncarnation: a group commit batch holding
// adjustments of two incarnations of one item (leases from before and
// after a delete of the entity) writes one sum per incarnation: the
// current one's apply, the stale one's are refused (ErrConditionFailed,
// which their leases take as a bucket gone) and change nothing. On
// DynamoDB Local and memorystore.
func TestGroupCommitAdjustsPerIncarnation(t *testing.T) {
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		rl := New(repo, func(o *Options) { o.Clock = clock })
		defer rl.Close()
		require.NotNil(t, rl.gc, "group commit is on by default")
		lim := WithLimits(PerDay("tpm", 1000))
		lease, err := rl.Acquire(t.Context(), "e", "api", Consume{"tpm": 100}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Commit(t.Context()))
		key := store.BucketKey{EntityID: "e", Resource: "api"}
		b, err := repo.GetBucket(t.Context(), key)
		require.NoError(t, err)
		require.NotZero(t, b.Incarnation)
		caps := map[string]int64{"tpm": 1_000_000}
		current, other := b.Incarnation, b.Incarnation^0x5a5a
		ops := []*gcOp{
			{kind: gcAdjust, key: key, delta: Consume{"tpm": -30}, caps: caps, inc: current},
			{kind: gcAdjust, key: key, delta: Consume{"tpm": -50}, caps: caps, inc: other},
			{kind: gcAdjust, key: key, delta: Consume{"tpm": 5}, caps: caps, inc: current},
			{kind: gcAdjust, key: key, delta: Consume{"tpm": 40}, caps: caps, inc: other},
		}
		rl.gc.writeAdjusts(t.Context(), key, clock().UnixMilli(), ops)
		require.NoError(t, ops[0].err)
		require.ErrorIs(t, ops[1].err, store.ErrConditionFailed)
		require.NoError(t, ops[2].err)
		require.ErrorIs(t, ops[3].err, store.ErrConditionFailed)
		b, err = repo.GetBucket(t.Context(), key)
		require.NoError(t, err)
		s, _ := b.State("tpm")
		require.Equal(t, int64(925_000), s.TokensMilli, "1000 − 100 + 30 − 5: the other incarnation's changed nothing")
	})
}

// TestBackgroundCommitKeepsIncarnationsApart: adjustments of two
// incarnations of one item queued by background commit are not merged.
func TestBackgroundCommitKeepsIncarnationsApart(t *testing.T) {
	key := store.BucketKey{EntityID: "e", Resource: "api"}
	a := store.BucketWrite{Kind: store.WriteAdjust, Key: key, Incarnation: 1, Limits: []store.LimitWrite{{Name: "tpm", ConsumedMilli: 1000}}}
	b := a
	b.Incarnation = 2
	require.False(t, mergeable(a, b), "two incarnations")
	b.Incarnation = 1
	require.True(t, mergeable(a, b), "one incarnation")
}
