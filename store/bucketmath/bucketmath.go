// Package bucketmath is the token-bucket arithmetic of the bucket items:
// refill, retry-after, available tokens. It is pure: values in, values out,
// the current time as a parameter, integer millitokens and epoch
// milliseconds.
//
// In the formulas of this package, // is floor division (rounding toward
// negative infinity: −1500 millitokens are −2 tokens, not −1, where Go's /
// truncates) and % its remainder, which takes the sign of the divisor.
//
// # Exactness
//
// The formulas are defined on unbounded integers, and their intermediate
// values exceed int64: elapsed×refill_amount for an LLM limit of 10M
// tokens/min idle for 11 days is about 9.5e18. Every function here computes
// the exact result of its formula, using 128-bit intermediates (type
// Int128, built on math/bits, allocation-free).
//
// A result that fits the Go result type is the exact one. When it does
// not, the result saturates (never wraps):
//
//   - token and time results (int64) saturate at math.MinInt64 or
//     math.MaxInt64. Refilled balances are capped at the capacity, so only
//     huge debts or corrupt refill settings can reach the limits;
//   - durations saturate at math.MaxInt64 or math.MinInt64 nanoseconds.
//     A retry-after is positive for every sane bucket (positive refill
//     amount, non-negative refill period); it can be negative only when the
//     stored refill settings are negative.
//
// Saturation happens only at the end: intermediate values are exact, so for
// example Available (balance // 1000) is exact even when the balance itself
// is below math.MinInt64.
//
// # Division by zero
//
// A corrupt bucket item may store a refill period or amount of zero. These
// functions never panic on one; instead:
//
//   - a refill period of zero (with positive elapsed time) refills nothing:
//     the balance and last-refill time are returned unchanged;
//   - a refill amount of zero with a positive deficit gives a retry-after of
//     math.MaxInt64 ("never"): a bucket that does not refill never covers
//     the deficit. (A zero refill amount refills nothing.)
package bucketmath

import (
	"math"
	"math/bits"
	"time"
)

// Refill returns the balance and last-refill time of a bucket holding
// tokensMilli millitokens, last refilled at lastRefillMs, advanced to nowMs.
// It computes:
//
//	elapsed = now − last_refill; if elapsed <= 0: unchanged
//	add = elapsed × refill_amount // refill_period; if add == 0: unchanged
//	used = add × refill_period // refill_amount
//	return min(capacity, tokens + add), last_refill + used
//
// The clock advances only by the time that produced whole millitokens, so a
// sub-millitoken remainder is kept for the next refill. A zero or negative
// elapsed time and a zero refillPeriodMs return the inputs unchanged. A result below math.MinInt64 or above
// math.MaxInt64 saturates; with positive refill settings no result can
// leave the int64 range.
func Refill(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) (newTokensMilli, newLastRefillMs int64) {
	tokens, last := RefillExact(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs)
	return tokens.Int64Sat(), last
}

// RefillExact is Refill with the refilled balance returned exactly, as
// a 128-bit integer, so that callers can keep computing with it exactly.
// The returned last-refill time is already saturated to int64.
//
// Instead of add × refill_period // refill_amount it computes the same
// last_refill + used as now + (−rem) // refill_amount, where rem is
// elapsed × refill_amount % refill_period (taking the sign of the
// divisor): add × refill_period = elapsed × refill_amount − rem, and
// (k×a + y) // a = k + y // a for every integer k. All the bounds below hold
// for every int64 input.
func RefillExact(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) (Int128, int64) {
	tokens := Int128From(tokensMilli)
	// elapsed is exact: |elapsed| < 2^64.
	elapsed := Int128From(nowMs).Sub(Int128From(lastRefillMs))
	if elapsed.Sign() <= 0 || refillPeriodMs == 0 {
		return tokens, lastRefillMs
	}
	// 0 < elapsed < 2^64 and |refillAmountMilli| <= 2^63, so |x| < 2^127:
	// the product never overflows.
	x, _ := MulInt128(elapsed, refillAmountMilli)
	add, rem := DivModFloor(x, refillPeriodMs)
	if add.Sign() == 0 {
		return tokens, lastRefillMs
	}
	// |add| <= |x| <= 2^127 − 2^63, so tokens + add fits in 128 bits.
	tokens = tokens.Add(add)
	if c := Int128From(capacityMilli); tokens.Cmp(c) > 0 {
		tokens = c
	}
	// add != 0 implies refillAmountMilli != 0. |rem| < |refillPeriodMs|, so
	// −rem fits in int64.
	return tokens, AddSat(nowMs, FloorDiv(-rem, refillAmountMilli))
}

