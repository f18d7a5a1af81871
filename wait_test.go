package limiter

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// Wait sleeps in real time, so these tests run on the real clock: the
// DynamoDB Local repository with Now = time.Now, and the memory store.

// realTimeBackends runs fn on a DynamoDB Local repository and on a memory
// store, both on the real clock. With sideBySide the two run in parallel
// (most of their time is spent asleep in Wait); a test that bounds how
// late a timer fires runs them one after the other.
func realTimeBackends(t *testing.T, sideBySide bool, fn func(t *testing.T, repo Repository)) {
	t.Run("dynamodb", func(t *testing.T) {
		if sideBySide {
			t.Parallel()
		}
		env := newTestEnv(t, func(o *DynamoDBOptions) { o.Now = time.Now })
		fn(t, env.repo)
	})
	t.Run("memory", func(t *testing.T) {
		if sideBySide {
			t.Parallel()
		}
		fn(t, newMemory())
	})
}

// tenPerSecond is a limit of 10 tokens refilling 10 per second.
var tenPerSecond = PerSecond("rps", 10)

// TestWaitReturnsWhenTokensRefill: on a drained bucket Wait sleeps until the
// computed refill time and succeeds on its next attempt (never early), which
// starts within 50 ms of the computed time (the largest jitter, 10 ms here,
// included). Store latency is logged, not asserted (no test may
// fail because a machine is slow): the refusal's round trip delays the
// start of the sleep, and the successful attempt takes one round trip or
// three (the speculative write is refused, then read and write).
func TestWaitReturnsWhenTokensRefill(t *testing.T) {
	twoPerSecond := WithLimits(PerSecond("rps", 2)) // a token every 500 ms
	realTimeBackends(t, false, func(t *testing.T, repo Repository) {
		for _, spec := range []bool{true, false} {
			// lastNow is the limiter's last clock reading: the "now" of
			// the last refusal's retry-after.
			var mu sync.Mutex
			var lastNow time.Time
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				lastNow = time.Now()
				return lastNow
			}
			rl := New(repo, func(o *Options) { o.SpeculativeWrites = spec }, func(o *Options) { o.Clock = clock })
			rl.intN = func(n int) int { return n - 1 } // the largest jitter: 10 ms here
			var sleeps []time.Duration
			var slept, woke time.Time
			rl.sleep = func(ctx context.Context, d time.Duration) error {
				sleeps = append(sleeps, d)
				slept = time.Now()
				err := sleepContext(ctx, d)
				woke = time.Now()
				return err
			}
			entity := map[bool]string{true: "spec", false: "slow"}[spec]
			lease, err := rl.Acquire(context.Background(), entity, "batch", Consume{"rps": 2}, twoPerSecond)
			require.NoError(t, err)
			lease.Commit(context.Background())

			// The refill time is a property of the drained bucket: a
			// refusal at limiter time now reports RetryAfter = t + 1ms
			// with the refill complete at now + t (bucket.go), so
			// refillAt ≥ now + RetryAfter - 1ms.
			_, err = rl.Acquire(context.Background(), entity, "batch", Consume{"rps": 1}, twoPerSecond)
			var rle *RateLimitExceededError
			require.ErrorAs(t, err, &rle, "Acquire on a drained bucket")
			mu.Lock()
			refillAt := lastNow.Truncate(time.Millisecond).Add(rle.RetryAfter - time.Millisecond)
			mu.Unlock()

			lease, err = rl.Wait(context.Background(), entity, "batch", Consume{"rps": 1}, twoPerSecond)
			returned := time.Now()
			require.NoError(t, err, "Wait: %v", err)
			require.NoError(t, lease.Commit(context.Background()))
			// A second sleep would mean the first attempt was refused: the
			// computed time was early.
			require.Len(t, sleeps, 1, "Wait slept %d times (%v), want once", len(sleeps), sleeps)
			// Wait's own delay: from the moment it decided to sleep
			// RetryAfter to the next attempt (jitter and timer included).
			overhead := woke.Sub(slept) - (sleeps[0] - maxWaitJitter)
			late := woke.Sub(refillAt)
			t.Logf("spec=%v: retry after %v, slept %v; next attempt %v after the computed time (%v after the refill, the refusal's round trip included), took %v",
				spec, rle.RetryAfter, sleeps, overhead.Round(time.Microsecond), late.Round(time.Microsecond), returned.Sub(woke).Round(time.Microsecond))
			assert.GreaterOrEqual(t, late, time.Duration(0), "Wait tried again before the refill time")
			// 10 ms of jitter at most; the rest is timer and scheduler
			// delay, a millisecond on an idle machine but up to ~150 ms on
			// one loaded many times over. A Wait that slept a second
			// time would be a whole refill period (500 ms) late.
			assert.GreaterOrEqual(t, overhead, maxWaitJitter, "Wait tried again after the computed time, want within [10ms, 250ms]")
			assert.LessOrEqual(t, overhead, 250*time.Millisecond, "Wait tried again after the computed time, want within [10ms, 250ms]")
		}
	})
}

