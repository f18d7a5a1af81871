package limiter

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/store"
)

// The tests of this file take DynamoDB away from a limiter through the
// fault proxy (internal/faultproxy) in three ways — a network black hole
// (requests never answered), a closed port (connections refused), a slow
// store (requests answered after 2 s) — and check what callers get: an
// answer before their deadline, at once once the circuit breaker is open,
// real leases again once DynamoDB is back, and a Close that does not wait
// for the store.

// outageMetrics counts the store calls a limiter makes (the calls the
// breaker let through) and the breaker's openings and closings.
type outageMetrics struct {
	calls          atomic.Int64
	opened, closed atomic.Int64
}

func (m *outageMetrics) AcquireDone(context.Context, AcquireOutcome, time.Duration) {}
func (m *outageMetrics) SpeculativeOutcome(store.SpeculativeOutcome)                {}
func (m *outageMetrics) StoreCall(context.Context, store.StoreOp, time.Duration, error) {
	m.calls.Add(1)
}

func (m *outageMetrics) CircuitChange(_ string, open bool) {
	if open {
		m.opened.Add(1)
	} else {
		m.closed.Add(1)
	}
}

// outage is one way of taking DynamoDB away behind a fault proxy.
type outage struct {
	name      string
	start     func(t *testing.T, p *faultproxy.Proxy)
	end       func(t *testing.T, p *faultproxy.Proxy)
	heldCalls bool // requests stay open at the proxy while it lasts
}

var outages = []outage{
	{name: "black hole", heldCalls: true,
		start: func(_ *testing.T, p *faultproxy.Proxy) { p.Add(faultproxy.Rule{Kind: faultproxy.Blackhole}) },
		end:   func(_ *testing.T, p *faultproxy.Proxy) { p.Clear() }},
	{name: "refused",
		start: func(_ *testing.T, p *faultproxy.Proxy) { p.Down() },
		end:   func(t *testing.T, p *faultproxy.Proxy) { require.NoError(t, p.Up()) }},
	{name: "slow", heldCalls: true,
		start: func(_ *testing.T, p *faultproxy.Proxy) {
			p.Add(faultproxy.Rule{Kind: faultproxy.DelayBefore, Delay: 2 * time.Second})
		},
		end: func(_ *testing.T, p *faultproxy.Proxy) { p.Clear() }},
}

// createBucket acquires and commits one request of e under lim on env's
// repository directly (not through a proxy, with the harness's store
// timeout), so that the bucket exists and DynamoDB Local has warmed up
// before a limiter with a short store timeout uses it.
func createBucket(t *testing.T, env *testEnv, e string, lim AcquireOption) {
	t.Helper()
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now })
	defer rl.Close()
	lease, err := rl.Acquire(env.ctx, e, "api", Consume{"rpm": 1}, lim)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(env.ctx))
}

// breakerState returns the state of rl's circuit breaker.
func breakerState(rl *RateLimiter) circuitState { return circuitState(rl.store.brk.state.Load()) }

