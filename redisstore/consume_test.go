package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// TestConsumeAgreesWithMemory runs speculative consumptions on the Redis
// store and on the memory store and requires the same outcome and the same
// item from both: the consume function's paths for one limit, two limits
// and more (each built into the reply differently), amounts on limits the
// request does not resolve, a zero amount before a positive one, changed
// parameters, and balances past 2^53 (the exact-integer path), alone and
// in batches.
func TestConsumeAgreesWithMemory(t *testing.T) {
	ctx := context.Background()
	const now = int64(1_795_000_000_000)
	huge := int64(math.MaxInt64 / 1000) // whole tokens; its millitokens pass 2^53
	st := func(name string, capacity, tokens int64) store.BucketState {
		return store.BucketState{LimitName: name, CapacityMilli: capacity * 1000, RefillAmountMilli: capacity * 1000,
			RefillPeriodMs: 60_000, TokensMilli: tokens * 1000, LastRefillMs: now}
	}
	lim := func(name string, capacity int64) store.Limit {
		return store.Limit{Name: name, Capacity: capacity, RefillAmount: capacity, RefillPeriod: time.Minute}
	}
	items := map[string][]store.BucketState{
		"one":      {st("rpm", 100, 100)},
		"two":      {st("rpm", 100, 100), st("tpm", 10_000, 10_000)},
		"three":    {st("rpm", 100, 100), st("tpm", 10_000, 10_000), st("rpd", 1000, 1000)},
		"huge":     {st("big", huge, huge-5), st("rpm", 100, 100)},
		"expiring": {st("rpm", 100, 100)},
	}
	type step struct {
		key     string
		consume store.Consume
		limits  []store.Limit
		after   int64 // ms after the items' creation; 1000 when 0
	}
	req := func(s step) store.SpeculativeRequest {
		if s.after == 0 {
			s.after = 1000
		}
		return store.SpeculativeRequest{Key: store.BucketKey{EntityID: s.key, Resource: "gpt"}, Consume: s.consume, Limits: s.limits, NowMs: now + s.after}
	}
	singles := []step{
		{"one", store.Consume{"rpm": 1}, []store.Limit{lim("rpm", 100)}, 0},
		{"one", store.Consume{"rpm": 100}, []store.Limit{lim("rpm", 100)}, 0}, // short by one
		{"one", store.Consume{"rpm": 1}, []store.Limit{lim("rpm", 99)}, 0},    // parameters changed
		{"one", store.Consume{"rpm": 1, "tpm": 5}, []store.Limit{lim("rpm", 100)}, 0},
		{"two", store.Consume{"rpm": 1, "tpm": 500}, []store.Limit{lim("rpm", 100), lim("tpm", 10_000)}, 0},
		{"two", store.Consume{"rpm": 0, "tpm": 700}, []store.Limit{lim("rpm", 100), lim("tpm", 10_000)}, 0},
		{"two", store.Consume{"tpm": 300}, []store.Limit{lim("rpm", 100)}, 0}, // an amount on a limit not resolved
		{"two", store.Consume{"rpm": 1, "tpm": -200}, nil, 0},
		{"three", store.Consume{"rpm": 2, "tpm": 10, "rpd": 3}, []store.Limit{lim("rpm", 100), lim("tpm", 10_000), lim("rpd", 1000)}, 0},
		{"three", store.Consume{"rpd": 1000}, []store.Limit{lim("rpd", 1000)}, 0},
		{"huge", store.Consume{"big": 1}, []store.Limit{lim("big", huge)}, 0},
		{"huge", store.Consume{"big": huge - 6, "rpm": 1}, []store.Limit{lim("big", huge), lim("rpm", 100)}, 0},
		{"huge", store.Consume{"big": 1}, []store.Limit{lim("big", huge)}, 0}, // short by one
		{"huge", store.Consume{"big": -(huge - 6)}, []store.Limit{lim("big", huge)}, 0},
		{"missing", store.Consume{"rpm": 1}, []store.Limit{lim("rpm", 100)}, 0},
		{"expiring", store.Consume{"rpm": 1}, []store.Limit{lim("rpm", 100)}, 9_999}, // a millisecond before its expiry
		{"expiring", store.Consume{"rpm": 1}, []store.Limit{lim("rpm", 100)}, 10_000},
		// After an idle minute every item is full again: a take refills
		// the whole item first (rf moves), a zero amount does not.
		{"two", store.Consume{"rpm": 0}, []store.Limit{lim("rpm", 100)}, 61_000},
		{"two", store.Consume{"tpm": 1}, []store.Limit{lim("tpm", 10_000)}, 61_000},
		{"two", store.Consume{"tpm": 1}, []store.Limit{lim("tpm", 10_000)}, 61_001}, // not full: no refill
		{"huge", store.Consume{"big": 2}, []store.Limit{lim("big", huge)}, 61_000},
		{"three", store.Consume{"rpd": 2000}, []store.Limit{lim("rpd", 1000)}, 61_000}, // short after the refill: nothing written
	}
	batches := [][]step{
		{{"one", store.Consume{"rpm": 3}, []store.Limit{lim("rpm", 100)}, 0}, {"two", store.Consume{"tpm": 40}, []store.Limit{lim("tpm", 10_000)}, 0}},
		{{"one", store.Consume{"rpm": 3}, nil, 0}, {"three", store.Consume{"rpd": 1}, []store.Limit{lim("rpd", 999)}, 0}}, // one refused: none applied
		{{"huge", store.Consume{"big": 1}, []store.Limit{lim("big", huge)}, 0}, {"missing", store.Consume{"rpm": 1}, nil, 0}},
	}

	redis, mem := newStore(t), memorystore.New()
	for _, repo := range []store.Repository{redis, mem} {
		for key, states := range items {
			w := store.BucketWrite{Kind: store.WriteCreate, Key: store.BucketKey{EntityID: key, Resource: "gpt"}, NowMs: now, ShardCount: 1, States: states}
			if key == "expiring" {
				w.TTL, w.TTLSeconds = store.TTLSet, 10 // expires at now + 10 s
			}
			require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{w}))
		}
	}
	for i, s := range singles {
		want, err := mem.SpeculativeConsume(ctx, req(s))
		require.NoError(t, err)
		got, err := redis.SpeculativeConsume(ctx, req(s))
		require.NoError(t, err)
		require.Equal(t, showResult(want), showResult(got), "step %d: %+v", i, s)
		if s.key == "expiring" {
			expired := s.after >= 10_000
			require.Equal(t, !expired, got.Applied, "step %d: %s", i, showResult(got))
			if expired {
				require.Equal(t, store.RefusedExpired, got.Reason, "step %d", i)
			}
		}
	}
	for i, b := range batches {
		var reqs []store.SpeculativeRequest
		for _, s := range b {
			reqs = append(reqs, req(s))
		}
		want, err := mem.SpeculativeConsumeAll(ctx, reqs)
		require.NoError(t, err)
		got, err := redis.SpeculativeConsumeAll(ctx, reqs)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for j := range want {
			require.Equal(t, showResult(want[j]), showResult(got[j]), "batch %d, request %d", i, j)
		}
	}
	// The items as stored agree too.
	for key := range items {
		k := store.BucketKey{EntityID: key, Resource: "gpt"}
		want, err := mem.GetBucket(ctx, k)
		require.NoError(t, err)
		got, err := redis.GetBucket(ctx, k)
		require.NoError(t, err)
		require.Equal(t, want.States, got.States, "item %s", key)
	}
	// The idle take refilled its item: rf is its time, and the balances
	// hold the capacity less what was taken since (1 + 1 + the batch's 40
	// tpm).
	two, err := redis.GetBucket(ctx, store.BucketKey{EntityID: "two", Resource: "gpt"})
	require.NoError(t, err)
	require.Equal(t, now+61_000, two.RefillMs)
	rpm, _ := two.State("rpm")
	tpm, _ := two.State("tpm")
	require.Equal(t, []int64{100_000, 9_958_000}, []int64{rpm.TokensMilli, tpm.TokensMilli})
}

