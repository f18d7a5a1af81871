// Package otelmetrics reports the measurements of a [limiter.RateLimiter] as
// OpenTelemetry metrics: it implements [limiter.Metrics] with instruments of
// go.opentelemetry.io/otel/metric.
//
//	m, err := otelmetrics.New(otel.GetMeterProvider())
//	if err != nil {
//		return err
//	}
//	rl := limiter.New(repo, func(o *limiter.Options) { o.Metrics = m })
//
// Instruments (meter "github.com/zaelimiter/limiter"):
//
//   - zaelimiter.acquire.duration (histogram, s), attribute outcome:
//     admitted, rate_limited, fail_open, unavailable, invalid, canceled. Its
//     count is the number of acquires.
//   - zaelimiter.speculative.outcomes (counter), attribute outcome: the
//     speculative-path outcomes of [limiter.RateLimiter.SpeculativeStats]
//     (success, fast_rejection, bucket_missing, refill_would_help, ...).
//   - zaelimiter.store.duration (histogram, s), attributes op (the
//     [limiter.Repository] method: LoadBuckets, GetBucket, WriteBuckets,
//     SpeculativeConsume, BumpShardCount, LoadConfigs) and result (ok,
//     condition_failed, transaction_conflict, error). Its count is the
//     number of store calls — on DynamoDB, of requests.
//   - zaelimiter.cache.lookups (counter), attributes cache (config, entity,
//     over_limit: the [limiter.CacheName]) and result (hit, miss): the
//     lookups of the limiter's per-key caches.
//   - zaelimiter.cache.evictions (counter), attribute cache: live entries
//     dropped to make room ([limiter.CacheEviction]); a steady rate means
//     the cache is smaller than the working set ([limiter.Options.ConfigCacheSize]).
//   - zaelimiter.index.foreign_items (counter), attribute index (GSI1 to
//     GSI4): entries a DynamoDB index query dropped because their item lies
//     in another namespace ([limiter.IndexMetrics]; set
//     [limiter.DynamoDBOptions].Metrics to record them). Anything above
//     zero means a principal wrote index keys naming a namespace that is
//     not its own.
//   - zaelimiter.circuit.changes (counter), attributes store (the
//     repository's name) and state (open, closed): the openings and
//     closings of the circuit breaker ([limiter.Options.CircuitFailures]).
//   - zaelimiter.circuit.open (up-down counter), attribute store: 1 while
//     the store's breaker is open, 0 otherwise (summed over the limiters
//     of the process).
//
// The attribute sets are built once, in New: recording allocates nothing
// beyond what the SDK does.
package otelmetrics

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// Meter and instrument names.
const (
	MeterName           = "github.com/zaelimiter/limiter"
	AcquireDuration     = "zaelimiter.acquire.duration"
	SpeculativeOutcomes = "zaelimiter.speculative.outcomes"
	StoreDuration       = "zaelimiter.store.duration"
	CacheLookups        = "zaelimiter.cache.lookups"
	CacheEvictions      = "zaelimiter.cache.evictions"
	ForeignIndexItems   = "zaelimiter.index.foreign_items"
	CircuitChanges      = "zaelimiter.circuit.changes"
	CircuitOpen         = "zaelimiter.circuit.open"
)

const (
	attrOutcome = "outcome"
	attrOp      = "op"
	attrResult  = "result"
	attrCache   = "cache"
	attrIndex   = "index"
	attrStore   = "store"
	attrState   = "state"

	// Outcomes and operations known when this package was written get
	// prebuilt attribute sets; newer ones are recorded too, with sets
	// built on each call.
	numKnownAcquire     = int(limiter.AcquireCanceled) + 1
	numKnownSpeculative = int(store.SpecFallbackParent) + 1
	numKnownStoreOps    = int(store.StoreLoadConfigs) + 1
	numKnownCaches      = int(limiter.CacheOverLimit) + 1

	resultOK            = 0
	resultConditionFail = 1
	resultConflict      = 2
	resultError         = 3
	numResults          = 4
)

