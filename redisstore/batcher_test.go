package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
	if err != nil {
		t.Fatal(err)
	}
}

// consumeReq asks for amount rpm tokens of (entity, resource) under a limit
// of the given capacity.
func consumeReq(entity, resource string, capacity, amount int64) store.SpeculativeRequest {
	return store.SpeculativeRequest{Key: store.BucketKey{EntityID: entity, Resource: resource},
		Consume: limiter.Consume{"rpm": amount}, Limits: []limiter.Limit{rpmLimit(capacity)}, NowMs: batchNow}
}

// pauseServer stops the server from running commands for d (CLIENT PAUSE):
// requests sent meanwhile stay in flight.
func pauseServer(t *testing.T, s *redisstore.Store, d time.Duration) {
	t.Helper()
	if err := s.Client().Do(context.Background(), "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
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
	if scripts == before {
		t.Fatal("no batch was sent: every request went alone")
	}
	t.Logf("%d requests: %d batched in %d scripts", len(reqs), batched, scripts-before)
	if batched < int64(len(reqs))/2 {
		t.Errorf("only %d of %d requests were batched", batched, len(reqs))
	}

	want := map[string]int64{} // tokens taken per entity
	smallApplied := 0
	for _, o := range out {
		if o.err != nil {
			t.Fatalf("%v: %v", o.req.Key, o.err)
		}
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
			} else if o.res.Reason != store.RefusedLimitExhausted {
				t.Errorf("small: refused with %q, want %q", o.res.Reason, store.RefusedLimitExhausted)
			}
			continue
		}
		if wantReason != "" {
			if o.res.Applied || o.res.Reason != wantReason {
				t.Errorf("%s %v: applied %v reason %q, want refused with %q", e, o.req.Consume, o.res.Applied, o.res.Reason, wantReason)
			}
			continue
		}
		if !o.res.Applied || o.res.Reason != "" {
			t.Errorf("%s %v: applied %v reason %q, want applied", e, o.req.Consume, o.res.Applied, o.res.Reason)
		}
		want[e] += o.req.Consume["rpm"]
	}
	if smallApplied != 1 {
		t.Errorf("%d of the two requests of 3 on a bucket of 5 applied, want 1", smallApplied)
	}
	for e, capacity := range map[string]int64{"a": 1000, "b": 1000, "c": 1000, "small": 5} {
		b, err := s.GetBucket(ctx, store.BucketKey{EntityID: e, Resource: "gpt"})
		if err != nil || b == nil {
			t.Fatalf("bucket %s: %v, %v", e, b, err)
		}
		st := b.States[0]
		if st.TokensMilli != (capacity-want[e])*1000 || st.TotalConsumedMilli != want[e]*1000 {
			t.Errorf("bucket %s: tokens %d consumed %d (milli), want %d and %d", e, st.TokensMilli, st.TotalConsumedMilli, (capacity-want[e])*1000, want[e]*1000)
		}
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
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued request past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 250*time.Millisecond {
		t.Errorf("the cancelled request returned after %v, while the server was still paused", waited)
	}
	wg.Wait()
	if kept != nil || !keptRes.Applied {
		t.Fatalf("the request queued with it: %+v, %v", keptRes, kept)
	}
	b, err := s.GetBucket(context.Background(), store.BucketKey{EntityID: "a", Resource: "gpt"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.States[0].TotalConsumedMilli; got != 12_000 {
		t.Fatalf("consumed %d millitokens, want 12000 (1+1+10; the cancelled 100 never sent)", got)
	}
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
			if !errors.Is(o.err, limiter.ErrUnavailable) {
				t.Errorf("request with the server down: %+v, %v; want ErrUnavailable", o.res, o.err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("requests still waiting 30 s after the server died")
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
		t.Fatal(err)
	}
	scripts, batched := s.BatchStats()
	t.Logf("%d requests: %d batched in %d scripts", goroutines*each, batched, scripts)
	var total int64
	for _, r := range resources {
		for e := range 4 {
			b, err := s.GetBucket(ctx, store.BucketKey{EntityID: fmt.Sprint("e", e), Resource: r})
			if err != nil {
				t.Fatal(err)
			}
			st := b.States[0]
			if st.TokensMilli+st.TotalConsumedMilli != 1_000_000_000 {
				t.Errorf("%s/%s: tokens %d + consumed %d != capacity", fmt.Sprint("e", e), r, st.TokensMilli, st.TotalConsumedMilli)
			}
			total += st.TotalConsumedMilli
		}
	}
	if total != goroutines*each*1000 {
		t.Fatalf("consumed %d millitokens in all, want %d", total, goroutines*each*1000)
	}
}
