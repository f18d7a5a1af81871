package limiter

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/zaelimiter/limiter/store"
)

// commitModes runs fn with Commit synchronous and in the background.
func commitModes(t *testing.T, fn func(t *testing.T, opts []func(*Options))) {
	for _, bg := range []bool{false, true} {
		t.Run(map[bool]string{false: "commit=sync", true: "commit=background"}[bg], func(t *testing.T) {
			fn(t, []func(*Options){func(o *Options) { o.BackgroundCommit = bg }})
		})
	}
}

// commitModesAtOnce is commitModes with the two modes run at once: started
// from goroutines rather than as parallel tests (which -parallel, two on
// two cores, would queue behind the package's other parallel cases). For
// cases that spend their time waiting for a fault proxy and bound no time.
func commitModesAtOnce(t *testing.T, fn func(t *testing.T, opts []func(*Options))) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, bg := range []bool{false, true} {
		wg.Go(func() {
			t.Run(map[bool]string{false: "commit=sync", true: "commit=background"}[bg], func(t *testing.T) {
				fn(t, []func(*Options){func(o *Options) { o.BackgroundCommit = bg }})
			})
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
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.BackgroundCommit = true })
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
	t.Parallel()
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.BackgroundCommit = true })
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
// would lift the balance over the capacity before the acquire takes its
// amount refuses the combined write; the item it returns then decides both
// exactly, the refund first (as the synchronous commit writes it), capped,
// then the acquire, in one write.
func TestBackgroundCommitRefundCapped(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.BackgroundCommit = true })
	rl.commits.delay = time.Hour
	lim := WithLimits(PerMinute("tpm", 100))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 50}, nil, lim)
	flushCommits(rl)
	// The lease of 20 gives 20 back; meanwhile the stored balance was
	// refilled to 95 (by another writer).
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 20}, Consume{"tpm": -20}, lim)
	setTokens(t, env, "e", "tpm", 95_000)
	env.rec.Reset()
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 10}, nil, lim)
	require.NoError(t, rl.Close())
	// The combined write was refused (95 + 20 > 100); from the item
	// it returned, the exact write of both: the refund capped at 100, then
	// the acquire, 90.
	assert.Equal(t, "UpdateItem!, UpdateItem", env.calls())
	b := env.bucket("e", "api")
	assert.Equal(t, int64(90_000), env.n(b, "b_tpm_tk"), "refund capped at the capacity, then the acquire")
	assert.Equal(t, int64(60_000), env.n(b, "b_tpm_tc"), "50 + 20 − 20 + 10")
	assert.Zero(t, rl.commits.failed.Load())
}

// flushCommits writes every adjustment queued by background commits, as
// Close does, and leaves the limiter open.
func flushCommits(rl *RateLimiter) {
	c := rl.commits
	c.mu.Lock()
	var keys []store.BucketKey
	for key := range c.pending {
		keys = append(keys, key)
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.flush(key)
	}
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
// after it applied is sent again, and its retry is recognised as applied:
// the acquire succeeds and the adjustment counts once, with no failure. A
// commit whose lone write keeps failing is logged and counted as a
// failure.
func TestBackgroundCommitFailureCounted(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	repo, p := proxied(t, env)
	var logs bytes.Buffer
	var mu sync.Mutex
	rl := New(repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.BackgroundCommit = true }, func(o *Options) { o.GroupCommit = false },
		func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(lockedWriter{mu: &mu, b: &logs}, nil)) })
	lim := WithLimits(PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -100}, lim)
	p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Error500After, Times: 1})
	_, err := rl.Acquire(context.Background(), "e", "api", Consume{"tpm": 1}, lim)
	require.NoError(t, err, "the folded write's retry counts as applied")
	require.Equal(t, 1, p.Faults("UpdateItem"))
	flushCommits(rl)
	assert.Equal(t, int64(0), rl.commits.failed.Load())
	assert.Equal(t, int64(500_000+400_000+1_000), env.n(env.bucket("e", "api"), "b_tpm_tc"), "the folded write applied once")

	// A lone write that keeps failing.
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 1}, Consume{"tpm": 1}, lim)
	p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Throttle})
	require.NoError(t, rl.Close())
	p.Clear()
	assert.Equal(t, int64(1), rl.commits.failed.Load())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, bytes.Count(logs.Bytes(), []byte("limiter: background commit failed")), "%s", logs.String())
}

