package store

import "github.com/zaelimiter/limiter/store/bucketmath"

// RefillDue reports whether taking consume from b at nowMs must refill b
// first to be exact: some limit of b with a positive amount in consume may
// have refilled to its capacity by nowMs (nowMs ≥ [bucketmath.FullAtMs] of
// its state). Taking from the stored balances then would let the capped
// refill credit the tokens taken back. Limits b lacks, and zero or
// negative amounts, are ignored.
func RefillDue(b *Bucket, consume Consume, nowMs int64) bool {
	if b == nil {
		return false
	}
	for _, s := range b.States {
		if consume[s.LimitName] > 0 && nowMs >= bucketmath.FullAtMs(s.TokensMilli, b.RefillMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs) {
			return true
		}
	}
	return false
}

// ChargeRefillDue reports whether an adjustment of b at nowMs must refill
// b first: a charge (a positive ConsumedMilli) on a limit that may have
// refilled to its capacity by nowMs. Taken from the stored balance, the
// charge would be absorbed by the cap of the refill applied later; taken
// after the refill, it is owed as an exact bucket owes it. (A refund gives
// the same balance either way: both are capped at the capacity.)
func ChargeRefillDue(b *Bucket, limits []LimitWrite, nowMs int64) bool {
	if b == nil {
		return false
	}
	for _, l := range limits {
		if l.ConsumedMilli <= 0 {
			continue
		}
		if s, ok := b.State(l.Name); ok && nowMs >= bucketmath.FullAtMs(s.TokensMilli, b.RefillMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs) {
			return true
		}
	}
	return false
}

// RefillTo refills every limit of b to nowMs in place, each balance capped
// at its capacity ([bucketmath.Refill]), and moves the refill timestamp to
// nowMs (never back: a nowMs before it leaves it, and the balances, as
// they are). A sub-millitoken remainder of the refill is dropped, as a
// read-then-write does. b must be the backend's own copy.
func (b *Bucket) RefillTo(nowMs int64) {
	if nowMs <= b.RefillMs {
		return
	}
	for i := range b.States {
		s := &b.States[i]
		s.TokensMilli, _ = bucketmath.Refill(s.TokensMilli, b.RefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		s.LastRefillMs = nowMs
	}
	b.RefillMs = nowMs
}
