package redisstore_test

import (
	"context"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/store"
)

// The tests of this file take the Redis server away from a limiter — paused
// (SIGSTOP), busy (DEBUG SLEEP), killed — and check what callers get: an
// answer before their deadline, at once once the circuit breaker is open,
// real leases again once the server is back, and a Close that does not
// wait for the server.

// outageMetrics counts the store calls a limiter makes (the calls the
// breaker let through) and the breaker's openings and closings.
type outageMetrics struct {
	calls          atomic.Int64
	opened, closed atomic.Int64
}

func (m *outageMetrics) AcquireDone(context.Context, limiter.AcquireOutcome, time.Duration) {}
func (m *outageMetrics) SpeculativeOutcome(store.SpeculativeOutcome)                        {}
func (m *outageMetrics) StoreCall(context.Context, store.StoreOp, time.Duration, error) {
	m.calls.Add(1)
}

func (m *outageMetrics) CircuitChange(name string, open bool) {
	if name != "redis" {
		panic("a breaker named " + name)
	}
	if open {
		m.opened.Add(1)
	} else {
		m.closed.Add(1)
	}
}

// boundedClient makes a client honour its context's deadline, so that the
// limiter's store timeout cuts its calls.
func boundedClient(o *redis.Options) { o.ContextTimeoutEnabled = true }

// redisOutage is one way of taking the server away.
type redisOutage struct {
	name  string
	args  []string // of the server
	start func(t *testing.T, srv *redisserver.Server) (end func())
}

var redisOutages = []redisOutage{
	{name: "paused", start: func(t *testing.T, srv *redisserver.Server) func() {
		require.NoError(t, srv.Pause())
		return func() { require.NoError(t, srv.Resume()) }
	}},
	{name: "debug sleep", args: []string{"--enable-debug-command", "yes"}, start: func(t *testing.T, srv *redisserver.Server) func() {
		o := redisserver.ClientOptions(srv.Addr())
		boundedClient(o)
		admin := redis.NewClient(o)
		slept := make(chan error, 1)
		go func() {
			o := redisserver.ClientOptions(srv.Addr())
			o.ReadTimeout = 20 * time.Second
			c := redis.NewClient(o)
			defer c.Close()
			slept <- c.Do(context.Background(), "DEBUG", "SLEEP", "6").Err()
		}()
		// The server is asleep once it stops answering.
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			return admin.Ping(ctx).Err() != nil
		}, 5*time.Second, 10*time.Millisecond)
		return func() {
			require.NoError(t, <-slept)
			admin.Close()
		}
	}},
	{name: "killed", start: func(t *testing.T, srv *redisserver.Server) func() {
		srv.Kill()
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, srv.Restart(ctx))
		}
	}},
}

