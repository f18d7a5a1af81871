// Layer 4, mechanics: Acquire, Do, Wait, Available and TimeUntilAvailable,
// which choose a path for each call.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Acquire takes consume from the (entityID, resource) bucket — and from the
// parent's when the entity cascades, and from the entity-wide bucket
// ([AllResources]) of each entity that has entity-wide limits, each name
// from every bucket with a limit of that name — and returns a [Lease]
// whose consumption is already durable in the store. The resource is what
// the call is for (a model); AllResources is refused as one. Finish the lease with [Lease.Commit] (after
// [Lease.Adjust] to the real amounts) or [Lease.Rollback].
//
// When a limit cannot satisfy the request the error is a
// *[RateLimitExceededError] (matching [ErrRateLimited]), with a positive
// RetryAfter, and nothing is written. A request whose write loses the race
// for its bucket items to other writers is not refused for it: it reads
// and decides again, after a short jittered backoff, within ctx's deadline
// (up to 8 attempts; one that loses them all is refused with the next
// backoff as its RetryAfter). Invalid input gives a *[ValidationError]. When the store fails the
// on-unavailable mode decides: block returns an *[UnavailableError], allow
// returns a no-op lease; a refusal for want of permission is an
// *[AccessDeniedError] in either mode. Context cancellation is returned as
// is. After [RateLimiter.Close] it returns [ErrClosed].
func (rl *RateLimiter) Acquire(ctx context.Context, entityID, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	m := rl.obs.metrics
	var start time.Time
	if m != nil {
		start = time.Now()
	}
	lease, err := rl.acquireChecked(ctx, entityID, resource, consume, opts)
	if m != nil {
		m.AcquireDone(ctx, acquireOutcome(ctx, lease, err), time.Since(start))
	}
	return lease, err
}

// checkKeyCall checks what a call about one (entity, resource) is given,
// in order: a context, its options (resolved), the entity id and the
// resource name.
func checkKeyCall(ctx context.Context, entityID, resource string, opts []AcquireOption) (acquireOptions, error) {
	if ctx == nil {
		return acquireOptions{}, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return o, err
	}
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return o, err
	}
	return o, store.ValidateChargedResource(resource)
}

// acquireChecked is Acquire without metrics.
func (rl *RateLimiter) acquireChecked(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption) (*Lease, error) {
	o, err := checkKeyCall(ctx, entityID, resource, opts)
	if err != nil {
		return nil, err
	}
	if resource == AllResources {
		return nil, store.ValidateAcquiredResource(resource)
	}
	if err := validateAmounts(consume, false); err != nil {
		return nil, err
	}
	if err := rl.enter(); err != nil {
		return nil, err
	}
	defer rl.exit()
	start := rl.nowMs()
	var lease *Lease
	allow, err := rl.guarded(ctx, o, entityID, resource, func(ctx context.Context) (err error) {
		lease, err = rl.acquire(ctx, entityID, resource, consume, o)
		return err
	})
	switch {
	case err == nil && !allow:
		lease.stamp(start)
		return lease, nil
	case !allow:
		return nil, err
	}
	return &Lease{rl: rl, noop: true}, nil
}

// guarded runs attempt, an acquire, unless the circuit breaker is open,
// on the decision context of o (decisionContext), and decides what its
// failure means (decide): err nil and allow false is attempt's success;
// allow is a failure the on-unavailable mode answers with a no-op lease;
// else err is the error to return (a refusal among them).
func (rl *RateLimiter) guarded(ctx context.Context, o acquireOptions, entityID, resource string, attempt func(context.Context) error) (allow bool, err error) {
	decided := false
	dctx := ctx
	if rl.store.brk.rejecting() {
		err = ErrCircuitOpen
	} else {
		var cancel context.CancelFunc
		if dctx, cancel = rl.decisionContext(ctx, o); cancel != nil {
			decided = true
			defer cancel()
		}
		if err = attempt(dctx); err == nil {
			return false, nil
		}
	}
	return rl.decide(ctx, dctx, decided, err, o, entityID, resource)
}

