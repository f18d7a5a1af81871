// Layer 4, mechanics: Acquire, Do, Available and TimeUntilAvailable,
// which choose a path for each call.

package limiter

import (
	"context"
	"errors"
	"fmt"
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
	return rl.acquireMetered(ctx, entityID, resource, consume, opts, nil)
}

// acquireMetered is acquireChecked, reported to the metrics.
func (rl *RateLimiter) acquireMetered(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption, gift *slotGift) (*Lease, error) {
	m := rl.obs.metrics
	var start time.Time
	if m != nil {
		start = time.Now()
	}
	lease, err := rl.acquireChecked(ctx, entityID, resource, consume, opts, gift)
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

// acquireChecked is Acquire without metrics; gift, when not nil, is the
// slots handed to the Wait that acquires (slothandoff.go), which its
// plan takes instead of charging them.
func (rl *RateLimiter) acquireChecked(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption, gift *slotGift) (*Lease, error) {
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
		lease, err = rl.acquire(ctx, entityID, resource, consume, o, gift)
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
func (rl *RateLimiter) acquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions, gift *slotGift) (*Lease, error) {
	if err := rl.overLimitRefuse(entityID, resource, consume); err != nil {
		return nil, err
	}
	p, err := rl.planAcquire(ctx, entityID, resource, consume, o)
	if err != nil {
		return nil, err
	}
	gift.takeFrom(&p, rl)
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
		gift.takeFrom(&p, rl)
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
