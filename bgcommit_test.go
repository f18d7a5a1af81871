package limiter

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/faultproxy"
)

// commitModes runs fn with Commit synchronous and in the background.
func commitModes(t *testing.T, fn func(t *testing.T, opts []Option)) {
	for _, bg := range []bool{false, true} {
		t.Run(map[bool]string{false: "commit=sync", true: "commit=background"}[bg], func(t *testing.T) {
			fn(t, []Option{WithBackgroundCommit(bg)})
		})
	}
}

// bgAcquireAdjust acquires consume on e, adjusts by adj and commits.
func bgAcquireAdjust(t *testing.T, rl *RateLimiter, e string, consume, adj Consume, lim AcquireOption) {
	t.Helper()
	l, err := rl.Acquire(context.Background(), e, "api", consume, lim)
	require.NoError(t, err)
	require.NoError(t, l.Adjust(adj))
	require.NoError(t, l.Commit(context.Background()))
}

// TestBackgroundCommitFoldsIntoNextAcquire: with background commit, Commit
// writes nothing; the next acquire of the item carries the adjustment in
// its own UpdateItem, and the bucket ends as with synchronous commits.
func TestBackgroundCommitFoldsIntoNextAcquire(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, WithClock(env.clock.now), WithBackgroundCommit(true))
	rl.commits.delay = time.Hour // only an acquire or Close writes the adjustments
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"rpm": 1, "tpm": 500}, nil, lim) // creates the bucket
	env.rec.Reset()
	bgAcquireAdjust(t, rl, "e", Consume{"rpm": 1, "tpm": 500}, Consume{"tpm": -100}, lim)
	assert.Equal(t, "UpdateItem", env.calls(), "acquire + adjust + commit: the acquire's write only")
	env.rec.Reset()
	bgAcquireAdjust(t, rl, "e", Consume{"rpm": 1, "tpm": 500}, Consume{"tpm": 300}, lim)
	assert.Equal(t, "UpdateItem", env.calls(), "the next acquire carries the first adjustment")
	require.NoError(t, rl.Close())
	assert.Equal(t, "UpdateItem, UpdateItem", env.calls(), "Close writes the last adjustment")
	b := env.bucket("e", "api")
	assert.Equal(t, int64(3_000), env.n(b, "b_rpm_tc"))
	assert.Equal(t, int64(1_700_000), env.n(b, "b_tpm_tc"), "500 + 400 + 800")
	assert.Equal(t, int64(10_000_000-1_700_000), env.n(b, "b_tpm_tk"))
	assert.Zero(t, rl.commits.failed.Load())
}

// TestBackgroundCommitAlone: an adjustment no acquire picks up is written
// alone after its delay, and Close waits for it.
func TestBackgroundCommitAlone(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, WithClock(env.clock.now), WithBackgroundCommit(true))
	lim := WithLimits(PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -200}, lim)
	env.rec.Reset()
	waitFor(t, func() bool { return env.rec.Count("UpdateItem") == 1 })
	require.NoError(t, rl.Close())
	assert.Equal(t, 1, env.rec.Count(""), "one write, the adjustment's")
	assert.Equal(t, int64(800_000), env.n(env.bucket("e", "api"), "b_tpm_tc"))
}

// TestBackgroundCommitRefundCapped: a refund folded into an acquire that
// would lift the balance over the capacity refuses the combined write; the
// item it returns then decides both exactly, the refund first (as the
// synchronous commit writes it), capped, then the acquire, in one write.
func TestBackgroundCommitRefundCapped(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, WithClock(env.clock.now), WithBackgroundCommit(true))
	rl.commits.delay = time.Hour
	lim := WithLimits(PerMinute("tpm", 100))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 50}, nil, lim)
	require.NoError(t, rl.Close())
	// The lease of 20 gives 20 back; meanwhile the stored balance was
	// refilled to 95 (by another writer).
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 20}, Consume{"tpm": -20}, lim)
	setTokens(t, env, "e", "tpm", 95_000)
	env.rec.Reset()
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 10}, nil, lim)
	require.NoError(t, rl.Close())
	// The combined write was refused (95 − 10 + 20 > 100); from the item
	// it returned, the exact write of both: the refund capped at 100, then
	// the acquire, 90.
	assert.Equal(t, "UpdateItem!, UpdateItem", env.calls())
	b := env.bucket("e", "api")
	assert.Equal(t, int64(90_000), env.n(b, "b_tpm_tk"), "refund capped at the capacity, then the acquire")
	assert.Equal(t, int64(60_000), env.n(b, "b_tpm_tc"), "50 + 20 − 20 + 10")
	assert.Zero(t, rl.commits.failed.Load())
}

