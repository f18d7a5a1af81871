// Layer 3, rules: the lease: what an acquire took, and its Adjust, Consume,
// Release, Commit and Rollback.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Lease is the consumption taken by one Acquire. It is already durable in
// the store; Adjust, Consume and Release change it locally, Commit writes the
// difference, Rollback gives back what it may. After Commit or Rollback every
// method returns [ErrLeaseDone], so `defer lease.Rollback(ctx)` right after
// Acquire is safe (like sql.Tx). A nil *Lease, as a failed Acquire returns,
// does not panic: its Consume, Adjust, Release, Commit and Rollback return
// a *[ValidationError] naming the lease, Consumed and Statuses are empty.
//
// # Refunds
//
// A lease gives back at most what it holds, less what the limit refilled
// while it held it. Per limit of each bucket the lease holds, in
// millitokens, held is what the lease has taken so far (the acquire's
// amount, plus later positive adjustments, less the refunds already given;
// never below zero), and a refund at time t gives back at most
//
//	refundable(t) = max(0, held − floor(refill amount × (t − t0) / refill period))
//
// where t0 is the time of the acquire: what the limit refilled since (in
// millitokens, rounded down; saturating). A larger refund is cut to it, and
// [Lease.Consumed] reports what stays charged (in whole tokens, rounded
// down: a one-token lease given back a millisecond after its acquire keeps
// a millitoken charged, and gives its token back as whole tokens count). So a lease held for a whole
// refill period gives nothing back: the tokens it took were replaced by the
// refill, which others may have taken already, and giving them back too
// would admit more than the capacity plus the refill in that period. The
// cap applies when the refund is asked for (Adjust, Release), against what
// the lease holds with its local changes, and again when it is written
// (Commit, Rollback, the rollback of [RateLimiter.Do], a background
// commit), against what is durable then. On top of it a refund never lifts
// a bucket above its capacity.
//
// A Lease is not safe for concurrent use.
type Lease struct {
	rl      leaseWriter
	noop    bool // fail-open lease: tracks nothing, writes nothing
	done    bool
	entries []*leaseEntry
	// slots renews the lease's in-flight slots until it ends (nil without
	// in-flight limits).
	slots *slotKeeper
}

// leaseWriter is what a lease needs of its limiter: the clock, and the
// write of its adjustments (through group commit).
type leaseWriter interface {
	nowMs() int64
	writeAdjust(ctx context.Context, w store.BucketWrite) error
	// writeAdjusts writes a commit's adjustments, one per item, and
	// returns each one's error.
	writeAdjusts(ctx context.Context, writes []store.BucketWrite) []error
	// commitLater queues a committed lease's adjustments to be written in
	// the background, and reports whether it did.
	commitLater(writes []store.BucketWrite) bool
	// commitsLater reports whether background commit is on: whether
	// commitLater may take a lease's adjustments (which are then built
	// only for it).
	commitsLater() bool
	// enter starts a call that writes (ErrClosed after Close); exit ends
	// it.
	enter() error
	exit()
}

// leaseEntry is one limit of one bucket item held by a lease.
type leaseEntry struct {
	key   store.BucketKey
	limit store.Limit
	// state is the local view of the bucket after this lease's changes.
	state store.BucketState
	// consumed is what the acquire took (tokens); initialConsumed is the
	// part of it that is durable in the store (all of it once the acquire
	// returned). The lease's methods leave them as they are and count
	// their own changes in deltaMilli and writtenMilli.
	consumed        int64
	initialConsumed int64
	// deltaMilli is the lease's change since the acquire (Consume, Adjust,
	// Release; millitokens, saturating, refunds cut), and writtenMilli
	// the part of it that is durable (Commit, Rollback).
	deltaMilli   int64
	writtenMilli int64
	// acquiredMs is the time of the acquire (epoch ms), from which the
	// limit's refill shrinks what a refund may give back (refundable).
	acquiredMs int64

	originalTokensMilli int64
	originalRfMs        int64
	// missingLimit is set when the item existed without this limit.
	missingLimit bool
	// paramsChanged is set when the item stored the limit with other
	// parameters (a limit change the initial write stores).
	paramsChanged bool
	// capped is set when a switch back capped the balance read (see
	// carrySwitches): the initial write stores the cap.
	capped bool
	// refilledMilli is the balance refilled to the acquire's time, before
	// its consumption.
	refilledMilli int64
	// inc is the incarnation of the item the acquire took from: the
	// lease's writes settle into that item only (see the incarnations in bucket.go).
	inc int64
}

