package limiter

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Bucket settings used by the original's tests/unit/test_bucket.py and by
// worked examples traced on the original (the aggregator's refill, a
// slow-path write, a debt's retry-after).
const (
	// A 100,000 tokens/minute limit in millitokens.
	cap100k    = 100_000_000
	perMinMs   = 60_000
	elevenDays = 11 * 24 * 60 * 60 * 1000 // ms
	// An LLM limit of 10M tokens/minute in millitokens.
	cap10M = 10_000_000_000
)

// state returns a bucket state with the given balance, last refill time and
// refill settings (all in millitokens and milliseconds).
func state(tokens, lastRefill, capacity, amount, period int64) store.BucketState {
	return store.BucketState{
		EntityID:          "e1",
		Resource:          "gpt-4",
		LimitName:         "tpm",
		TokensMilli:       tokens,
		LastRefillMs:      lastRefill,
		CapacityMilli:     capacity,
		RefillAmountMilli: amount,
		RefillPeriodMs:    period,
	}
}

// ms returns n milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func TestRefillBucket(t *testing.T) {
	t.Parallel()
	const maxI, minI = math.MaxInt64, math.MinInt64
	for _, tc := range []struct {
		name                     string
		tokens, last, now        int64
		capacity, amount, period int64
		wantTokens, wantLast     int64
	}{
		// The original's test_bucket.py.
		{"no time elapsed", 50_000_000, 1000, 1000, cap100k, cap100k, perMinMs, 50_000_000, 1000},
		{"partial refill", 0, 0, 30_000, cap100k, cap100k, perMinMs, 50_000_000, 30_000},
		{"capped", 0, 0, 120_000, cap100k, cap100k, perMinMs, cap100k, 120_000},
		{"debt refill", -50_000_000, 0, 30_000, cap100k, cap100k, perMinMs, 0, 30_000},
		// The aggregator's refill of an empty bucket 30 s after its last
		// refill, 100,000 tokens/min, on one shard and on two (each shard
		// owns half the capacity and rate).
		{"aggregator refill one shard", 0, 1_700_000_000_000, 1_700_000_030_000, 100_000_000, 100_000_000, perMinMs, 50_000_000, 1_700_000_030_000},
		{"aggregator refill two shards", 0, 1_700_000_000_000, 1_700_000_030_000, 50_000_000, 50_000_000, perMinMs, 25_000_000, 1_700_000_030_000},
		// A slow-path write traced on the original: 203 ms of 10,000
		// tokens/min earns 33,833 millitokens in 202.998 ms, so the clock
		// advances by 202 ms only; rps at 10/s is capped and keeps its time.
		{"tpm drift compensation", 9_900_000, 5000, 5203, 10_000_000, 10_000_000, perMinMs, 9_933_833, 5202},
		{"rps capped keeps full earning time", 9000, 5000, 5203, 10_000, 10_000, 1000, 10_000, 5203},
		// 1 token/min earns one millitoken every 60 ms.
		{"sub-millitoken elapsed is kept", 0, 1000, 1059, 1000, 1000, perMinMs, 0, 1000},
		{"remainder is kept for next time", 0, 1000, 1061, 1000, 1000, perMinMs, 1, 1060},
		{"negative elapsed", 7, 5000, 4000, cap100k, cap100k, perMinMs, 7, 5000},
		{"negative elapsed across int64 range", 7, maxI, minI, cap100k, cap100k, perMinMs, 7, maxI},
		{"above capacity without refill stays", 2000, 1000, 1059, 1000, 1000, perMinMs, 2000, 1000},
		{"above capacity with refill snaps to capacity", 2000, 1000, 1060, 1000, 1000, perMinMs, 1000, 1060},
		// Corrupt buckets: the original divides by zero on a bucket with a
		// zero refill period (an item whose limit had only a balance written).
		{"zero period does not panic", 5, 0, 1000, 1000, 1000, 0, 5, 0},
		{"zero amount refills nothing", 5, 0, 1000, 1000, 0, 1000, 5, 0},
		{"all zero", 0, 0, 1000, 0, 0, 0, 0, 0},
		// Overflow: elapsed×amount = 950,400,000 × 10^10 ≈ 9.5e18 > MaxInt64.
		{"LLM limit of 10M tokens/min idle for 11 days", 0, 1_000, 1_000 + elevenDays, cap10M, cap10M, perMinMs, cap10M, 1_000 + elevenDays},
		{"LLM limit idle for 11 days from debt", -cap10M, 1_000, 1_000 + elevenDays, cap10M, cap10M, perMinMs, cap10M, 1_000 + elevenDays},
		// 11 days + 1 ms: elapsed×amount = 9,504,000,010,000,000,000 earns
		// 158,400,000,166,666 millitokens with 40,000 left over, so the clock
		// stops 1 ms short of now.
		{"overflowing product keeps the remainder", 0, 0, elevenDays + 1, cap10M, cap10M, perMinMs, cap10M, elevenDays},
		// Python's integers do not overflow: 3.2e10 ms × 1e13 = 3.2e23 is
		// beyond 2^64 too, and the refill must still be exact.
		{"a year idle at 10^13 per minute", 0, 0, 32_000_000_000, 10_000_000_000_000, 10_000_000_000_000, perMinMs, 10_000_000_000_000, 31_999_999_999},
		{"full int64 range elapsed", 0, minI, maxI, maxI, maxI, 1, maxI, maxI},
		// Negative settings only occur on corrupt items; Python's floor
		// semantics still apply. add = -1 // 2 = -1, used = -2 // -1 = 2.
		{"negative amount floors", 0, 999, 1000, 1000, -1, 2, -1, 1001},
		// add = 1 // -2 = -1, used = 2 // 1 = 2.
		{"negative period floors", 0, 999, 1000, 1000, 1, -2, -1, 1001},
		// add = -(2^64-1)×(2^63-1): the sum is far below MinInt64.
		{"tokens saturate at MinInt64", 0, minI, maxI, maxI, maxI, -1, minI, maxI},
		// add = -1 // 2 = -1, used = -2 // -1 = 2: MaxInt64 + 1.
		{"last refill saturates at MaxInt64", 0, maxI - 1, maxI, 1000, -1, 2, -1, maxI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gotTokens, gotLast := bucketmath.Refill(tc.tokens, tc.last, tc.now, tc.capacity, tc.amount, tc.period)
			assert.Equal(t, [2]int64{tc.wantTokens, tc.wantLast}, [2]int64{gotTokens, gotLast}, "bucketmath.Refill(%d, %d, %d, %d, %d, %d) = (tokens, last refill)", tc.tokens, tc.last, tc.now, tc.capacity, tc.amount, tc.period)
		})
	}
}