// TestBackgroundCommitAbandonedAcquire: an acquire carrying an adjustment
// whose caller gives up while DynamoDB applies it late: the acquire's
// tokens are given back, the adjustment stays applied, once.
func TestBackgroundCommitAbandonedAcquire(t *testing.T) {
	commitModes(t, func(t *testing.T, opts []func(*Options)) {
		t.Parallel() // waits for a late answer; a table and proxy of its own
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
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.BackgroundCommit = true }, func(o *Options) { o.SpeculativeWrites = false })
	lim := WithLimits(PerMinute("tpm", 10_000))
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, nil, lim)
	bgAcquireAdjust(t, rl, "e", Consume{"tpm": 500}, Consume{"tpm": -100}, lim)
	require.NoError(t, rl.Close())
	assert.Equal(t, int64(900_000), env.n(env.bucket("e", "api"), "b_tpm_tc"))
}

// bgRepos runs fn on DynamoDB Local and on memorystore.
func bgRepos(t *testing.T, fn func(t *testing.T, repo Repository, clock func() time.Time)) {
	t.Run("dynamodb", func(t *testing.T) {
		env := newTestEnv(t)
		fn(t, env.repo, env.clock.now)
	})
	t.Run("memory", func(t *testing.T) {
		clock := &fakeClock{t: epoch}
		fn(t, newMemory(), clock.now)
	})
}

// bgLimiter returns a limiter on repo; with background commit its queued
// adjustments wait for the next write of their item (no delay ends).
func bgLimiter(repo Repository, clock func() time.Time, opts []func(*Options)) *RateLimiter {
	rl := New(repo, append([]func(*Options){func(o *Options) { o.Clock = clock }}, opts...)...)
	if rl.commits != nil {
		rl.commits.delay = time.Hour
	}
	return rl
}

// TestBackgroundCommitAnswersAsSync: a commit queued in the background is
// applied before the next acquire of its item decides, with a synchronous
// Commit's caps: the same admissions and balances as synchronous commits,
// on the fast path and the read-then-write path.
func TestBackgroundCommitAnswersAsSync(t *testing.T) {
	t.Parallel()
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		for _, spec := range []bool{true, false} {
			t.Run(map[bool]string{true: "speculative", false: "read-then-write"}[spec], func(t *testing.T) {
				commitModes(t, func(t *testing.T, opts []func(*Options)) {
					ctx := context.Background()
					rl := bgLimiter(repo, clock, append(opts, func(o *Options) { o.SpeculativeWrites = spec }))
					admin := New(repo, func(o *Options) { o.Clock = clock })
					lim := WithLimits(PerMinute("tpm", 100))
					e := fmt.Sprintf("refund-%v-%v", spec, rl.commits != nil)

					// A refund that meets a full bucket: capped before the
					// acquire takes its amount (the fold once gave 100 − 50
					// + 80 = 130, refused it, wrote the acquire alone and
					// then the refund: 100 left; exact is 50).
					lease, err := rl.Acquire(ctx, e, "api", Consume{"tpm": 80}, lim)
					require.NoError(t, err)
					require.NoError(t, admin.Reset(ctx, e, "api"))
					require.NoError(t, lease.Adjust(Consume{"tpm": -80}))
					require.NoError(t, lease.Commit(ctx))
					mustCommit(t, mustAcquire(t, rl, e, "api", Consume{"tpm": 50}, lim))
					avail, err := rl.Available(ctx, e, "api", lim)
					require.NoError(t, err)
					assert.Equal(t, int64(50), avail["tpm"])

					// An overrun of 90 before an acquire of 80 (the fold was
					// refused, the acquire written alone and admitted, the
					// bucket ended at −80; exact is a refusal).
					e = fmt.Sprintf("overrun-%v-%v", spec, rl.commits != nil)
					lease, err = rl.Acquire(ctx, e, "api", Consume{"tpm": 10}, lim)
					require.NoError(t, err)
					require.NoError(t, lease.Adjust(Consume{"tpm": 90}))
					require.NoError(t, lease.Commit(ctx))
					_, err = rl.Acquire(ctx, e, "api", Consume{"tpm": 80}, lim)
					var rle *RateLimitExceededError
					require.ErrorAs(t, err, &rle)
					assert.Equal(t, int64(0), rle.Primary.Available)
					require.NoError(t, rl.Close())
					b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: e, Resource: "api"})
					require.NoError(t, err)
					s, _ := b.State("tpm")
					assert.Equal(t, int64(0), s.TokensMilli)
					assert.Equal(t, int64(100_000), s.TotalConsumedMilli)
					if rl.commits != nil {
						assert.Zero(t, rl.commits.failed.Load())
					}
				})
			})
		}
	})
}

