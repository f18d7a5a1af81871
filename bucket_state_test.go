package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// A bucket of 100 requests per minute, empty at noon, holds 25 requests 15
// seconds later and is full again after a minute.
func ExampleBucketState_RefilledAt() {
	noon := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	s := store.BucketState{
		LimitName:         "rpm",
		TokensMilli:       0,
		LastRefillMs:      noon.UnixMilli(),
		CapacityMilli:     100_000,
		RefillAmountMilli: 100_000,
		RefillPeriodMs:    60_000,
	}
	fmt.Println(s.RefilledAt(noon.Add(15 * time.Second)).Tokens())
	fmt.Println(s.RefilledAt(noon.Add(2 * time.Minute)).Tokens())
	fmt.Println(s.Tokens()) // s itself is unchanged
	// Output:
	// 25
	// 100
	// 0
}

func TestBucketStateRefilledAt(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_700_000_000_000)
	// 7 tokens per 3 s: 1 ms refills 7/3 millitokens, 2 whole ones.
	s := store.BucketState{LimitName: "x", TokensMilli: -500, LastRefillMs: t0.UnixMilli(),
		CapacityMilli: 10_000, RefillAmountMilli: 7000, RefillPeriodMs: 3000, TotalConsumedMilli: 42}
	for _, tc := range []struct {
		name     string
		now      time.Time
		tokens   int64
		lastFill int64
	}{
		{"1 ms: 2 millitokens, made in under 1 ms, so rf stays", t0.Add(time.Millisecond), -498, t0.UnixMilli()},
		{"3 ms: 7 millitokens, exactly", t0.Add(3 * time.Millisecond), -493, t0.UnixMilli() + 3},
		{"one period", t0.Add(3 * time.Second), 6500, t0.UnixMilli() + 3000},
		{"capped at capacity", t0.Add(time.Hour), 10_000, t0.Add(time.Hour).UnixMilli()},
		{"now before the last refill", t0.Add(-time.Second), -500, t0.UnixMilli()},
		{"now equal to the last refill", t0, -500, t0.UnixMilli()},
	} {
		got := s.RefilledAt(tc.now)
		assert.Equal(t, tc.tokens, got.TokensMilli, "%s: RefilledAt millitokens", tc.name)
		assert.Equal(t, tc.lastFill, got.LastRefillMs, "%s: RefilledAt last refill", tc.name)
		assert.Equal(t, s.LimitName, got.LimitName, "%s: RefilledAt changed other fields: %+v", tc.name, got)
		assert.Equal(t, s.CapacityMilli, got.CapacityMilli, "%s: RefilledAt changed other fields: %+v", tc.name, got)
		assert.Equal(t, s.TotalConsumedMilli, got.TotalConsumedMilli, "%s: RefilledAt changed other fields: %+v", tc.name, got)
	}
	// The balance grows with time and stops at capacity.
	prev := s.TokensMilli
	for ms := int64(0); ms <= 6000; ms += 7 {
		got := s.RefilledAt(t0.Add(time.Duration(ms) * time.Millisecond)).TokensMilli
		require.GreaterOrEqual(t, got, prev, "after %d ms: millitokens fell", ms)
		require.LessOrEqual(t, got, s.CapacityMilli, "after %d ms: millitokens past capacity", ms)
		prev = got
	}
	assert.Equal(t, s.CapacityMilli, prev, "after 6 s: %d mt, want capacity %d mt", prev, s.CapacityMilli)
	zero := s
	zero.RefillPeriodMs = 0
	got := zero.RefilledAt(t0.Add(time.Hour))
	assert.Equal(t, zero, got, "zero period: RefilledAt, want unchanged")
}
