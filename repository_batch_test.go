package limiter

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// chainRequests are the speculative requests of an acquire of c on the
// three buckets of deepChain, at now.
func chainRequests(c Consume, now time.Time) []store.SpeculativeRequest {
	limits := []Limit{PerMinute("rpm", 1000), PerMinute("tpm", 1_000_000), PerHour("usd", 50_000_000)}
	var reqs []store.SpeculativeRequest
	for _, id := range []string{"key", "proj", "org"} {
		reqs = append(reqs, store.SpeculativeRequest{Key: store.BucketKey{EntityID: id, Resource: "gpt"}, Consume: c, Limits: storeLimits(limits), NowMs: now.UnixMilli()})
	}
	return reqs
}

// TestSpeculativeConsumeAllItemsAfter: an applied batch returns each item
// as a read finds it after the write (this repository the only writer):
// the speculative writes' results, and, once the buckets are full again,
// the exact writes' (rf moved, the balances refilled).
func TestSpeculativeConsumeAllItemsAfter(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	deepChain(t, env, rl)
	c := Consume{"rpm": 1, "tpm": 500, "usd": 2_000}
	for range 2 {
		_, err := rl.Acquire(env.ctx, "key", "gpt", c)
		require.NoError(t, err)
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		refills bool
	}{{"speculative", 0, false}, {"exact", 2 * time.Second, true}} {
		env.clock.advance(step.advance)
		now := env.clock.now()
		env.rec.Reset()
		results, err := env.repo.SpeculativeConsumeAll(env.ctx, chainRequests(c, now))
		require.NoError(t, err, step.name)
		require.Equal(t, "TransactWriteItems[3]", env.calls(), step.name)
		for _, res := range results {
			require.True(t, res.Applied, "%s: %+v", step.name, res)
			got, err := env.repo.readBucket(env.ctx, res.Key)
			require.NoError(t, err)
			require.Equal(t, got, res.Bucket, "%s: the result of %s is the item as read after", step.name, res.Key.EntityID)
			if step.refills {
				require.Equal(t, now.UnixMilli(), res.Bucket.RefillMs, "%s: rf moved to now", step.name)
			}
		}
	}
}

// TestSpeculativeConsumeAllRefused: a batch the organisation refuses
// writes nothing; every result holds its item as it was, the
// organisation's with its reason, the others with none.
func TestSpeculativeConsumeAllRefused(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	deepChain(t, env, rl)
	orgLimits := []Limit{PerMinute("rpm", 1000), PerMinute("tpm", 900_000), PerHour("usd", 50_000_000)}
	require.NoError(t, rl.Admin().SetLimits(env.ctx, Scope{Entity: "org", Resource: "gpt"}, orgLimits))
	for range 2 {
		_, err := rl.Acquire(env.ctx, "key", "gpt", Consume{"tpm": 400_000})
		require.NoError(t, err)
	}
	before := map[string]int64{}
	for _, id := range []string{"key", "proj", "org"} {
		before[id] = env.tokens(id, "gpt", "tpm")
	}
	// 200,000 left on the key and the project, 100,000 on the organisation.
	reqs := chainRequests(Consume{"tpm": 150_000}, env.clock.now())
	reqs[2].Limits = storeLimits(orgLimits)
	results, err := env.repo.SpeculativeConsumeAll(env.ctx, reqs)
	require.NoError(t, err)
	for i, want := range []store.RefusalReason{store.RefusedNone, store.RefusedNone, store.RefusedLimitExhausted} {
		res := results[i]
		require.False(t, res.Applied, "%s", res.Key.EntityID)
		require.Equal(t, want, res.Reason, "%s's reason", res.Key.EntityID)
		s, ok := res.Bucket.State("tpm")
		require.True(t, ok, "%s's item", res.Key.EntityID)
		require.Equal(t, before[res.Key.EntityID], s.TokensMilli, "%s's item as it was", res.Key.EntityID)
		require.Equal(t, before[res.Key.EntityID], env.tokens(res.Key.EntityID, "gpt", "tpm"), "%s untouched", res.Key.EntityID)
	}
}

// conflictReasons is a cancellation of a three-item transaction whose
// second item is in another transaction.
func conflictReasons() error {
	return &types.TransactionCanceledException{Message: aws.String("injected"), CancellationReasons: []types.CancellationReason{
		{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}, {Code: aws.String("None")},
	}}
}

// TestSpeculativeConsumeAllConflict: a batch cancelled for a
// TransactionConflict is sent again and charges each item once; one that
// keeps conflicting is refused with store.RefusedRefillDue (never as a
// rate limit), and the acquire then takes the read-then-write path.
func TestSpeculativeConsumeAllConflict(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	deepChain(t, env, env.limiter())
	var conflicts atomic.Int64
	left := atomic.Int64{}
	repo := env.withClient(hook(func(op string, params any) error {
		in, ok := params.(*dynamodb.TransactWriteItemsInput)
		if !ok || !strings.HasPrefix(aws.ToString(in.ClientRequestToken), "zael-batch-") || left.Add(-1) < 0 {
			return nil
		}
		conflicts.Add(1)
		return conflictReasons()
	}))
	rl := New(repo, func(o *Options) { o.Clock = env.clock.now })
	c := Consume{"rpm": 1, "tpm": 500, "usd": 2_000}
	for range 2 {
		_, err := rl.Acquire(env.ctx, "key", "gpt", c)
		require.NoError(t, err)
	}
	left.Store(1)
	_, err := rl.Acquire(env.ctx, "key", "gpt", c)
	require.NoError(t, err)
	require.Equal(t, int64(1), conflicts.Load())
	for _, id := range []string{"key", "proj", "org"} {
		require.Equal(t, int64((1_000_000-3*500)*1000), env.tokens(id, "gpt", "tpm"), "%s charged once per acquire", id)
	}

	left.Store(1 << 20)
	results, err := repo.SpeculativeConsumeAll(env.ctx, chainRequests(c, env.clock.now()))
	require.NoError(t, err)
	for _, res := range results {
		require.False(t, res.Applied)
		require.Equal(t, store.RefusedRefillDue, res.Reason, "%s", res.Key.EntityID)
	}
	require.Equal(t, int64(1+maxExactWrites), conflicts.Load(), "a transaction per round")
	_, err = rl.Acquire(env.ctx, "key", "gpt", c)
	require.NoError(t, err, "the read-then-write path admits")
	for _, id := range []string{"key", "proj", "org"} {
		require.Equal(t, int64((1_000_000-4*500)*1000), env.tokens(id, "gpt", "tpm"), "%s charged once per acquire", id)
	}
}