// TestWaitContext: a cancel during the sleep returns ctx.Err() itself; a
// deadline before the computed time fails at once with an error matching
// both ErrRateLimited and context.DeadlineExceeded; a done context makes no
// call.
func TestWaitContext(t *testing.T) {
	realTimeBackends(t, true, func(t *testing.T, repo Repository) {
		rl := New(repo)
		perMinute := WithLimits(PerMinute("rpm", 10)) // a drained bucket waits 6 s per token
		lease, err := rl.Acquire(context.Background(), "e", "batch", Consume{"rpm": 10}, perMinute)
		require.NoError(t, err)
		lease.Commit(context.Background())

		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		lease, err = rl.Wait(ctx, "e", "batch", Consume{"rpm": 1}, perMinute)
		require.Nil(t, lease, "Wait canceled: lease")
		require.Same(t, context.Canceled, err, "Wait canceled: want ctx.Err() itself") // not wrapped
		d := time.Since(start)
		assert.LessOrEqual(t, d, 2*time.Second, "canceled Wait returned late")

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		_, err = rl.Wait(ctx, "e", "batch", Consume{"rpm": 1}, perMinute)
		var rle *RateLimitExceededError
		require.ErrorIs(t, err, context.DeadlineExceeded, "Wait past the deadline")
		require.ErrorAs(t, err, &rle, "Wait past the deadline")
		require.GreaterOrEqual(t, rle.RetryAfter, 5*time.Second, "Wait past the deadline: RetryAfter")
		d = time.Since(start)
		assert.LessOrEqual(t, d, 500*time.Millisecond, "Wait past the deadline returned late, want at once")

		calls := 0
		rl.sleep = func(context.Context, time.Duration) error { calls++; return nil }
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = rl.Wait(done, "e", "batch", Consume{"rpm": 1}, perMinute)
		assert.Same(t, context.Canceled, err, "Wait on a done context: want ctx.Err() itself")
		assert.EqualValues(t, 0, calls, "Wait on a done context slept %d times", calls)
	})
}

