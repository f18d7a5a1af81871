package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// TestBatchSameNowAgreesWithMemory: in a call of several requests, one
// whose now, resolved limits and amounts are all the previous request's
// is sent as '"' alone (see lua/consume_lib.lua); one that differs from
// it in its now only is sent as its now and '*', in its amounts as '='.
// The arguments say so, and batches that switch between the forms (a '"'
// after a '*', after an '=', after a request sent in full, and a request
// of another now or other amounts after a '"') are decided as the memory
// store decides them, batched (each request alone, in order) and all or
// none. A '"' read with the wrong now would refill where it must not (or
// not where it must); one read with the wrong amounts would be short where
// it fits, or fit where it is short. It runs on the functions, on the
// scripts (EVALSHA) and on a Cluster.
func TestBatchSameNowAgreesWithMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) *redisstore.Store
	}{
		{"functions", func(t *testing.T) *redisstore.Store { return newStore(t) }},
		{"scripts", func(t *testing.T) *redisstore.Store {
			s, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) }, scriptsOnly)
			require.NoError(t, err)
			require.False(t, s.UsesFunctions(), "the scripts case runs functions")
			return s
		}},
		{"cluster", func(t *testing.T) *redisstore.Store { return newClusterStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testBatchSameNow(t, tc.store(t)) })
	}
}

// testBatchSameNow is TestBatchSameNowAgreesWithMemory on redis.
func testBatchSameNow(t *testing.T, redis *redisstore.Store) {
	ctx := context.Background()
	const now = int64(1_795_000_000_000)
	lim := func(name string, capacity int64) store.Limit {
		return store.Limit{Name: name, Capacity: capacity, RefillAmount: capacity, RefillPeriod: time.Minute}
	}
	rpm, tpm := lim("rpm", 10), lim("tpm", 1000)
	mem := memorystore.New()
	keys := []string{"a", "b", "c", "d"}
	for _, repo := range []store.Repository{redis, mem} {
		for _, k := range keys {
			require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{{Kind: store.WriteCreate,
				Key: store.BucketKey{EntityID: k, Resource: "gpt"}, NowMs: now, ShardCount: 1,
				States: []store.BucketState{
					{LimitName: "rpm", CapacityMilli: 10_000, RefillAmountMilli: 10_000, RefillPeriodMs: 60_000, TokensMilli: 10_000, LastRefillMs: now},
					{LimitName: "tpm", CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 60_000, TokensMilli: 1_000_000, LastRefillMs: now},
				}}}))
		}
	}
	req := func(key string, at int64, rpmN, tpmN int64) store.SpeculativeRequest {
		return store.SpeculativeRequest{Key: store.BucketKey{EntityID: key, Resource: "gpt"},
			Consume: store.Consume{"rpm": rpmN, "tpm": tpmN}, Limits: []store.Limit{rpm, tpm}, NowMs: now + at}
	}
	// the form each request of a batch is sent in
	forms := func(reqs []store.SpeculativeRequest) []string {
		args := redis.ConsumeArgs(reqs)
		var out []string
		for i := 0; i < len(args); {
			switch {
			case args[i] == `"`:
				out, i = append(out, `"`), i+1
			case args[i+1] == "*":
				out, i = append(out, "*"), i+2
			case args[i+1] == "=":
				out, i = append(out, "="), i+3+2*len(reqs[len(out)].Consume)
			default:
				nl := len(reqs[len(out)].Limits)
				out, i = append(out, "full"), i+3+2*nl+2*len(reqs[len(out)].Consume)
			}
		}
		return out
	}
	each := []struct {
		reqs  []store.SpeculativeRequest
		forms []string
	}{
		{
			// 3 of rpm 10 each on a, then '"' twice: the third is short
			[]store.SpeculativeRequest{req("a", 1, 3, 100), req("a", 1, 3, 100), req("a", 1, 3, 100), req("a", 1, 3, 100), req("b", 1, 3, 100)},
			[]string{"full", `"`, `"`, `"`, `"`},
		},
		{
			// '*' (a later now: a is refilled a little), then '"' on it;
			// '=' (other amounts), then '"' with those amounts
			[]store.SpeculativeRequest{req("c", 2, 1, 500), req("a", 6_002, 1, 500), req("a", 6_002, 1, 500), req("d", 6_002, 2, 400), req("d", 6_002, 2, 400), req("d", 6_002, 2, 400)},
			[]string{"full", "*", `"`, "=", `"`, `"`},
		},
		{
			// after a '"', another now, then other amounts at that now
			[]store.SpeculativeRequest{req("b", 7_000, 1, 1), req("b", 7_000, 1, 1), req("c", 61_000, 1, 1), req("c", 61_000, 9, 1), req("c", 61_000, 9, 1)},
			[]string{"full", `"`, "*", "=", `"`},
		},
		{
			// a '"' far later than the call's first request: a is refilled
			// at its own now (rf moves to it), not at the first's
			[]store.SpeculativeRequest{req("d", 62_000, 1, 1), req("b", 120_000, 1, 1), req("a", 120_000, 1, 1)},
			[]string{"full", "*", `"`},
		},
	}
	for i, batch := range each {
		require.Equal(t, batch.forms, forms(batch.reqs), "batch %d: the forms sent", i)
		got, err := redis.ConsumeEach(ctx, batch.reqs)
		require.NoError(t, err)
		require.Len(t, got, len(batch.reqs))
		refused := 0
		for j, r := range batch.reqs {
			want, err := mem.SpeculativeConsume(ctx, r)
			require.NoError(t, err)
			require.Equal(t, showResult(want), showResult(got[j]), "batch %d, request %d", i, j)
			if !got[j].Applied {
				refused++
			}
		}
		if i == 0 {
			require.Equal(t, 1, refused, "batch 0: the fourth request on a is short")
		}
	}
	// all or none: '"' on other items, then one short ('"' too) refuses all
	for i, batch := range [][]store.SpeculativeRequest{
		{req("a", 180_000, 2, 10), req("b", 180_000, 2, 10)},
		{req("d", 180_000, 9, 10), req("a", 180_000, 9, 10)}, // d holds 10 of rpm, a 8: short
	} {
		require.Equal(t, `"`, forms(batch)[len(batch)-1], "all-or-none batch %d: the last request's form", i)
		want, err := mem.SpeculativeConsumeAll(ctx, batch)
		require.NoError(t, err)
		got, err := redis.SpeculativeConsumeAll(ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for j := range want {
			require.Equal(t, showResult(want[j]), showResult(got[j]), "all-or-none batch %d, request %d", i, j)
		}
		require.Equal(t, i == 0, got[0].Applied, "all-or-none batch %d", i)
	}
	for _, k := range keys {
		key := store.BucketKey{EntityID: k, Resource: "gpt"}
		want, err := mem.GetBucket(ctx, key)
		require.NoError(t, err)
		got, err := redis.GetBucket(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want.States, got.States, "item %s", k)
	}
}
