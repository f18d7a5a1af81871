package limiter_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

type nopMetrics struct{}

func (nopMetrics) AcquireDone(context.Context, limiter.AcquireOutcome, time.Duration) {}
func (nopMetrics) SpeculativeOutcome(store.SpeculativeOutcome)                        {}
func (nopMetrics) StoreCall(context.Context, store.StoreOp, time.Duration, error)     {}

// countingMetrics counts the calls of each hook.
type countingMetrics struct{ acquires, spec, calls atomic.Int64 }

func (m *countingMetrics) AcquireDone(context.Context, limiter.AcquireOutcome, time.Duration) {
	m.acquires.Add(1)
}
func (m *countingMetrics) SpeculativeOutcome(store.SpeculativeOutcome) { m.spec.Add(1) }
func (m *countingMetrics) StoreCall(context.Context, store.StoreOp, time.Duration, error) {
	m.calls.Add(1)
}

// TestMetricsKeepRepository: with metrics, Repository returns the
// repository given to New, optional capabilities are still found, and
// Options.Metrics set to nil turns them off again.
func TestMetricsKeepRepository(t *testing.T) {
	ctx := context.Background()
	repo := memorystore.New()
	m := &countingMetrics{}
	rl := limiter.New(repo, func(o *limiter.Options) { o.Metrics = m })
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "e"})
	require.NoError(t, err)
	ev, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "e"))
	require.NoError(t, err, "AuditEvents through a metered limiter")
	require.Len(t, ev, 1, "AuditEvents through a metered limiter")
	_, err = rl.Acquire(ctx, "e", "api", limiter.Consume{"rpm": 1}, limiter.WithLimits(limiter.PerMinute("rpm", 2)))
	require.NoError(t, err)
	require.EqualValues(t, 1, m.acquires.Load(), "metrics: acquires")
	require.NotZero(t, m.spec.Load(), "metrics: speculative outcomes")
	require.NotZero(t, m.calls.Load(), "metrics: store calls")
	m = &countingMetrics{}
	rl = limiter.New(repo, func(o *limiter.Options) { o.Metrics = m }, func(o *limiter.Options) { o.Metrics = nil })
	_, err = rl.Acquire(ctx, "e", "api", limiter.Consume{"rpm": 1}, limiter.WithLimits(limiter.PerMinute("rpm", 2)))
	require.NoError(t, err)
	n := m.acquires.Load() + m.spec.Load() + m.calls.Load()
	assert.EqualValues(t, 0, n, "Options.Metrics nil still reports %d events", n)
}

// TestObservabilityAllocs: the hooks themselves allocate nothing — an
// Acquire with a no-op Metrics and a logger above Debug costs what one
// without them costs.
func TestObservabilityAllocs(t *testing.T) {
	ctx := context.Background()
	c := limiter.Consume{"rps": 1}
	lim := limiter.WithLimits(limiter.PerSecond("rps", 1_000_000_000))
	measure := func(opts ...func(*limiter.Options)) float64 {
		rl := limiter.New(memorystore.New(), opts...)
		return testing.AllocsPerRun(500, func() {
			_, err := rl.Acquire(ctx, "bench", "gpt-4", c, lim)
			require.NoError(t, err)
		})
	}
	quiet := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	plain, observed := measure(), measure(func(o *limiter.Options) { o.Metrics = nopMetrics{} }, func(o *limiter.Options) { o.Logger = quiet })
	assert.LessOrEqual(t, observed, plain, "allocations per Acquire with hooks, want those without")
}
