package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/faultproxy"
)

// stallLoad is 32 goroutines acquiring and committing in a loop (a
// service's callers: a pause of 20 ms after each), block mode, each on an
// entity of its own, counting what they get.
type stallLoad struct {
	ok, failed, circuitOpen atomic.Int64
	streak                  atomic.Int64 // answered calls since the last failure
	// pauseStart is when the pause began (monoNow's ns; 0: none), and late
	// counts the failed acquires begun more than lateAfter after it, which
	// the pause cannot time out (its length less the store timeout, plus a
	// tenth of the timeout).
	pauseStart, late atomic.Int64
	lateAfter        time.Duration
	// took is the duration of each acquire and commit (while recording).
	mu        sync.Mutex
	took      []time.Duration
	recording atomic.Bool
	stop      chan struct{}
	wg        sync.WaitGroup
}

// startStallLoad starts the load on rl once each worker's bucket exists,
// and returns when the store has answered 64 calls in a row with the
// breaker closed. A store that cannot (DynamoDB Local on a machine too
// loaded to answer 32 callers within the store timeout) skips the test:
// what the breaker should do is then beside the point.
func startStallLoad(t *testing.T, env *testEnv, rl *RateLimiter, m *outageMetrics, lim AcquireOption) *stallLoad {
	t.Helper()
	l := runStallLoad(t, env, rl, lim, 250*time.Millisecond)
	if !l.settle(rl, m) {
		l.end()
		t.Skipf("the store did not answer 64 calls in a row within %v under 32 callers in 30 s (%d answered, %d failed): too loaded a machine",
			rl.store.bound.d, l.ok.Load(), l.failed.Load())
	}
	return l
}

