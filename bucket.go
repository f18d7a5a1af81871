package limiter

// This file is the token-bucket math, a function-by-function port of the
// original's bucket.py. It is pure: values in, values out, the
// current time as a parameter, integer millitokens and epoch milliseconds.
//
// # Exactness
//
// Python integers have arbitrary precision, so the original never overflows:
// elapsed×refill_amount for an LLM limit of 10M tokens/min idle for 11 days
// is about 9.5e18, beyond int64. Every function here computes the exact
// arbitrary-precision result of the Python formula, using 128-bit
// intermediates (type int128, built on math/bits, allocation-free), and uses
// floor division wherever Python uses // (Go's / truncates: −1500 millitokens
// is −2 tokens, not −1).
//
// Results equal the original's whenever the exact result fits the Go result
// type. When it does not, the result saturates (never wraps):
//
//   - token and time results (int64) saturate at math.MinInt64 or
//     math.MaxInt64. Refilled balances are capped at the capacity, so only
//     huge debts or corrupt refill settings can reach the limits;
//   - durations saturate at math.MaxInt64 or math.MinInt64 nanoseconds.
//     A retry-after is positive for every sane bucket (positive refill
//     amount, non-negative refill period); it can be negative only when the
//     stored refill settings are negative, exactly as in the original.
//
// Saturation happens only at the end: intermediate values are exact, so for
// example Available (balance // 1000) is exact even when the balance itself
// is below math.MinInt64.
//
// # Division by zero
//
// The original raises ZeroDivisionError on corrupt buckets (a stored refill
// period or amount of zero). These functions never panic; instead:
//
//   - a refill period of zero (with positive elapsed time) refills nothing:
//     the balance and last-refill time are returned unchanged;
//   - a refill amount of zero with a positive deficit gives a retry-after of
//     math.MaxInt64 ("never"): a bucket that does not refill never covers
//     the deficit. (A zero refill amount refills nothing, as in the original.)

import (
	"math"
	"math/bits"
	"time"
)

// refillBucket returns the balance and last-refill time of a bucket holding
// tokensMilli millitokens, last refilled at lastRefillMs, advanced to nowMs.
// It is the original's refill_bucket:
//
//	elapsed = now − last_refill; if elapsed <= 0: unchanged
//	add = elapsed × refill_amount // refill_period; if add == 0: unchanged
//	used = add × refill_period // refill_amount
//	return min(capacity, tokens + add), last_refill + used
//
// The clock advances only by the time that produced whole millitokens, so a
// sub-millitoken remainder is kept for the next refill. A zero or negative
// elapsed time and a zero refillPeriodMs (where the original divides by zero)
// return the inputs unchanged. A result below math.MinInt64 or above
// math.MaxInt64 saturates; with positive refill settings no result can
// leave the int64 range.
func refillBucket(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) (newTokensMilli, newLastRefillMs int64) {
	tokens, last := refillExact(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs)
	return tokens.int64Sat(), last
}

// refillExact is refillBucket with the refilled balance returned exactly, as
// a 128-bit integer, so that callers can keep computing with it the way
// Python does. The returned last-refill time is already saturated to int64.
//
// Instead of add × refill_period // refill_amount it computes the same
// last_refill + used as now + (−rem) // refill_amount, where rem is
// elapsed × refill_amount mod refill_period (Python's %, taking the sign of the
// divisor): add × refill_period = elapsed × refill_amount − rem, and
// (k×a + y) // a = k + y // a for every integer k. All the bounds below hold
// for every int64 input.
func refillExact(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) (int128, int64) {
	tokens := int128From(tokensMilli)
	// elapsed is exact: |elapsed| < 2^64.
	elapsed := int128From(nowMs).sub(int128From(lastRefillMs))
	if elapsed.sign() <= 0 || refillPeriodMs == 0 {
		return tokens, lastRefillMs
	}
	// 0 < elapsed < 2^64 and |refillAmountMilli| <= 2^63, so |x| < 2^127:
	// the product never overflows.
	x, _ := mulInt128(elapsed, refillAmountMilli)
	add, rem := divModFloor(x, refillPeriodMs)
	if add.sign() == 0 {
		return tokens, lastRefillMs
	}
	// |add| <= |x| <= 2^127 − 2^63, so tokens + add fits in 128 bits.
	tokens = tokens.add(add)
	if c := int128From(capacityMilli); tokens.cmp(c) > 0 {
		tokens = c
	}
	// add != 0 implies refillAmountMilli != 0. |rem| < |refillPeriodMs|, so
	// −rem fits in int64.
	return tokens, addInt64Sat(nowMs, floorDiv(-rem, refillAmountMilli))
}

