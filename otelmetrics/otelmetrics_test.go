package otelmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/otelmetrics"
	"github.com/zaelimiter/limiter/store"
)

// points summarises the collected data points as sorted lines
// "instrument{attr=value,...} count" (histograms) or "... value" (sums).
func points(t *testing.T, reader *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	attrs := func(s attribute.Set) string {
		var parts []string
		for _, kv := range s.ToSlice() {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var out []string
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelmetrics.MeterName, sm.Scope.Name, "scope %q", sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				assert.Equal(t, "s", m.Unit, "%s: unit %q", m.Name, m.Unit)
				for _, p := range d.DataPoints {
					if p.Count > 0 {
						assert.Positive(t, p.Sum, "%s%s: sum for %d measurements", m.Name, attrs(p.Attributes), p.Count)
					}
					out = append(out, fmt.Sprintf("%s%s %d", m.Name, attrs(p.Attributes), p.Count))
				}
			case metricdata.Sum[int64]:
				assert.True(t, d.IsMonotonic, "%s: not monotonic", m.Name)
				for _, p := range d.DataPoints {
					out = append(out, fmt.Sprintf("%s%s %d", m.Name, attrs(p.Attributes), p.Value))
				}
			default:
				assert.Failf(t, "unexpected data", "%s: %T", m.Name, m.Data)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestMetrics drives a real limiter (memory store) through admissions, a
// refusal, an invalid request and a fall-back, and reads what the
// OpenTelemetry SDK recorded.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	require.NoError(t, err)
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } }, func(o *limiter.Options) { o.Metrics = m })
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 2))
	for i := range 3 {
		lease, err := rl.Acquire(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1}, lim)
		if i < 2 {
			require.NoError(t, err, "acquire %d", i)
		} else {
			require.ErrorIs(t, err, limiter.ErrRateLimited, "acquire %d", i)
		}
		if err == nil {
			require.NoError(t, lease.Commit(ctx))
		}
	}
	_, err = rl.Acquire(ctx, "", "gpt-4", limiter.Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, limiter.ErrValidation)
	want := []string{
		"zaelimiter.acquire.duration{outcome=admitted} 2",
		"zaelimiter.acquire.duration{outcome=invalid} 1",
		"zaelimiter.acquire.duration{outcome=rate_limited} 1",
		// The entity cache: the first acquire misses, reads the entity
		// with its item (which fills the cache), looks again (a hit) and
		// creates the item; the next two hit.
		"zaelimiter.cache.lookups{cache=entity,result=hit} 3",
		"zaelimiter.cache.lookups{cache=entity,result=miss} 1",
		"zaelimiter.speculative.outcomes{outcome=bucket_missing} 1",
		"zaelimiter.speculative.outcomes{outcome=fast_rejection} 1",
		"zaelimiter.speculative.outcomes{outcome=success} 1",
		"zaelimiter.store.duration{op=LoadBuckets,result=ok} 1",
		"zaelimiter.store.duration{op=SpeculativeConsume,result=ok} 2",
		"zaelimiter.store.duration{op=WriteBuckets,result=ok} 1",
	}
	assert.Equal(t, want, points(t, reader), "recorded")
}