// TestLimitArgsKept checks the arguments the store keeps per limit (in the
// slot a hash of the limit picks, which another limit may take over):
// limits that differ in one field only, asked for in turn, each get their
// own, also when there are more of them than slots (3,600 against 1,024),
// so that limits of one name share slots.
func TestLimitArgsKept(t *testing.T) {
	s := newStore(t)
	var limits []store.Limit
	for i := range 1200 {
		name := []string{"rpm", "tpm", "rpd", "r" + strconv.Itoa(i)}[i%4]
		limits = append(limits,
			store.Limit{Name: name, Capacity: int64(100 + i), RefillAmount: int64(100 + i), RefillPeriod: time.Minute},
			store.Limit{Name: name, Capacity: int64(100 + i), RefillAmount: int64(50 + i), RefillPeriod: time.Minute},
			store.Limit{Name: name, Capacity: int64(100 + i), RefillAmount: int64(100 + i), RefillPeriod: time.Hour})
	}
	for round := range 3 {
		for _, l := range limits {
			field, params := s.LimitArgs(limiter.Limit(l))
			want := fmt.Sprintf("%d|%d|%d", l.Capacity*1000, l.RefillAmount*1000, l.RefillPeriod.Milliseconds())
			require.Equal(t, "l:"+l.Name, field, "round %d, %+v", round, l)
			require.Equal(t, want, params, "round %d, %+v", round, l)
		}
	}
}

// showResult is a speculative result as the tests compare them across
// stores: applied, the reason, and the item's refill time and each
// limit's balance and total.
func showResult(r store.SpeculativeResult) string {
	s := fmt.Sprintf("applied=%v reason=%q", r.Applied, r.Reason)
	if r.Bucket != nil {
		s += fmt.Sprintf(" rf=%d", r.Bucket.RefillMs)
		for _, b := range r.Bucket.States {
			s += fmt.Sprintf(" %s=%d/%d", b.LimitName, b.TokensMilli, b.TotalConsumedMilli)
		}
	}
	return s
}