// consumeResult is the outcome of tryConsume, the original's ConsumeResult.
type consumeResult struct {
	// Success reports whether the refilled balance covered the request.
	Success bool
	// NewTokensMilli is the balance after the refill and, on success, after
	// taking the request.
	NewTokensMilli int64
	// NewLastRefillMs is the drift-compensated last-refill time.
	NewLastRefillMs int64
	// Available is the refilled balance in whole tokens before the request
	// (floored, negative when the bucket is in debt).
	Available int64
	// RetryAfter is how long until the refill covers the deficit; zero on
	// success.
	RetryAfter time.Duration
}

// tryConsume refills s to nowMs and takes requested whole tokens if the
// refilled balance covers them. It is the original's try_consume: on
// failure the balance is the refilled balance and RetryAfter is
// calculateRetryAfter(requested×1000 − balance, …). A zero request fails when
// the refilled balance is negative; a negative request always succeeds and
// adds tokens without a cap. s is not modified.
func tryConsume(s BucketState, requested, nowMs int64) consumeResult {
	cur, last := refillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	req := int128Milli(requested)
	res := consumeResult{
		NewLastRefillMs: last,
		Available:       floorDivMilli(cur),
	}
	if cur.cmp(req) >= 0 {
		res.Success = true
		// 0 <= cur − req < 2^63 + 2^73: no overflow.
		res.NewTokensMilli = cur.sub(req).int64Sat()
		return res
	}
	res.NewTokensMilli = cur.int64Sat()
	res.RetryAfter = retryAfterExact(req.subSat(cur), s.RefillAmountMilli, s.RefillPeriodMs)
	return res
}

// forceConsume refills s to nowMs and then takes amount whole tokens without
// any check: the balance may go negative (debt), and a negative amount returns
// tokens beyond the capacity until the next refill caps the balance. It is the
// original's force_consume. s is not modified.
func forceConsume(s BucketState, amount, nowMs int64) (newTokensMilli, newLastRefillMs int64) {
	cur, last := refillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return cur.subSat(int128Milli(amount)).int64Sat(), last
}

// sameParams reports whether s is stored with l's capacity, refill amount
// and refill period.
func sameParams(s BucketState, l Limit) bool {
	return s.CapacityMilli == satMul(l.Capacity, 1000) && s.RefillAmountMilli == satMul(l.RefillAmount, 1000) &&
		s.RefillPeriodMs == l.RefillPeriod.Milliseconds()
}

