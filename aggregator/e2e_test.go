package aggregator

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

func mustAcquire(t *testing.T, rl *limiter.RateLimiter, entity, resource string, c limiter.Consume, opts ...limiter.AcquireOption) *limiter.Lease {
	t.Helper()
	l, err := rl.Acquire(context.Background(), entity, resource, c, opts...)
	require.NoError(t, err, "Acquire(%s, %s, %v)", entity, resource, c)
	return l
}

func mustCommit(t *testing.T, l *limiter.Lease) {
	t.Helper()
	require.NoError(t, l.Commit(context.Background()), "Commit")
}

// windowSpan is the windows of one type that a run of writes between two
// wall-clock instants may have landed in: one, or two when the run crossed a
// window boundary.
func windowSpan(t *testing.T, window string, from, to time.Time) []time.Time {
	t.Helper()
	a, err := ddbschema.WindowStart(window, from)
	require.NoError(t, err)
	b, _ := ddbschema.WindowStart(window, to)
	if a.Equal(b) {
		return []time.Time{a}
	}
	return []time.Time{a, b}
}

// TestE2ESnapshotsEqualCommittedConsumption: acquires, adjusts, commits and
// a rollback on both paths, with a cascade to a parent, go through the
// stream and the runner into usage snapshots whose counters are exactly
// the committed consumption per entity and window, and which the
// repository's usage queries return.
func TestE2ESnapshotsEqualCommittedConsumption(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	slow, spec := e.limiter(false), e.limiter(true)
	_, err := slow.Admin().CreateEntity(ctx, limiter.Entity{ID: "P"})
	require.NoError(t, err)
	_, err = slow.Admin().CreateEntity(ctx, limiter.Entity{ID: "C", ParentID: "P", Cascade: true})
	require.NoError(t, err)
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))

	begin := time.Now()
	want := map[string]map[string]int64{"C": {}, "P": {}, "solo": {}}
	events := map[string]int64{}
	for i := range 10 {
		rl := slow
		if i%2 == 1 {
			rl = spec
		}
		e.clock.advance(10 * time.Millisecond)
		l := mustAcquire(t, rl, "C", "gpt", limiter.Consume{"rpm": 1, "tpm": 100}, lim)
		if i > 0 {
			require.NoError(t, l.Adjust(limiter.Consume{"tpm": int64(i * 10)}))
		}
		mustCommit(t, l)
		for _, id := range []string{"C", "P"} {
			want[id]["rpm"]++
			want[id]["tpm"] += 100 + int64(i*10)
			events[id] += 2 // rpm and tpm on enter
			if i > 0 {
				events[id]++ // the tpm adjustment on commit
			}
		}
	}
	// A refund on commit counts negative; a rollback nets to zero but its
	// writes are events.
	l := mustAcquire(t, spec, "C", "gpt", limiter.Consume{"rpm": 1, "tpm": 500}, lim)
	require.NoError(t, l.Adjust(limiter.Consume{"tpm": -200}))
	mustCommit(t, l)
	l = mustAcquire(t, slow, "C", "gpt", limiter.Consume{"rpm": 1, "tpm": 700}, lim)
	require.NoError(t, l.Rollback(ctx))
	for _, id := range []string{"C", "P"} {
		want[id]["rpm"]++
		want[id]["tpm"] += 300
		events[id] += 3 + 4
	}
	mustCommit(t, mustAcquire(t, spec, "solo", "gpt", limiter.Consume{"rpm": 2, "tpm": 50}, lim))
	want["solo"] = map[string]int64{"rpm": 2, "tpm": 50}
	events["solo"] = 2
	end := time.Now()

	res := e.drain()
	require.NotZero(t, res.SnapshotsUpdated, "no snapshot written: %+v", res)

	for _, window := range []string{store.WindowHourly, store.WindowDaily} {
		span := windowSpan(t, window, begin, end)
		for id, counters := range want {
			snaps, err := iterx.Collect(spec.Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: id, Resource: "gpt", WindowType: window, Start: span[0], End: span[len(span)-1]}))
			require.NoError(t, err, "UsageSnapshots(%s)", id)
			// Sum the items of this window type's span: every window type
			// is an item of its own, also where an hour and the day start
			// at midnight.
			got, gotEvents := map[string]int64{}, int64(0)
			for _, s := range snaps {
				require.Equal(t, window, s.WindowType, "%s: snapshot %+v", id, s)
				if !containsTime(span, s.WindowStart) {
					continue
				}
				for k, v := range s.Counters {
					got[k] += v
				}
				gotEvents += s.TotalEvents
			}
			wantCounters, wantEvents := counters, events[id]
			assert.Equal(t, wantCounters, got, "%s %s windows %v: counters %v, %d events; want %v, %d events", id, window, span, got, gotEvents, wantCounters, wantEvents)
			assert.Equal(t, wantEvents, gotEvents, "%s %s windows %v: counters %v, %d events; want %v, %d events", id, window, span, got, gotEvents, wantCounters, wantEvents)
		}
	}

	// The summary of the hourly snapshots is the same total.
	sum, err := spec.Admin().UsageSummary(ctx, limiter.UsageQuery{EntityID: "solo", Resource: "gpt", WindowType: store.WindowHourly})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, sum.Total["rpm"], int64(2), "summary = %+v", sum)
	assert.GreaterOrEqual(t, sum.Total["tpm"], int64(50), "summary = %+v", sum)
	assert.GreaterOrEqual(t, sum.SnapshotCount, 1, "summary = %+v", sum)

	// Redelivering nothing: a second drain reads no new record and adds
	// nothing.
	assert.EqualValues(t, 0, e.drain().SnapshotsUpdated, "second drain wrote")
}