// TestAllowModeWhileDynamoDBDown: with DynamoDB gone, allow mode answers
// every acquire with a no-op lease before its 500 ms deadline; after five
// failed calls the breaker opens and acquires are decided without a store
// call; once DynamoDB is back, a probe closes the breaker and real leases
// return within 3 s.
func TestAllowModeWhileDynamoDBDown(t *testing.T) {
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t)
			m := &outageMetrics{}
			rl, p := proxiedLimiter(t, env, func(o *Options) { o.StoreTimeout = defaultStoreTimeout }, func(o *Options) { o.CircuitFailures, o.CircuitCooldown = 5, time.Second }, func(o *Options) { o.Metrics = m })
			defer rl.Close()
			lim := WithLimits(PerMinute("rpm", 10_000))
			allow := WithOnUnavailable(OnUnavailableAllow)
			createBucket(t, env, "e", lim)

			o.start(t, p)
			const n = 40
			deadline := 500 * time.Millisecond
			var late, atOnce, whileOpen int
			var took []time.Duration
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				calls, open := m.calls.Load(), breakerState(rl) == circuitOpen
				start := time.Now()
				lease, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
				d := time.Since(start)
				cancel()
				require.NoError(t, err, "acquire %d after %v", i, d)
				assert.True(t, lease.FailedOpen(), "acquire %d: a real lease while DynamoDB is away", i)
				took = append(took, d)
				if d >= deadline {
					late++
				}
				if m.calls.Load() == calls {
					atOnce++
				}
				if open {
					whileOpen++
				}
				time.Sleep(5 * time.Millisecond) // the acquires of a service, not a loop
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			t.Logf("%s: %d acquires, median %v, max %v; %d after the deadline, %d decided without a store call, %d with the breaker open; %d store calls",
				o.name, n, took[n/2].Round(time.Microsecond), took[n-1].Round(time.Millisecond), late, atOnce, whileOpen, m.calls.Load())
			// Each answer is taken a margin before the deadline; on a loaded
			// machine (and under -race) a goroutine can wake later than that.
			assert.LessOrEqual(t, late, n/10, "acquires that returned after their %v deadline", deadline)
			assert.Less(t, took[n-1], deadline+time.Second, "the slowest acquire")
			assert.Less(t, took[n/2], deadline, "the median acquire")
			assert.EqualValues(t, 1, m.opened.Load(), "breaker openings")
			assert.GreaterOrEqual(t, atOnce, n-10, "acquires decided without a store call: the breaker did not decide them")
			assert.GreaterOrEqual(t, whileOpen, n-10, "acquires made with the breaker open")

			// DynamoDB is back: the next probe closes the breaker.
			o.end(t, p)
			back := time.Now()
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				lease, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
				cancel()
				require.NoError(t, err)
				if !lease.FailedOpen() {
					require.NoError(t, lease.Commit(context.Background()))
					break
				}
				require.Less(t, time.Since(back), 10*time.Second, "no real lease 10 s after DynamoDB came back")
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("%s: a real lease %v after DynamoDB came back", o.name, time.Since(back).Round(time.Millisecond))
			assert.Less(t, time.Since(back), 3*time.Second, "a real lease came back only after 3 s")
			assert.Equal(t, circuitClosed, breakerState(rl))
			assert.EqualValues(t, 1, m.closed.Load(), "breaker closings")
		})
	}
}

// TestBlockModeWhileDynamoDBDown: in block mode the acquires fail with
// ErrUnavailable before their deadline, not with the context's error; once
// the breaker is open the cause is ErrCircuitOpen. An acquire whose context
// can never end waits at most the store timeout.
func TestBlockModeWhileDynamoDBDown(t *testing.T) {
	env := newTestEnv(t)
	m := &outageMetrics{}
	const timeout = 300 * time.Millisecond
	rl, p := proxiedLimiter(t, env, func(o *Options) { o.StoreTimeout = timeout }, func(o *Options) { o.CircuitFailures, o.CircuitCooldown = 3, time.Minute }, func(o *Options) { o.Metrics = m })
	defer rl.Close()
	lim := WithLimits(PerMinute("rpm", 10_000))
	createBucket(t, env, "e", lim)
	p.Add(faultproxy.Rule{Kind: faultproxy.Blackhole})

	// Without a deadline: the store timeout decides.
	for i := range 3 {
		start := time.Now()
		_, err := rl.Acquire(context.Background(), "e", "api", Consume{"rpm": 1}, lim)
		d := time.Since(start)
		require.ErrorIs(t, err, ErrUnavailable, "acquire %d without a deadline, after %v", i, d)
		var te *storeTimeoutError
		assert.ErrorAs(t, err, &te, "acquire %d: %v", i, err)
		assert.Less(t, d, timeout+blockedBound, "acquire %d without a deadline took %v", i, d)
	}
	require.Equal(t, circuitOpen, breakerState(rl), "three calls timed out: the breaker is open")
	calls := m.calls.Load()
	for i := range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
		cancel()
		require.ErrorIs(t, err, ErrCircuitOpen, "acquire %d with the breaker open", i)
		var ue *UnavailableError
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, "e", ue.EntityID)
	}
	assert.Equal(t, calls, m.calls.Load(), "store calls made with the breaker open")
}

// TestBreakerIgnoresRefusals: throttling (a rate limit of DynamoDB's own)
// and refused conditional writes are answers of a working store: however
// many there are, the breaker stays closed. Server errors open it.
func TestBreakerIgnoresRefusals(t *testing.T) {
	env := newTestEnv(t)
	m := &outageMetrics{}
	// One attempt per request: the SDK's backoff between retries of
	// throttled requests can pass the store timeout.
	p := faultproxy.Start(t, ddblocal.Endpoint(t))
	repo := *env.repo
	repo.client = ddblocal.NewClient(p.URL, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	rl := New(&repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.CircuitFailures, o.CircuitCooldown = 2, time.Minute }, func(o *Options) { o.Metrics = m }, func(o *Options) { o.GroupCommit = false })
	defer rl.Close()
	lim := WithLimits(PerMinute("rpm", 3))
	mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
	for range 4 { // refused conditional writes: the bucket is empty after two
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
		if err != nil {
			require.ErrorIs(t, err, ErrRateLimited)
		}
	}
	p.Add(faultproxy.Rule{Kind: faultproxy.Throttle}) // reads too: an item may be read before its write
	for i := range 4 {
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 1000)))
		require.ErrorIs(t, err, ErrUnavailable, "acquire %d, throttled", i)
		assert.NotErrorIs(t, err, ErrCircuitOpen, "acquire %d, throttled", i)
	}
	assert.Equal(t, circuitClosed, breakerState(rl), "throttling opened the breaker")
	assert.Zero(t, m.opened.Load())

	p.Clear()
	p.Add(faultproxy.Rule{Kind: faultproxy.Error500After})
	for range 2 {
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 1000)))
		require.ErrorIs(t, err, ErrUnavailable)
	}
	assert.Equal(t, circuitOpen, breakerState(rl), "two server errors in a row: the breaker is open")
	assert.EqualValues(t, 1, m.opened.Load())
}