// applyLimit returns s as limit l governs it from nowMs on. When s is
// stored with l's parameters it is returned unchanged. Otherwise the limit
// changed: s is first refilled to nowMs under its stored parameters (the
// tokens earned before the change are kept), then takes l's parameters, and
// a balance above l's capacity is cut down to it. A raised limit thus keeps
// the balance and refills at the new rate; a lowered one holds at most the
// new capacity at once. changed reports whether the parameters differed.
func applyLimit(s BucketState, l Limit, nowMs int64) (out BucketState, changed bool) {
	if sameParams(s, l) {
		return s, false
	}
	s.TokensMilli, s.LastRefillMs = refillBucket(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs = satMul(l.Capacity, 1000), satMul(l.RefillAmount, 1000), l.RefillPeriod.Milliseconds()
	s.TokensMilli = min(s.TokensMilli, s.CapacityMilli)
	return s, true
}

// refund returns a balance of tokensMilli after giving back refundMilli (≥
// 0), never above capacityMilli (a balance already above it is left as it
// is): a refund cannot create tokens the bucket could not hold.
func refund(tokensMilli, refundMilli, capacityMilli int64) int64 {
	if tokensMilli >= capacityMilli {
		return tokensMilli
	}
	return min(addInt64Sat(tokensMilli, refundMilli), capacityMilli)
}

// calculateAvailable returns the whole tokens of s refilled to nowMs
// (floored; negative when the bucket is in debt). It is the original's
// calculate_available.
func calculateAvailable(s BucketState, nowMs int64) int64 {
	cur, _ := refillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return floorDivMilli(cur)
}

// calculateTimeUntilAvailable returns how long until s holds needed whole
// tokens: zero if the balance refilled to nowMs already covers them, else the
// retry-after of the deficit. It is the original's
// calculate_time_until_available.
func calculateTimeUntilAvailable(s BucketState, needed, nowMs int64) time.Duration {
	cur, _ := refillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	need := int128Milli(needed)
	if cur.cmp(need) >= 0 {
		return 0
	}
	return retryAfterExact(need.subSat(cur), s.RefillAmountMilli, s.RefillPeriodMs)
}

// calculateRetryAfter returns how long a bucket refilling refillAmountMilli
// millitokens every refillPeriodMs milliseconds needs to regain deficitMilli
// millitokens. It is the original's calculate_retry_after:
// zero if deficitMilli <= 0, else t+1 milliseconds with
// t = deficit × refill_period // refill_amount (the original returns the
// float seconds (t+1)/1000; the extra millisecond guarantees the deficit is
// covered). Example: deficit 11000, amount 10000, period 60000 → 66.001s.
//
// A zero refillAmountMilli (a division by zero in the original) gives
// math.MaxInt64. A result beyond the range of time.Duration saturates at
// math.MaxInt64, or at math.MinInt64 for the negative results that only
// negative (corrupt) refill settings produce; it never wraps.
func calculateRetryAfter(deficitMilli, refillAmountMilli, refillPeriodMs int64) time.Duration {
	return retryAfterExact(int128From(deficitMilli), refillAmountMilli, refillPeriodMs)
}

// retryAfterExact is calculateRetryAfter for a deficit of up to 128 bits (a
// deficit computed from requested×1000 and a refilled balance can exceed
// int64).
//
// To keep deficit × period within 128 bits it splits the deficit as
// q×amount + r (floor division, |r| < |amount|), so that
// t = q×period + (r×period) // amount exactly. If q×period does not fit in
// 128 bits, |t| > 2^126 and the result saturates with the sign of q×period.
func retryAfterExact(deficit int128, refillAmountMilli, refillPeriodMs int64) time.Duration {
	if deficit.sign() <= 0 {
		return 0
	}
	if refillAmountMilli == 0 {
		return math.MaxInt64
	}
	q, r := divModFloor(deficit, refillAmountMilli)
	qp, ok := mulInt128(q, refillPeriodMs)
	if !ok {
		if q.isNeg() != (refillPeriodMs < 0) {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	// |r| < 2^63 and |refillPeriodMs| <= 2^63: |rp| < 2^126, no overflow.
	rp, _ := mulInt128(int128From(r), refillPeriodMs)
	f, _ := divModFloor(rp, refillAmountMilli)
	t := qp.addSat(f)
	return durationFromMillis(t.addSat(int128From(1)))
}

// buildLimitStatus returns the status of requesting requested tokens of limit
// from the bucket state s at nowMs, as the original's build_limit_status
// s is not modified.
func buildLimitStatus(entityID, resource string, limit Limit, s BucketState, requested, nowMs int64) LimitStatus {
	res := tryConsume(s, requested, nowMs)
	return LimitStatus{
		EntityID:   entityID,
		Resource:   resource,
		LimitName:  limit.Name,
		Limit:      limit,
		Available:  res.Available,
		Requested:  requested,
		Exceeded:   !res.Success,
		RetryAfter: res.RetryAfter,
	}
}

// wouldRefillSatisfy reports whether refilling buckets to nowMs would let
// consume succeed on every limit it asks for, and returns the status of each
// such limit in the order of buckets. It is the original's
// would_refill_satisfy: states whose amount in consume is
// zero or absent are skipped (negative amounts are checked), and the limit of
// each status is derived from the state with limitFromBucketState. Unlike the
// original, the hidden wcu limit is always skipped, so it never reaches a
// status (the original builds one for it and fails). With no status to
// check it reports true.
func wouldRefillSatisfy(buckets []BucketState, consume Consume, nowMs int64) (bool, []LimitStatus) {
	ok := true
	var statuses []LimitStatus
	for _, s := range buckets {
		if s.LimitName == wcuLimitName {
			continue
		}
		amount := consume[s.LimitName]
		if amount == 0 {
			continue
		}
		st := buildLimitStatus(s.EntityID, s.Resource, limitFromBucketState(s), s, amount, nowMs)
		if st.Exceeded {
			ok = false
		}
		statuses = append(statuses, st)
	}
	return ok, statuses
}

// int128Milli returns v×1000 exactly; |v×1000| < 2^73.
func int128Milli(v int64) int128 {
	p, _ := mulInt128(int128From(v), 1000)
	return p
}

// floorDivMilli returns v // 1000 (floor division) saturated to int64.
func floorDivMilli(v int128) int64 {
	q, _ := divModFloor(v, 1000)
	return q.int64Sat()
}

// durationFromMillis returns ms milliseconds as a Duration, saturated at
// math.MinInt64 and math.MaxInt64 nanoseconds.
func durationFromMillis(ms int128) time.Duration {
	const (
		maxMs = math.MaxInt64 / int64(time.Millisecond)
		minMs = math.MinInt64 / int64(time.Millisecond)
	)
	switch {
	case ms.cmp(int128From(maxMs)) > 0:
		return math.MaxInt64
	case ms.cmp(int128From(minMs)) < 0:
		return math.MinInt64
	}
	return time.Duration(int64(ms.lo)) * time.Millisecond
}

// addInt64Sat returns a+b saturated at math.MinInt64 and math.MaxInt64.
func addInt64Sat(a, b int64) int64 {
	s := a + b
	if (a < 0) == (b < 0) && (s < 0) != (a < 0) {
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return s
}

// addMilli returns counter + tokens×1000, saturating instead of wrapping.
func addMilli(counter, tokens int64) int64 {
	d := satMul(tokens, 1000)
	s := counter + d
	if (d > 0 && s < counter) || (d < 0 && s > counter) {
		if d > 0 {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	return s
}

// satMul returns a×b saturated to the int64 range.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	p := a * b
	if p/b != a || (a == -1 && b == -1<<63) || (b == -1 && a == -1<<63) {
		if (a < 0) != (b < 0) {
			return -1 << 63
		}
		return 1<<63 - 1
	}
	return p
}

// floorDiv returns a/b rounded toward negative infinity (Python's //).
// b must not be zero.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// int128 is a signed 128-bit integer in two's complement: hi holds the upper
// 64 bits (with the sign bit) and lo the lower 64 bits. The zero value is 0.
// add and sub wrap around like Go's integer arithmetic; callers use them only
// where the result is known to fit, and addSat or subSat elsewhere.
type int128 struct {
	hi, lo uint64
}

var (
	maxInt128 = int128{hi: math.MaxInt64, lo: math.MaxUint64}
	minInt128 = int128{hi: 1 << 63}
)

// int128From returns v as an int128.
func int128From(v int64) int128 {
	return int128{hi: uint64(v >> 63), lo: uint64(v)}
}

// isNeg reports whether a < 0.
func (a int128) isNeg() bool { return int64(a.hi) < 0 }

// sign returns −1, 0 or +1 as a is negative, zero or positive.
func (a int128) sign() int {
	switch {
	case a.isNeg():
		return -1
	case a.hi == 0 && a.lo == 0:
		return 0
	}
	return 1
}

// cmp returns −1, 0 or +1 as a is less than, equal to or greater than b.
func (a int128) cmp(b int128) int {
	switch {
	case a.hi != b.hi:
		if int64(a.hi) < int64(b.hi) {
			return -1
		}
		return 1
	case a.lo != b.lo:
		if a.lo < b.lo {
			return -1
		}
		return 1
	}
	return 0
}

// add returns a+b, wrapping on overflow.
func (a int128) add(b int128) int128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return int128{hi: hi, lo: lo}
}

// sub returns a−b, wrapping on overflow.
func (a int128) sub(b int128) int128 {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return int128{hi: hi, lo: lo}
}

// neg returns −a, wrapping for the minimum value (−2^127 stays −2^127).
func (a int128) neg() int128 { return int128{}.sub(a) }

// addSat returns a+b saturated at the int128 limits.
func (a int128) addSat(b int128) int128 {
	s := a.add(b)
	if a.isNeg() == b.isNeg() && s.isNeg() != a.isNeg() {
		if a.isNeg() {
			return minInt128
		}
		return maxInt128
	}
	return s
}

// subSat returns a−b saturated at the int128 limits.
func (a int128) subSat(b int128) int128 {
	d := a.sub(b)
	if a.isNeg() != b.isNeg() && d.isNeg() != a.isNeg() {
		if a.isNeg() {
			return minInt128
		}
		return maxInt128
	}
	return d
}

// mag returns |a| as an unsigned 128-bit number (hi, lo); |−2^127| = 2^127
// is representable.
func (a int128) mag() (hi, lo uint64) {
	if a.isNeg() {
		a = a.neg()
	}
	return a.hi, a.lo
}

// int64Sat returns a as an int64, saturated at math.MinInt64 and
// math.MaxInt64.
func (a int128) int64Sat() int64 {
	switch {
	case a.hi == uint64(int64(a.lo)>>63):
		return int64(a.lo)
	case a.isNeg():
		return math.MinInt64
	}
	return math.MaxInt64
}

// magInt64 returns |v| as a uint64; |math.MinInt64| = 2^63 is representable.
func magInt64(v int64) uint64 {
	if v < 0 {
		return -uint64(v)
	}
	return uint64(v)
}

// mulInt128 returns a×b and true, or the zero value and false when the
// product does not fit in an int128.
func mulInt128(a int128, b int64) (int128, bool) {
	ahi, alo := a.mag()
	bm := magInt64(b)
	h0, lo := bits.Mul64(alo, bm)
	h1, l1 := bits.Mul64(ahi, bm)
	hi, carry := bits.Add64(h0, l1, 0)
	if h1 != 0 || carry != 0 {
		return int128{}, false
	}
	neg := a.isNeg() != (b < 0)
	if hi >= 1<<63 { // |a×b| >= 2^127: only −2^127 fits
		if neg && hi == 1<<63 && lo == 0 {
			return minInt128, true
		}
		return int128{}, false
	}
	p := int128{hi: hi, lo: lo}
	if neg {
		p = p.neg()
	}
	return p, true
}

// divModFloor returns q = a // d and r = a % d with Python's semantics: q is
// rounded toward negative infinity and r = a − q×d has the sign of d, with
// |r| < |d|. d must not be zero, and a // d must fit in an int128 (it does
// unless a is −2^127 and d is −1).
func divModFloor(a int128, d int64) (int128, int64) {
	ahi, alo := a.mag()
	dm := magInt64(d)
	qhi, rhi := ahi/dm, ahi%dm
	qlo, rm := bits.Div64(rhi, alo, dm) // rhi < dm: no overflow panic
	neg := a.isNeg() != (d < 0)
	q := int128{hi: qhi, lo: qlo}
	if neg {
		q = q.neg()
	}
	r := int64(rm) // rm < |d| <= 2^63 fits
	if a.isNeg() {
		r = -r
	}
	if rm != 0 && neg {
		// Truncation rounded toward zero; floor is one lower, and the
		// remainder moves to the divisor's side.
		q = q.sub(int128From(1))
		r += d
	}
	return q, r
}