// TestRefillBucketElevenDaysNoWrap is the regression test for the issue "an
// LLM limit of 10M tokens/min idle for 11 days": elapsed×refillAmount
// overflows int64, and naive int64 math wraps to a negative refill.
func TestRefillBucketElevenDaysNoWrap(t *testing.T) {
	t.Parallel()
	const now = 1_767_225_600_000 // 2026-01-01T00:00:00Z
	elapsed := int64(elevenDays)
	// The naive product really does overflow.
	p := elapsed * cap10M
	require.NotEqual(t, elapsed, p/cap10M, "precondition: %d×%d = %d does not overflow int64", elapsed, int64(cap10M), p)
	for _, tokens := range []int64{0, 1, cap10M / 2, -cap10M, -5 * cap10M} {
		got, gotLast := bucketmath.Refill(tokens, now-elapsed, now, cap10M, cap10M, perMinMs)
		assert.Equal(t, [2]int64{cap10M, now}, [2]int64{got, gotLast}, "bucketmath.Refill(%d, now-11d, now, 10M tokens/min) = (tokens, last refill)", tokens)
	}
}

func TestTryConsume(t *testing.T) {
	t.Parallel()
	full := state(cap100k, 0, cap100k, cap100k, perMinMs)
	rpm10 := func(tokens int64) store.BucketState { return state(tokens, 0, 10_000, 10_000, perMinMs) }
	for _, tc := range []struct {
		name      string
		state     store.BucketState
		requested int64
		now       int64
		want      consumeResult
	}{
		// The original's test_bucket.py.
		{"consume success", full, 50_000, 0, consumeResult{Success: true, NewTokensMilli: 50_000_000, Available: 100_000}},
		{"consume exact", full, 100_000, 0, consumeResult{Success: true, NewTokensMilli: 0, Available: 100_000}},
		// deficit 50,000,000 × 60000 // 10^8 = 30000 ms.
		{"insufficient", full, 150_000, 0, consumeResult{NewTokensMilli: cap100k, Available: 100_000, RetryAfter: ms(30_001)}},
		{"consume after refill", state(0, 0, cap100k, cap100k, perMinMs), 30_000, 30_000,
			consumeResult{Success: true, NewTokensMilli: 20_000_000, NewLastRefillMs: 30_000, Available: 50_000}},
		// The worked example of a debt: rpm 10/min at −11 tokens, limit
		// not consumed, waits 11,000×60,000//10,000 = 66,000 ms (+1 ms).
		// Then a bucket created at 10/min holding 9 tokens asked for 50 by
		// an override with other settings: the stored settings count.
		{"debt blocks a zero request", rpm10(-11_000), 0, 0, consumeResult{NewTokensMilli: -11_000, Available: -11, RetryAfter: ms(66_001)}},
		{"override with other settings uses the stored ones", rpm10(9_000), 50, 0, consumeResult{NewTokensMilli: 9_000, Available: 9, RetryAfter: ms(246_001)}},
		// Floor division: −1500 millitokens is −2 tokens; 1500×60000//10000 = 9000.
		{"available floors negative balance", rpm10(-1500), 0, 0, consumeResult{NewTokensMilli: -1500, Available: -2, RetryAfter: ms(9_001)}},
		{"available floors positive balance", rpm10(1500), 1, 0, consumeResult{Success: true, NewTokensMilli: 500, Available: 1}},
		{"zero request on empty bucket succeeds", rpm10(0), 0, 0, consumeResult{Success: true}},
		{"negative request adds tokens without cap", full, -5, 0, consumeResult{Success: true, NewTokensMilli: cap100k + 5000, Available: 100_000}},
		{"eleven idle days then consume", state(0, 0, cap10M, cap10M, perMinMs), 5000, elevenDays,
			consumeResult{Success: true, NewTokensMilli: cap10M - 5_000_000, NewLastRefillMs: elevenDays, Available: 10_000_000}},
		// Corrupt bucket with only a balance and no refill settings (the
		// original divides by zero on it): no panic; a bucket that never
		// refills never satisfies a deficit.
		{"corrupt bucket denies forever", state(0, 0, 0, 0, 0), 1, 1000, consumeResult{RetryAfter: math.MaxInt64}},
		{"corrupt bucket admits zero request", state(0, 0, 0, 0, 0), 0, 1000, consumeResult{Success: true}},
		// requested×1000 overflows int64; the deficit is still exact.
		{"huge request saturates retry-after", full, math.MaxInt64, 0, consumeResult{NewTokensMilli: cap100k, Available: 100_000, RetryAfter: math.MaxInt64}},
		{"huge negative request saturates balance", full, math.MinInt64, 0, consumeResult{Success: true, NewTokensMilli: math.MaxInt64, Available: 100_000}},
		// (MaxInt64×1000 − MaxInt64)×1 // MaxInt64 = 999 ms: exact.
		{"huge request with fast refill is exact", state(math.MaxInt64, 0, math.MaxInt64, math.MaxInt64, 1), math.MaxInt64, 0,
			consumeResult{NewTokensMilli: math.MaxInt64, Available: math.MaxInt64 / 1000, RetryAfter: ms(1000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := tc.state
			got := tryConsume(tc.state, tc.requested, tc.now)
			assert.Equal(t, tc.want, got, "tryConsume(%+v, %d, %d)", tc.state, tc.requested, tc.now)
			assert.Equal(t, before, tc.state, "tryConsume modified its state")
		})
	}
}

func TestCalculateRetryAfter(t *testing.T) {
	t.Parallel()
	const maxI = math.MaxInt64
	// The largest whole number of milliseconds a Duration holds.
	const maxMs = maxI / int64(time.Millisecond)
	for _, tc := range []struct {
		name                    string
		deficit, amount, period int64
		want                    time.Duration
	}{
		// The original's test_bucket.py.
		{"no deficit", 0, cap100k, perMinMs, 0},
		{"negative deficit", -5000, cap100k, perMinMs, 0},
		{"10k tokens at 100k/min", 10_000_000, cap100k, perMinMs, ms(6_001)},
		{"100k tokens at 100k/min", 100_000_000, cap100k, perMinMs, ms(60_001)},
		// The worked example of a debt: rpm 10/min at −11 tokens, and 9
		// tokens asked for 50.
		{"debt of 11 tokens at 10/min", 11_000, 10_000, perMinMs, ms(66_001)},
		{"deficit of 41 tokens at 10/min", 41_000, 10_000, perMinMs, ms(246_001)},
		{"one millitoken at 1 token/s", 1, 1000, 1000, ms(2)},
		{"floors the wait", 1, 3, 1000, ms(334)},
		{"deficit×period overflows int64", 1 << 40, 1 << 40, 1 << 40, ms(1<<40 + 1)},
		{"largest exact duration", maxMs - 1, 1, 1, ms(maxMs)},
		{"saturates just beyond Duration", maxMs, 1, 1, maxI},
		{"saturates far beyond Duration", maxI, 1, maxI, maxI},
		{"saturates instead of wrapping", maxI, 1, perMinMs, maxI},
		{"zero amount never refills", 1, 0, perMinMs, maxI},
		{"zero period", 1000, 1000, 0, ms(1)},
		// Corrupt negative settings follow Python: -1000 // 1 ... (t+1) ms.
		{"negative amount gives negative wait", 1000, -1000, 1000, ms(-999)},
		{"negative saturates at MinInt64", maxI, -1, maxI, math.MinInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := bucketmath.RetryAfter(tc.deficit, tc.amount, tc.period)
			assert.Equal(t, tc.want, got, "bucketmath.RetryAfter(%d, %d, %d) = %v (%d), want %v (%d)", tc.deficit, tc.amount, tc.period, got, int64(got), tc.want, int64(tc.want))
		})
	}
}

func TestCalculateAvailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		state store.BucketState
		now   int64
		want  int64
	}{
		// The original's test_bucket.py.
		{"refilled from empty", state(0, 0, cap100k, cap100k, perMinMs), 30_000, 50_000},
		{"refilled from debt", state(-100_000_000, 0, cap100k, cap100k, perMinMs), 30_000, -50_000},
		{"floors negative balance", state(-1500, 0, cap100k, cap100k, perMinMs), 0, -2},
		{"floors positive balance", state(1999, 0, cap100k, cap100k, perMinMs), 0, 1},
		{"eleven idle days", state(0, 0, cap10M, cap10M, perMinMs), elevenDays, 10_000_000},
		{"zero period does not panic", state(-2500, 0, 1000, 1000, 0), 1000, -3},
		// The balance −(2^64−1)×(2^63−1) is far below MinInt64 but //1000 is
		// still below it too.
		{"saturates", state(0, math.MinInt64, math.MaxInt64, math.MaxInt64, -1), math.MaxInt64, math.MinInt64},
		// Exact balance MinInt64 − 1000 is out of range; //1000 is not.
		{"exact below int64 balance", state(math.MinInt64, 0, 0, -1000, 1), 1, math.MinInt64/1000 - 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := calculateAvailable(tc.state, tc.now)
			assert.Equal(t, tc.want, got, "calculateAvailable(%+v, %d) = %d, want %d", tc.state, tc.now, got, tc.want)
		})
	}
}