// entriesOf returns the entries of one bucket item, in order.
func (ls *Lease) entriesOf(key store.BucketKey) []*leaseEntry {
	out := make([]*leaseEntry, 0, len(ls.entries))
	for _, e := range ls.entries {
		if e.key == key {
			out = append(out, e)
		}
	}
	return out
}

// keys returns the distinct bucket items of the lease in first-seen order.
func (ls *Lease) keys() []store.BucketKey {
	var out []store.BucketKey
	for _, e := range ls.entries {
		if len(out) == 0 || !containsKey(out, e.key) {
			out = append(out, e.key)
		}
	}
	return out
}

func containsKey(keys []store.BucketKey, k store.BucketKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// Consumed returns, per limit name, the tokens this lease has taken so far
// (whole tokens, rounded down), summed over the entity and (with cascade)
// its parent: with cascade an acquire of 500 tpm reports 1000. Refunds
// count as they were cut (see Refunds above): after Commit or Rollback it
// is what stays charged. Sums saturate (a limit's amount at
// math.MaxInt64 millitokens). Adjust with the difference between the real
// and the estimated amount, not against Consumed.
func (ls *Lease) Consumed() map[string]int64 {
	out := make(map[string]int64)
	if ls == nil {
		return out
	}
	for _, e := range ls.entries {
		if l, show := ls.shownSlot(e); show {
			out[l.Name] = bucketmath.AddSat(out[l.Name], bucketmath.FloorDiv(e.held(), 1000))
		}
	}
	return out
}

// held is what the lease holds of e's limit, with its local changes
// (millitokens, in [0, MaxInt64]).
func (e *leaseEntry) held() int64 {
	return max(0, bucketmath.AddSat(bucketmath.SatMul(e.consumed, 1000), e.deltaMilli))
}

// durable is the part of held that is written (millitokens, in [0,
// MaxInt64]).
func (e *leaseEntry) durable() int64 {
	return max(0, bucketmath.AddSat(bucketmath.SatMul(e.initialConsumed, 1000), e.writtenMilli))
}

// refundable returns the millitokens a refund at nowMs may give back of
// heldMilli that e's lease took since its acquire: heldMilli less the
// limit's refill since e.acquiredMs (floor(refill amount × elapsed ms /
// refill period), in millitokens), never below zero. It is not rounded to
// whole tokens: what the refill cut keeps charged is a fraction of a token
// when the lease was short (a millisecond of 100 a minute keeps 1
// millitoken of a one-token lease, and gives back 999), and rounding the
// refund down would keep the whole token.
func (e *leaseEntry) refundable(heldMilli, nowMs int64) int64 {
	if heldMilli <= 0 {
		return 0
	}
	left := bucketmath.Int128From(heldMilli)
	ra, rp := bucketmath.SatMul(e.limit.RefillAmount, 1000), e.limit.RefillPeriod.Milliseconds()
	if elapsed := bucketmath.AddSat(nowMs, -e.acquiredMs); elapsed > 0 && ra > 0 && rp > 0 {
		// ra, elapsed < 2^63: the product fits in an Int128.
		x, _ := bucketmath.MulInt128(bucketmath.Int128From(ra), elapsed)
		refill, _ := bucketmath.DivModFloor(x, rp)
		left = left.SubSat(refill)
	}
	if left.Sign() <= 0 {
		return 0
	}
	return left.Int64Sat()
}

// stamp sets the acquire time of every entry of the lease.
func (ls *Lease) stamp(acquiredMs int64) {
	for _, e := range ls.entries {
		e.acquiredMs = acquiredMs
	}
}

// LeaseStatus is one limit of a bucket a lease holds, as the lease sees
// it: what rate-limit response headers report.
type LeaseStatus struct {
	EntityID string
	Resource string
	Limit    Limit
	// Remaining is the whole tokens left in the bucket (floored; negative
	// when in debt), after the lease's consumption.
	Remaining int64
	// Reset is how long until the bucket is full again at its refill
	// rate; zero when it is full. For a calendar limit it is the time until
	// the next period starts (from now: the lease's own period may have
	// ended), and Resource is the period's bucket (see
	// [Limit.CalendarBucket]). For a prepaid limit it is zero (a balance
	// never fills by itself), and Resource is the balance's bucket (see
	// [Limit.PrepaidBucket]).
	Reset time.Duration
	// Held is the whole tokens the lease holds of this limit of this
	// bucket, with its local changes: after Commit, what it stays charged
	// there (refunds cut as described under Refunds in [Lease]).
	Held int64
}

// Statuses returns, for every limit of every bucket the lease holds (the
// entity's, then its parent's with cascade), the tokens remaining and the
// time until the bucket is full, refilled to now. They come from the
// lease's own view: the bucket as its acquire left it plus the lease's
// own Consume and Adjust calls; what other clients took since is not
// seen. A no-op lease has none.
func (ls *Lease) Statuses() []LeaseStatus {
	if ls == nil || len(ls.entries) == 0 {
		return nil
	}
	now := ls.rl.nowMs()
	out := make([]LeaseStatus, 0, len(ls.entries))
	for _, e := range ls.entries {
		l, show := ls.shownSlot(e)
		if !show {
			continue
		}
		out = append(out, LeaseStatus{
			EntityID: e.key.EntityID, Resource: e.key.Resource, Limit: Limit(l),
			Remaining: calculateAvailable(e.state, now),
			// A balance is never full again by itself; a calendar budget
			// is when the next period starts.
			Reset: kindOf(e.limit).reset(e.limit, timeToFill(e.state, now), now),
			Held:  bucketmath.FloorDiv(e.held(), 1000),
		})
	}
	return out
}

// timeToFill returns how long until s, refilled at its rate, is full:
// the whole milliseconds that earn capacity − balance (refilled to now),
// rounded up; zero when it is full (or does not refill).
func timeToFill(s store.BucketState, now int64) time.Duration {
	cur, _ := bucketmath.RefillExact(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	deficit := bucketmath.Int128From(s.CapacityMilli).SubSat(cur)
	if deficit.Sign() <= 0 || s.RefillAmountMilli <= 0 || s.RefillPeriodMs <= 0 {
		return 0
	}
	hi, lo := deficit.Mag()
	if hi != 0 || lo >= 1<<63 {
		return math.MaxInt64
	}
	x, ok := bucketmath.MulInt128(deficit, s.RefillPeriodMs)
	if !ok {
		return math.MaxInt64
	}
	q, r := bucketmath.DivModFloor(x, s.RefillAmountMilli)
	if r != 0 {
		q = q.AddSat(bucketmath.Int128From(1))
	}
	return bucketmath.DurationFromMillis(q)
}

// FailedOpen reports whether the lease was issued without the store: the
// store was unavailable and the on-unavailable mode was allow. Such a
// lease holds nothing (no tokens, no slots in flight) and writes nothing.
func (ls *Lease) FailedOpen() bool { return ls != nil && ls.noop }

// errNilLease is returned by the methods of a nil *Lease, such as the one
// a failed Acquire returns with its error.
var errNilLease = store.NewValidationError(ErrValidation, "lease", "nil",
	"the lease is nil (the Acquire that returned it failed: check its error)")

func (ls *Lease) check() error {
	if ls == nil {
		return errNilLease
	}
	if ls.done {
		return ErrLeaseDone
	}
	return nil
}

// Consume takes more tokens within the lease, checked against the local view
// of the buckets: a *[RateLimitExceededError] when a positive amount does not
// fit (and nothing changes). The amounts are written by Commit.
//
// The check reserves nothing: it sees the buckets as this lease's acquire
// left them, not what other leases and processes took since, so amounts it
// lets through are charged at Commit as a positive [Lease.Adjust] is, and may
// leave a bucket in debt (two leases of a 10-token bucket that each hold 1
// and each Consume 8 leave it at −8). To be admitted only while the
// tokens are there, acquire them: [RateLimiter.Acquire].
func (ls *Lease) Consume(c Consume) error {
	if err := ls.check(); err != nil || ls.noop {
		return err
	}
	if err := ls.validate(c, false); err != nil {
		return err
	}
	now := ls.rl.nowMs()
	statuses := make([]LimitStatus, 0, len(ls.entries))
	exceeded := false
	for _, e := range ls.entries {
		amount := c[e.limit.Name]
		st := LimitStatus{EntityID: e.key.EntityID, Resource: e.key.Resource, LimitName: e.limit.Name, Limit: Limit(e.limit), Requested: amount}
		admit(&st, e.state, amount, now)
		exceeded = exceeded || st.Exceeded
		statuses = append(statuses, st)
	}
	if exceeded {
		return newRateLimitExceededError(statuses)
	}
	ls.apply(c, now)
	return nil
}

// Adjust changes the lease's consumption by c (positive takes more,
// negative gives back) without any check: the bucket may go into debt, which
// later acquires wait out. Use it to reconcile an estimate with the real
// token count. A refund gives back at most what the lease holds less the
// limit's refill since the acquire (see Refunds in [Lease]); a larger one
// is cut, now and again when Commit writes it, and [Lease.Consumed] shows
// the cut. A refund never lifts a bucket above its capacity. It never
// returns a rate-limit error; a name the lease holds no limit for is a
// *[ValidationError].
func (ls *Lease) Adjust(c Consume) error {
	if err := ls.check(); err != nil || ls.noop {
		return err
	}
	if err := ls.validate(c, true); err != nil {
		return err
	}
	ls.apply(c, ls.rl.nowMs())
	return nil
}

// Release gives back c (non-negative amounts): Adjust with every amount
// negated, cut as Adjust cuts refunds (see Refunds in [Lease]).
func (ls *Lease) Release(c Consume) error {
	if err := ls.check(); err != nil || ls.noop {
		return err
	}
	if err := ls.validate(c, false); err != nil {
		return err
	}
	return ls.Adjust(negate(c))
}

// validate checks c against the lease: amounts in range (negative ones
// only when refunds are allowed) and names of limits the lease holds.
func (ls *Lease) validate(c Consume, refunds bool) error {
	if err := validateAmounts(c, refunds); err != nil {
		return err
	}
	if len(ls.entries) == 0 {
		return nil // an empty override checks nothing
	}
	if err := ls.checkSlotNames(c); err != nil {
		return err
	}
	for name := range c {
		if !slices.ContainsFunc(ls.entries, func(e *leaseEntry) bool { return e.limit.Name == name }) {
			names := make([]string, 0, len(ls.entries))
			for _, e := range ls.entries {
				if l, _ := ls.shownSlot(e); !slices.Contains(names, l.Name) {
					names = append(names, l.Name)
				}
			}
			return store.NewValidationError(ErrValidation, "consume", name,
				fmt.Sprintf("the lease holds no limit named %q (limits: %s)", name, strings.Join(names, ", ")))
		}
	}
	return nil
}

// apply changes the lease's consumption by c at now: a positive amount is
// added (saturating), a negative one is cut to what the entry may give back
// (refundable).
func (ls *Lease) apply(c Consume, now int64) {
	for _, e := range ls.entries {
		amount := c[e.limit.Name]
		if amount == 0 {
			continue
		}
		milli := bucketmath.SatMul(amount, 1000)
		if milli < 0 {
			milli = -min(-milli, e.refundable(e.held(), now))
			if milli == 0 {
				continue
			}
		}
		before := e.state.TokensMilli
		cur, last := bucketmath.RefillExact(e.state.TokensMilli, e.state.LastRefillMs, now, e.state.CapacityMilli, e.state.RefillAmountMilli, e.state.RefillPeriodMs)
		if last != e.state.LastRefillMs || cur.Cmp(bucketmath.Int128From(e.state.TokensMilli)) != 0 {
			// A refill moves the local view's refill time to now, as the
			// stores' writes do (the sub-millitoken remainder is dropped):
			// the drift-compensated time can lie a millisecond before the
			// time whose refill was just credited, and refilling from it
			// again at the same instant would credit that millisecond again.
			last = max(now, e.state.LastRefillMs)
		}
		e.state.TokensMilli, e.state.LastRefillMs = cur.SubSat(bucketmath.Int128From(milli)).Int64Sat(), last
		if milli < 0 && e.state.TokensMilli > e.state.CapacityMilli {
			// A refund does not lift the local view above capacity.
			e.state.TokensMilli = max(before, e.state.CapacityMilli)
		}
		e.state.TotalConsumedMilli = bucketmath.AddSat(e.state.TotalConsumedMilli, milli)
		e.deltaMilli = bucketmath.AddSat(e.deltaMilli, milli)
	}
}

// commitDelta is what Commit at now writes for e (millitokens): the change
// since the last write, a refund cut to what the durable part may give
// back.
func (e *leaseEntry) commitDelta(now int64) int64 {
	held, durable := e.held(), e.durable()
	d := held - durable // both in [0, MaxInt64]: no overflow
	if d < 0 {
		d = -min(-d, e.refundable(durable, now))
	}
	return d
}

// rollbackDelta is what Rollback at now writes for e (millitokens): the
// durable part, negated, cut to what it may give back.
func (e *leaseEntry) rollbackDelta(now int64) int64 {
	return -e.refundable(e.durable(), now)
}

// written records that d (millitokens), a commit's or rollback's delta
// for e, is durable: the lease now holds (and reports) the durable part.
func (e *leaseEntry) written(d int64) {
	e.writtenMilli = bucketmath.AddSat(e.writtenMilli, d)
	// held() == durable() from now on.
	e.deltaMilli = bucketmath.AddSat(bucketmath.SatMul(e.initialConsumed-e.consumed, 1000), e.writtenMilli)
}

// Commit writes the lease's changes since Acquire (one unconditional ADD per
// bucket item touched; on DynamoDB those of a cascade at once, as the
// acquire wrote them) and ends the lease. A net refund is cut to what the
// lease may give back now (see Refunds in [Lease]). When a write fails,
// the others are still made, and
// Commit returns the error and the lease stays open: what was written is
// remembered, so Commit can be retried or Rollback gives back what is
// durable. A write that failed with [ErrUnavailable] (no answer within the
// store timeout, the SDK's own resends included) may have applied all the
// same, and the lease cannot know: a Commit retried after it may charge
// that write's change a second time (the lease's adjustment, never its
// acquire); a Rollback after it may give back what the write took. After
// [RateLimiter.Close] it returns [ErrClosed] and writes nothing.
func (ls *Lease) Commit(ctx context.Context) error {
	if err := ls.check(); err != nil {
		return err
	}
	if ctx == nil {
		return errNilContext
	}
	if err := ls.rl.enter(); err != nil {
		return err
	}
	defer ls.rl.exit()
	ls.endSlots(true)
	if ls.noop || !ls.changed() {
		ls.done = true
		return nil
	}
	now := ls.rl.nowMs()
	if ls.rl.commitsLater() && ls.rl.commitLater(ls.laterWrites(now)) {
		for _, e := range ls.entries {
			e.written(e.commitDelta(now))
		}
		ls.done = true
		return nil
	}
	delta := func(e *leaseEntry) int64 { return e.commitDelta(now) }
	var writes []store.BucketWrite
	for _, key := range ls.keys() {
		entries := ls.entriesOf(key)
		w := adjustWrite(key, now, entries, delta)
		if len(w.Limits) == 0 {
			for _, e := range entries {
				e.written(0) // a refund cut to nothing
			}
			continue
		}
		writes = append(writes, w)
	}
	if len(writes) == 0 {
		ls.done = true
		return nil
	}
	ctx, cancel := detachedContext(ctx)
	defer cancel()
	errs := ls.rl.writeAdjusts(ctx, writes)
	for i, w := range writes {
		// A condition failure means the bucket item no longer exists
		// (expired, or deleted with its entity and perhaps created again:
		// another incarnation): there is nothing left to adjust.
		if err := errs[i]; err != nil && !errors.Is(err, store.ErrConditionFailed) {
			errs[i] = fmt.Errorf("commit %s/%s: %w", w.Key.EntityID, w.Key.Resource, err)
			continue
		}
		errs[i] = nil
		for _, e := range ls.entriesOf(w.Key) {
			e.written(delta(e))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ls.done = true
	return nil
}

// changed reports whether the lease holds a change since Acquire that
// Commit must write.
func (ls *Lease) changed() bool {
	for _, e := range ls.entries {
		if e.held() != e.durable() {
			return true
		}
	}
	return false
}

// laterWrites returns the adjustments Commit writes at now, for a
// background commit.
func (ls *Lease) laterWrites(now int64) []store.BucketWrite {
	var writes []store.BucketWrite
	for _, key := range ls.keys() {
		w := adjustWrite(key, now, ls.entriesOf(key), func(e *leaseEntry) int64 { return e.commitDelta(now) })
		if len(w.Limits) > 0 {
			writes = append(writes, w)
		}
	}
	return writes
}

// Rollback gives back what the lease has made durable (one unconditional
// ADD per bucket item), less the limit's refill since the acquire (see
// Refunds in [Lease]: a lease rolled back a whole refill period after its
// acquire gives nothing back), and ends the lease; local adjustments are
// dropped. It runs on a context detached from ctx's cancellation. After
// Commit it returns [ErrLeaseDone] and changes nothing; after
// [RateLimiter.Close], [ErrClosed]. When a write fails the others are still
// attempted, the error is returned and the lease stays open so that
// Rollback can be retried without refunding twice.
func (ls *Lease) Rollback(ctx context.Context) error {
	if err := ls.check(); err != nil {
		return err
	}
	if ctx == nil {
		return errNilContext
	}
	if err := ls.rl.enter(); err != nil {
		return err
	}
	defer ls.rl.exit()
	ls.endSlots(false)
	if ls.noop {
		ls.done = true
		return nil
	}
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	var errs []error
	now := ls.rl.nowMs()
	for _, key := range ls.keys() {
		entries := ls.entriesOf(key)
		delta := func(e *leaseEntry) int64 { return e.rollbackDelta(now) }
		w := adjustWrite(key, now, entries, delta)
		if len(w.Limits) == 0 {
			for _, e := range entries {
				e.written(0) // local adjustments are dropped
			}
			continue
		}
		if cancel == nil {
			ctx, cancel = detachedContext(ctx)
		}
		if err := ls.rl.writeAdjust(ctx, w); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			errs = append(errs, fmt.Errorf("rollback %s/%s: %w", key.EntityID, key.Resource, err))
			continue
		}
		for _, e := range entries {
			e.written(delta(e))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	ls.done = true
	return nil
}

// adjustWrite builds the unconditional ADD of delta(e) millitokens for
// entries at nowMs, with each limit's capacity as the hint for refunds.
func adjustWrite(key store.BucketKey, nowMs int64, entries []*leaseEntry, delta func(*leaseEntry) int64) store.BucketWrite {
	w := store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: nowMs}
	if len(entries) > 0 {
		w.Incarnation = entries[0].inc // one item: one incarnation
	}
	for _, e := range entries {
		if d := delta(e); d != 0 {
			w.Limits = append(w.Limits, store.LimitWrite{Name: e.limit.Name, ConsumedMilli: d, CapacityMilli: bucketmath.SatMul(e.limit.Capacity, 1000)})
		}
	}
	w.TTLExtendSeconds = adjustTTLExtension(w, func(name string) (store.Limit, bool) {
		for _, e := range entries {
			if e.limit.Name == name {
				return e.limit, true
			}
		}
		return store.Limit{}, false
	})
	return w
}

// validateAmounts rejects the reserved wcu name, negative amounts (unless
// refunds are allowed) and amounts whose millitoken value would overflow.
func validateAmounts(c Consume, refunds bool) error {
	for name, v := range c {
		if name == wcuLimitName {
			return store.NewValidationError(ErrInvalidName, "consume", name, "'wcu' is a reserved limit name")
		}
		if v < 0 && !refunds {
			return store.NewValidationError(ErrValidation, "consume", name,
				fmt.Sprintf("amount %d is negative (give tokens back with Lease.Adjust or Lease.Release)", v))
		}
		if v > maxAmount || v < -maxAmount {
			return store.NewValidationError(ErrValidation, "consume", name, "amount out of range")
		}
	}
	return nil
}

// acquireOutcome classifies the result of Acquire.
func acquireOutcome(ctx context.Context, lease *Lease, err error) AcquireOutcome {
	switch {
	case err == nil && lease.FailedOpen():
		return AcquireFailOpen
	case err == nil:
		return AcquireAdmitted
	case errors.Is(err, ErrRateLimited):
		return AcquireRateLimited
	case errors.Is(err, ErrValidation):
		return AcquireInvalid
	case errors.Is(err, ErrUnavailable):
		return AcquireUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return AcquireCanceled
	default:
		return AcquireUnavailable
	}
}