// TestBreakerProbesOneAtATime: once the cooldown has passed, one call goes
// to the store as the probe; while it is out, every other acquire is
// decided at once. A probe that fails opens the breaker again.
func TestBreakerProbesOneAtATime(t *testing.T) {
	env := newTestEnv(t)
	m := &outageMetrics{}
	const timeout, cooldown = 500 * time.Millisecond, 300 * time.Millisecond
	rl, p := proxiedLimiter(t, env, func(o *Options) { o.StoreTimeout = timeout }, func(o *Options) { o.CircuitFailures, o.CircuitCooldown = 1, cooldown }, func(o *Options) { o.Metrics = m })
	defer rl.Close()
	lim := WithLimits(PerMinute("rpm", 10_000))
	allow := WithOnUnavailable(OnUnavailableAllow)
	createBucket(t, env, "e", lim)
	p.Add(faultproxy.Rule{Kind: faultproxy.Blackhole})
	_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
	require.NoError(t, err)
	require.Equal(t, circuitOpen, breakerState(rl))

	time.Sleep(cooldown + 50*time.Millisecond)
	calls := m.calls.Load()
	probe := make(chan error, 1)
	go func() {
		_, err := rl.Acquire(context.Background(), "e", "api", Consume{"rpm": 1}, lim, allow)
		probe <- err
	}()
	waitFor(t, func() bool { return breakerState(rl) == circuitHalfOpen })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			lease, err := rl.Acquire(context.Background(), "e", "api", Consume{"rpm": 1}, lim, allow)
			assert.NoError(t, err)
			assert.True(t, lease.FailedOpen())
		})
	}
	wg.Wait()
	assert.Equal(t, circuitHalfOpen, breakerState(rl), "the probe is still out")
	require.NoError(t, <-probe)
	assert.Equal(t, calls+1, m.calls.Load(), "store calls: the probe alone")
	assert.Equal(t, circuitOpen, breakerState(rl), "the probe failed: open again")
}

// TestCloseWithinStoreTimeout: Close does not wait for a store that does
// not answer longer than the store timeout: the writes of acquires that
// gave up end at their bound, and no request stays open.
func TestCloseWithinStoreTimeout(t *testing.T) {
	for _, o := range outages {
		if !o.heldCalls {
			continue
		}
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			commitModes(t, func(t *testing.T, mode []func(*Options)) {
				t.Parallel()
				env := newTestEnv(t)
				const timeout = time.Second
				rl, p := proxiedLimiter(t, env, append([]func(*Options){func(o *Options) { o.StoreTimeout = timeout }}, mode...)...)
				lim := WithLimits(PerMinute("rpm", 10_000))
				allow := WithOnUnavailable(OnUnavailableAllow)
				createBucket(t, env, "e", lim)
				lease, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
				require.NoError(t, err)
				o.start(t, p)
				// Acquires that give up before the store timeout: their writes
				// go on in the background.
				for range 3 {
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					_, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
					cancel()
					require.NoError(t, err)
				}
				require.NoError(t, lease.Adjust(Consume{"rpm": 5}))
				_ = lease.Commit(env.ctx) // a background commit waits for Close
				start := time.Now()
				require.NoError(t, rl.Close())
				d := time.Since(start)
				t.Logf("Close took %v with %d requests held at the proxy", d.Round(time.Millisecond), p.Held())
				assert.Less(t, d, timeout+blockedBound, "Close waited for the store")
				waitFor(t, func() bool { return p.Held() == 0 })
			})
		})
	}
}