func TestCalculateTimeUntilAvailable(t *testing.T) {
	t.Parallel()
	rpm100 := func(tokens int64) store.BucketState { return state(tokens, 0, 100_000, 100_000, perMinMs) }
	for _, tc := range []struct {
		name   string
		state  store.BucketState
		needed int64
		now    int64
		want   time.Duration
	}{
		{"already available", rpm100(100_000), 100, 0, 0},
		{"available after refill", rpm100(0), 50, 30_000, 0},
		// 10,000 millitokens at 100,000 per 60 s: 6000 ms.
		{"ten tokens from empty", rpm100(0), 10, 0, ms(6_001)},
		// 1666 earned in 1 s; 98,334×60000//100,000 = 59000.
		{"hundred tokens after one second", rpm100(0), 100, 1000, ms(59_001)},
		{"debt blocks zero", rpm100(-1), 0, 0, ms(1)},
		{"zero amount never refills", state(0, 0, 1000, 0, perMinMs), 1, 0, math.MaxInt64},
		{"huge need saturates", rpm100(0), math.MaxInt64, 0, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := calculateTimeUntilAvailable(tc.state, tc.needed, tc.now)
			assert.Equal(t, tc.want, got, "calculateTimeUntilAvailable(%+v, %d, %d) = %v, want %v", tc.state, tc.needed, tc.now, got, tc.want)
		})
	}
}