// TestCacheMetrics drives a limiter with tiny caches through hits, misses
// and evictions of every cache, and checks that the counters recorded
// through OpenTelemetry are the ones the limiter counts itself
// (RateLimiter.CacheStats).
func TestCacheMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	require.NoError(t, err)
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } }, func(o *limiter.Options) { o.Metrics = m },
		func(o *limiter.Options) { o.OverLimitCacheMaxWait = time.Minute },
		func(o *limiter.Options) { o.ConfigCacheSize = 3 }, func(o *limiter.Options) { o.EntityCacheSize = 1 },
		func(o *limiter.Options) { o.OverLimitCacheSize = 1 })
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4"}, []limiter.Limit{limiter.PerMinute("rpm", 1)}))
	// Per entity: one admission, then refusals (the first by the store,
	// which fills the over-limit cache, the next by the cache). Entity b
	// evicts a from the entity and over-limit caches; the config cache,
	// of 3 slots, evicts on every load of 4.
	for _, id := range []string{"a", "b", "a", "b"} {
		for range 3 {
			lease, err := rl.Acquire(ctx, id, "gpt-4", limiter.Consume{"rpm": 1})
			if err == nil {
				err = lease.Commit(ctx)
			}
			if !errors.Is(err, limiter.ErrRateLimited) {
				require.NoError(t, err)
			}
		}
	}

	got := map[string]int64{}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != otelmetrics.CacheLookups && mt.Name != otelmetrics.CacheEvictions {
				continue
			}
			for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints {
				cache, _ := p.Attributes.Value("cache")
				result, _ := p.Attributes.Value("result")
				got[mt.Name+"/"+cache.AsString()+"/"+result.AsString()] = p.Value
			}
		}
	}
	for _, c := range []limiter.CacheName{limiter.CacheConfigs, limiter.CacheEntities, limiter.CacheOverLimit} {
		st := cacheStats(rl.Stats(), c)
		assert.NotZero(t, st.Hits, "%s: stats %+v; want hits, misses and evictions", c, st)
		assert.NotZero(t, st.Misses, "%s: stats %+v; want hits, misses and evictions", c, st)
		assert.NotZero(t, st.Evictions, "%s: stats %+v; want hits, misses and evictions", c, st)
		for name, want := range map[string]int64{
			otelmetrics.CacheLookups + "/" + c.String() + "/hit":  st.Hits,
			otelmetrics.CacheLookups + "/" + c.String() + "/miss": st.Misses,
			otelmetrics.CacheEvictions + "/" + c.String() + "/":   st.Evictions,
		} {
			assert.Equal(t, want, got[name], "%s = %d, want %d (CacheStats)", name, got[name], want)
		}
	}
	assert.NotZero(t, rl.Stats().OverLimitHits, "the over-limit cache refused nothing")
}

// TestStoreResults: errors are classified by the limiter's sentinels,
// outcomes the adapter does not know yet are still recorded, and index
// entries dropped are counted by index.
func TestStoreResults(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	require.NoError(t, err)
	m.StoreCall(ctx, store.StoreWriteBuckets, time.Millisecond, fmt.Errorf("write: %w", store.ErrConditionFailed))
	m.StoreCall(ctx, store.StoreWriteBuckets, time.Millisecond, store.ErrTransactionConflict)
	m.StoreCall(ctx, store.StoreGetBucket, time.Millisecond, errors.New("boom"))
	m.StoreCall(ctx, store.StoreOp(99), time.Millisecond, nil)
	m.AcquireDone(ctx, limiter.AcquireOutcome(99), time.Millisecond)
	m.SpeculativeOutcome(store.SpeculativeOutcome(99))
	m.CacheEvent(limiter.CacheName(99), limiter.CacheMiss, 2)
	m.CacheEvent(limiter.CacheName(99), limiter.CacheEviction, 1)
	m.CacheEvent(limiter.CacheEntities, limiter.CacheEvent(99), 1)
	m.ForeignIndexItems(ctx, "GSI1", 2)
	m.ForeignIndexItems(ctx, "GSI3", 1)
	m.ForeignIndexItems(ctx, "GSI1", 1)
	want := []string{
		"zaelimiter.acquire.duration{outcome=AcquireOutcome(99)} 1",
		"zaelimiter.cache.evictions{cache=CacheName(99)} 1",
		"zaelimiter.cache.lookups{cache=CacheName(99),result=miss} 2",
		"zaelimiter.index.foreign_items{index=GSI1} 3",
		"zaelimiter.index.foreign_items{index=GSI3} 1",
		"zaelimiter.speculative.outcomes{outcome=SpeculativeOutcome(99)} 1",
		"zaelimiter.store.duration{op=GetBucket,result=error} 1",
		"zaelimiter.store.duration{op=StoreOp(99),result=ok} 1",
		"zaelimiter.store.duration{op=WriteBuckets,result=condition_failed} 1",
		"zaelimiter.store.duration{op=WriteBuckets,result=transaction_conflict} 1",
	}
	assert.Equal(t, want, points(t, reader), "recorded")
}