// TestOpenDynamoDBUnreachable: OpenDynamoDB on a closed port fails at once
// with an *UnavailableError that names the endpoint and what to check; on
// an endpoint that does not answer, after OpenTimeout; on a missing table,
// with a *TableNotFoundError that names the table and how to create it.
func TestOpenDynamoDBUnreachable(t *testing.T) {
	ctx := context.Background()
	t.Run("closed port", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		endpoint := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		start := time.Now()
		_, err = openDynamo(ctx, NewDynamoDBLocalClient(endpoint), func(o *DynamoDBOptions) { o.Table = "rl" })
		d := time.Since(start)
		require.ErrorIs(t, err, ErrUnavailable)
		var ue *UnavailableError
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, "rl", ue.Table)
		for _, want := range []string{"limiter: cannot reach DynamoDB at " + endpoint, "connection refused", "zae-limiter local up", "[stack=rl]"} {
			assert.Contains(t, err.Error(), want)
		}
		assert.NotContains(t, err.Error(), "version record", "a message naming an internal step")
		assert.Less(t, d, 2*time.Second, "OpenDynamoDB on a closed port took %v", d)
	})
	t.Run("black hole", func(t *testing.T) {
		p := faultproxy.Start(t, ddblocal.Endpoint(t))
		p.Add(faultproxy.Rule{Kind: faultproxy.Blackhole})
		start := time.Now()
		_, err := openDynamo(ctx, ddblocal.NewClient(p.URL), func(o *DynamoDBOptions) {
			o.Table = "rl"
			o.OpenTimeout = 300 * time.Millisecond
		})
		d := time.Since(start)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "limiter: cannot reach DynamoDB at "+p.URL+": no answer within 300ms (DynamoDBOptions.OpenTimeout)")
		assert.Less(t, d, 300*time.Millisecond+blockedBound, "OpenDynamoDB took %v", d)
		waitFor(t, func() bool { return p.Held() == 0 })
	})
	t.Run("missing table", func(t *testing.T) {
		table := ddblocal.TableName(t)
		_, err := openDynamo(ctx, ddblocal.Client(t), func(o *DynamoDBOptions) { o.Table = table })
		require.ErrorIs(t, err, ErrTableNotFound)
		require.NotErrorIs(t, err, ErrUnavailable)
		var nf *TableNotFoundError
		require.ErrorAs(t, err, &nf)
		assert.Equal(t, table, nf.Table)
		var rnf *types.ResourceNotFoundException
		assert.ErrorAs(t, err, &rnf, "the SDK's error is still reachable")
		for _, want := range []string{`limiter: table "` + table + `" not found at http://`, "zae-limiter local up --name " + table,
			"zae-limiter deploy --name " + table, "CreateTable"} {
			assert.Contains(t, err.Error(), want)
		}
	})
}

// TestOutageLogs: the breaker's changes are logged (open at Warn, closed at
// Info), and the decisions it makes at Debug only.
func TestOutageLogs(t *testing.T) {
	env := newTestEnv(t)
	var buf strings.Builder
	var mu sync.Mutex
	logger := slogText(&lockedStringWriter{mu: &mu, b: &buf})
	rl, p := proxiedLimiter(t, env, func(o *Options) { o.StoreTimeout = 2 * time.Second }, func(o *Options) { o.CircuitFailures, o.CircuitCooldown = 1, 100*time.Millisecond }, func(o *Options) { o.Logger = logger })
	defer rl.Close()
	lim := WithLimits(PerMinute("rpm", 10_000))
	allow := WithOnUnavailable(OnUnavailableAllow)
	createBucket(t, env, "e", lim)
	p.Down()
	for range 3 {
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
		require.NoError(t, err)
	}
	require.NoError(t, p.Up())
	time.Sleep(150 * time.Millisecond)
	lease, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim, allow)
	require.NoError(t, err)
	require.False(t, lease.FailedOpen(), "the probe's acquire")
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, rest, _ := strings.Cut(line, "msg=")
		msg, _, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `"`)
		level, _, _ := strings.Cut(strings.TrimPrefix(line, "level="), " ")
		msgs = append(msgs, level+" "+msg)
	}
	assert.Equal(t, []string{
		"WARN limiter: circuit open",
		"WARN limiter: backend unavailable",  // the acquire whose call failed
		"DEBUG limiter: backend unavailable", // decided by the breaker
		"DEBUG limiter: backend unavailable",
		"DEBUG limiter: circuit half-open",
		"INFO limiter: circuit closed",
	}, msgs, "log:\n%s", out)
	assert.Contains(t, out, `error="limiter: circuit breaker open`)
}

// lockedStringWriter is a strings.Builder written under a lock.
type lockedStringWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedStringWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// slogText is a text logger of every level, without times.
func slogText(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) }}))
}
