package limiter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// recMetrics records what a RateLimiter reports.
type recMetrics struct {
	mu       sync.Mutex
	acquires []string // outcome names
	spec     []string // speculative outcome names
	calls    []string // "Op", or "Op!" when it failed
}

func (m *recMetrics) AcquireDone(_ context.Context, o AcquireOutcome, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d <= 0 {
		o = -1 // shows as AcquireOutcome(-1): a latency must be measured
	}
	m.acquires = append(m.acquires, o.String())
}

func (m *recMetrics) SpeculativeOutcome(o store.SpeculativeOutcome) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spec = append(m.spec, o.String())
}

func (m *recMetrics) StoreCall(_ context.Context, op store.StoreOp, d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := op.String()
	if err != nil {
		s += "!"
	}
	if d <= 0 {
		s += "(no latency)"
	}
	m.calls = append(m.calls, s)
}

// take returns and clears the records.
func (m *recMetrics) take() (acquires, spec, calls string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	acquires, spec, calls = strings.Join(m.acquires, " "), strings.Join(m.spec, " "), strings.Join(m.calls, " ")
	m.acquires, m.spec, m.calls = nil, nil, nil
	return acquires, spec, calls
}

// TestMetricsOutcomes: every acquire reports its outcome, every speculative
// attempt its outcome, and every bucket operation one store call — one per
// DynamoDB request the recorder sees.
func TestMetricsOutcomes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	m := &recMetrics{}
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.Metrics = m })
	lim := WithLimits(PerMinute("rpm", 2))

	steps := []struct {
		name                  string
		run                   func() error
		acquires, spec, calls string
		requests              string // DynamoDB requests, from the recorder
	}{
		{"new bucket", func() error {
			lease, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
			if err == nil {
				lease.Adjust(Consume{"rpm": 1})
				err = lease.Commit(ctx)
			}
			return err
		}, "admitted", "bucket_missing", "LoadBuckets WriteBuckets WriteBuckets",
			"BatchGetItem[2], PutItem, UpdateItem"},
		{"refused", func() error {
			_, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
			if !errors.Is(err, ErrRateLimited) {
				return err
			}
			return nil
		}, "rate_limited", "fast_rejection", "SpeculativeConsume", "UpdateItem!"},
		{"invalid", func() error {
			_, err := rl.Acquire(ctx, "", "api", Consume{"rpm": 1}, lim)
			if !errors.Is(err, ErrValidation) {
				return err
			}
			return nil
		}, "invalid", "", "", ""},
		{"wait refused, then fits", func() error {
			rl.sleep = func(_ context.Context, d time.Duration) error { env.clock.advance(d); return nil }
			lease, err := rl.Wait(ctx, "e", "api", Consume{"rpm": 1}, lim)
			if err == nil {
				err = lease.Commit(ctx)
			}
			return err
		}, "rate_limited admitted", "fast_rejection refill_would_help", "SpeculativeConsume SpeculativeConsume LoadBuckets WriteBuckets",
			"UpdateItem!, UpdateItem!, BatchGetItem[2], UpdateItem"},
		{"canceled", func() error {
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			_, err := rl.Acquire(canceled, "e", "api", Consume{"rpm": 1}, lim)
			if !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}, "canceled", "", "", ""}, // a done context makes no call
	}
	for _, s := range steps {
		env.rec.Reset()
		err := s.run()
		require.NoError(t, err, "%s: %v", s.name, err)
		acquires, spec, calls := m.take()
		assert.Equal(t, s.acquires, acquires, "%s: acquires", s.name)
		assert.Equal(t, s.spec, spec, "%s: spec", s.name)
		assert.Equal(t, s.calls, calls, "%s: calls", s.name)
		got := env.calls()
		assert.Equal(t, s.requests, got, "%s: DynamoDB requests %q, want %q", s.name, got, s.requests)
	}

	// An unavailable backend: block, then allow (fail-open).
	dead := New(newDeadRepo(t, env), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.Metrics = m }, func(o *Options) { o.SpeculativeWrites = false })
	_, err := dead.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrUnavailable, err)
	l, err := dead.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, WithOnUnavailable(OnUnavailableAllow))
	require.NoError(t, err, "allow")
	require.True(t, l.FailedOpen(), "allow: %v, want a no-op lease", l)
	acquires, spec, calls := m.take()
	assert.Equal(t, "unavailable fail_open", acquires, "unavailable: acquires")
	assert.Empty(t, spec, "unavailable: spec")
	assert.Equal(t, "LoadBuckets! LoadConfigs! LoadBuckets!", calls, "unavailable: calls")
}