// setTokens sets b_{limit}_tk of e's bucket.
func setTokens(t *testing.T, env *testEnv, e, limit string, milli int64) {
	t.Helper()
	_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(env.repo.Table()),
		Key:                       primaryKey(pkBucket(env.repo.NamespaceID(), e, "api", 0), skState),
		UpdateExpression:          aws.String("SET #tk = :v"),
		ExpressionAttributeNames:  map[string]string{"#tk": bucketAttr(limit, fieldTokens)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": schemaN(milli)},
	})
	require.NoError(t, err)
}

// TestBackgroundCommitFailureCounted: a folded write answered with a 500
// after it applied is not sent again: the adjustment counts once, and is
// logged and counted as a failure (it may not have applied); one whose
// lone write fails is logged and counted too.
func TestBackgroundCommitFailureCounted(t *testing.T) {
	env := newTestEnv(t)
	repo, p := proxied(t, env)
	var logs bytes.Buffer
	var mu sync.Mutex
	rl := New(repo, WithClock(env.clock.now), WithBackgroundCommit(true), WithGroupCommit(false),
		WithLogger(slog.New(slog.NewTextHandler(lockedWriter{mu: &mu, b: &logs}, nil))))
	lim := WithLimits(PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -100}, lim)
	p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Error500After, Times: 1})
	_, err := rl.Acquire(context.Background(), "e", "api", Consume{"tpm": 1}, lim)
	require.ErrorIs(t, err, ErrUnavailable)
	require.NoError(t, rl.Close())
	assert.Equal(t, int64(1), rl.commits.failed.Load())
	assert.Equal(t, int64(500_000+400_000+1_000), env.n(env.bucket("e", "api"), "b_tpm_tc"), "the folded write applied once")

	// A lone write that keeps failing.
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 1}, Consume{"tpm": 1}, lim)
	p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Throttle})
	require.NoError(t, rl.Close())
	p.Clear()
	assert.Equal(t, int64(2), rl.commits.failed.Load())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, bytes.Count(logs.Bytes(), []byte("limiter: background commit failed")), "%s", logs.String())
}

// TestBackgroundCommitAbandonedAcquire: an acquire carrying an adjustment
// whose caller gives up while DynamoDB applies it late: the acquire's
// tokens are given back, the adjustment stays applied, once.
func TestBackgroundCommitAbandonedAcquire(t *testing.T) {
	commitModes(t, func(t *testing.T, opts []Option) {
		env := newTestEnv(t)
		rl, p := proxiedLimiter(t, env, opts...)
		lim := WithLimits(PerMinute("tpm", 10_000))
		bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
		bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -100}, lim)
		p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.DelayAfter, Delay: time.Second, Times: 1})
		_, err := acquireWithin(t, rl, 200*time.Millisecond, "e", Consume{"tpm": 300}, lim)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, rl.Close())
		assert.Equal(t, int64(900_000), env.n(env.bucket("e", "api"), "b_tpm_tc"), "500 + 400: the abandoned acquire given back")
		assert.Equal(t, int64(10_000_000-900_000), env.n(env.bucket("e", "api"), "b_tpm_tk"))
	})
}

// TestBackgroundCommitReadThenWrite: without speculative writes nothing
// folds the adjustment: it is written alone.
func TestBackgroundCommitReadThenWrite(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, WithClock(env.clock.now), WithBackgroundCommit(true), WithSpeculativeWrites(false))
	lim := WithLimits(PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -100}, lim)
	require.NoError(t, rl.Close())
	assert.Equal(t, int64(900_000), env.n(env.bucket("e", "api"), "b_tpm_tc"))
}
