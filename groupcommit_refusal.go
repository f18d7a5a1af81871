// Layer 4, mechanics: the arithmetic of group commit's batches on their
// own: a batch's summed amounts and adjustment, and whether a member's
// write would have been refused alone by the item a refused batch
// returned.

package limiter

import (
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// specRefusal returns why a speculative write of consume alone would be
// refused by b at nowMs, or store.RefusedNone when it would apply: the condition
// of [store.SpeculativeStore.SpeculativeConsume] (the item exists and is not
// expired, limits holds the stored parameters, every named limit exists,
// positive amounts fit in the balance without refill), plus the DynamoDB
// backend's write-capacity token.
func specRefusal(b *store.Bucket, consume Consume, limits []store.Limit, nowMs int64) store.RefusalReason {
	if b == nil {
		return store.RefusedBucketMissing
	}
	if b.Expired(nowMs) {
		return store.RefusedExpired
	}
	for _, l := range limits {
		s, ok := b.State(l.Name)
		if !ok {
			return store.RefusedLimitMissing
		}
		if !sameParams(s, l) {
			return store.RefusedLimitsChanged
		}
	}
	app := false
	for name, amount := range consume {
		s, ok := b.State(name)
		if !ok {
			return store.RefusedLimitMissing
		}
		if amount > 0 && s.TokensMilli < bucketmath.SatMul(amount, 1000) {
			app = true
		}
	}
	wcu := wcuSpent(b)
	switch {
	case app && wcu:
		return store.RefusedBothExhausted
	case wcu:
		return store.RefusedWriteCapacity
	case app:
		return store.RefusedLimitExhausted
	}
	return store.RefusedNone
}

// refusedResult is the result of a speculative write refused by b for
// reason at nowMs.
func refusedResult(key store.BucketKey, b *store.Bucket, reason store.RefusalReason, nowMs int64) store.SpeculativeResult {
	res := store.SpeculativeResult{Key: key, Bucket: b, Reason: reason}
	if reason == store.RefusedWriteCapacity || reason == store.RefusedBothExhausted {
		res.CapacityRefills = wcuRefills(b, nowMs)
	}
	return res
}
