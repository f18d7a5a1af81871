package limiter

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestAcquireAllDynamoDBCalls: on DynamoDB the read-then-write path of a
// batch costs one BatchGetItem (entity records and buckets) and one
// TransactWriteItems of every item; the speculative path, once it keeps
// the items, one TransactWriteItems; a refused batch writes nothing;
// Commit writes one adjustment per item it changes.
func TestAcquireAllDynamoDBCalls(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		for _, e := range []Entity{{ID: "proj"}, {ID: "key1", ParentID: "proj", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(env.ctx, e)
			require.NoError(t, err)
		}
		tpm := WithLimits(PerMinute("tpm", 1000))
		reqs := []AcquireRequest{
			{EntityID: "key1", Resource: "gpt", Consume: Consume{"tpm": 400}},
			{EntityID: "solo", Resource: "claude", Consume: Consume{"tpm": 100}},
		}
		check := env.callChecker(t)
		var lease *Lease
		// key1, its parent and solo: 3 entity records and 3 buckets read,
		// 3 items written; first, solo's record is read once to learn
		// whether it cascades (key1's is known from its creation).
		// On the speculative path the items, none kept yet, are read
		// first: missing, the batch falls back.
		want := map[bool]string{false: "GetItem, BatchGetItem[6], TransactWriteItems[3]",
			true: "GetItem, BatchGetItem[3], BatchGetItem[6], TransactWriteItems[3]"}[env.spec]
		check("first batch", want, func() {
			var err error
			lease, _, err = rl.AcquireAll(env.ctx, reqs, tpm)
			require.NoError(t, err)
		})
		// The adjustment reaches every item holding tpm.
		check("commit", "UpdateItem, UpdateItem, UpdateItem", func() {
			err := lease.Adjust(Consume{"tpm": -50})
			require.NoError(t, err)
			err = lease.Commit(env.ctx)
			require.NoError(t, err)
		})
		want = map[bool]string{false: "BatchGetItem[6], TransactWriteItems[3]", true: "TransactWriteItems[3]"}[env.spec]
		check("second batch", want, func() {
			l, _, err := rl.AcquireAll(env.ctx, reqs, tpm)
			require.NoError(t, err)
			l.Commit(env.ctx)
		})
		// key1 has 250 left (1000 less 400, 50 back, 400 again): 500
		// more is refused, and solo keeps its tokens.
		before := env.tokens("solo", "claude", "tpm")
		// The speculative path reads the items its kept ones refuse.
		want = map[bool]string{false: "BatchGetItem[6]", true: "BatchGetItem[3]"}[env.spec]
		check("refused batch", want, func() {
			_, statuses, err := rl.AcquireAll(env.ctx, []AcquireRequest{
				{EntityID: "solo", Resource: "claude", Consume: Consume{"tpm": 1}},
				{EntityID: "key1", Resource: "gpt", Consume: Consume{"tpm": 500}},
			}, tpm)
			require.ErrorIs(t, err, ErrRateLimited, "refused batch")
			require.Len(t, statuses, 2, "refused batch: statuses %+v", statuses)
			require.True(t, statuses[1][0].Exceeded, "refused batch: key1's status %+v, want exceeded", statuses[1][0])
		})
		got := env.tokens("solo", "claude", "tpm")
		require.Equal(t, before, got, "a refused batch took from solo: %d, was %d", got, before)
	})
}

// TestResetDynamoDB: Reset reads shard 0, then the other shards, and
// fills every shard in one transaction, leaving the hidden write-capacity
// limit as it is.
func TestResetDynamoDB(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	lims := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
	lease, err := rl.Acquire(env.ctx, "k", "gpt", Consume{"rpm": 4, "tpm": 900}, lims)
	require.NoError(t, err)
	lease.Commit(env.ctx)
	wcuBefore := env.tokens("k", "gpt", wcuLimitName)
	check := env.callChecker(t)
	// BatchGetItem[4]: the stored limits, resolved for the current period
	// buckets of calendar limits (none here); PutItem: the audit event.
	check("one shard", "BatchGetItem[4], GetItem, UpdateItem, PutItem", func() {
		err := rl.Reset(env.ctx, "k", "gpt")
		require.NoError(t, err)
	})
	rpm, tpm, wcu := env.tokens("k", "gpt", "rpm"), env.tokens("k", "gpt", "tpm"), env.tokens("k", "gpt", wcuLimitName)
	require.EqualValues(t, 10_000, rpm, "rpm after reset")
	require.EqualValues(t, 1_000_000, tpm, "tpm after reset")
	require.Equal(t, wcuBefore, wcu, "wcu after reset, want kept")
	// Two shards: shard 1 exists too.
	_, err = env.repo.BumpShardCount(env.ctx, "k", "gpt", 1)
	require.NoError(t, err)
	s1 := store.BucketKey{EntityID: "k", Resource: "gpt", Shard: 1}
	st := bucketStateFromLimit("k", "gpt", store.Limit(PerMinute("rpm", 5)), env.clock.now().UnixMilli())
	st.TokensMilli = 0
	err = env.repo.WriteBuckets(env.ctx, []store.BucketWrite{{Kind: store.WriteCreate, Key: s1, NowMs: env.clock.now().UnixMilli(), ShardCount: 2, States: []store.BucketState{st}}})
	require.NoError(t, err)
	check("two shards", "GetItem, BatchGetItem[1], TransactWriteItems[2], PutItem", func() {
		err := rl.Reset(env.ctx, "k", "gpt")
		require.NoError(t, err)
	})
	b, err := env.repo.GetBucket(env.ctx, s1)
	require.NoError(t, err, "shard 1 after reset")
	require.NotNil(t, b, "shard 1 after reset")
	require.EqualValues(t, 5000, b.States[0].TokensMilli, "shard 1 after reset: %+v", b)
}