var resultNames = [numResults]string{"ok", "condition_failed", "transaction_conflict", "error"}

// latencyBuckets are the histogram boundaries in seconds (the OpenTelemetry
// semantic conventions' for request durations).
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Metrics implements [limiter.Metrics], [limiter.CacheMetrics],
// [limiter.IndexMetrics] and [limiter.CircuitMetrics] with OpenTelemetry
// instruments. It is safe for concurrent use. Create it with [New].
type Metrics struct {
	acquire   metric.Float64Histogram
	spec      metric.Int64Counter
	store     metric.Float64Histogram
	lookups   metric.Int64Counter
	evictions metric.Int64Counter
	foreign   metric.Int64Counter
	circuit   metric.Int64Counter
	open      metric.Int64UpDownCounter

	acquireOpts  [numKnownAcquire][]metric.RecordOption
	specOpts     [numKnownSpeculative][]metric.AddOption
	storeOpts    [numKnownStoreOps][numResults][]metric.RecordOption
	lookupOpts   [numKnownCaches][2][]metric.AddOption // [cache][hit, miss]
	evictionOpts [numKnownCaches][]metric.AddOption
}

var (
	_ limiter.IndexMetrics   = (*Metrics)(nil)
	_ limiter.Metrics        = (*Metrics)(nil)
	_ limiter.CacheMetrics   = (*Metrics)(nil)
	_ limiter.CircuitMetrics = (*Metrics)(nil)
)

// New creates the instruments on mp's meter [MeterName].
func New(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter(MeterName)
	m := &Metrics{}
	var err error
	if m.acquire, err = meter.Float64Histogram(AcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of rate-limiter acquires, by outcome."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	if m.spec, err = meter.Int64Counter(SpeculativeOutcomes, metric.WithUnit("{acquire}"),
		metric.WithDescription("Outcomes of the speculative fast path.")); err != nil {
		return nil, err
	}
	if m.store, err = meter.Float64Histogram(StoreDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of bucket-store calls (DynamoDB requests), by operation and result."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	if m.lookups, err = meter.Int64Counter(CacheLookups, metric.WithUnit("{lookup}"),
		metric.WithDescription("Lookups of the rate limiter's per-key caches, by cache and result.")); err != nil {
		return nil, err
	}
	if m.evictions, err = meter.Int64Counter(CacheEvictions, metric.WithUnit("{entry}"),
		metric.WithDescription("Live entries of the rate limiter's per-key caches dropped to make room, by cache.")); err != nil {
		return nil, err
	}
	if m.foreign, err = meter.Int64Counter(ForeignIndexItems, metric.WithUnit("{item}"),
		metric.WithDescription("DynamoDB index entries dropped from a namespace's query because their item lies in another namespace, by index.")); err != nil {
		return nil, err
	}
	if m.circuit, err = meter.Int64Counter(CircuitChanges, metric.WithUnit("{change}"),
		metric.WithDescription("Openings and closings of the rate limiter's circuit breaker, by store and state.")); err != nil {
		return nil, err
	}
	if m.open, err = meter.Int64UpDownCounter(CircuitOpen, metric.WithUnit("{breaker}"),
		metric.WithDescription("Circuit breakers of the rate limiter open now, by store.")); err != nil {
		return nil, err
	}
	for c := range m.lookupOpts {
		m.lookupOpts[c][0] = []metric.AddOption{lookupAttrs(limiter.CacheName(c), limiter.CacheHit)}
		m.lookupOpts[c][1] = []metric.AddOption{lookupAttrs(limiter.CacheName(c), limiter.CacheMiss)}
		m.evictionOpts[c] = []metric.AddOption{cacheAttrs(limiter.CacheName(c))}
	}
	for i := range m.acquireOpts {
		m.acquireOpts[i] = []metric.RecordOption{acquireAttrs(limiter.AcquireOutcome(i))}
	}
	for i := range m.specOpts {
		m.specOpts[i] = []metric.AddOption{specAttrs(store.SpeculativeOutcome(i))}
	}
	for op := range m.storeOpts {
		for r := range numResults {
			m.storeOpts[op][r] = []metric.RecordOption{storeAttrs(store.StoreOp(op), r)}
		}
	}
	return m, nil
}