// runStallLoad starts the load on rl once each worker's bucket exists;
// a failed acquire begun more than lateAfter after a pause began is late.
func runStallLoad(t *testing.T, env *testEnv, rl *RateLimiter, lim AcquireOption, lateAfter time.Duration) *stallLoad {
	t.Helper()
	for w := range 32 {
		createBucket(t, env, fmt.Sprintf("e-%d", w), lim)
	}
	l := &stallLoad{stop: make(chan struct{}), lateAfter: lateAfter}
	for w := range 32 {
		e := fmt.Sprintf("e-%d", w)
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				began := monoNow()
				lease, err := rl.Acquire(context.Background(), e, "api", Consume{"rpm": 1}, lim)
				if err == nil {
					err = lease.Commit(context.Background())
				}
				if err == nil && l.recording.Load() {
					l.mu.Lock()
					l.took = append(l.took, time.Duration(monoNow()-began))
					l.mu.Unlock()
				}
				switch {
				case err == nil:
					l.ok.Add(1)
					l.streak.Add(1)
				case errors.Is(err, ErrCircuitOpen):
					l.circuitOpen.Add(1)
				default:
					l.failed.Add(1)
					l.streak.Store(0)
					if ps := l.pauseStart.Load(); ps != 0 && began > ps+int64(l.lateAfter) {
						l.late.Add(1)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

// settle waits until the store has answered 64 calls in a row with the
// breaker closed, and resets the counts of openings and refusals. It
// reports false when the store did not within 30 s.
func (l *stallLoad) settle(rl *RateLimiter, m *outageMetrics) bool {
	l.streak.Store(0)
	deadline := time.Now().Add(30 * time.Second)
	for l.streak.Load() < 64 || breakerState(rl) != circuitClosed {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.opened.Store(0)
	m.closed.Store(0)
	l.circuitOpen.Store(0)
	l.pauseStart.Store(0)
	l.late.Store(0)
	return true
}

func (l *stallLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// TestBreakerSurvivesOneStall: one pause of the store longer than the
// store timeout (1.4 timeouts: 700 ms against the default 500 ms) under 32
// concurrent acquires fails the calls it caught, at most one per caller
// and none begun after the pause could make it fail, and does not open the
// breaker: the calls made after those failures are answered when the
// pause ends. The store timeout is the default, or longer where the store
// is slower: four times the 95th percentile of the acquires and commits
// of the same load over a second, made past the breaker, so that the pause is long against
// the store's own latency on any machine. A pause that DynamoDB Local,
// answering the held requests, drew out by more than a tenth of the
// timeout is a longer pause: it is tried again with twice the timeout
// (four tries at most, then the test fails).
func TestBreakerSurvivesOneStall(t *testing.T) {
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 1_000_000))
	timeout := stallTimeout(t, env, lim)
	for try := 1; !stallOnce(t, env, lim, timeout, try); try++ {
		require.Less(t, try, 4, "the store did not answer within a tenth of the store timeout after any pause")
		timeout *= 2
	}
}

// stallTimeout returns the store timeout of TestBreakerSurvivesOneStall:
// DefaultStoreTimeout, or four times the 95th percentile of the acquires
// and commits of the load over a second (at least 128 of them, after
// 200 ms of warm-up) when that is longer.
func stallTimeout(t *testing.T, env *testEnv, lim AcquireOption) time.Duration {
	rl := New(env.repo, WithClock(env.clock.now), WithStoreTimeout(30*time.Second), WithCircuitBreaker(0, 0))
	defer rl.Close()
	load := runStallLoad(t, env, rl, lim, 0)
	time.Sleep(200 * time.Millisecond) // the first calls of each worker warm up
	load.recording.Store(true)
	start := time.Now()
	for time.Since(start) < time.Second || load.ok.Load() < 128 {
		require.Less(t, time.Since(start), time.Minute, "the store answered %d acquires in a minute", load.ok.Load())
		time.Sleep(10 * time.Millisecond)
	}
	load.end()
	load.mu.Lock()
	took := slices.Clone(load.took)
	load.mu.Unlock()
	slices.Sort(took)
	p95 := took[len(took)*95/100]
	timeout := max(DefaultStoreTimeout, 4*p95).Round(time.Millisecond)
	t.Logf("%d acquires and commits under 32 callers: 95%% within %v, the slowest %v: store timeout %v",
		len(took), p95.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), timeout)
	return timeout
}

// stallOnce is one try of TestBreakerSurvivesOneStall with the store
// timeout timeout: false when the store took more than a tenth of it to
// answer after the pause (or did not settle before it), and the test is
// to be tried again.
func stallOnce(t *testing.T, env *testEnv, lim AcquireOption, timeout time.Duration, try int) bool {
	m := &outageMetrics{}
	rl, p := proxiedLimiter(t, env, WithStoreTimeout(timeout),
		WithCircuitBreaker(DefaultCircuitFailures, DefaultCircuitCooldown), WithMetrics(m))
	defer rl.Close()
	pause := timeout * 7 / 5
	load := runStallLoad(t, env, rl, lim, pause-timeout+timeout/10)
	if !load.settle(rl, m) {
		load.end()
		t.Logf("try %d: the store did not answer 64 calls in a row within %v under 32 callers in 30 s", try, timeout)
		return false
	}
	failedBefore, okBefore := load.failed.Load(), load.ok.Load()
	load.pauseStart.Store(monoNow())
	p.Hold()
	p.Add(faultproxy.Rule{Kind: faultproxy.Hang})
	time.Sleep(pause)
	p.Clear()
	p.Release()
	// How long the store takes to answer once the pause ends, asked past
	// the limiter and its breaker.
	probeStart := monoNow()
	_, err := rl.repo.GetEntity(context.Background(), "e-0")
	require.ErrorIs(t, err, ErrEntityNotFound)
	answer := time.Duration(monoNow() - probeStart)
	for deadline := time.Now().Add(20 * time.Second); load.ok.Load() < okBefore+96 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	load.end()
	failed := load.failed.Load() - failedBefore
	t.Logf("try %d: timeout %v, pause %v; the store answered %v after the pause; %d failed (%d begun after the pause could cause it), %d refused by the breaker, %d answered, %d openings",
		try, timeout, pause, answer.Round(time.Millisecond), failed, load.late.Load(), load.circuitOpen.Load(), load.ok.Load()-okBefore, m.opened.Load())
	if answer > timeout/10 {
		return false
	}
	require.Zero(t, m.opened.Load(), "breaker openings")
	require.Zero(t, load.circuitOpen.Load(), "acquires refused by the breaker")
	require.Positive(t, failed, "the pause outlasted the store timeout: it failed the calls it caught")
	require.LessOrEqual(t, failed, int64(32), "failures beyond the pause's own calls")
	require.Zero(t, load.late.Load(), "failed acquires begun after the pause could cause them")
	require.Equal(t, circuitClosed, breakerState(rl))
	return true
}

// TestBreakerOpensOnBlackHole: a store that stops answering under 32
// concurrent acquires opens the breaker within a second; then an acquire
// fails at once.
func TestBreakerOpensOnBlackHole(t *testing.T) {
	env := newTestEnv(t)
	m := &outageMetrics{}
	rl, p := proxiedLimiter(t, env, WithStoreTimeout(DefaultStoreTimeout),
		WithCircuitBreaker(DefaultCircuitFailures, time.Minute), WithMetrics(m))
	defer rl.Close()
	lim := WithLimits(PerMinute("rpm", 1_000_000))
	load := startStallLoad(t, env, rl, m, lim)

	start := time.Now()
	p.Add(faultproxy.Rule{Kind: faultproxy.Blackhole})
	for m.opened.Load() == 0 && time.Since(start) < 5*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	load.end()
	t.Logf("black hole: open after %v; %d failed", took.Round(time.Millisecond), load.failed.Load())
	require.EqualValues(t, 1, m.opened.Load(), "breaker openings")
	require.Less(t, took, time.Second, "the breaker opened after %v", took)
	_, err := rl.Acquire(context.Background(), "e-0", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrCircuitOpen)
}
