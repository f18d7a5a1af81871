package limiter

import (
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// This file checks bucket.go against a model of the original's bucket.py
// written plainly with math/big: Python's arbitrary-precision integers and
// floor division, no overflow anywhere, and conversion to int64 or
// time.Duration (with saturation) only at the very end. The model shares no
// code with bucket.go. Its only departures from Python are the documented
// ones: a zero refill period refills nothing (Python raises
// ZeroDivisionError), and a zero refill amount with a positive deficit waits
// forever (math.MaxInt64; Python raises ZeroDivisionError).

// pyInt returns v as a big integer.
func pyInt(v int64) *big.Int { return big.NewInt(v) }

// pyFloorDiv returns a // b: the quotient rounded toward negative infinity.
// (big.Int's Div is Euclidean, not floor, for negative divisors.)
func pyFloorDiv(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() != 0 && (r.Sign() < 0) != (b.Sign() < 0) {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// pyMul returns a × b.
func pyMul(a, b *big.Int) *big.Int { return new(big.Int).Mul(a, b) }

// pyMin returns min(a, b).
func pyMin(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// toInt64 returns v clamped to the int64 range.
func toInt64(v *big.Int) int64 {
	switch {
	case v.Cmp(pyInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case v.Cmp(pyInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return v.Int64()
}

// pyRefillBucket is refill_bucket of bucket.py.
func pyRefillBucket(tokens, lastRefill, now, capacity, amount, period *big.Int) (newTokens, newLastRefill *big.Int) {
	elapsed := new(big.Int).Sub(now, lastRefill)
	if elapsed.Sign() <= 0 {
		return tokens, lastRefill
	}
	if period.Sign() == 0 {
		return tokens, lastRefill // Python: ZeroDivisionError
	}
	add := pyFloorDiv(pyMul(elapsed, amount), period)
	if add.Sign() == 0 {
		return tokens, lastRefill
	}
	used := pyFloorDiv(pyMul(add, period), amount)
	return pyMin(capacity, new(big.Int).Add(tokens, add)), new(big.Int).Add(lastRefill, used)
}

// pyRefillState is pyRefillBucket applied to a bucket state.
func pyRefillState(s store.BucketState, now int64) (newTokens, newLastRefill *big.Int) {
	return pyRefillBucket(pyInt(s.TokensMilli), pyInt(s.LastRefillMs), pyInt(now),
		pyInt(s.CapacityMilli), pyInt(s.RefillAmountMilli), pyInt(s.RefillPeriodMs))
}

// pyRetryAfter is calculate_retry_after of bucket.py, converted to a
// Duration: (t+1) milliseconds, clamped to the Duration range.
func pyRetryAfter(deficit, amount, period *big.Int) time.Duration {
	if deficit.Sign() <= 0 {
		return 0
	}
	if amount.Sign() == 0 {
		return math.MaxInt64 // Python: ZeroDivisionError
	}
	t := pyFloorDiv(pyMul(deficit, period), amount)
	ms := new(big.Int).Add(t, big.NewInt(1))
	return time.Duration(toInt64(pyMul(ms, pyInt(int64(time.Millisecond)))))
}

// pyTryConsume is try_consume of bucket.py.
func pyTryConsume(s store.BucketState, requested, now int64) consumeResult {
	cur, last := pyRefillState(s, now)
	req := pyMul(pyInt(requested), pyInt(1000))
	res := consumeResult{
		NewLastRefillMs: toInt64(last),
		Available:       toInt64(pyFloorDiv(cur, pyInt(1000))),
	}
	if cur.Cmp(req) >= 0 {
		res.Success = true
		res.NewTokensMilli = toInt64(new(big.Int).Sub(cur, req))
		return res
	}
	res.NewTokensMilli = toInt64(cur)
	res.RetryAfter = pyRetryAfter(new(big.Int).Sub(req, cur), pyInt(s.RefillAmountMilli), pyInt(s.RefillPeriodMs))
	return res
}

// bucketSeeds are (tokens, lastRefill, now, capacity, amount, period) tuples
// covering the numbers of the original's bucket tests and worked examples,
// and the int64 edges.
var bucketSeeds = [][6]int64{
	{50_000_000, 1000, 1000, 100_000_000, 100_000_000, 60_000},
	{0, 0, 30_000, 100_000_000, 100_000_000, 60_000},
	{-50_000_000, 0, 30_000, 100_000_000, 100_000_000, 60_000},
	{9_900_000, 5000, 5203, 10_000_000, 10_000_000, 60_000},
	{-11_000, 0, 0, 10_000, 10_000, 60_000},
	{-1500, 0, 0, 10_000, 10_000, 60_000},
	{0, 0, 950_400_000, 10_000_000_000, 10_000_000_000, 60_000},
	{0, 0, 32_000_000_000, 10_000_000_000_000, 10_000_000_000_000, 60_000},
	{7, 5000, 4000, 1000, 1000, 60_000},
	{5, 0, 1000, 1000, 1000, 0},
	{0, 0, 1000, 0, 0, 0},
	{0, 999, 1000, 1000, -1, 2},
	{0, 999, 1000, 1000, 1, -2},
	{0, math.MinInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, 1},
	{0, math.MinInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, -1},
	{math.MinInt64, math.MinInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, -1},
	{math.MinInt64, math.MinInt64, math.MaxInt64, math.MaxInt64, math.MinInt64, 1},
	{math.MinInt64, math.MinInt64, math.MaxInt64, math.MinInt64, math.MinInt64, -1},
	{math.MaxInt64, math.MinInt64, math.MaxInt64, math.MinInt64, math.MinInt64, math.MinInt64},
	{math.MaxInt64, math.MaxInt64, math.MinInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64},
	{0, math.MaxInt64 - 1, math.MaxInt64, 1000, -1, 2},
	{math.MinInt64, 0, 1, 0, -1000, 1},
	{-1, -1, 0, -1, -1, -1},
}

// stateOf returns the bucket state of a seed tuple (seed[2], now, is not
// part of the state).
func stateOf(seed [6]int64) store.BucketState {
	return store.BucketState{
		LimitName: "tpm", TokensMilli: seed[0], LastRefillMs: seed[1],
		CapacityMilli: seed[3], RefillAmountMilli: seed[4], RefillPeriodMs: seed[5],
	}
}

// amountSeeds are request sizes (whole tokens) tried with every bucket seed.
var amountSeeds = []int64{0, 1, -1, 50_000, 150_000, math.MaxInt64, math.MinInt64, math.MaxInt64 / 1000, math.MinInt64 / 1000}

// FuzzRefillBucket checks refillBucket against refill_bucket.
func FuzzRefillBucket(f *testing.F) {
	for _, s := range bucketSeeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, tokens, lastRefill, now, capacity, amount, period int64) {
		gotTokens, gotLast := bucketmath.Refill(tokens, lastRefill, now, capacity, amount, period)
		wantTokens, wantLast := pyRefillBucket(pyInt(tokens), pyInt(lastRefill), pyInt(now), pyInt(capacity), pyInt(amount), pyInt(period))
		assert.Equal(t, [2]int64{toInt64(wantTokens), toInt64(wantLast)}, [2]int64{gotTokens, gotLast}, "bucketmath.Refill(%d, %d, %d, %d, %d, %d) = (tokens, last refill), exact want (%v, %v)", tokens, lastRefill, now, capacity, amount, period, wantTokens, wantLast)
	})
}

// FuzzTryConsume checks tryConsume against try_consume.
func FuzzTryConsume(f *testing.F) {
	for _, s := range bucketSeeds {
		for _, n := range amountSeeds {
			f.Add(s[0], s[1], s[2], s[3], s[4], s[5], n)
		}
	}
	f.Fuzz(func(t *testing.T, tokens, lastRefill, now, capacity, amount, period, requested int64) {
		s := stateOf([6]int64{tokens, lastRefill, now, capacity, amount, period})
		got := tryConsume(s, requested, now)
		want := pyTryConsume(s, requested, now)
		assert.Equal(t, want, got, "tryConsume(%+v, %d, %d)", s, requested, now)
	})
}

// FuzzForceConsume checks forceConsume against force_consume.
func FuzzForceConsume(f *testing.F) {
	for _, s := range bucketSeeds {
		for _, n := range amountSeeds {
			f.Add(s[0], s[1], s[2], s[3], s[4], s[5], n)
		}
	}
	f.Fuzz(func(t *testing.T, tokens, lastRefill, now, capacity, amount, period, consumed int64) {
		s := stateOf([6]int64{tokens, lastRefill, now, capacity, amount, period})
		gotTokens, gotLast := forceConsume(s, consumed, now)
		cur, last := pyRefillState(s, now)
		wantTokens := new(big.Int).Sub(cur, pyMul(pyInt(consumed), pyInt(1000)))
		assert.Equal(t, [2]int64{toInt64(wantTokens), toInt64(last)}, [2]int64{gotTokens, gotLast}, "forceConsume(%+v, %d, %d) = (tokens, last refill)", s, consumed, now)
	})
}

// FuzzCalculateAvailable checks calculateAvailable against calculate_available.
func FuzzCalculateAvailable(f *testing.F) {
	for _, s := range bucketSeeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, tokens, lastRefill, now, capacity, amount, period int64) {
		s := stateOf([6]int64{tokens, lastRefill, now, capacity, amount, period})
		got := calculateAvailable(s, now)
		cur, _ := pyRefillState(s, now)
		want := toInt64(pyFloorDiv(cur, pyInt(1000)))
		assert.Equal(t, want, got, "calculateAvailable(%+v, %d) = %d, want %d", s, now, got, want)
	})
}

// FuzzCalculateTimeUntilAvailable checks calculateTimeUntilAvailable against
// calculate_time_until_available.
func FuzzCalculateTimeUntilAvailable(f *testing.F) {
	for _, s := range bucketSeeds {
		for _, n := range amountSeeds {
			f.Add(s[0], s[1], s[2], s[3], s[4], s[5], n)
		}
	}
	f.Fuzz(func(t *testing.T, tokens, lastRefill, now, capacity, amount, period, needed int64) {
		s := stateOf([6]int64{tokens, lastRefill, now, capacity, amount, period})
		got := calculateTimeUntilAvailable(s, needed, now)
		cur, _ := pyRefillState(s, now)
		need := pyMul(pyInt(needed), pyInt(1000))
		var want time.Duration
		if cur.Cmp(need) < 0 {
			want = pyRetryAfter(new(big.Int).Sub(need, cur), pyInt(amount), pyInt(period))
		}
		assert.Equal(t, want, got, "calculateTimeUntilAvailable(%+v, %d, %d) = %v (%d), want %v (%d)", s, needed, now, got, int64(got), want, int64(want))
	})
}

// FuzzCalculateRetryAfter checks calculateRetryAfter against calculate_retry_after.
func FuzzCalculateRetryAfter(f *testing.F) {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	for _, s := range [][3]int64{
		{0, 100_000_000, 60_000},
		{10_000_000, 100_000_000, 60_000},
		{11_000, 10_000, 60_000},
		{41_000, 10_000, 60_000},
		{1, 3, 1000},
		{maxMs - 1, 1, 1},
		{maxMs, 1, 1},
		{1, 0, 60_000},
		{1000, 1000, 0},
		{1000, -1000, 1000},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64, -1, math.MaxInt64},
		{math.MaxInt64, math.MinInt64, math.MinInt64},
		{math.MaxInt64, math.MaxInt64, math.MinInt64},
		{math.MinInt64, 1, 1},
		{1, math.MinInt64, math.MaxInt64},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, deficit, amount, period int64) {
		got := bucketmath.RetryAfter(deficit, amount, period)
		want := pyRetryAfter(pyInt(deficit), pyInt(amount), pyInt(period))
		assert.Equal(t, want, got, "bucketmath.RetryAfter(%d, %d, %d) = %v (%d), want %v (%d)", deficit, amount, period, got, int64(got), want, int64(want))
	})
}