func acquireAttrs(o limiter.AcquireOutcome) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrOutcome, o.String())))
}

func specAttrs(o store.SpeculativeOutcome) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrOutcome, o.String())))
}

func storeAttrs(op store.StoreOp, result int) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrOp, op.String()), attribute.String(attrResult, resultNames[result])))
}

func lookupAttrs(c limiter.CacheName, e limiter.CacheEvent) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrCache, c.String()), attribute.String(attrResult, e.String())))
}

func cacheAttrs(c limiter.CacheName) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrCache, c.String())))
}

// AcquireDone records the acquire's latency under its outcome.
func (m *Metrics) AcquireDone(ctx context.Context, outcome limiter.AcquireOutcome, latency time.Duration) {
	if i := int(outcome); i >= 0 && i < numKnownAcquire {
		m.acquire.Record(ctx, latency.Seconds(), m.acquireOpts[i]...)
		return
	}
	m.acquire.Record(ctx, latency.Seconds(), acquireAttrs(outcome))
}

// SpeculativeOutcome counts the outcome.
func (m *Metrics) SpeculativeOutcome(outcome store.SpeculativeOutcome) {
	ctx := context.Background()
	if i := int(outcome); i >= 0 && i < numKnownSpeculative {
		m.spec.Add(ctx, 1, m.specOpts[i]...)
		return
	}
	m.spec.Add(ctx, 1, specAttrs(outcome))
}

// StoreCall records the call's latency under its operation and result.
func (m *Metrics) StoreCall(ctx context.Context, op store.StoreOp, latency time.Duration, err error) {
	r := resultOK
	switch {
	case err == nil:
	case errors.Is(err, store.ErrConditionFailed):
		r = resultConditionFail
	case errors.Is(err, store.ErrTransactionConflict):
		r = resultConflict
	default:
		r = resultError
	}
	if i := int(op); i >= 0 && i < numKnownStoreOps {
		m.store.Record(ctx, latency.Seconds(), m.storeOpts[i][r]...)
		return
	}
	m.store.Record(ctx, latency.Seconds(), storeAttrs(op, r))
}

// CircuitChange counts an opening or closing of a circuit breaker and
// moves the count of open ones. It is rare: the attribute sets are built
// on each call.
func (m *Metrics) CircuitChange(store string, open bool) {
	ctx := context.Background()
	state, delta := "closed", int64(-1)
	if open {
		state, delta = "open", 1
	}
	m.circuit.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(attrStore, store), attribute.String(attrState, state))))
	m.open.Add(ctx, delta, metric.WithAttributeSet(attribute.NewSet(attribute.String(attrStore, store))))
}

// CacheEvent counts cache lookups (hits and misses) and evictions. Events
// this package does not know are ignored.
func (m *Metrics) CacheEvent(cache limiter.CacheName, event limiter.CacheEvent, n int64) {
	ctx := context.Background()
	known := int(cache) >= 0 && int(cache) < numKnownCaches
	switch event {
	case limiter.CacheHit, limiter.CacheMiss:
		r := 0
		if event == limiter.CacheMiss {
			r = 1
		}
		if known {
			m.lookups.Add(ctx, n, m.lookupOpts[cache][r]...)
			return
		}
		m.lookups.Add(ctx, n, lookupAttrs(cache, event))
	case limiter.CacheEviction:
		if known {
			m.evictions.Add(ctx, n, m.evictionOpts[cache]...)
			return
		}
		m.evictions.Add(ctx, n, cacheAttrs(cache))
	}
}

// ForeignIndexItems counts index entries of another namespace dropped by a
// query (a rare event: the attribute set is built on each call).
func (m *Metrics) ForeignIndexItems(ctx context.Context, index string, n int64) {
	m.foreign.Add(ctx, n, metric.WithAttributeSet(attribute.NewSet(attribute.String(attrIndex, index))))
}
