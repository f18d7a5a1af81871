package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// TestBatchSameLimitsAgreesWithMemory: in a call of several requests, a
// request whose resolved limits equal the previous request's does not
// send them again ('=', see lua/consume_lib.lua), nor its amounts when
// they are the previous request's too ('*'). Batches whose limits and
// amounts change and repeat (other names, other parameters, another
// order, other amounts) are decided as the
// memory store decides them: the batched consume (each request alone, in
// order, a later one on an item seeing an earlier one's take) and the
// consume of all or none. A request that took the wrong request's limits
// would miss a changed parameter (rpm at 99 where the item holds 100) or
// take from a limit it does not resolve; one that took the wrong amounts
// would be short where it fits, or fit where it is short.
func TestBatchSameLimitsAgreesWithMemory(t *testing.T) {
	ctx := context.Background()
	const now = int64(1_795_000_000_000)
	lim := func(name string, capacity int64) store.Limit {
		return store.Limit{Name: name, Capacity: capacity, RefillAmount: capacity, RefillPeriod: time.Minute}
	}
	st := func(name string, capacity int64) store.BucketState {
		return store.BucketState{LimitName: name, CapacityMilli: capacity * 1000, RefillAmountMilli: capacity * 1000,
			RefillPeriodMs: 60_000, TokensMilli: capacity * 1000, LastRefillMs: now}
	}
	items := map[string][]store.BucketState{
		"a": {st("rpm", 100), st("tpm", 10_000)},
		"b": {st("rpm", 99), st("tpm", 10_000)},
		"c": {st("rpm", 100), st("tpm", 10_000)},
		"d": {st("rpm", 99), st("tpm", 10_000)},
		"e": {st("rpm", 100), st("tpm", 9_000)},
		"f": {st("rpm", 100), st("tpm", 10_000)},
	}
	redis, mem := newStore(t), memorystore.New()
	for _, repo := range []store.Repository{redis, mem} {
		for key, states := range items {
			require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{{Kind: store.WriteCreate,
				Key: store.BucketKey{EntityID: key, Resource: "gpt"}, NowMs: now, ShardCount: 1, States: states}}))
		}
	}
	rpm, rpm99, tpm := lim("rpm", 100), lim("rpm", 99), lim("tpm", 10_000)
	req := func(key string, after int64, consume store.Consume, limits ...store.Limit) store.SpeculativeRequest {
		return store.SpeculativeRequest{Key: store.BucketKey{EntityID: key, Resource: "gpt"}, Consume: consume, Limits: limits, NowMs: now + after}
	}
	each := [][]store.SpeculativeRequest{
		{
			req("a", 1000, store.Consume{"rpm": 1}, rpm),
			req("b", 1000, store.Consume{"rpm": 2}, rpm99),                  // other parameters: sent in full
			req("c", 1000, store.Consume{"rpm": 3}, rpm99),                  // '=': rpm at 99, the item holds 100
			req("d", 1000, store.Consume{"rpm": 4}, rpm99),                  // '=': applies
			req("a", 1000, store.Consume{"rpm": 5, "tpm": 50}, rpm, tpm),    // two limits
			req("e", 1000, store.Consume{"rpm": 6, "tpm": 60}, rpm, tpm),    // '=': tpm at 10,000, the item holds 9,000
			req("f", 1000, store.Consume{"rpm": 7, "tpm": 70}, rpm, tpm),    // '=': applies
			req("a", 1000, store.Consume{"rpm": 8, "tpm": 9_950}, rpm, tpm), // '=': short on tpm (a took 50)
			req("f", 1000, store.Consume{"tpm": 80, "rpm": 9}, tpm, rpm),    // another order: sent in full
			req("c", 1000, store.Consume{"tpm": 90}, tpm, rpm),              // '=': applies
			req("c", 1000, store.Consume{"tpm": 100}, tpm),                  // fewer limits: sent in full
		},
		{
			req("f", 61_000, store.Consume{"rpm": 1, "tpm": 1}, rpm, tpm), // refilled first
			req("e", 61_000, store.Consume{"rpm": 1}, rpm),
			req("f", 61_001, store.Consume{"rpm": 1}, rpm), // '*': the same amounts, a later now
		},
		{
			// '*': the previous request's limits and amounts
			req("b", 62_000, store.Consume{"rpm": 3}, rpm99),
			req("c", 62_000, store.Consume{"rpm": 3}, rpm99),  // '*': rpm at 99, the item holds 100
			req("d", 62_000, store.Consume{"rpm": 3}, rpm99),  // '*' after '*': applies
			req("d", 62_000, store.Consume{"rpm": 50}, rpm99), // '=': other amounts
			req("d", 62_000, store.Consume{"rpm": 50}, rpm99), // '*': short (d took 3 + 50 of 99)
			req("a", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, rpm, tpm),
			req("e", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, rpm, tpm), // '*': tpm at 10,000, the item holds 9,000
			req("f", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, rpm, tpm), // '*': applies
			req("f", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, rpm, tpm), // '*': short on tpm
			req("c", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, tpm, rpm), // another order: sent in full
			req("a", 62_000, store.Consume{"rpm": 2, "tpm": 9_000}, tpm, rpm), // '*': short on tpm (a took 9,000)
		},
	}
	for i, batch := range each {
		got, err := redis.ConsumeEach(ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(batch))
		for j, r := range batch {
			want, err := mem.SpeculativeConsume(ctx, r)
			require.NoError(t, err)
			require.Equal(t, showResult(want), showResult(got[j]), "batch %d, request %d", i, j)
		}
	}
	refused := 0
	all := [][]store.SpeculativeRequest{
		{req("a", 63_000, store.Consume{"rpm": 1}, rpm), req("f", 63_000, store.Consume{"rpm": 1}, rpm), req("c", 63_000, store.Consume{"rpm": 1}, rpm99)},
		{req("a", 63_000, store.Consume{"rpm": 1}, rpm), req("f", 63_000, store.Consume{"rpm": 1}, rpm), req("d", 63_000, store.Consume{"rpm": 1}, rpm99), req("b", 63_000, store.Consume{"rpm": 1}, rpm99)},
		{req("d", 63_000, store.Consume{"rpm": 1}, rpm99), req("b", 63_000, store.Consume{"rpm": 1}, rpm99), req("c", 63_000, store.Consume{"rpm": 1}, rpm99)},
		{req("d", 63_000, store.Consume{"rpm": 1}, rpm99), req("b", 63_000, store.Consume{"rpm": 1}, rpm99)},
	}
	for i, batch := range all {
		want, err := mem.SpeculativeConsumeAll(ctx, batch)
		require.NoError(t, err)
		got, err := redis.SpeculativeConsumeAll(ctx, batch)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for j := range want {
			require.Equal(t, showResult(want[j]), showResult(got[j]), "all-or-none batch %d, request %d", i, j)
			if !got[j].Applied {
				refused++
			}
		}
	}
	require.Positive(t, refused, "no all-or-none batch refused: the '=' of c (rpm at 99) was not tested")
	for key := range items {
		k := store.BucketKey{EntityID: key, Resource: "gpt"}
		want, err := mem.GetBucket(ctx, k)
		require.NoError(t, err)
		got, err := redis.GetBucket(ctx, k)
		require.NoError(t, err)
		require.Equal(t, want.States, got.States, "item %s", key)
	}
}