// TestLoggerDecisions: speculative fallbacks, shard doubling, conflict
// retries, on-unavailable decisions and Wait's sleeps are logged at their
// levels.
func TestLoggerDecisions(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{
		Level:       slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	}))
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		buf.Reset()
		return slices.DeleteFunc(lines, func(s string) bool { return s == "" })
	}
	lim := WithLimits(PerMinute("rpm", 100))

	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.Logger = logger })
	mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim))
	rl.specFallback(store.BucketKey{EntityID: "e", Resource: "api", Shard: 1}, store.SpecFallbackShardDoubled)
	want := []string{
		`level=DEBUG msg="limiter: speculative fallback" entity_id=e resource=api shard=0 outcome=bucket_missing`,
		`level=INFO msg="limiter: shard count doubled" entity_id=e resource=api shard=1 outcome=shard_doubled`,
	}
	assert.Equal(t, want, take(), "fallback logs")

	dead := New(newDeadRepo(t, env), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.Logger = logger })
	dead.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	dead.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, WithOnUnavailable(OnUnavailableAllow))
	got := take()
	if assert.Len(t, got, 2, "unavailable logs:\n%s", strings.Join(got, "\n")) {
		for i, mode := range []string{"block", "allow"} {
			prefix := `level=WARN msg="limiter: backend unavailable" entity_id=e resource=api on_unavailable=` + mode + ` store=`
			assert.True(t, strings.HasPrefix(got[i], prefix), "unavailable log %q, want the prefix %q", got[i], prefix)
		}
		assert.Contains(t, got[1], "error=", "unavailable logs")
	}

	// A TransactionConflict on a cascade's two-item write (as in
	// TestTransactionConflictRetried).
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	take()
	conflicts := 1
	inject := hook(func(op string, _ any) error {
		if op == "TransactWriteItems" && conflicts > 0 {
			conflicts--
			return &types.TransactionCanceledException{Message: aws.String("conflict"), CancellationReasons: []types.CancellationReason{
				{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
		}
		return nil
	})
	conflicted := New(env.withClient(inject), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false }, func(o *Options) { o.Logger = logger })
	conflicted.sleep = func(context.Context, time.Duration) error { return nil }
	mustCommit(t, mustAcquire(t, conflicted, "C", "api", Consume{"rpm": 1}, lim))
	want = []string{`level=INFO msg="limiter: transaction conflict, retrying" buckets="[C/api#0 P/api#0]" retry=1 backoff=25ms`}
	assert.Equal(t, want, take(), "conflict logs")

	// Wait's sleep, on a drained bucket (fake clock: the sleep advances it);
	// a capacity of 2 at 1 per second, so that the bucket is not full
	// after the sleep and the speculative write falls back.
	waiter := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.Logger = logger })
	waiter.intN = func(int) int { return 0 }
	waiter.sleep = func(_ context.Context, d time.Duration) error { env.clock.advance(d); return nil }
	perSecond := WithLimits(Limit{Name: "rps", Capacity: 2, RefillAmount: 1, RefillPeriod: time.Second})
	mustCommit(t, mustAcquire(t, waiter, "w", "api", Consume{"rps": 2}, perSecond))
	take()
	_, err := waiter.Wait(ctx, "w", "api", Consume{"rps": 1}, perSecond)
	require.NoError(t, err)
	want = []string{
		`level=DEBUG msg="limiter: wait" entity_id=w resource=api limit=rps retry_after=1.001s sleep=1.001s`,
		`level=DEBUG msg="limiter: speculative fallback" entity_id=w resource=api shard=0 outcome=refill_would_help`,
	}
	assert.Equal(t, want, take(), "wait logs")

	// Above Debug, nothing of the above but the warnings.
	quiet := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	mustCommit(t, mustAcquire(t, quiet, "q", "api", Consume{"rpm": 1}, lim))
	assert.Empty(t, take(), "Info logger wrote")
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