// TestWaitNeverFits: a request larger than a limit's capacity, a limit
// that does not refill, an invalid request and an unavailable backend all
// return at once.
func TestWaitNeverFits(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := New(env.repo)
	rl.sleep = func(context.Context, time.Duration) error {
		t.Fatal("Wait slept")
		return nil
	}
	_, err := rl.Wait(env.ctx, "e", "batch", Consume{"rps": 11}, WithLimits(tenPerSecond))
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle, "Wait beyond capacity")
	require.Equal(t, "rps", rle.Primary.LimitName, "Wait beyond capacity: %v", err)
	_, err = rl.Wait(env.ctx, "", "batch", Consume{"rps": 1}, WithLimits(tenPerSecond))
	assert.ErrorIs(t, err, ErrValidation, "Wait with an invalid entity")
	dead := New(newDeadRepo(t, env))
	_, err = dead.Wait(env.ctx, "e", "batch", Consume{"rps": 1}, WithLimits(tenPerSecond))
	assert.ErrorIs(t, err, ErrUnavailable, "Wait on a dead backend")
	lease, err := dead.Wait(env.ctx, "e", "batch", Consume{"rps": 1}, WithLimits(tenPerSecond), WithOnUnavailable(OnUnavailableAllow))
	if assert.NoError(t, err, "Wait fail-open") {
		assert.True(t, lease.FailedOpen(), "Wait fail-open: %v, want a no-op lease", lease)
	}
	assert.True(t, (&RateLimitExceededError{Violations: []LimitStatus{{Requested: 1, Limit: Limit{Capacity: 5}}}}).NeverFits(), "NeverFits: a limit without refill should never fit")
}

// TestWaitJitter: each sleep is the retry-after plus at most
// min(retry-after/10, 10 ms); no retry-after sleeps at least 1 ms.
func TestWaitJitter(t *testing.T) {
	rl := New(newMemory())
	for _, tc := range []struct{ retry, lo, hi time.Duration }{
		{0, time.Millisecond, 1100 * time.Microsecond},
		{100 * time.Millisecond, 100 * time.Millisecond, 110 * time.Millisecond},
		{6 * time.Second, 6 * time.Second, 6*time.Second + 10*time.Millisecond},
	} {
		rl.intN = func(int) int { return 0 }
		d := rl.waitDuration(tc.retry)
		assert.Equal(t, tc.lo, d, "waitDuration(%v) without jitter = %v, want %v", tc.retry, d, tc.lo)
		rl.intN = func(n int) int { return n - 1 }
		d = rl.waitDuration(tc.retry)
		assert.Equal(t, tc.hi, d, "waitDuration(%v) with the largest jitter = %v, want %v", tc.retry, d, tc.hi)
	}
}

// TestWaitConcurrentNoOverAdmission: 32 goroutines Wait for one token each
// on a bucket of 10 refilling 10/s. All are served, and at any moment the
// number served is at most the capacity plus the refill earned since the
// start; the bucket's counter shows exactly 32 tokens taken.
func TestWaitConcurrentNoOverAdmission(t *testing.T) {
	realTimeBackends(t, true, func(t *testing.T, repo Repository) {
		rl := New(repo)
		const waiters = 32
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now() // the bucket is created full after this
		var mu sync.Mutex
		var served []time.Time
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				lease, err := rl.Wait(ctx, "job", "batch", Consume{"rps": 1}, WithLimits(tenPerSecond))
				if !assert.NoError(t, err, "Wait") {
					return
				}
				at := time.Now() // consumption was durable before this
				assert.NoError(t, lease.Commit(ctx), "Commit")
				mu.Lock()
				served = append(served, at)
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Len(t, served, waiters, "%d of %d waiters served", len(served), waiters)
		slices.SortFunc(served, func(a, b time.Time) int { return a.Compare(b) })
		for k, at := range served {
			// Refill earned by time at, rounded up: 10 tokens per second.
			allowed := tenPerSecond.Capacity + (at.Sub(start).Milliseconds()*10+999)/1000
			assert.LessOrEqual(t, int64(k+1), allowed, "waiters served by %v after the start, more than the tokens that existed", at.Sub(start))
		}
		total := served[waiters-1].Sub(start)
		t.Logf("%d waiters served in %v (ideal %v)", waiters, total.Round(time.Millisecond), time.Duration(waiters-10)*100*time.Millisecond)
		b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: "job", Resource: "batch"})
		require.NoError(t, err, "GetBucket")
		require.NotNil(t, b, "GetBucket")
		s, _ := b.State("rps")
		assert.EqualValues(t, waiters*1000, s.TotalConsumedMilli, "bucket tc = %d, want %d", s.TotalConsumedMilli, waiters*1000)
	})
}
