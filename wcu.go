package limiter

import (
	"github.com/zaelimiter/limiter/internal/bucketmath"
	"github.com/zaelimiter/limiter/store"
)

// The hidden write-capacity limit of the DynamoDB backend.
//
// DynamoDB serves at most about 1000 write units per second on one
// partition, so one hot (entity, resource) bucket item cannot take more
// writes than that. Every bucket item of the DynamoDB backend therefore
// carries a hidden limit named wcu (capacity 1000 tokens, refilling 1000
// per second), in the Python library's layout: a speculative write takes
// one token of it along with the request's amounts. When it is spent and
// refilling would not bring a token back, the item really takes more than
// 1000 writes per second, and the limiter doubles the (entity, resource)'s
// shard count so that its load spreads over more items (see
// [store.ShardStore]). The limit is the backend's business: it never appears in
// a [store.Bucket]'s States, in statuses, errors, availability or usage
// snapshots, and other backends have none.

// wcuRefill returns the write that credits base's wcu limit with its refill
// up to nowMs, as a normal write of the item does for every limit; ok is
// false when there is nothing to credit (no wcu limit, or nothing refilled).
func wcuRefill(base *store.Bucket, nowMs int64) (w store.LimitWrite, ok bool) {
	if base == nil || wcuOf(base) == nil {
		return store.LimitWrite{}, false
	}
	s := wcuOf(base)
	tk, _ := bucketmath.Refill(s.TokensMilli, base.RefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	if tk <= s.TokensMilli {
		return store.LimitWrite{}, false
	}
	return store.LimitWrite{Name: wcuLimitName, RefillMilli: tk - s.TokensMilli}, true
}

// wcuRefills reports whether b's wcu limit, refilled to nowMs, holds a
// write token: if so the item is not really above its write ceiling and the
// read-then-write path (which persists the refill) will do. An item
// without a wcu limit always refills.
func wcuRefills(b *store.Bucket, nowMs int64) bool {
	if b == nil || wcuOf(b) == nil {
		return true
	}
	s := wcuOf(b)
	tk, _ := bucketmath.Refill(s.TokensMilli, b.RefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return tk >= wcuWriteCostMilli
}

// wcuSpent reports whether b's wcu limit lacks a write token as stored (no
// refill): a speculative write of the item would be refused for it.
func wcuSpent(b *store.Bucket) bool {
	return b != nil && wcuOf(b) != nil && wcuOf(b).TokensMilli < wcuWriteCostMilli
}

// wcuOf returns the write-capacity state the repository read with b, nil
// when b holds none (an item of another backend, or a missing one).
func wcuOf(b *store.Bucket) *store.BucketState {
	if b == nil {
		return nil
	}
	s, _ := b.Private.(*store.BucketState)
	return s
}