func TestForceConsume(t *testing.T) {
	t.Parallel()
	full := state(cap100k, 0, cap100k, cap100k, perMinMs)
	for _, tc := range []struct {
		name       string
		state      store.BucketState
		amount     int64
		now        int64
		wantTokens int64
		wantLast   int64
	}{
		// The original's test_bucket.py.
		{"within balance", full, 50_000, 0, 50_000_000, 0},
		{"into debt", full, 150_000, 0, -50_000_000, 0},
		{"negative amount returns tokens without cap", full, -50_000, 0, 150_000_000, 0},
		{"refills first", state(0, 0, cap100k, cap100k, perMinMs), 10_000, 30_000, 40_000_000, 30_000},
		{"zero period does not panic", state(0, 0, 1000, 1000, 0), 1, 5000, -1000, 0},
		{"saturates low", state(math.MinInt64, 0, 0, 0, 1), math.MaxInt64, 0, math.MinInt64, 0},
		{"saturates high", full, math.MinInt64, 0, math.MaxInt64, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gotTokens, gotLast := forceConsume(tc.state, tc.amount, tc.now)
			assert.Equal(t, [2]int64{tc.wantTokens, tc.wantLast}, [2]int64{gotTokens, gotLast}, "forceConsume(%+v, %d, %d) = (tokens, last refill)", tc.state, tc.amount, tc.now)
		})
	}
}

func TestBuildLimitStatus(t *testing.T) {
	t.Parallel()
	l := PerMinute("rpm", 10)
	for _, tc := range []struct {
		name      string
		state     store.BucketState
		requested int64
		want      LimitStatus
	}{
		{"passes", state(10_000, 0, 10_000, 10_000, perMinMs), 3,
			LimitStatus{EntityID: "child", Resource: "api", LimitName: "rpm", Limit: l, Available: 10, Requested: 3}},
		{"debt of 11 tokens exceeded", state(-11_000, 0, 10_000, 10_000, perMinMs), 0,
			LimitStatus{EntityID: "child", Resource: "api", LimitName: "rpm", Limit: l, Available: -11, Exceeded: true, RetryAfter: ms(66_001)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := buildLimitStatus("child", "api", store.Limit(l), tc.state, tc.requested, 0)
			assert.Equal(t, tc.want, got, "buildLimitStatus(%+v, %d)", tc.state, tc.requested)
		})
	}
}