// decisionContext returns the context an acquire made with ctx works on:
// in allow mode, when ctx's deadline comes before a store call's bound
// could end, one that ends a small margin before the deadline (cancel must
// then be called), so that the acquire answers with a no-op lease before
// its caller gives up; otherwise ctx (block mode returns ctx's error at
// the deadline, as it always did).
func (rl *RateLimiter) decisionContext(ctx context.Context, o acquireOptions) (context.Context, context.CancelFunc) {
	if !rl.store.bound.beforeBound(ctx) {
		return ctx, nil
	}
	mode := o.onUnavailable
	if mode == "" {
		mode = rl.configs.cachedOnUnavailable()
	}
	if mode != OnUnavailableAllow {
		return ctx, nil
	}
	return decisionContext(ctx)
}

// decide says how an acquire made with ctx that failed with err ends: err
// as it is (a rate limit, invalid input, the caller's cancellation), an
// *AccessDeniedError, or by the on-unavailable mode: allow (true), or an
// *UnavailableError. dctx is the context the acquire worked on; decided
// reports that it ends before ctx (see decisionContext), and when
// it has, the store did not answer in time: that is decided by the mode
// too, even if ctx's deadline has just passed meanwhile.
func (rl *RateLimiter) decide(ctx, dctx context.Context, decided bool, err error, o acquireOptions, entityID, resource string) (bool, error) {
	if errors.Is(err, ErrRateLimited) || errors.Is(err, ErrValidation) {
		return false, err
	}
	if cerr := ctx.Err(); decided && dctx.Err() != nil && (cerr == nil || errors.Is(cerr, context.DeadlineExceeded)) {
		err = &deadlineError{cause: err}
	} else if cerr != nil {
		return false, err
	}
	if isAccessDenied(err) {
		return false, &AccessDeniedError{Cause: err, Table: rl.repo.Name(), EntityID: entityID, Resource: resource}
	}
	mode := o.onUnavailable
	switch {
	case mode != "":
	case noAnswer(err):
		mode = rl.configs.cachedOnUnavailable() // the store would not answer this read either
	default:
		mode = rl.configs.resolveOnUnavailable(dctx)
	}
	rl.logUnavailable(ctx, entityID, resource, mode, err)
	if mode == OnUnavailableAllow {
		return true, nil
	}
	return false, &UnavailableError{Cause: err, Table: rl.repo.Name(), EntityID: entityID, Resource: resource}
}

// noAnswer reports whether err says the store gave no answer: its calls
// time out, or the circuit breaker is open.
func noAnswer(err error) bool {
	var te *storeTimeoutError
	var de *deadlineError
	return errors.Is(err, ErrCircuitOpen) || errors.As(err, &te) || errors.As(err, &de)
}

// Do acquires, runs fn with the lease, and commits when fn returns nil. When
// fn returns an error or panics, the acquire is rolled back (and the panic
// re-raised), giving back what [Lease.Rollback] may. The error is fn's, or
// the acquire's or commit's.
func (rl *RateLimiter) Do(ctx context.Context, entityID, resource string, consume Consume,
	fn func(ctx context.Context, lease *Lease) error, opts ...AcquireOption) (err error) {
	if fn == nil {
		return store.NewValidationError(ErrValidation, "fn", "nil", "Do needs a function to run with the lease")
	}
	lease, err := rl.Acquire(ctx, entityID, resource, consume, opts...)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if rbErr := lease.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, ErrLeaseDone) && err != nil {
			err = errors.Join(err, rbErr)
		}
	}()
	if err := fn(ctx, lease); err != nil {
		return err
	}
	if err := lease.Commit(ctx); err != nil {
		return err
	}
	committed = true
	return nil
}

