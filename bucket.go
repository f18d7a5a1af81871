// Layer 1, math and models: the token-bucket operations on a bucket state
// (consume, refund, available, retry-after), on the exact arithmetic of
// package bucketmath, the DynamoDB backend's hidden write-capacity limit,
// and the TTLs of bucket items (the time to fill, a debt, an adjustment).

package limiter

import (
	"math/rand/v2"
	"time"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// consumeResult is the outcome of tryConsume.
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
// refilled balance covers them. On failure the balance is the refilled
// balance and RetryAfter is
// bucketmath.RetryAfter(requested×1000 − balance, …). A zero request fails when
// the refilled balance is negative; a negative request always succeeds and
// adds tokens without a cap. s is not modified.
func tryConsume(s store.BucketState, requested, nowMs int64) consumeResult {
	cur, last := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	req := bucketmath.Milli(requested)
	res := consumeResult{
		NewLastRefillMs: last,
		Available:       bucketmath.FloorDivMilli(cur),
	}
	if cur.Cmp(req) >= 0 {
		res.Success = true
		// 0 <= cur − req < 2^63 + 2^73: no overflow.
		res.NewTokensMilli = cur.Sub(req).Int64Sat()
		return res
	}
	res.NewTokensMilli = cur.Int64Sat()
	res.RetryAfter = bucketmath.RetryAfterExact(req.SubSat(cur), s.RefillAmountMilli, s.RefillPeriodMs)
	return res
}

// forceConsume refills s to nowMs and then takes amount whole tokens without
// any check: the balance may go negative (debt), and a negative amount returns
// tokens beyond the capacity until the next refill caps the balance. s is
// not modified.
func forceConsume(s store.BucketState, amount, nowMs int64) (newTokensMilli, newLastRefillMs int64) {
	cur, last := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return cur.SubSat(bucketmath.Milli(amount)).Int64Sat(), last
}

// sameParams reports whether s is stored with l's capacity, refill amount
// and refill period.
func sameParams(s store.BucketState, l store.Limit) bool {
	return s.CapacityMilli == bucketmath.SatMul(l.Capacity, 1000) && s.RefillAmountMilli == bucketmath.SatMul(l.RefillAmount, 1000) &&
		s.RefillPeriodMs == l.RefillPeriod.Milliseconds()
}

// applyLimit returns s as limit l governs it from nowMs on. When s is
// stored with l's parameters it is returned unchanged. Otherwise the limit
// changed: s is first refilled to nowMs under its stored parameters (the
// tokens earned before the change are kept), then takes l's parameters, and
// a balance above l's capacity is cut down to it. A raised limit thus keeps
// the balance and refills at the new rate; a lowered one holds at most the
// new capacity at once. changed reports whether the parameters differed.
//
// Two kinds of bucket differ. The bucket of a calendar limit's period
// keeps what the period spent: its balance moves by the change of
// capacity (a monthly budget lowered from 500 to 400 after 100 spent
// leaves 300, raised to 600 leaves 500), in debt when the period spent
// more than the new budget. A prepaid balance is money paid in: it keeps
// its balance whatever its capacity (the ceiling of top-ups) becomes.
func applyLimit(s store.BucketState, l store.Limit, nowMs int64) (out store.BucketState, changed bool) {
	if sameParams(s, l) {
		return s, false
	}
	// The refill up to the change is paid out at the old rate, its
	// sub-millitoken remainder dropped: the time before nowMs never earns
	// at the new rate.
	s.TokensMilli, _ = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	s.LastRefillMs = max(s.LastRefillMs, nowMs)
	oldCapacity := s.CapacityMilli
	s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs = bucketmath.SatMul(l.Capacity, 1000), bucketmath.SatMul(l.RefillAmount, 1000), l.RefillPeriod.Milliseconds()
	switch {
	case l.Prepaid:
	case l.IsPeriodBucket():
		s.TokensMilli = min(bucketmath.AddSat(s.TokensMilli, bucketmath.AddSat(s.CapacityMilli, -oldCapacity)), s.CapacityMilli)
	default:
		s.TokensMilli = min(s.TokensMilli, s.CapacityMilli)
	}
	return s, true
}

// calculateAvailable returns the whole tokens of s refilled to nowMs
// (floored; negative when the bucket is in debt).
func calculateAvailable(s store.BucketState, nowMs int64) int64 {
	cur, _ := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return bucketmath.FloorDivMilli(cur)
}

// calculateTimeUntilAvailable returns how long until s holds needed whole
// tokens: zero if the balance refilled to nowMs already covers them, else the
// retry-after of the deficit.
func calculateTimeUntilAvailable(s store.BucketState, needed, nowMs int64) time.Duration {
	cur, _ := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	need := bucketmath.Milli(needed)
	if cur.Cmp(need) >= 0 {
		return 0
	}
	return bucketmath.RetryAfterExact(need.SubSat(cur), s.RefillAmountMilli, s.RefillPeriodMs)
}

// buildLimitStatus returns the status of requesting requested tokens of limit
// from the bucket state s at nowMs, as tryConsume decides it. s is not
// modified.
func buildLimitStatus(entityID, resource string, limit store.Limit, s store.BucketState, requested, nowMs int64) LimitStatus {
	res := tryConsume(s, requested, nowMs)
	return LimitStatus{
		EntityID:   entityID,
		Resource:   resource,
		LimitName:  limit.Name,
		Limit:      Limit(limit),
		Available:  res.Available,
		Requested:  requested,
		Exceeded:   !res.Success,
		RetryAfter: res.RetryAfter,
	}
}

// wouldRefillSatisfy reports whether refilling buckets to nowMs would let
// consume succeed on every limit it asks for, and returns the status of each
// such limit in the order of buckets. Only positive amounts gate admission,
// on every path: states whose amount in consume is not positive (a refund,
// zero or absent) are skipped, and the limit of
// each status is derived from the state with limitFromBucketState. The
// hidden wcu limit is always skipped, so it never reaches a status. With no
// status to check it reports true.
func wouldRefillSatisfy(buckets []store.BucketState, consume Consume, nowMs int64) (bool, []LimitStatus) {
	ok := true
	var statuses []LimitStatus
	for _, s := range buckets {
		if s.LimitName == wcuLimitName {
			continue
		}
		amount := consume[s.LimitName]
		if amount <= 0 {
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

// The hidden write-capacity limit of the DynamoDB backend.
//
// DynamoDB serves at most about 1000 write units per second on one
// partition, so one hot (entity, resource) bucket item cannot take more
// writes than that. Every bucket item of the DynamoDB backend therefore
// carries a hidden limit named wcu (capacity 1000 tokens, refilling 1000
// per second), part of the shared table's layout: a speculative write takes
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

// itemExtras is what the DynamoDB backend reads of a bucket item besides
// its [store.Bucket] ([store.Bucket.Private]): the hidden wcu limit, and
// per state the exact state of the speculative write.
type itemExtras struct {
	wcu *store.BucketState // nil when the item has none
	// exact holds one entry per state of the bucket, in order.
	exact []exactState
	// contended counts the writes from this item, as the repository keeps
	// it, still to be made full writes (fullWrite): writes of the item
	// were refused lately because other writers moved it (see
	// contendedWrites).
	contended uint8
	// newestID and priorID are the item's write identifiers wid0 and
	// wid1 (zero when missing): see ddbschema.NewestWriteIDs.
	newestID, priorID ddbschema.WriteID
}

// wrote shifts x's write identifiers as a write carrying id shifts the
// item's, where a slot whose predecessor is missing takes id itself
// (nothing for a nil x or a zero id, which no write stores).
func (x *itemExtras) wrote(id ddbschema.WriteID) {
	if x == nil || id == 0 {
		return
	}
	prior := x.newestID
	if prior == 0 {
		prior = id
	}
	x.newestID, x.priorID = id, prior
}

// contendedWrites is how many writes from a kept item are full writes
// after a write of it was refused because another writer moved it: one
// unchanged-item write in so many asks whether the others have stopped.
const contendedWrites = 8

// contendedOf returns b's count of full writes to come (0 for nil).
func contendedOf(b *store.Bucket) uint8 {
	if x := extrasOf(b); x != nil {
		return x.contended
	}
	return 0
}

// exactState is what the speculative write of a limit conditions itself on
// (see ddbschema.BucketLimit): whether its stored fa can be trusted (fa and
// ts present, ts = tk, fp the signature of its parameters), and fa.
type exactState struct {
	valid    bool
	fullAtMs int64
}

// extrasOf returns what the repository read with b besides it, nil when b
// holds none (an item of another backend, or a missing one).
func extrasOf(b *store.Bucket) *itemExtras {
	if b == nil {
		return nil
	}
	x, _ := b.Private.(*itemExtras)
	return x
}

// wcuOf returns the write-capacity state the repository read with b, nil
// when b holds none (an item of another backend, or a missing one).
func wcuOf(b *store.Bucket) *store.BucketState {
	if x := extrasOf(b); x != nil {
		return x.wcu
	}
	return nil
}

// wcuWriteCostMilli is what one speculative write consumes from the hidden
// wcu limit of a bucket item: one write unit.
const wcuWriteCostMilli = 1000

// admit applies the one admission rule of every path: a positive
// amount must fit in the refilled balance; zero or negative amounts never
// gate (zero only refills, negative gives back). It fills st's Available,
// Exceeded and RetryAfter and returns the balance after taking amount.
func admit(st *LimitStatus, s store.BucketState, amount, now int64) (tokensMilli, lastRefillMs int64, ok bool) {
	// One exact refill decides all: tryConsume for a positive amount,
	// forceConsume (and calculateAvailable) otherwise.
	cur, last := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	st.Available = bucketmath.FloorDivMilli(cur)
	req := bucketmath.Milli(amount)
	switch {
	case amount <= 0:
		return cur.SubSat(req).Int64Sat(), last, true
	case cur.Cmp(req) < 0:
		st.Exceeded, st.RetryAfter = true, bucketmath.RetryAfterExact(req.SubSat(cur), s.RefillAmountMilli, s.RefillPeriodMs)
		return cur.Int64Sat(), last, false
	}
	// 0 <= cur − req < 2^63 + 2^73: no overflow.
	return cur.Sub(req).Int64Sat(), last, true
}

// bucketStateFromLimit returns a full bucket for l, refilled at nowMs; an
// empty one for the bucket limit of a prepaid balance
// (store.Limit.PrepaidBucketLimit), which only top-ups fill.
func bucketStateFromLimit(entityID, resource string, l store.Limit, nowMs int64) store.BucketState {
	tokens := l.Capacity * 1000
	if l.Prepaid {
		tokens = 0
	}
	return store.BucketState{
		EntityID:          entityID,
		Resource:          resource,
		LimitName:         l.Name,
		TokensMilli:       tokens,
		LastRefillMs:      nowMs,
		CapacityMilli:     l.Capacity * 1000,
		RefillAmountMilli: l.RefillAmount * 1000,
		RefillPeriodMs:    l.RefillPeriod.Milliseconds(),
	}
}

// maxBucketTTLSeconds caps bucket TTLs (100 years): the time to fill of a
// huge limit saturates instead of overflowing into a TTL in the past.
const maxBucketTTLSeconds = 100 * 365 * 24 * 3600

// ceilSeconds returns ms (≥ 0) in whole seconds, rounded up.
func ceilSeconds(ms int64) int64 { return ms/1000 + min(ms%1000, 1) }

// adjustTTLExtension returns the seconds by which the charges of w (a
// store.WriteAdjust on an item of limits) delay the time the item is full
// again, for its TTL (store.BucketWrite.TTLExtendSeconds): the largest
// per-limit delay, rounded up. The bucket of a calendar period or of a
// prepaid balance has its own expiry (its refill is negligible) and takes
// none.
func adjustTTLExtension(w store.BucketWrite, limits func(name string) (store.Limit, bool)) int64 {
	if store.IsOwnBucketResource(w.Key.Resource) {
		return 0
	}
	ext := int64(0)
	for _, lw := range w.Limits {
		if lw.ConsumedMilli <= 0 {
			continue
		}
		l, ok := limits(lw.Name)
		if !ok {
			continue
		}
		d := bucketmath.GiveDelayMs(lw.ConsumedMilli, bucketmath.SatMul(l.RefillAmount, 1000), l.RefillPeriod.Milliseconds())
		ext = max(ext, min(ceilSeconds(d), maxBucketTTLSeconds))
	}
	return ext
}

// Incarnations of bucket items.
//
// An entity deleted and created again with the same id is a new entity:
// nothing acquired before the delete settles into it. Each bucket item
// carries the random incarnation its creating write gave it
// (store.Bucket.Incarnation); every lease entry remembers the incarnation
// of the item it took from (the speculative write and the read return
// it, the create chooses it), and every write that settles a lease
// (commit, rollback, a give-back, background and group commit) or was
// computed from a read (the read-then-write path and its retry) is
// conditioned on it. A delete removes the items; the item the next
// acquire creates has another incarnation, so the old lease's writes fail
// their condition and write nothing, as they do when the item is gone.
// An item without one (written by the Python original, or before items
// carried one) keeps none, and the writes of its leases require it to
// have none.

// newIncarnation returns a random non-zero incarnation for an item a write
// creates.
func newIncarnation() int64 {
	return int64(rand.Uint64()>>1) | 1
}

// incarnationOf returns the incarnation of the item res answered with (0
// when it holds none).
func incarnationOf(res store.SpeculativeResult) int64 { return bucketIncarnation(res.Bucket) }

// bucketIncarnation returns b's incarnation, 0 for a nil b.
func bucketIncarnation(b *store.Bucket) int64 {
	if b == nil {
		return 0
	}
	return b.Incarnation
}

// capState returns s with its balance, refilled to now, at most capMilli
// (s as it is when it holds no more).
func capState(s store.BucketState, capMilli, now int64) store.BucketState {
	r := s
	r.TokensMilli, _ = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	if r.TokensMilli <= capMilli {
		return s
	}
	r.LastRefillMs = max(s.LastRefillMs, now)
	r.TokensMilli = capMilli
	return r
}