// TestBackgroundCommitKeepsOrder: a charge queued after a refund of the
// same item is not summed with it (the refund's cap comes first): the
// bucket ends as with the two commits written one after the other.
func TestBackgroundCommitKeepsOrder(t *testing.T) {
	t.Parallel()
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		commitModes(t, func(t *testing.T, opts []func(*Options)) {
			ctx := context.Background()
			rl := bgLimiter(repo, clock, opts)
			lim := WithLimits(PerMinute("tpm", 100))
			e := fmt.Sprintf("e-%v", rl.commits != nil)
			a, err := rl.Acquire(ctx, e, "api", Consume{"tpm": 80}, lim)
			require.NoError(t, err)
			b, err := rl.Acquire(ctx, e, "api", Consume{"tpm": 10}, lim)
			require.NoError(t, err)
			require.NoError(t, New(repo, func(o *Options) { o.Clock = clock }).Reset(ctx, e, "api"))
			require.NoError(t, a.Adjust(Consume{"tpm": -80}))
			require.NoError(t, a.Commit(ctx)) // 100 + 80, capped: 100
			require.NoError(t, b.Adjust(Consume{"tpm": 90}))
			require.NoError(t, b.Commit(ctx)) // 10
			_, err = rl.Acquire(ctx, e, "api", Consume{"tpm": 15}, lim)
			require.ErrorIs(t, err, ErrRateLimited, "summed, the two commits would have left 90")
			avail, err := rl.Available(ctx, e, "api", lim)
			require.NoError(t, err)
			assert.Equal(t, int64(10), avail["tpm"])
			require.NoError(t, rl.Close())
		})
	})
}

// TestBackgroundCommitSumsSaturate: the adjustments queued for one item
// add up saturating: 1,100 commits of the largest amount leave the bucket
// deep in debt (their sum once wrapped around and left it full on
// DynamoDB).
func TestBackgroundCommitSumsSaturate(t *testing.T) {
	t.Parallel()
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		ctx := context.Background()
		rl := bgLimiter(repo, clock, []func(*Options){func(o *Options) { o.BackgroundCommit = true }, func(o *Options) { o.GroupCommit = false }})
		lim := WithLimits(PerMinute("tpm", 2_000))
		leases := make([]*Lease, 1_100)
		for i := range leases {
			// Acquires of zero: the total consumed stays within int64.
			l, err := rl.Acquire(ctx, "e", "api", Consume{"tpm": 0}, lim)
			require.NoError(t, err)
			leases[i] = l
		}
		for _, l := range leases {
			require.NoError(t, l.Adjust(Consume{"tpm": maxAmount}))
			require.NoError(t, l.Commit(ctx))
		}
		require.NoError(t, rl.Close())
		b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: "e", Resource: "api"})
		require.NoError(t, err)
		s, _ := b.State("tpm")
		assert.Less(t, s.TokensMilli, int64(-1<<62), "the bucket is deep in debt")
		assert.Zero(t, rl.commits.failed.Load())
	})
}