func containsTime(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}

// TestE2ERefillKeepsFastPath: a bucket drained by a request and left alone
// is refilled by the processor, so the next acquire succeeds with one
// speculative UpdateItem; without the processor it falls back to the slow
// path.
func TestE2ERefillKeepsFastPath(t *testing.T) {
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 10))
	for _, withProcessor := range []bool{true, false} {
		t.Run("processor="+strconv.FormatBool(withProcessor), func(t *testing.T) {
			e := newEnv(t)
			rl := e.limiter(true)
			mustCommit(t, mustAcquire(t, rl, "x", "api", limiter.Consume{"rpm": 10}, lim))
			require.EqualValues(t, 0, e.tokens("x", "api", 0, "rpm"), "tokens after draining")
			e.clock.advance(30 * time.Second) // 5 tokens accrue
			if withProcessor {
				res := e.drain()
				require.EqualValues(t, 1, res.RefillsWritten, "refills = %d, want 1 (%+v)", res.RefillsWritten, res)
				require.EqualValues(t, 5000, e.tokens("x", "api", 0, "rpm"), "tokens after refill")
			}
			e.rec.Reset()
			mustCommit(t, mustAcquire(t, rl, "x", "api", limiter.Consume{"rpm": 1}, lim))
			want := "UpdateItem"
			if !withProcessor {
				want = "UpdateItem!, BatchGetItem, UpdateItem"
			}
			require.Equal(t, want, calls(e.rec), "calls")
			require.EqualValues(t, 4000, e.tokens("x", "api", 0, "rpm"), "tokens")
		})
	}
}

// TestE2EWindowFromEventTime: the window is the stream record's
// event time, not the bucket's rf nor the processor's clock (both 3 hours
// ahead here). Only hourly windows are configured.
func TestE2EWindowFromEventTime(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Windows = []string{store.WindowHourly} })
	e.clock.advance(3 * time.Hour)
	rl := e.limiter(false)
	begin := time.Now()
	mustCommit(t, mustAcquire(t, rl, "w", "api", limiter.Consume{"rpm": 3}, limiter.WithLimits(limiter.PerMinute("rpm", 100))))
	end := time.Now()
	e.drain()
	snaps, err := iterx.Collect(rl.Admin().UsageSnapshots(e.ctx, limiter.UsageQuery{EntityID: "w", WindowType: store.WindowHourly}))
	require.NoError(t, err)
	span := windowSpan(t, store.WindowHourly, begin, end)
	require.Len(t, snaps, 1, "hourly snapshots = %+v, want one in %v with rpm 3", snaps, span)
	require.True(t, containsTime(span, snaps[0].WindowStart), "hourly snapshots = %+v, want one in %v with rpm 3", snaps, span)
	require.EqualValues(t, 3, snaps[0].Counters["rpm"], "hourly snapshots = %+v, want one in %v with rpm 3", snaps, span)
}

// load runs n acquires of one rps token on entity/api at rate per second of
// the fake clock, draining the stream every pollEvery acquires, and
// returns the summed results. stop, when not nil, ends the load early.
func (e *env) load(rl *limiter.RateLimiter, entity string, n, rate, pollEvery int, stop func(r Result, acquires int) bool) (Result, int) {
	e.t.Helper()
	lim := limiter.WithLimits(limiter.PerSecond("rps", 1_000_000))
	var total Result
	add := func(r Result) {
		total.Processed += r.Processed
		total.RefillsWritten += r.RefillsWritten
		total.ShardsDoubled += r.ShardsDoubled
		total.ShardItemsCreated += r.ShardItemsCreated
	}
	for i := 1; i <= n; i++ {
		e.clock.advance(time.Second / time.Duration(rate))
		mustCommit(e.t, mustAcquire(e.t, rl, entity, "api", limiter.Consume{"rps": 1}, lim))
		if i%pollEvery == 0 {
			add(e.drain())
			if stop != nil && stop(total, i) {
				return total, i
			}
		}
	}
	add(e.drain())
	return total, n
}

