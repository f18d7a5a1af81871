package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// The batching of speculative consumes: requests that arrive while the
// store's scripts are in flight are sent together as one script, each
// decided as if it were sent alone.

const batchNow = 1_767_225_600_000 // 2026-01-01T00:00:00Z

// rpmLimit is the limit of the buckets these tests create: capacity tokens
// per minute.
func rpmLimit(capacity int64) limiter.Limit { return limiter.PerMinute("rpm", capacity) }

// createBucket creates the bucket of (entity, resource) with one full rpm
// limit of the given capacity.
func createBucket(t *testing.T, s *redisstore.Store, entity, resource string, capacity int64) {
	t.Helper()
	l := rpmLimit(capacity)
	err := s.WriteBuckets(context.Background(), []store.BucketWrite{{
		Kind: store.WriteCreate, Key: store.BucketKey{EntityID: entity, Resource: resource}, NowMs: batchNow, ShardCount: 1,
		States: []store.BucketState{{LimitName: "rpm", TokensMilli: capacity * 1000, CapacityMilli: capacity * 1000,
			RefillAmountMilli: l.RefillAmount * 1000, RefillPeriodMs: l.RefillPeriod.Milliseconds()}},
	}})
	require.NoError(t, err)
}

// consumeReq asks for amount rpm tokens of (entity, resource) under a limit
// of the given capacity.
func consumeReq(entity, resource string, capacity, amount int64) store.SpeculativeRequest {
	return store.SpeculativeRequest{Key: store.BucketKey{EntityID: entity, Resource: resource},
		Consume: limiter.Consume{"rpm": amount}, Limits: []store.Limit{store.Limit(rpmLimit(capacity))}, NowMs: batchNow}
}

// pauseServer stops the server from running commands for d (CLIENT PAUSE):
// requests sent meanwhile stay in flight.
func pauseServer(t *testing.T, s *redisstore.Store, d time.Duration) {
	t.Helper()
	require.NoError(t, s.Client().Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err())
}

type consumeOutcome struct {
	req store.SpeculativeRequest
	res store.SpeculativeResult
	err error
}

// consumeAll sends reqs from goroutines of their own, the first two (which
// take the store's in-flight slots while the server is paused) before the
// others (which queue behind them), and returns every outcome.
func consumeAll(ctx context.Context, s *redisstore.Store, reqs []store.SpeculativeRequest) []consumeOutcome {
	out := make([]consumeOutcome, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		if i == 2 {
			time.Sleep(50 * time.Millisecond) // the first two are in flight
		}
		wg.Go(func() {
			res, err := s.SpeculativeConsume(ctx, r)
			out[i] = consumeOutcome{r, res, err}
		})
	}
	wg.Wait()
	return out
}