// RetryAfter returns how long a bucket refilling refillAmountMilli
// millitokens every refillPeriodMs milliseconds needs to regain deficitMilli
// millitokens: zero if deficitMilli <= 0, else t+1 milliseconds with
// t = deficit × refill_period // refill_amount (the extra millisecond
// guarantees the deficit is covered). Example: deficit 11000, amount 10000, period 60000 → 66.001s.
//
// A zero refillAmountMilli gives math.MaxInt64. A result beyond the range of time.Duration saturates at
// math.MaxInt64, or at math.MinInt64 for the negative results that only
// negative (corrupt) refill settings produce; it never wraps.
func RetryAfter(deficitMilli, refillAmountMilli, refillPeriodMs int64) time.Duration {
	return RetryAfterExact(Int128From(deficitMilli), refillAmountMilli, refillPeriodMs)
}

// RetryAfterExact is RetryAfter for a deficit of up to 128 bits (a
// deficit computed from requested×1000 and a refilled balance can exceed
// int64).
//
// To keep deficit × period within 128 bits it splits the deficit as
// q×amount + r (floor division, |r| < |amount|), so that
// t = q×period + (r×period) // amount exactly. If q×period does not fit in
// 128 bits, |t| > 2^126 and the result saturates with the sign of q×period.
func RetryAfterExact(deficit Int128, refillAmountMilli, refillPeriodMs int64) time.Duration {
	if deficit.Sign() <= 0 {
		return 0
	}
	if refillAmountMilli == 0 {
		return math.MaxInt64
	}
	q, r := DivModFloor(deficit, refillAmountMilli)
	qp, ok := MulInt128(q, refillPeriodMs)
	if !ok {
		if q.IsNeg() != (refillPeriodMs < 0) {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	// |r| < 2^63 and |refillPeriodMs| <= 2^63: |rp| < 2^126, no overflow.
	rp, _ := MulInt128(Int128From(r), refillPeriodMs)
	f, _ := DivModFloor(rp, refillAmountMilli)
	t := qp.AddSat(f)
	return DurationFromMillis(t.AddSat(Int128From(1)))
}

// Milli returns v×1000 exactly; |v×1000| < 2^73.
func Milli(v int64) Int128 {
	p, _ := MulInt128(Int128From(v), 1000)
	return p
}

// FloorDivMilli returns v // 1000 (floor division) saturated to int64.
func FloorDivMilli(v Int128) int64 {
	q, _ := DivModFloor(v, 1000)
	return q.Int64Sat()
}

// DurationFromMillis returns ms milliseconds as a Duration, saturated at
// math.MinInt64 and math.MaxInt64 nanoseconds.
func DurationFromMillis(ms Int128) time.Duration {
	const (
		maxMs = math.MaxInt64 / int64(time.Millisecond)
		minMs = math.MinInt64 / int64(time.Millisecond)
	)
	switch {
	case ms.Cmp(Int128From(maxMs)) > 0:
		return math.MaxInt64
	case ms.Cmp(Int128From(minMs)) < 0:
		return math.MinInt64
	}
	return time.Duration(int64(ms.lo)) * time.Millisecond
}

// AddSat returns a+b saturated at math.MinInt64 and math.MaxInt64.
func AddSat(a, b int64) int64 {
	s := a + b
	if (a < 0) == (b < 0) && (s < 0) != (a < 0) {
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return s
}

// AddMilli returns counter + tokens×1000, saturating instead of wrapping.
func AddMilli(counter, tokens int64) int64 {
	d := SatMul(tokens, 1000)
	s := counter + d
	if (d > 0 && s < counter) || (d < 0 && s > counter) {
		if d > 0 {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	return s
}

// SatMul returns a×b saturated to the int64 range.
func SatMul(a, b int64) int64 {
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

// FloorDiv returns a // b: a/b rounded toward negative infinity.
// b must not be zero.
func FloorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Int128 is a signed 128-bit integer in two's complement: hi holds the upper
// 64 bits (with the sign bit) and lo the lower 64 bits. The zero value is 0.
// Add and sub wrap around like Go's integer arithmetic; callers use them only
// where the result is known to fit, and addSat or subSat elsewhere.
type Int128 struct {
	hi, lo uint64
}

var (
	maxInt128 = Int128{hi: math.MaxInt64, lo: math.MaxUint64}
	minInt128 = Int128{hi: 1 << 63}
)

// Int128From returns v as an Int128.
func Int128From(v int64) Int128 {
	return Int128{hi: uint64(v >> 63), lo: uint64(v)}
}

// IsNeg reports whether a < 0.
func (a Int128) IsNeg() bool { return int64(a.hi) < 0 }

// Sign returns −1, 0 or +1 as a is negative, zero or positive.
func (a Int128) Sign() int {
	switch {
	case a.IsNeg():
		return -1
	case a.hi == 0 && a.lo == 0:
		return 0
	}
	return 1
}

// Cmp returns −1, 0 or +1 as a is less than, equal to or greater than b.
func (a Int128) Cmp(b Int128) int {
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

// Add returns a+b, wrapping on overflow.
func (a Int128) Add(b Int128) Int128 {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, carry)
	return Int128{hi: hi, lo: lo}
}

// Sub returns a−b, wrapping on overflow.
func (a Int128) Sub(b Int128) Int128 {
	lo, borrow := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, borrow)
	return Int128{hi: hi, lo: lo}
}

// Neg returns −a, wrapping for the minimum value (−2^127 stays −2^127).
func (a Int128) Neg() Int128 { return Int128{}.Sub(a) }

// AddSat returns a+b saturated at the Int128 limits.
func (a Int128) AddSat(b Int128) Int128 {
	s := a.Add(b)
	if a.IsNeg() == b.IsNeg() && s.IsNeg() != a.IsNeg() {
		if a.IsNeg() {
			return minInt128
		}
		return maxInt128
	}
	return s
}

// SubSat returns a−b saturated at the Int128 limits.
func (a Int128) SubSat(b Int128) Int128 {
	d := a.Sub(b)
	if a.IsNeg() != b.IsNeg() && d.IsNeg() != a.IsNeg() {
		if a.IsNeg() {
			return minInt128
		}
		return maxInt128
	}
	return d
}

// Mag returns |a| as an unsigned 128-bit number (hi, lo); |−2^127| = 2^127
// is representable.
func (a Int128) Mag() (hi, lo uint64) {
	if a.IsNeg() {
		a = a.Neg()
	}
	return a.hi, a.lo
}

// Int64Sat returns a as an int64, saturated at math.MinInt64 and
// math.MaxInt64.
func (a Int128) Int64Sat() int64 {
	switch {
	case a.hi == uint64(int64(a.lo)>>63):
		return int64(a.lo)
	case a.IsNeg():
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

// MulInt128 returns a×b and true, or the zero value and false when the
// product does not fit in an Int128.
func MulInt128(a Int128, b int64) (Int128, bool) {
	ahi, alo := a.Mag()
	bm := magInt64(b)
	h0, lo := bits.Mul64(alo, bm)
	h1, l1 := bits.Mul64(ahi, bm)
	hi, carry := bits.Add64(h0, l1, 0)
	if h1 != 0 || carry != 0 {
		return Int128{}, false
	}
	neg := a.IsNeg() != (b < 0)
	if hi >= 1<<63 { // |a×b| >= 2^127: only −2^127 fits
		if neg && hi == 1<<63 && lo == 0 {
			return minInt128, true
		}
		return Int128{}, false
	}
	p := Int128{hi: hi, lo: lo}
	if neg {
		p = p.Neg()
	}
	return p, true
}

// DivModFloor returns q = a // d and r = a % d (floor division): q is
// rounded toward negative infinity and r = a − q×d has the sign of d, with
// |r| < |d|. d must not be zero, and a // d must fit in an Int128 (it does
// unless a is −2^127 and d is −1).
func DivModFloor(a Int128, d int64) (Int128, int64) {
	ahi, alo := a.Mag()
	dm := magInt64(d)
	qhi, rhi := ahi/dm, ahi%dm
	qlo, rm := bits.Div64(rhi, alo, dm) // rhi < dm: no overflow panic
	neg := a.IsNeg() != (d < 0)
	q := Int128{hi: qhi, lo: qlo}
	if neg {
		q = q.Neg()
	}
	r := int64(rm) // rm < |d| <= 2^63 fits
	if a.IsNeg() {
		r = -r
	}
	if rm != 0 && neg {
		// Truncation rounded toward zero; floor is one lower, and the
		// remainder moves to the divisor's side.
		q = q.Sub(Int128From(1))
		r += d
	}
	return q, r
}

// FullAtMs returns the first millisecond at which a bucket holding
// tokensMilli, last refilled at lastRefillMs, has refilled to its capacity:
// lastRefillMs + ⌈(capacity − tokens) × period / amount⌉, the first time at
// which [Refill] caps the balance. It is math.MinInt64 when the bucket is
// already full (tokens ≥ capacity: capped at any time), and math.MaxInt64
// when it never fills (a non-positive refill amount or period). Otherwise
// the result saturates at math.MaxInt64.
//
// A take of amount from the stored balance, without moving the refill
// time, is exact at nowMs if and only if nowMs < FullAtMs: the refill up to
// nowMs is then not capped, so refilling later from the same refill time
// gives the same balance as refilling first.
func FullAtMs(tokensMilli, lastRefillMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	if tokensMilli >= capacityMilli {
		return math.MinInt64
	}
	if refillAmountMilli <= 0 || refillPeriodMs <= 0 {
		return math.MaxInt64
	}
	// 0 < deficit < 2^64 and 0 < period < 2^63: the product fits.
	deficit := Int128From(capacityMilli).Sub(Int128From(tokensMilli))
	x, _ := MulInt128(deficit, refillPeriodMs)
	q, r := DivModFloor(x, refillAmountMilli)
	if r != 0 {
		q = q.Add(Int128From(1))
	}
	return Int128From(lastRefillMs).AddSat(q).Int64Sat()
}

// StoredFullAtMs is the fa a write stores for a limit it leaves holding
// tokensMilli at refill time lastRefillMs: [FullAtMs], or lastRefillMs
// when the limit is full. Both are lower bounds of the time the limit is
// full (a full limit was full by its refill time); the refill time lets a
// take that the speculative write makes at that refill time (rf ≥ now)
// move fa to the limit's exact full-at time, where the minimum would
// leave it in the past and refuse the next take.
func StoredFullAtMs(tokensMilli, lastRefillMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	return max(FullAtMs(tokensMilli, lastRefillMs, capacityMilli, refillAmountMilli, refillPeriodMs), lastRefillMs)
}

// TakeDelayMs returns ⌊amount × period / refill amount⌋ milliseconds, by
// which taking amountMilli (> 0) from a bucket at least delays the time it
// is full; 0 for a non-positive amount or non-positive refill settings.
// Saturates at math.MaxInt64.
func TakeDelayMs(amountMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	if amountMilli <= 0 || refillAmountMilli <= 0 || refillPeriodMs <= 0 {
		return 0
	}
	x, _ := MulInt128(Int128From(amountMilli), refillPeriodMs)
	q, _ := DivModFloor(x, refillAmountMilli)
	return q.Int64Sat()
}

// GiveDelayMs returns ⌈amount × period / refill amount⌉ milliseconds, by
// which giving amountMilli (> 0) back to a bucket at most advances the time
// it is full; 0 for a non-positive amount, math.MaxInt64 for non-positive
// refill settings (the advance is then unbounded). Saturates at
// math.MaxInt64.
func GiveDelayMs(amountMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	if amountMilli <= 0 {
		return 0
	}
	if refillAmountMilli <= 0 || refillPeriodMs <= 0 {
		return math.MaxInt64
	}
	x, _ := MulInt128(Int128From(amountMilli), refillPeriodMs)
	q, r := DivModFloor(x, refillAmountMilli)
	if r != 0 {
		q = q.Add(Int128From(1))
	}
	return q.Int64Sat()
}