// AcquireAll takes every request's amounts, or none: either every request
// is admitted and the returned [Lease] holds all of them (Commit, Adjust
// and Rollback work on it as on the lease of one Acquire), or the error is
// a *[RateLimitExceededError] and nothing was taken from any bucket — a
// refusal of one request costs the others nothing. The statuses are per
// request, in order: the limits of its bucket (then its ancestors', with
// cascade), with Available the whole tokens there before the batch,
// refilled to now. Requests that charge one bucket item (the same key
// twice, or children of one parent) are checked against it together, with
// their amounts summed; they must resolve the same limits for it.
//
// On a repository that is a [store.BatchStore] (every backend of this
// module: one TransactWriteItems on DynamoDB, one script on Redis, one
// lock in memory) and with speculative writes on, it costs one round trip
// when every bucket covers its amounts without a refill. Otherwise it
// reads every bucket at once and writes them all in one atomic
// [Repository.WriteBuckets] (one BatchGetItem and one TransactWriteItems
// on DynamoDB). A batch charges at most 100 bucket items (DynamoDB's
// ceiling of one transaction); more is a *[ValidationError]. The
// over-limit cache and group commit are not used. Errors follow
// [RateLimiter.Acquire]: with the allow on-unavailable mode an
// unavailable store gives a lease issued failed open.
func (rl *RateLimiter) AcquireAll(ctx context.Context, reqs []AcquireRequest, opts ...AcquireOption) (*Lease, [][]LimitStatus, error) {
	if ctx == nil {
		return nil, nil, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	if len(reqs) == 0 {
		return &Lease{rl: rl}, nil, nil
	}
	for i, r := range reqs {
		if err := store.ValidateIdentifier(r.EntityID, "entity_id"); err != nil {
			return nil, nil, err
		}
		if err := store.ValidateAcquiredResource(r.Resource); err != nil {
			return nil, nil, err
		}
		if err := validateAmounts(r.Consume, false); err != nil {
			return nil, nil, err
		}
		if r.Limits != nil {
			ls := storeLimits(r.Limits)
			if err := validateLimits(ls); err != nil {
				return nil, nil, err
			}
			if o.reqLimits == nil {
				o.reqLimits = make([][]store.Limit, len(reqs))
			}
			o.reqLimits[i] = ls
		}
	}
	if err := rl.enter(); err != nil {
		return nil, nil, err
	}
	defer rl.exit()
	start := rl.nowMs()
	var (
		lease    *Lease
		statuses [][]LimitStatus
	)
	allow, err := rl.guarded(ctx, o, reqs[0].EntityID, reqs[0].Resource, func(ctx context.Context) (err error) {
		lease, statuses, err = rl.acquireAll(ctx, reqs, o)
		return err
	})
	switch {
	case err == nil && !allow:
		lease.stamp(start)
		return lease, statuses, nil
	case errors.Is(err, ErrRateLimited):
		return nil, statuses, err
	case !allow:
		return nil, nil, err
	}
	return &Lease{rl: rl, noop: true}, nil, nil
}

// acquire obtains a lease on the path its plan (planAcquire) names: the
// speculative path of the entity's bucket, falling back to the
// read-then-write path (acquireSingle), or the items of the whole chain
// (acquireItems). The limits are resolved first (the override, or the
// stored config through the cache), so that every path checks the request
// against them and notices a limit change.
func (rl *RateLimiter) acquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (*Lease, error) {
	if err := rl.overLimitRefuse(entityID, resource, consume); err != nil {
		return nil, err
	}
	p, err := rl.planAcquire(ctx, entityID, resource, consume, o)
	if err != nil {
		return nil, err
	}
	switch {
	case p.shape == shapeNone:
		return &Lease{rl: rl}, nil
	case p.items == nil:
		lease, err := rl.acquireSingle(ctx, &p)
		if !onBatchPath(err) {
			return lease, err
		}
		// The path found more to charge than the entity's bucket and its
		// parent's: every bucket of the chain, as items.
		if p, err = rl.planChainItems(ctx, entityID, resource, consume, o); err != nil {
			return nil, err
		}
	}
	lease, _, err := rl.acquireItems(ctx, &p)
	return lease, err
}

// acquireSingle takes plan p of the entity's bucket (and its parent's,
// with cascade): the speculative path (shapeSpeculative), and when it
// cannot decide, the read-then-write path, after the read-then-write of
// another acquire of this limiter on the same item when one is in flight
// (coalesce: the speculative path again once it ended). An error of
// onBatchPath asks for the whole chain as items; nothing stays taken then.
func (rl *RateLimiter) acquireSingle(ctx context.Context, p *acquirePlan) (*Lease, error) {
	if p.shape == shapeSpeculative {
		lease, err := rl.speculativeAcquire(ctx, p)
		if err != nil || lease != nil {
			return lease, err
		}
		key := store.BucketKey{EntityID: p.entityID, Resource: p.resource}
		switch lead, err := rl.coalesce(ctx, key); {
		case err != nil:
			return nil, err
		case lead:
			defer rl.slowFlights.leave(key)
		default:
			if lease, err := rl.speculativeAcquire(ctx, p); err != nil || lease != nil {
				return lease, err
			}
		}
	}
	return rl.slowAcquire(ctx, p)
}

// acquireAll plans the requests of an AcquireAll (planAll) and takes the
// plan's items. The statuses are per request.
func (rl *RateLimiter) acquireAll(ctx context.Context, reqs []AcquireRequest, o acquireOptions) (*Lease, [][]LimitStatus, error) {
	p, err := rl.planAll(ctx, reqs, o)
	if err != nil {
		return nil, nil, err
	}
	return rl.acquireItems(ctx, &p)
}

// acquireItems takes the items of plan p on the path of its shape: the
// pair path's writes (speculativePair) or the store's atomic speculative
// batch (speculativeAll) first, and the read-then-write of every item
// (exactItems) when they cannot decide, or at once for shapeExact. The
// statuses are per request of the plan.
func (rl *RateLimiter) acquireItems(ctx context.Context, p *acquirePlan) (*Lease, [][]LimitStatus, error) {
	var (
		lease    *Lease
		statuses [][]LimitStatus
		decided  bool
		err      error
	)
	switch p.shape {
	case shapeNone:
		return &Lease{rl: rl}, make([][]LimitStatus, len(p.charged)), nil
	case shapePair:
		lease, statuses, decided, err = rl.speculativePair(ctx, p.items)
		if !decided && err == nil && rl.addSlotGens(ctx, p.items) {
			// The generations' limits the items lacked are in them now.
			lease, statuses, decided, err = rl.speculativePair(ctx, p.items)
		}
	case shapeBatch:
		lease, statuses, decided, err = rl.speculativeAll(ctx, p.items)
	}
	if decided || err != nil {
		lease, err = rl.ownBucketFinish(p.items, lease, statuses, err)
		return lease, p.perRequest(statuses), err
	}
	lease, statuses, err = rl.exactItems(ctx, p.items)
	return lease, p.perRequest(statuses), err
}

// Available returns, per limit, the whole tokens available now for
// (entityID, resource) — negative when in debt, the capacity when the bucket
// does not exist yet; for a calendar limit, what is left of the current
// period's budget; for a prepaid limit, its balance (0 before the first
// top-up). It only reads: it is the "peek" of other throttles
// (and [RateLimiter.Reset] their "reset").
func (rl *RateLimiter) Available(ctx context.Context, entityID, resource string, opts ...AcquireOption) (map[string]int64, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := rl.enter(); err != nil {
		return nil, err
	}
	defer rl.exit()
	limits, _, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return nil, err
	}
	limits = o.capped(limits)
	now := rl.nowMs()
	b, own, err := rl.readLimitBuckets(ctx, entityID, resource, limits, nil, now)
	if err != nil {
		return nil, fmt.Errorf("available %s/%s: %w", entityID, resource, err)
	}
	out := make(map[string]int64, len(limits))
	var missing []store.Limit
	for _, l := range limits {
		if l.OwnBucket() {
			out[l.Name], _ = own[l.Name].left(l, now)
			if _, ok := own[l.Name].bucket.State(l.Name); !ok && l.IsCalendar() {
				missing = append(missing, l)
			}
			continue
		}
		if s, ok := b.State(l.Name); ok {
			s, _ = applyLimit(s, l, now)
			out[l.Name] = calculateAvailable(s, now)
		} else {
			out[l.Name] = l.Capacity
			missing = append(missing, l)
		}
	}
	if !o.override {
		// A bucket the next acquire creates may start lower after a
		// switch of the defaults, and one that predates a switch back
		// holds at most what the switch left (carrySwitches).
		lc, err := rl.configs.resolveSlots(ctx, entityID, resource, false)
		if err != nil {
			return nil, err
		}
		sw := lc.switches.list()
		if len(sw) > 0 {
			for _, l := range limits {
				if !slices.ContainsFunc(missing, func(m store.Limit) bool { return m.Name == l.Name }) && spendCarries(l) && switchedBack(sw, l, now) {
					missing = append(missing, l)
				}
			}
		}
		for _, l := range missing {
			left, ok, err := rl.switchedStart(ctx, entityID, resource, l, sw, now)
			if err != nil {
				return nil, fmt.Errorf("available %s/%s: %w", entityID, resource, err)
			}
			if ok {
				out[l.Name] = min(out[l.Name], bucketmath.FloorDiv(left, 1000))
			}
		}
	}
	return out, nil
}