// TestE2EHotBucketShardsOnce: 1800 writes/s on one bucket item (above the
// partition's 1000) drain its wcu below 20 % within about a second, and the
// processor doubles shard 0 once and creates shard 1 whole; at the halved
// load (900/s per shard) it does not double again.
func TestE2EHotBucketShardsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("about 2600 acquires")
	}
	e := newEnv(t)
	rl := e.limiter(true)
	doubledAt := 0
	res, n := e.load(rl, "hot", 3000, 1800, 100, func(r Result, acquires int) bool {
		if r.ShardsDoubled > 0 && doubledAt == 0 {
			doubledAt = acquires
		}
		return doubledAt > 0 && acquires >= doubledAt+600
	})
	t.Logf("doubled after %d acquires, stopped after %d", doubledAt, n)
	require.EqualValues(t, 1, res.ShardsDoubled, "after %d acquires: %d doublings, %d shard items created; want 1 and 1", n, res.ShardsDoubled, res.ShardItemsCreated)
	require.EqualValues(t, 1, res.ShardItemsCreated, "after %d acquires: %d doublings, %d shard items created; want 1 and 1", n, res.ShardsDoubled, res.ShardItemsCreated)
	require.GreaterOrEqual(t, doubledAt, 1500, "doubled after %d acquires; wcu holds 1000 writes and refills 1000/s, so at 1800/s it falls below 20%% after about 1800", doubledAt)
	require.LessOrEqual(t, doubledAt, 2000, "doubled after %d acquires; wcu holds 1000 writes and refills 1000/s, so at 1800/s it falls below 20%% after about 1800", doubledAt)
	assert.EqualValues(t, 0, rl.Stats().Speculative.Counts[store.SpecFallbackShardDoubled], "the client doubled too")
	s0, s1 := e.bucket("hot", "api", 0), e.bucket("hot", "api", 1)
	require.EqualValues(t, 2, s0.ShardCount, "shard 0 = %+v, shard 1 = %+v", s0, s1)
	require.NotNil(t, s1, "shard 0 = %+v, shard 1 = %+v", s0, s1)
	require.EqualValues(t, 2, s1.ShardCount, "shard 0 = %+v, shard 1 = %+v", s0, s1)
	require.Nil(t, e.bucket("hot", "api", 2), "shard 0 = %+v, shard 1 = %+v", s0, s1)
	// Shard 1 is a whole item: every limit with shard 0's configuration.
	require.Len(t, s1.Limits, len(s0.Limits), "shard 1 = %+v", s1)
	require.Equal(t, "hot", s1.EntityID, "shard 1 = %+v", s1)
	require.Equal(t, "api", s1.Resource, "shard 1 = %+v", s1)
	for _, s := range s0.Limits {
		got, ok := s1.Limit(s.Name)
		require.True(t, ok, "shard 1 %s = %+v, shard 0 %+v", s.Name, got, s)
		assert.Equal(t, s.CapacityMilli, got.CapacityMilli, "shard 1 %s = %+v, shard 0 %+v", s.Name, got, s)
		assert.Equal(t, s.RefillAmountMilli, got.RefillAmountMilli, "shard 1 %s = %+v, shard 0 %+v", s.Name, got, s)
		assert.Equal(t, s.RefillPeriodMs, got.RefillPeriodMs, "shard 1 %s = %+v, shard 0 %+v", s.Name, got, s)
	}
	// The load reached shard 1 after the doubling.
	rps, _ := s1.Limit("rps")
	assert.NotZero(t, rps.TotalConsumedMilli, "shard 1 never written: %+v", rps)
}

// TestE2EQuietBucketNeverShards: 1500 writes at 500/s, more than the
// original needed to shard (about 800 lifetime writes, since its wcu
// never refilled), leave one
// shard.
func TestE2EQuietBucketNeverShards(t *testing.T) {
	if testing.Short() {
		t.Skip("1500 acquires")
	}
	e := newEnv(t)
	rl := e.limiter(true)
	res, _ := e.load(rl, "quiet", 1500, 500, 100, nil)
	require.EqualValues(t, 0, res.ShardsDoubled, "%d doublings, %d shard items created", res.ShardsDoubled, res.ShardItemsCreated)
	require.EqualValues(t, 0, res.ShardItemsCreated, "%d doublings, %d shard items created", res.ShardsDoubled, res.ShardItemsCreated)
	require.EqualValues(t, 1, e.bucket("quiet", "api", 0).ShardCount, "shard 0")
	require.Nil(t, e.bucket("quiet", "api", 1), "shard 0")
	assert.GreaterOrEqual(t, rl.Stats().Speculative.Counts[store.SpecSuccess], int64(1400), "speculative successes")
}
