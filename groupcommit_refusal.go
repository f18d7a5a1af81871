// Layer 4, mechanics: the arithmetic of group commit's batches on their
// own: a batch's summed amounts and adjustment, and whether a member's
// write would have been refused alone by the item a refused batch
// returned.

package limiter

import (
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// capacities returns the capacity of each limit, in millitokens.
func capacities(limits []Limit) map[string]int64 {
	if len(limits) == 0 {
		return nil
	}
	caps := make(map[string]int64, len(limits))
	for _, l := range limits {
		caps[l.Name] = bucketmath.SatMul(l.Capacity, 1000)
	}
	return caps
}

// adjustDeltaWrite is the store.WriteAdjust of delta (tokens) on key, limits in
// sorted order, zero deltas left out, with the capacity hints caps.
func adjustDeltaWrite(key store.BucketKey, nowMs int64, delta Consume, caps map[string]int64) store.BucketWrite {
	w := store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: nowMs}
	for _, name := range consumeNames(delta) {
		if d := delta[name]; d != 0 {
			w.Limits = append(w.Limits, store.LimitWrite{Name: name, ConsumedMilli: bucketmath.SatMul(d, 1000), CapacityMilli: caps[name]})
		}
	}
	return w
}

// addConsume adds c to sum, per limit.
func addConsume(sum, c Consume) {
	for name, v := range c {
		sum[name] += v
	}
}

// specRefusal returns why a speculative write of consume alone would be
// refused by b at nowMs, or store.RefusedNone when it would apply: the condition
// of [store.SpeculativeStore.SpeculativeConsume] (the item exists and is not
// expired, limits holds the stored parameters, every named limit exists,
// positive amounts fit in the balance without refill), plus the DynamoDB
// backend's write-capacity token.
func specRefusal(b *store.Bucket, consume Consume, limits []Limit, nowMs int64) store.RefusalReason {
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