// TimeUntilAvailable returns how long until needed could be acquired for
// (entityID, resource): the longest wait over the limits with a positive
// amount. Missing buckets are full. A calendar limit whose current period
// cannot cover its amount waits until the next period starts; a prepaid
// balance that cannot, [BalanceRetryAfter]. It only reads.
func (rl *RateLimiter) TimeUntilAvailable(ctx context.Context, entityID, resource string, needed Consume, opts ...AcquireOption) (time.Duration, error) {
	if ctx == nil {
		return 0, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return 0, err
	}
	if err := rl.enter(); err != nil {
		return 0, err
	}
	defer rl.exit()
	limits, _, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return 0, err
	}
	limits = o.capped(limits)
	now := rl.nowMs()
	b, own, err := rl.readLimitBuckets(ctx, entityID, resource, limits, needed, now)
	if err != nil {
		return 0, fmt.Errorf("time until available %s/%s: %w", entityID, resource, err)
	}
	var wait time.Duration
	for _, l := range limits {
		n := needed[l.Name]
		if n <= 0 {
			continue
		}
		if l.OwnBucket() {
			left, until := own[l.Name].left(l, now)
			if n > left {
				wait = max(wait, until)
			}
			continue
		}
		s, ok := b.State(l.Name)
		if !ok {
			continue
		}
		s, _ = applyLimit(s, l, now)
		wait = max(wait, calculateTimeUntilAvailable(s, n, now))
	}
	return wait, nil
}