// TestRecordAllocs: recording allocates nothing in the adapter (the
// attribute sets are prebuilt).
func TestRecordAllocs(t *testing.T) {
	ctx := context.Background()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(1000, func() {
		m.AcquireDone(ctx, limiter.AcquireAdmitted, time.Millisecond)
		m.SpeculativeOutcome(store.SpecSuccess)
		m.StoreCall(ctx, store.StoreSpeculativeConsume, time.Millisecond, nil)
		m.CacheEvent(limiter.CacheConfigs, limiter.CacheHit, 3)
		m.CacheEvent(limiter.CacheEntities, limiter.CacheEviction, 1)
	})
	assert.Zero(t, allocs, "%.1f allocations per acquire's measurements, want 0", allocs)
}

// Report a limiter's acquires, speculative outcomes and DynamoDB calls
// through OpenTelemetry. In a service, pass otel.GetMeterProvider() (or your
// SDK MeterProvider with its exporter); here a ManualReader shows what was
// recorded.
func ExampleNew() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		log.Fatal(err)
	}
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Metrics = m }) // or a DynamoDB repository
	for range 3 {
		lease, err := rl.Acquire(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1},
			limiter.WithLimits(limiter.PerMinute("rpm", 2)))
		if err == nil {
			lease.Commit(ctx)
		}
	}

	var rm metricdata.ResourceMetrics
	reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == otelmetrics.AcquireDuration {
			for _, p := range h.DataPoints {
				outcome, _ := p.Attributes.Value("outcome")
				fmt.Printf("%s outcome=%s count=%d\n", m.Name, outcome.String(), p.Count)
			}
		}
	}
	// Unordered output:
	// zaelimiter.acquire.duration outcome=admitted count=2
	// zaelimiter.acquire.duration outcome=rate_limited count=1
}

// TestCircuitMetrics: the openings and closings of a breaker are counted
// by store and state, and the open breakers are an up-down count.
func TestCircuitMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	require.NoError(t, err)
	var cm limiter.CircuitMetrics = m
	cm.CircuitChange("zae-limiter", true)
	cm.CircuitChange("redis", true)
	cm.CircuitChange("zae-limiter", false)
	cm.CircuitChange("zae-limiter", true)

	got := map[string]int64{}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok || (mt.Name != otelmetrics.CircuitChanges && mt.Name != otelmetrics.CircuitOpen) {
				continue
			}
			assert.Equal(t, mt.Name == otelmetrics.CircuitChanges, sum.IsMonotonic, "%s: monotonic", mt.Name)
			for _, p := range sum.DataPoints {
				store, _ := p.Attributes.Value("store")
				state, _ := p.Attributes.Value("state")
				got[mt.Name+"/"+store.AsString()+"/"+state.AsString()] = p.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{
		otelmetrics.CircuitChanges + "/zae-limiter/open":   2,
		otelmetrics.CircuitChanges + "/zae-limiter/closed": 1,
		otelmetrics.CircuitChanges + "/redis/open":         1,
		otelmetrics.CircuitOpen + "/zae-limiter/":          1,
		otelmetrics.CircuitOpen + "/redis/":                1,
	}, got)
}

// cacheStats picks one cache's statistics out of st.
func cacheStats(st limiter.Stats, c limiter.CacheName) limiter.CacheStats {
	switch c {
	case limiter.CacheConfigs:
		return st.Configs
	case limiter.CacheEntities:
		return st.Entities
	}
	return st.OverLimit
}