func TestWouldRefillSatisfy(t *testing.T) {
	t.Parallel()
	// bucket returns an empty state of amount tokens per minute, last
	// refilled at 0.
	bucket := func(name string, amount int64) store.BucketState {
		return store.BucketState{
			EntityID: "e1", Resource: "api", LimitName: name,
			CapacityMilli: amount * 1000, RefillAmountMilli: amount * 1000, RefillPeriodMs: perMinMs,
		}
	}
	status := func(name string, amount, available, requested int64, retry time.Duration) LimitStatus {
		return LimitStatus{
			EntityID: "e1", Resource: "api", LimitName: name, Limit: PerMinute(name, amount),
			Available: available, Requested: requested, Exceeded: retry > 0, RetryAfter: retry,
		}
	}
	// The hidden wcu limit: 1000 writes per second, exhausted.
	wcu := store.BucketState{
		EntityID: "e1", Resource: "api", LimitName: wcuLimitName,
		CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, LastRefillMs: 30_000,
	}
	for _, tc := range []struct {
		name    string
		buckets []store.BucketState
		consume Consume
		now     int64
		wantOK  bool
		want    []LimitStatus
	}{
		// The original's test_bucket.py.
		{"refill covers request", []store.BucketState{bucket("rpm", 100)}, Consume{"rpm": 10}, 30_000,
			true, []LimitStatus{status("rpm", 100, 50, 10, 0)}},
		// 1666 millitokens after 1 s; (100,000 − 1666)×60000//100,000 = 59000.
		{"refill too slow", []store.BucketState{bucket("rpm", 100)}, Consume{"rpm": 100}, 1000,
			false, []LimitStatus{status("rpm", 100, 1, 100, ms(59_001))}},
		{"multi-limit all pass", []store.BucketState{bucket("rpm", 100), bucket("tpm", 10_000)}, Consume{"rpm": 1, "tpm": 500}, 30_000,
			true, []LimitStatus{status("rpm", 100, 50, 1, 0), status("tpm", 10_000, 5000, 500, 0)}},
		// (6,000,000 − 5,000,000)×60000//10,000,000 = 6000.
		{"multi-limit one fails", []store.BucketState{bucket("rpm", 100), bucket("tpm", 10_000)}, Consume{"rpm": 1, "tpm": 6000}, 30_000,
			false, []LimitStatus{status("rpm", 100, 50, 1, 0), status("tpm", 10_000, 5000, 6000, ms(6_001))}},
		{"order of buckets is kept", []store.BucketState{bucket("tpm", 10_000), bucket("rpm", 100)}, Consume{"rpm": 1, "tpm": 1}, 30_000,
			true, []LimitStatus{status("tpm", 10_000, 5000, 1, 0), status("rpm", 100, 50, 1, 0)}},
		{"limits absent from consume are ignored", []store.BucketState{bucket("rpm", 100)}, Consume{"tpm": 5}, 0, true, nil},
		{"zero amounts are ignored", []store.BucketState{bucket("rpm", 100)}, Consume{"rpm": 0}, 0, true, nil},
		{"refunds are skipped", []store.BucketState{bucket("rpm", 100)}, Consume{"rpm": -1}, 0, true, nil},
		{"a refund beside a take", []store.BucketState{bucket("rpm", 100), bucket("tpm", 10_000)}, Consume{"rpm": -1, "tpm": 500}, 30_000,
			true, []LimitStatus{status("tpm", 10_000, 5000, 500, 0)}},
		{"no buckets", nil, Consume{"rpm": 1}, 0, true, nil},
		{"nil consume", []store.BucketState{bucket("rpm", 100)}, nil, 0, true, nil},
		// The original let the hidden wcu limit reach Limit validation and
		// the statuses (a cascade whose parent was exhausted then failed
		// with "reserved limit name" instead of a rate limit error). It is skipped even when the caller names it.
		{"wcu is always skipped", []store.BucketState{wcu, bucket("rpm", 100)}, Consume{"rpm": 10, wcuLimitName: 1}, 30_000,
			true, []LimitStatus{status("rpm", 100, 50, 10, 0)}},
		{"only wcu", []store.BucketState{wcu}, Consume{wcuLimitName: 5}, 30_000, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gotOK, got := wouldRefillSatisfy(tc.buckets, tc.consume, tc.now)
			assert.Equal(t, tc.wantOK, gotOK, "wouldRefillSatisfy(%v) ok = %t, want %t", tc.consume, gotOK, tc.wantOK)
			require.Len(t, got, len(tc.want), "wouldRefillSatisfy(%v) returned %d statuses %+v, want %d %+v", tc.consume, len(got), got, len(tc.want), tc.want)
			for i := range got {
				assert.Equal(t, tc.want[i], got[i], "wouldRefillSatisfy(%v) status %d", tc.consume, i)
			}
		})
	}
}

// BenchmarkTryConsume measures the hot path; every case should report
// 0 allocs/op, including the refill whose product overflows int64.
func BenchmarkTryConsume(b *testing.B) {
	for _, bc := range []struct {
		name      string
		state     store.BucketState
		requested int64
		now       int64
	}{
		{"success", state(50_000_000, 0, cap100k, cap100k, perMinMs), 1000, 203},
		{"denied", state(0, 0, cap100k, cap100k, perMinMs), 100_000, 203},
		{"overflowing refill", state(0, 0, cap10M, cap10M, perMinMs), 500, elevenDays},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var sink consumeResult
			for b.Loop() {
				sink = tryConsume(bc.state, bc.requested, bc.now)
			}
			_ = sink
		})
	}
}

func TestMilliTokensSaturates(t *testing.T) {
	t.Parallel()
	const maxTokens = (1<<63 - 1) / 1000
	for _, tc := range []struct{ in, want int64 }{
		{0, 0}, {1, 1000}, {-3, -3000},
		{maxTokens, maxTokens * 1000}, {maxTokens + 1, 1<<63 - 1},
		{-maxTokens, -maxTokens * 1000}, {-maxTokens - 1, -1 << 63},
		{1<<63 - 1, 1<<63 - 1}, {-1 << 63, -1 << 63},
	} {
		got := store.MilliTokens(tc.in)
		assert.Equal(t, tc.want, got, "MilliTokens(%d) = %d, want %d", tc.in, got, tc.want)
	}
}