// TestBatchedConsumeDecidesEachAlone: with the server paused, two
// requests go in flight and the others queue; the queue then goes as one
// script. Each request is applied or refused on its own, as if alone:
// requests on one bucket see each other's writes (of two asking 3 from a
// bucket of 5, exactly one applies), refusals (missing bucket, changed
// limits, exhausted) cost the others nothing, and every balance and total
// is exact.
func TestBatchedConsumeDecidesEachAlone(t *testing.T) {
	ctx := context.Background()
	s, _ := privateStore(t, nil)
	for _, e := range []string{"a", "b", "c"} {
		createBucket(t, s, e, "gpt", 1000)
	}
	createBucket(t, s, "small", "gpt", 5)

	var reqs []store.SpeculativeRequest
	reqs = append(reqs, consumeReq("a", "gpt", 1000, 1), consumeReq("b", "gpt", 1000, 1)) // in flight
	for i := range 30 {
		reqs = append(reqs, consumeReq([]string{"a", "b", "c"}[i%3], "gpt", 1000, int64(1+i%4)))
	}
	reqs = append(reqs,
		consumeReq("missing", "gpt", 1000, 1), // bucket_missing
		consumeReq("c", "gpt", 999, 1),        // limits_changed: not the stored capacity
		consumeReq("c", "gpt", 1000, 5000),    // app_limit_exhausted
		consumeReq("small", "gpt", 5, 3),
		consumeReq("small", "gpt", 5, 3), // one of these two is refused
	)
	pauseServer(t, s, 300*time.Millisecond)
	before, _ := s.BatchStats()
	out := consumeAll(ctx, s, reqs)
	scripts, batched := s.BatchStats()
	require.NotEqual(t, before, scripts, "no batch was sent: every request went alone")
	t.Logf("%d requests: %d batched in %d scripts", len(reqs), batched, scripts-before)
	assert.GreaterOrEqual(t, batched, int64(len(reqs))/2, "requests batched")

	want := map[string]int64{} // tokens taken per entity
	smallApplied := 0
	for _, o := range out {
		require.NoError(t, o.err, "%v", o.req.Key)
		e := o.req.Key.EntityID
		var wantReason store.RefusalReason
		switch {
		case e == "missing":
			wantReason = store.RefusedBucketMissing
		case e == "c" && o.req.Limits[0].Capacity == 999:
			wantReason = store.RefusedLimitsChanged
		case e == "c" && o.req.Consume["rpm"] == 5000:
			wantReason = store.RefusedLimitExhausted
		case e == "small":
			if o.res.Applied {
				smallApplied++
				want[e] += 3
			} else {
				assert.Equal(t, store.RefusedLimitExhausted, o.res.Reason, "small: refused")
			}
			continue
		}
		if wantReason != "" {
			assert.False(t, o.res.Applied, "%s %v", e, o.req.Consume)
			assert.Equal(t, wantReason, o.res.Reason, "%s %v", e, o.req.Consume)
			continue
		}
		assert.True(t, o.res.Applied, "%s %v", e, o.req.Consume)
		assert.Empty(t, o.res.Reason, "%s %v", e, o.req.Consume)
		want[e] += o.req.Consume["rpm"]
	}
	assert.Equal(t, 1, smallApplied, "requests of 3 on a bucket of 5 applied")
	for e, capacity := range map[string]int64{"a": 1000, "b": 1000, "c": 1000, "small": 5} {
		b, err := s.GetBucket(ctx, store.BucketKey{EntityID: e, Resource: "gpt"})
		require.NoError(t, err)
		require.NotNil(t, b, "bucket %s", e)
		st := b.States[0]
		assert.Equal(t, (capacity-want[e])*1000, st.TokensMilli, "bucket %s: tokens", e)
		assert.Equal(t, want[e]*1000, st.TotalConsumedMilli, "bucket %s: consumed", e)
	}
}