// Wait jitter (see [RateLimiter.Wait]): each sleep is the retry-after plus a
// random extra of up to a tenth of it, at most maxWaitJitter, and at least
// minWaitSleep.
const (
	maxWaitJitter = 10 * time.Millisecond
	minWaitSleep  = time.Millisecond
)

// Wait is Acquire that blocks until the request fits instead of failing
// with a rate-limit error: the idiom of golang.org/x/time/rate's Wait, for
// batch jobs that would rather wait than drop work. Each time a limit
// refuses, Wait sleeps for the refusal's RetryAfter — the time the bucket
// math computed until the missing tokens have refilled — plus a small jitter,
// then tries again, and returns the lease as soon as an Acquire succeeds.
// Finish the lease as after Acquire (Commit or Rollback).
//
// Wait returns without waiting:
//
//   - ctx's error, unwrapped (errors.Is(err, context.Canceled) or
//     context.DeadlineExceeded), when ctx is done before or during a sleep;
//   - an error matching both [ErrRateLimited] (errors.As finds the
//     *[RateLimitExceededError]) and [context.DeadlineExceeded] when ctx's
//     deadline comes before the computed retry time: waiting could not
//     succeed, so Wait fails at once instead of sleeping until the deadline;
//   - the *[RateLimitExceededError] itself when the request can never fit:
//     a violated limit's capacity is smaller than the amount requested, or
//     the limit does not refill;
//   - every other error of Acquire (validation, unavailable in block mode,
//     [ErrClosed]) as Acquire returns it. In allow mode an unavailable
//     backend gives a no-op lease, as with Acquire. [RateLimiter.Close]
//     wakes a sleeping Wait, which returns [ErrClosed].
//
// Fairness and jitter: Wait is not a queue. Waiters on one bucket retry
// independently when their computed time comes, and whichever Acquire
// reaches the store first wins the refilled tokens; the others are refused
// again with a fresh retry-after and sleep again. No waiter is served before
// the tokens exist, so Wait never over-admits, but a waiter can be overtaken
// by later ones. Each sleep is lengthened by a random jitter of up to 10% of
// the retry-after, at most 10 ms, so that waiters refused together do not
// all hit the store in the same millisecond. With N waiters on a drained
// bucket each refill costs up to N acquire attempts (each a store round
// trip); to wait on one hot key from many goroutines, put an in-process
// limiter or semaphore in front of Wait.
//
// Waits refused by an in-flight limit alone are the exception: a slot
// comes back when a lease ends, and the Waits of one limiter queue per
// item; a slot a lease of the limiter gives back goes to the first of
// them at once, and together they poll about as often as one would. On
// DynamoDB such a Wait polls by reading the items it takes slots of (one
// GetItem, or one BatchGetItem for a cascade, shared with the limiter's
// other Waits for 20 ms) and writes only when they show a slot free, no
// more Waits at once than the slots shown free (and one every 5 s all the
// same, so that a raised capacity is found); a Wait that finds others of
// the limiter queued for the same slots polls behind them instead of
// writing at once.
func (rl *RateLimiter) Wait(ctx context.Context, entityID, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	var (
		err   error                   // the last refusal
		rle   *RateLimitExceededError // err as such
		force bool                    // the next poll writes
	)
	// reads is set while the request waits for slots and polls by reading
	// first (see slotsLookFree); a Wait that finds the Waits of this
	// limiter queued for the same slots queues behind them.
	reads := rl.queuedSlotReads(entityID, resource, consume, opts)
	since := time.Now() // the Wait's age orders the hand-off of slots
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		free, claimed := force, []slotRead(nil)
		if !free {
			free, claimed = rl.slotPollWrites(ctx, reads)
		}
		if free {
			force = false
			var lease *Lease
			lease, err = rl.Acquire(ctx, entityID, resource, consume, opts...)
			rl.slotViews.unclaim(claimed)
			if err == nil || !errors.As(err, &rle) || rle.NeverFits() {
				return lease, err
			}
			reads = rl.slotReads(entityID, resource, rle, opts)
		}
		retryAfter, keys := slotWaitPoll, []slotWaitKey(nil)
		if rle != nil {
			retryAfter, keys = rle.RetryAfter, slotWaitKeys(rle)
		} else {
			keys = slotReadKeys(reads)
		}
		d := rl.waitDuration(retryAfter)
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < retryAfter && rle == nil {
				force = true // queued without a refusal: the acquire decides
				continue
			}
			if left < retryAfter {
				return nil, fmt.Errorf("wait %s/%s: retry after %v is past the context deadline: %w: %w",
					entityID, resource, rle.RetryAfter, context.DeadlineExceeded, err)
			}
			if d > left {
				d = retryAfter // no jitter past the deadline
			}
		}
		if rle != nil && rl.obs.logging(ctx, slog.LevelDebug) {
			rl.obs.log.LogAttrs(ctx, slog.LevelDebug, "limiter: wait",
				slog.String("entity_id", entityID), slog.String("resource", resource),
				slog.String("limit", rle.Primary.LimitName), slog.Duration("retry_after", rle.RetryAfter),
				slog.Duration("sleep", d))
		}
		if keys != nil {
			gift, err := rl.waitForSlot(ctx, keys, d, rl.slotWant(rle, reads, opts), since)
			if err != nil {
				return nil, err
			}
			if gift != nil {
				// A lease of this limiter handed its slots to this Wait.
				var lease *Lease
				lease, err = rl.acquireGift(ctx, entityID, resource, consume, opts, gift)
				if err == nil || !errors.As(err, &rle) || rle.NeverFits() {
					return lease, err
				}
				reads = rl.slotReads(entityID, resource, rle, opts)
			}
		} else if err := rl.sleepUnlessClosed(ctx, d); err != nil {
			return nil, err
		}
	}
}