// TestAllowModeWhileRedisDown: with the server gone, allow mode answers
// every acquire with a no-op lease before its 500 ms deadline; after five
// failed calls the breaker opens and acquires are decided without a store
// call; once the server is back, a probe closes the breaker and real
// leases return within 3 s.
func TestAllowModeWhileRedisDown(t *testing.T) {
	for _, o := range redisOutages {
		t.Run(o.name, func(t *testing.T) {
			s, srv := privateStoreOn(t, redisserver.Private(t, o.args...), boundedClient)
			m := &outageMetrics{}
			rl := limiter.New(s, func(o *limiter.Options) { o.StoreTimeout = 500 * time.Millisecond }, func(o *limiter.Options) { o.CircuitFailures, o.CircuitCooldown = 5, time.Second }, func(o *limiter.Options) { o.Metrics = m })
			defer rl.Close()
			allow := limiter.WithOnUnavailable(limiter.OnUnavailableAllow)
			lim := limiter.WithLimits(limiter.PerMinute("rpm", 10_000))
			ctx := context.Background()
			warm := limiter.New(s) // the harness's store timeout: the first calls load the Lua code
			_, err := acquire(ctx, warm)
			require.NoError(t, err)
			require.NoError(t, warm.Close())

			end := o.start(t, srv)
			const n = 40
			deadline := 500 * time.Millisecond
			var late, atOnce int
			var took []time.Duration
			for i := range n {
				actx, cancel := context.WithTimeout(ctx, deadline)
				calls := m.calls.Load()
				start := time.Now()
				lease, err := rl.Acquire(actx, "k", "gpt", limiter.Consume{"rpm": 1}, lim, allow)
				d := time.Since(start)
				cancel()
				require.NoError(t, err, "acquire %d after %v", i, d)
				assert.True(t, lease.FailedOpen(), "acquire %d: a real lease while the server is away", i)
				took = append(took, d)
				if d >= deadline {
					late++
				}
				if m.calls.Load() == calls {
					atOnce++
				}
				time.Sleep(5 * time.Millisecond)
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			t.Logf("%s: %d acquires, median %v, max %v; %d after the deadline, %d decided without a store call; %d store calls",
				o.name, n, took[n/2].Round(time.Microsecond), took[n-1].Round(time.Millisecond), late, atOnce, m.calls.Load())
			// Each answer is taken a margin before the deadline; on a loaded
			// machine (and under -race) a goroutine can wake later than that.
			assert.LessOrEqual(t, late, n/10, "acquires that returned after their %v deadline", deadline)
			assert.Less(t, took[n-1], deadline+time.Second, "the slowest acquire")
			assert.Less(t, took[n/2], deadline, "the median acquire")
			assert.EqualValues(t, 1, m.opened.Load(), "breaker openings")
			assert.GreaterOrEqual(t, atOnce, n-10, "acquires decided without a store call: the breaker did not decide them")

			end()
			back := time.Now()
			for {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				lease, err := rl.Acquire(actx, "k", "gpt", limiter.Consume{"rpm": 1}, lim, allow)
				cancel()
				require.NoError(t, err)
				if !lease.FailedOpen() {
					require.NoError(t, lease.Commit(ctx))
					break
				}
				require.Less(t, time.Since(back), 10*time.Second, "no real lease 10 s after the server came back")
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: a real lease %v after the server came back", o.name, time.Since(back).Round(time.Millisecond))
			assert.Less(t, time.Since(back), 3*time.Second, "a real lease came back only after 3 s")
			assert.EqualValues(t, 1, m.closed.Load(), "breaker closings")
		})
	}
}

// TestCloseWhileRedisPaused: the writes of acquires that gave up on a
// paused server end at the store timeout, and Close does not wait longer.
func TestCloseWhileRedisPaused(t *testing.T) {
	s, srv := privateStore(t, boundedClient)
	const timeout = time.Second
	rl := limiter.New(s, func(o *limiter.Options) { o.StoreTimeout = timeout }, func(o *limiter.Options) { o.BackgroundCommit = true })
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 10_000))
	warm := limiter.New(s)
	_, err := acquire(ctx, warm)
	require.NoError(t, err)
	require.NoError(t, warm.Close())
	lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1}, lim)
	require.NoError(t, err)

	require.NoError(t, srv.Pause())
	defer func() { require.NoError(t, srv.Resume()) }()
	for range 3 {
		actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := rl.Acquire(actx, "k", "gpt", limiter.Consume{"rpm": 1}, lim, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
		cancel()
		require.NoError(t, err)
	}
	require.NoError(t, lease.Adjust(limiter.Consume{"rpm": 5}))
	require.NoError(t, lease.Commit(ctx)) // queued: Close writes it
	start := time.Now()
	require.NoError(t, rl.Close())
	d := time.Since(start)
	t.Logf("Close took %v", d.Round(time.Millisecond))
	assert.Less(t, d, timeout+time.Second, "Close waited for the paused server")
}

// TestStoreErrorsPrefixed: the errors of a server that cannot be reached
// match ErrUnavailable and start "limiter: ".
func TestStoreErrorsPrefixed(t *testing.T) {
	s, srv := privateStore(t, nil)
	srv.Kill()
	rl := limiter.New(s, func(o *limiter.Options) { o.CircuitFailures, o.CircuitCooldown = 0, 0 })
	_, err := acquire(context.Background(), rl)
	require.ErrorIs(t, err, limiter.ErrUnavailable)
	assert.Regexp(t, `^limiter: backend unavailable: redis \w+( \w+)?: .*connection refused \[stack=redis, entity=k, resource=gpt\]$`, err.Error())
}