// TestBatchedConsumeCancelledWhileQueued: a queued request whose context
// ends before it is sent returns the context's error at once and takes
// nothing; the requests queued with it are still sent.
func TestBatchedConsumeCancelledWhileQueued(t *testing.T) {
	s, _ := privateStore(t, nil)
	createBucket(t, s, "a", "gpt", 1000)
	pauseServer(t, s, 400*time.Millisecond)
	var wg sync.WaitGroup
	for range 2 { // in flight
		wg.Go(func() { s.SpeculativeConsume(context.Background(), consumeReq("a", "gpt", 1000, 1)) })
	}
	time.Sleep(50 * time.Millisecond)
	var kept error
	var keptRes store.SpeculativeResult
	wg.Go(func() { keptRes, kept = s.SpeculativeConsume(context.Background(), consumeReq("a", "gpt", 1000, 10)) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.SpeculativeConsume(ctx, consumeReq("a", "gpt", 1000, 100))
	require.ErrorIs(t, err, context.DeadlineExceeded, "queued request past its deadline")
	assert.Less(t, time.Since(start), 250*time.Millisecond, "the cancelled request returned while the server was still paused")
	wg.Wait()
	require.NoError(t, kept, "the request queued with it")
	require.True(t, keptRes.Applied, "the request queued with it")
	b, err := s.GetBucket(context.Background(), store.BucketKey{EntityID: "a", Resource: "gpt"})
	require.NoError(t, err)
	assert.Equal(t, int64(12_000), b.States[0].TotalConsumedMilli, "1+1+10; the cancelled 100 never sent")
}

// TestBatchedConsumeServerDown: the server dies while requests are in
// flight and queued: every request returns, with ErrUnavailable.
func TestBatchedConsumeServerDown(t *testing.T) {
	s, srv := privateStore(t, func(o *redis.Options) { o.MaxRetries = -1 })
	createBucket(t, s, "a", "gpt", 1000)
	pauseServer(t, s, 2*time.Second)
	done := make(chan []consumeOutcome)
	go func() {
		reqs := make([]store.SpeculativeRequest, 10)
		for i := range reqs {
			reqs[i] = consumeReq("a", "gpt", 1000, 1)
		}
		done <- consumeAll(context.Background(), s, reqs)
	}()
	time.Sleep(150 * time.Millisecond)
	srv.Kill()
	select {
	case out := <-done:
		for _, o := range out {
			assert.ErrorIs(t, o.err, limiter.ErrUnavailable, "request with the server down: %+v", o.res)
		}
	case <-time.After(30 * time.Second):
		require.Fail(t, "requests still waiting 30 s after the server died")
	}
}

// TestBatchedConsumeCluster: on a Cluster a script's keys must share a
// slot: requests on several resources (several slots) batch per resource,
// and the totals are exact.
func TestBatchedConsumeCluster(t *testing.T) {
	ctx := context.Background()
	s := newClusterStore(t)
	resources := []string{"gpt", "claude", "embed", "whisper"}
	for _, r := range resources {
		for e := range 4 {
			createBucket(t, s, fmt.Sprint("e", e), r, 1_000_000)
		}
	}
	const goroutines, each = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r := consumeReq(fmt.Sprint("e", (g+i)%4), resources[(g*7+i)%4], 1_000_000, 1)
				res, err := s.SpeculativeConsume(ctx, r)
				if err != nil || !res.Applied {
					errs <- fmt.Errorf("%v: %+v, %v", r.Key, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	scripts, batched := s.BatchStats()
	t.Logf("%d requests: %d batched in %d scripts", goroutines*each, batched, scripts)
	var total int64
	for _, r := range resources {
		for e := range 4 {
			b, err := s.GetBucket(ctx, store.BucketKey{EntityID: fmt.Sprint("e", e), Resource: r})
			require.NoError(t, err)
			st := b.States[0]
			assert.Equal(t, int64(1_000_000_000), st.TokensMilli+st.TotalConsumedMilli, "e%d/%s: tokens + consumed", e, r)
			total += st.TotalConsumedMilli
		}
	}
	assert.Equal(t, int64(goroutines*each*1000), total, "millitokens consumed in all")
}

// TestBatchedConsumeResultsReachTheirCallers: the queued requests'
// records are reused from one request to the next. Under 16 goroutines
// sending requests back to back (each on a bucket of its own, with an
// amount of its own), a seventh of them with deadlines short enough to
// end while queued, in flight or not at all, every request that returns
// without an error gets its own result (its key, its bucket), and every
// bucket's total is exactly what the results report applied: no result
// goes to another caller, none is lost.
func TestBatchedConsumeResultsReachTheirCallers(t *testing.T) {
	s, _ := privateStore(t, nil)
	const workers, each = 16, 150
	for w := range workers {
		createBucket(t, s, "e"+strconv.Itoa(w), "gpt", 1_000_000)
	}
	applied := make([]int64, workers)
	cancelled := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			entity := "e" + strconv.Itoa(w)
			for i := range each {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if i%7 == 3 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(i%5)*50*time.Microsecond)
				}
				req := consumeReq(entity, "gpt", 1_000_000, int64(1+w))
				req.NowMs = batchNow + int64(i)
				res, err := s.SpeculativeConsume(ctx, req)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, context.DeadlineExceeded, "%s request %d", entity, i)
					cancelled[w]++
					continue
				}
				if !assert.Equal(t, req.Key, res.Key, "%s request %d: another caller's result", entity, i) {
					return
				}
				assert.True(t, res.Applied, "%s request %d: %s", entity, i, res.Reason)
				if assert.NotNil(t, res.Bucket, "%s request %d", entity, i) {
					assert.Equal(t, req.Key, res.Bucket.Key, "%s request %d: another caller's bucket", entity, i)
				}
				if res.Applied {
					applied[w] += 1 + int64(w)
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Minute):
		require.Fail(t, "requests still waiting after a minute: a caller was never handed its result")
	}
	_, batched := s.BatchStats()
	t.Logf("%d requests batched; cancelled per worker %v", batched, cancelled)
	require.Positive(t, batched, "no request was queued: the test did not test")
	for w := range workers {
		b, err := s.GetBucket(context.Background(), store.BucketKey{EntityID: "e" + strconv.Itoa(w), Resource: "gpt"})
		require.NoError(t, err)
		require.Equal(t, applied[w]*1000, b.States[0].TotalConsumedMilli, "e%d: total against the applied results", w)
	}
}