// slotWaitKeys returns the items of rle's violations when every one is an
// in-flight limit's (a slot comes back when a lease ends, which a Wait
// can learn of in this process), else nil.
func slotWaitKeys(rle *RateLimitExceededError) []slotWaitKey {
	var keys []slotWaitKey
	for _, v := range rle.Violations {
		if !store.Limit(v.Limit).IsInFlight() {
			return nil
		}
		k := slotWaitKey{v.EntityID, v.Resource}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// waitForSlot sleeps a Wait refused for want of a slot of keys' items:
// until a lease of this process gives one back (release), or until its
// poll, d (slotWaitPoll and its jitter) times the number of waiters of
// the busiest item, at most maxSlotPoll, so that the waiters of one
// process poll the store about as often as one would. It returns nil when
// woken or when the poll is due.
func (rl *RateLimiter) waitForSlot(ctx context.Context, keys []slotWaitKey, d time.Duration, want []slotRead, since time.Time) (*slotGift, error) {
	sctx, wake := context.WithCancel(ctx)
	defer wake()
	w := &slotWaiter{wake: wake, want: want, since: since}
	n := rl.slotWaits.join(w, keys)
	d = min(d*time.Duration(n), max(d, maxSlotPoll))
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	err := rl.sleepUnlessClosed(sctx, d)
	gift := rl.slotWaits.leave(w, keys)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil && !errors.Is(err, ErrClosed) {
		return gift, nil // woken by a slot given back, or handed
	}
	if err != nil {
		rl.giveBackGift(ctx, gift)
		return nil, err
	}
	return gift, nil
}

// slotWant returns the slots a Wait refused with rle (or polling for
// reads) takes, so that a lease of the limiter may hand it exactly those
// (slothandoff.go): the in-flight limits of every item the request takes
// slots of, with their amounts. nil (no handed slots) for a Wait with
// options or not refused for want of slots alone.
func (rl *RateLimiter) slotWant(rle *RateLimitExceededError, reads []slotRead, opts []AcquireOption) []slotRead {
	if len(opts) > 0 {
		return nil
	}
	if rle == nil || slotWaitKeys(rle) == nil {
		return reads
	}
	return inFlightRequested(rle)
}

// sleepUnlessClosed is rl.sleep, cut short by Close with ErrClosed.
func (rl *RateLimiter) sleepUnlessClosed(ctx context.Context, d time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(rl.gate.life, cancel)
	err := rl.sleep(sctx, d)
	stop()
	cancel()
	if rl.gate.life.Err() != nil && ctx.Err() == nil {
		return ErrClosed
	}
	return err
}

// waitDuration is the sleep before the next attempt of Wait: retryAfter
// (at least minWaitSleep) plus a random jitter of up to
// min(retryAfter/10, maxWaitJitter).
func (rl *RateLimiter) waitDuration(retryAfter time.Duration) time.Duration {
	d := max(retryAfter, minWaitSleep)
	j := min(d/10, maxWaitJitter)
	if us := int(j / time.Microsecond); us > 0 {
		d += time.Duration(rl.intN(us+1)) * time.Microsecond
	}
	return d
}

// ownRead is the period or balance bucket of a calendar or prepaid limit
// as read: its key, the item (nil: missing), the limit it holds, and the
// start of the next period (0 for a balance).
type ownRead struct {
	key    store.BucketKey
	bucket *store.Bucket
	limit  store.Limit
	nextMs int64
}

// left returns what calendar or prepaid limit l has left (a calendar
// limit's capacity when its period's bucket does not exist yet, a
// balance's 0) and how long until more comes: until the period ends, or
// BalanceRetryAfter for a balance.
func (r ownRead) left(l store.Limit, nowMs int64) (int64, time.Duration) {
	k := kindOf(l)
	until := k.retryAfter(l, r.nextMs, nowMs)
	if s, ok := r.bucket.State(r.limit.Name); ok {
		s, _ = applyLimit(s, r.limit, nowMs)
		return calculateAvailable(s, nowMs), until
	}
	return k.unwritten(l), until
}

// readLimitBuckets reads the bucket of (entityID, resource) and the period
// or balance bucket of each calendar or prepaid limit of limits (those
// with an amount in needed, when needed is not nil) at nowMs: one read
// of the bucket when there are none, else one read of them all.
func (rl *RateLimiter) readLimitBuckets(ctx context.Context, entityID, resource string, limits []store.Limit, needed Consume, nowMs int64) (*store.Bucket, map[string]ownRead, error) {
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	var own map[string]ownRead
	keys := []store.BucketKey{key}
	for _, l := range limits {
		if !l.OwnBucket() || (needed != nil && needed[l.Name] <= 0) {
			continue
		}
		bucket, bl, nextMs, err := ownBucket(l, resource, time.UnixMilli(nowMs), rl.slotGenMs())
		if err != nil {
			return nil, nil, err
		}
		if own == nil {
			own = make(map[string]ownRead)
		}
		r := ownRead{key: store.BucketKey{EntityID: entityID, Resource: bucket}, limit: bl, nextMs: nextMs}
		own[l.Name] = r
		if !slices.Contains(keys, r.key) {
			keys = append(keys, r.key) // in-flight slots live in the bucket itself
		}
	}
	if own == nil {
		b, err := rl.store.getBucket(ctx, key)
		return b, nil, err
	}
	_, buckets, err := rl.store.loadBuckets(ctx, nil, keys)
	if err != nil {
		return nil, nil, err
	}
	for name, r := range own {
		r.bucket = buckets[r.key]
		own[name] = r
	}
	return buckets[key], own, nil
}
