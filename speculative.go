// Layer 4, mechanics: the speculative path: one conditional write and no
// read, falling back to the read-then-write path (a key's first acquire is
// in first_acquire.go).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// pickShard chooses a random shard of (entityID, resource) from the entity
// cache's shard count.
func (rl *RateLimiter) pickShard(entityID, resource string) store.BucketKey {
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	if n := rl.ents.shardCount(entityID, resource); n > 1 {
		key.Shard = rl.intN(n)
	}
	return key
}

// learn records what a speculative result tells about the entity: its shard
// count and, unless known from META, its cascade settings.
// now is the acquire's reading of the clock.
func (rl *RateLimiter) learn(res store.SpeculativeResult, now time.Time) {
	if res.Bucket == nil {
		return
	}
	rl.ents.learn(res.Key.EntityID, res.Key.Resource, res.Bucket.ShardCount, res.Applied, res.Bucket.Cascade, res.Bucket.ParentID, now)
}

// specAcquire is one acquire on the fast path: what every write of it
// needs.
type specAcquire struct {
	resource string
	consume  Consume
	at       time.Time // the clock, read once per acquire
	child    resolved
	parent   resolved // resolved once the parent is known
	o        acquireOptions
	// mixed is set, with refused the item that refused, when that
	// refusal came after a write of this acquire to the other item applied
	// and was given back: the refusal may be owed to what other acquires
	// held of refused for a moment (see mixedRetries).
	mixed   bool
	refused store.BucketKey
	// rounds counts the rounds run again after such a refusal.
	rounds int
	// first is set when the acquire is its key's first: the child's write
	// was refused because its item does not exist, while the parent's,
	// sent beside it, applied (see firstAcquire).
	first *firstWrites
	// sightDue is set when the entity is not in the entity cache, which
	// sightFirst reads it into before the acquire goes on (sighted: it
	// did); sight is what it found, when the key's item is missing.
	sightDue, sighted bool
	sight             *firstSight
}

// mixedRetries bounds the rounds an acquire runs again after a refusal of
// one item while its write to the other applied (a mixed outcome).
//
// The child's and the parent's writes go out together and are not one
// atomic step. Near exhaustion, two groups of concurrent acquires can each
// take the last tokens of one item and be refused by the other: each group
// gives its write back, and each refusal saw an item emptied only by the
// other group's writes, which are given back too. Deciding such a refusal
// at once under-admits by up to the number of acquires in flight. So after
// a mixed outcome the acquire, its own write given back, pauses a moment
// (a random pause of at most mixedPause), reads the item that refused
// (one read) and runs again when that item now covers the request; else,
// as when an item simply has no tokens left (a denial storm costs one read
// more per refusal, no write), the refusal is the answer, and the
// over-limit cache keeps the item as read.
const mixedRetries = 3

// mixedPause bounds the random pause before that read.
const mixedPause = 4 * time.Millisecond

// mixedRefusal records that the refusal about to be returned came from
// key after a mixed outcome.
func (a *specAcquire) mixedRefusal(key store.BucketKey) {
	a.mixed, a.refused = true, key
}

// nowMs is the acquire's time in epoch ms.
func (a *specAcquire) nowMs() int64 { return a.at.UnixMilli() }

// request returns the speculative write of the acquire on key, conditioned
// on limits.
func (a *specAcquire) request(key store.BucketKey, limits []store.Limit) store.SpeculativeRequest {
	return store.SpeculativeRequest{Key: key, Consume: a.consume, Limits: limits, NowMs: a.nowMs()}
}

// pauseThenRead is the first step of a retry after a mixed outcome (see
// mixedRetries): a random pause of at most mixedPause, then a read of the
// refusing item. It returns nil when ctx ends first, the read fails or
// the item is missing.
func (rl *RateLimiter) pauseThenRead(ctx context.Context, key store.BucketKey) *store.Bucket {
	t := time.NewTimer(time.Duration(rl.intN(int(mixedPause/time.Microsecond))+1) * time.Microsecond)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil
	case <-t.C:
	}
	b, err := rl.store.getBucket(ctx, key)
	if err != nil {
		return nil
	}
	return b
}

// isRefusal reports whether err is a refusal for want of tokens.
func isRefusal(err error) bool {
	var rle *RateLimitExceededError
	return errors.As(err, &rle)
}

// speculativeFrom is speculativeAcquire on a, which stays on the caller's
// stack: nothing here retains it.
func (rl *RateLimiter) speculativeFrom(ctx context.Context, entityID string, a *specAcquire) (*Lease, error) {
	resource, consume, child, o := a.resource, a.consume, a.child, a.o
	info, shards := rl.ents.lookup(entityID, resource, a.at)
	if !info.known && !a.sighted && rl.cacheSizes[CacheEntities] > 0 {
		// speculativeAcquire reads the entity first (sightFirst).
		a.sightDue = true
		return nil, nil
	}
	parentID := info.cascadeParent(entityID)

	key := store.BucketKey{EntityID: entityID, Resource: resource}
	if shards > 1 {
		key.Shard = rl.intN(shards)
	}
	var childRes, parentRes store.SpeculativeResult
	parallel := parentID != ""
	if parallel {
		// The cache knows the parent: both writes in one round trip.
		var err error
		if a.parent, err = rl.parentLimits(ctx, parentID, resource, o); err != nil {
			return nil, err
		}
		if rl.cascadesFurther(entityID, parentID, nil) {
			return nil, errCascadePath
		}
	}
	if a.sight.missingItem(key) {
		// The key's item does not exist: speculativeAcquire hands the
		// acquire to firstAcquire, which takes from the parent and
		// creates it.
		a.first = &firstWrites{key: key, parentID: parentID, parentDue: parallel, child: store.SpeculativeResult{Key: key, Reason: store.RefusedBucketMissing}}
		return nil, nil
	}
	if parallel {
		var err error
		if childRes, parentRes, err = rl.consumeBoth(ctx, a, key, rl.pickShard(parentID, resource)); err != nil {
			return nil, err
		}
		if err := rl.learnParent(ctx, a, entityID, parentID, childRes, parentRes); err != nil {
			return nil, err
		}
	} else {
		var err error
		if childRes, err = rl.specConsume(ctx, a.request(key, child.limits)); err != nil {
			return nil, err
		}
	}
	rl.learn(childRes, a.at)

	if !childRes.Applied && childRes.Reason == store.RefusedBucketMissing && parentRes.Applied && key.Shard == 0 {
		// The key's first acquire: the parent's take stays, and
		// speculativeAcquire hands the acquire to firstAcquire.
		a.first = &firstWrites{key: key, parentID: parentID, child: childRes, parent: parentRes}
		return nil, nil
	}
	retried := false // a retry on another shard applied
	if !childRes.Applied {
		if parentRes.Applied {
			if err := rl.undo(ctx, parentRes, consume, a.parent.limits); err != nil {
				return nil, err
			}
		}
		var err error
		if retried, err = rl.childRefused(ctx, a, &childRes, parentRes.Applied); err != nil || !retried {
			if parentRes.Applied && isRefusal(err) {
				a.mixedRefusal(childRes.Key)
			}
			return nil, err
		}
		parallel = false // the parent's write, if any, was undone
	}
	countSuccess := func() {
		if !retried {
			rl.stats.count(store.SpecSuccess)
		}
	}

	lease := newSpecLease(rl, childRes, consume, child.limits)
	entries := lease.entries
	if !parallel {
		if !info.known && childRes.Bucket.Cascade && childRes.Bucket.ParentID != entityID {
			parentID = childRes.Bucket.ParentID
		}
		if parentID == "" {
			countSuccess()
			return lease, nil
		}
		var err error
		if a.parent, err = rl.parentLimits(ctx, parentID, resource, o); err != nil {
			// The child's write is given back (on errOwnBucketPath and
			// errWidePath the batch path takes the whole plan).
			if uerr := rl.undo(ctx, childRes, consume, child.limits); uerr != nil {
				return nil, uerr
			}
			return nil, err
		}
		if rl.cascadesFurther(entityID, parentID, nil) {
			// Likewise for a chain longer than two.
			return nil, rl.undoApplied(ctx, a, childRes, store.SpeculativeResult{})
		}
		if parentRes, err = rl.specConsume(ctx, a.request(rl.pickShard(parentID, resource), a.parent.limits)); err != nil {
			return nil, errors.Join(err, rl.undo(ctx, childRes, consume, child.limits))
		}
		if err := rl.learnParent(ctx, a, entityID, parentID, childRes, parentRes); err != nil {
			return nil, err
		}
	}
	if parentRes.Applied {
		countSuccess()
		lease.entries = appendSpecEntries(entries, make([]leaseEntry, 0, len(a.parent.limits)), parentRes, consume, a.parent.limits)
		return lease, nil
	}
	return rl.parentRefused(ctx, a, childRes, entries, parentRes)
}

// cascadesFurther reports whether parentID, which entityID cascades to,
// cascades in turn to another entity: the acquire then charges more than
// two. The entity cache decides when it knows the parent; otherwise res,
// when not nil, the parent's speculative write, does from the copy of the
// parent's settings on its bucket. Peeking does not count as a cache
// lookup (the acquire's lookup of entityID did).
func (rl *RateLimiter) cascadesFurther(entityID, parentID string, res *store.SpeculativeResult) bool {
	next := ""
	if info, ok := rl.ents.peek(parentID); ok && info.known {
		next = info.cascadeParent(parentID)
	} else if res != nil && res.Bucket != nil && res.Bucket.Cascade {
		next = res.Bucket.ParentID
	}
	return next != "" && next != parentID && next != entityID
}

// learnParent records what parent, the answer to the parent's write of
// entityID's acquire a, tells of it. When it shows that the parent
// cascades further (a chain longer than two), whichever of child and
// parent applied is given back and errCascadePath returned (or the
// give-back's error): the batch path takes the whole chain.
func (rl *RateLimiter) learnParent(ctx context.Context, a *specAcquire, entityID, parentID string, child, parent store.SpeculativeResult) error {
	rl.learn(parent, a.at)
	if rl.cascadesFurther(entityID, parentID, &parent) {
		return rl.undoApplied(ctx, a, child, parent)
	}
	return nil
}

// undoApplied gives back whichever of the child's and the parent's writes
// applied, and returns errCascadePath: the batch path takes the whole
// chain instead. When a give-back fails it returns that error instead.
func (rl *RateLimiter) undoApplied(ctx context.Context, a *specAcquire, child, parent store.SpeculativeResult) error {
	var errs []error
	if child.Applied {
		errs = append(errs, rl.undo(ctx, child, a.consume, a.child.limits))
	}
	if parent.Applied {
		errs = append(errs, rl.undo(ctx, parent, a.consume, a.parent.limits))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return errCascadePath
}

// consumeBoth writes the child's and the parent's speculative consumption
// concurrently. On an error it gives back whichever write applied.
func (rl *RateLimiter) consumeBoth(ctx context.Context, a *specAcquire, key, pkey store.BucketKey) (child, parent store.SpeculativeResult, err error) {
	return rl.consumePair(ctx, a.request(key, a.child.limits), a.request(pkey, a.parent.limits))
}

// consumePair writes two speculative requests on two bucket items
// concurrently, one round trip: a child's and its parent's, or an
// (entity, resource) bucket and another item of the acquire's plan (see
// speculativePair). On an error it gives back whichever write applied
// (its request's amounts, capped at its limits' capacities).
func (rl *RateLimiter) consumePair(ctx context.Context, req, req2 store.SpeculativeRequest) (res, res2 store.SpeculativeResult, err error) {
	var wg sync.WaitGroup
	var err2 error
	wg.Go(func() { res2, err2 = rl.specConsume(ctx, req2) })
	res, err = rl.specConsume(ctx, req)
	wg.Wait()
	if err != nil || err2 != nil {
		var undo []error
		if res.Applied {
			undo = append(undo, rl.undo(ctx, res, req.Consume, req.Limits))
		}
		if res2.Applied {
			undo = append(undo, rl.undo(ctx, res2, req2.Consume, req2.Limits))
		}
		return res, res2, errors.Join(append([]error{err, err2}, undo...)...)
	}
	return res, res2, nil
}

// childRefused handles a refused child write. It reports retried=true when a
// retry on another shard succeeded (child then holds that result); it
// returns a *RateLimitExceededError for a fast rejection, and (false, nil)
// for a fallback to the slow path. mixed tells that the parent's write
// applied and was given back: a fast rejection is then not kept by the
// over-limit cache (see mixedRetries).
func (rl *RateLimiter) childRefused(ctx context.Context, a *specAcquire, child *store.SpeculativeResult, mixed bool) (bool, error) {
	b := child.Bucket
	if child.Reason == store.RefusedWriteCapacity || child.Reason == store.RefusedBothExhausted {
		if !child.CapacityRefills && rl.store.shards != nil {
			// More writes per second than the item takes: spread the load.
			n, err := rl.store.bumpShardCount(ctx, child.Key.EntityID, child.Key.Resource, b.ShardCount)
			if err != nil {
				return false, err
			}
			rl.ents.setShards(child.Key.EntityID, child.Key.Resource, n)
			rl.specFallback(child.Key, store.SpecFallbackShardDoubled)
			return false, nil
		}
		if child.Reason == store.RefusedWriteCapacity {
			rl.specFallback(child.Key, store.SpecFallbackWCUExhausted)
			return false, nil
		}
	}
	if child.Reason == store.RefusedLimitExhausted && b.ShardCount > 1 {
		untried := make([]int, 0, b.ShardCount-1)
		for k := range b.ShardCount {
			if k != child.Key.Shard {
				untried = append(untried, k)
			}
		}
		for attempt := 0; attempt < 2 && len(untried) > 0; attempt++ {
			i := rl.intN(len(untried))
			shard := untried[i]
			untried = append(untried[:i], untried[i+1:]...)
			key := child.Key
			key.Shard = shard
			res, err := rl.specConsume(ctx, a.request(key, a.child.limits))
			if err != nil {
				return false, err
			}
			if res.Applied {
				rl.learn(res, a.at)
				rl.stats.count(store.SpecShardRetrySuccess)
				*child = res
				return true, nil
			}
		}
	}
	return false, rl.checkRefused(*child, a.consume, a.nowMs(), !mixed)
}

// checkRefused decides a refused write from the old item without another
// read: fall back (nil) when the item or a limit is missing, the limits
// changed or refill would help, or reject (*RateLimitExceededError,
// nothing written; remembered by the over-limit cache when remember is
// set).
func (rl *RateLimiter) checkRefused(res store.SpeculativeResult, consume Consume, now int64, remember bool) error {
	switch {
	case res.Reason == store.RefusedRefillDue:
		rl.specFallback(res.Key, store.SpecFallbackRefillDue)
		return nil
	case res.Bucket == nil:
		rl.specFallback(res.Key, store.SpecFallbackBucketMissing)
		return nil
	case res.Reason == store.RefusedExpired:
		rl.specFallback(res.Key, store.SpecFallbackExpired)
		return nil
	case res.Reason == store.RefusedLimitMissing:
		rl.specFallback(res.Key, store.SpecFallbackLimitMissing)
		return nil
	case res.Reason == store.RefusedLimitsChanged:
		rl.specFallback(res.Key, store.SpecFallbackLimitsChanged)
		return nil
	}
	ok, statuses := wouldRefillSatisfy(res.Bucket.States, consume, now)
	if ok {
		rl.specFallback(res.Key, store.SpecFallbackRefillWouldHelp)
		return nil
	}
	rl.stats.count(store.SpecFastRejection)
	err := newRateLimitExceededError(statuses)
	if remember {
		rl.overLimitRemember(res.Bucket, now, err)
	}
	return err
}

// parentRefused handles a refused parent write after the child's succeeded:
// give the child back and fall back, reject, or settle the parent on the
// parent-only slow path.
func (rl *RateLimiter) parentRefused(ctx context.Context, a *specAcquire, child store.SpeculativeResult, childEntries []*leaseEntry, parent store.SpeculativeResult) (*Lease, error) {
	undoChild := func() error { return rl.undo(ctx, child, a.consume, a.child.limits) }
	if parent.Bucket == nil || parent.Reason == store.RefusedExpired || parent.Reason == store.RefusedLimitMissing || parent.Reason == store.RefusedLimitsChanged ||
		parent.Reason == store.RefusedRefillDue {
		rl.specFallback(parent.Key, store.SpecFallbackParent)
		return nil, undoChild()
	}
	ok, parentStatuses := wouldRefillSatisfy(parent.Bucket.States, a.consume, a.nowMs())
	if !ok {
		if err := undoChild(); err != nil {
			return nil, err
		}
		a.mixedRefusal(parent.Key)
		rl.stats.count(store.SpecFastRejection)
		// The child passed: report it as it was before its write.
		var statuses []LimitStatus
		for _, e := range childEntries {
			statuses = append(statuses, LimitStatus{
				EntityID: e.key.EntityID, Resource: e.key.Resource, LimitName: e.limit.Name, Limit: Limit(e.limit),
				Available: bucketmath.FloorDiv(bucketmath.AddMilli(e.state.TokensMilli, e.consumed), 1000), Requested: e.consumed,
			})
		}
		err := newRateLimitExceededError(append(statuses, parentStatuses...))
		return nil, err
	}
	lease, err := rl.parentOnlyAcquire(ctx, parent.Key.EntityID, a)
	if err != nil || lease == nil {
		rl.specFallback(parent.Key, store.SpecFallbackParent)
		return nil, errors.Join(err, undoChild())
	}
	rl.stats.count(store.SpecParentOnlyPath)
	lease.entries = append(childEntries, lease.entries...)
	return lease, nil
}

// parentOnlyAcquire is the parent-only slow path: read the parent's
// shard-0 bucket, refill and consume locally with the parent's resolved
// limits (the caller's override reaches this path too), and write. It
// returns (nil, nil) when the full slow path must decide.
func (rl *RateLimiter) parentOnlyAcquire(ctx context.Context, parentID string, a *specAcquire) (*Lease, error) {
	key := store.BucketKey{EntityID: parentID, Resource: a.resource}
	_, buckets, err := rl.store.loadBuckets(ctx, nil, []store.BucketKey{key})
	if err != nil {
		return nil, err
	}
	g := entityGroup{entityID: parentID, resource: a.resource, limits: a.parent.limits, source: a.parent.source, bucket: buckets[key]}
	if g.bucket == nil {
		return nil, nil
	}
	now := rl.nowMs()
	entries, _, exceeded := consumeGroup(g, a.resource, a.consume, now)
	if exceeded {
		return nil, nil
	}
	for _, e := range entries {
		if e.missingLimit || e.paramsChanged {
			return nil, nil
		}
	}
	lease := &Lease{rl: rl, entries: entries}
	err = rl.commitInitial(ctx, lease, []entityGroup{g})
	if errors.Is(err, errReread) {
		return nil, nil // lost a race: the full slow path reads again
	}
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// undo gives back consume on the item res, an applied speculative write,
// answered with (the shard it hit) as a refund capped at limits'
// capacities. It waits for the write or for ctx, whichever ends first; the
// write goes on when ctx ends first. The DynamoDB backend's write-capacity
// token is not given back.
func (rl *RateLimiter) undo(ctx context.Context, res store.SpeculativeResult, consume Consume, limits []store.Limit) error {
	key := res.Key
	w := giveBackWrite(key, incarnationOf(res), rl.nowMs(), consume, limits)
	if len(w.Limits) == 0 {
		return nil
	}
	_, err := detached(&rl.bg, ctx, true, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, rl.writeAdjust(ctx, w)
	}, func(_ struct{}, err error) {
		if err != nil && !errors.Is(err, store.ErrConditionFailed) {
			rl.logGiveBackFailed(context.Background(), key, err)
		}
	})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) && ctx.Err() == nil {
		return fmt.Errorf("give back %s/%s: %w", key.EntityID, key.Resource, err)
	}
	return nil
}

// specFallback counts a speculative outcome that hands over to the slow
// path (or doubles the shard count) and logs it with the bucket's key.
func (rl *RateLimiter) specFallback(key store.BucketKey, o store.SpeculativeOutcome) {
	rl.stats.count(o)
	level, msg := slog.LevelDebug, "limiter: speculative fallback"
	if o == store.SpecFallbackShardDoubled {
		level, msg = slog.LevelInfo, "limiter: shard count doubled"
	}
	ctx := context.Background()
	if !rl.obs.logging(ctx, level) {
		return
	}
	rl.obs.log.LogAttrs(ctx, level, msg,
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource),
		slog.Int("shard", key.Shard), slog.String("outcome", o.String()))
}

// specConsume is the speculative write of the fast path, through group
// commit when it is on. The caller gets its answer, or its context's error
// as soon as the context ends; a write that applies after its caller gave
// up is given back.
func (rl *RateLimiter) specConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	if rl.gc != nil {
		return rl.gc.consume(ctx, req)
	}
	return detached(&rl.bg, ctx, false, func(ctx context.Context) (store.SpeculativeResult, error) {
		return rl.store.speculativeConsume(ctx, req)
	}, func(res store.SpeculativeResult, err error) {
		if err == nil && res.Applied {
			rl.giveBack(req.Key, incarnationOf(res), req.Consume, req.Limits)
		}
	})
}

// firstWrites are the two speculative writes of a key's first acquire:
// the child's on key, refused for want of its item (or not sent: a read
// found none), and the parent's (parentID's; none for a key that cascades
// to nobody), applied.
type firstWrites struct {
	key           store.BucketKey
	parentID      string
	child, parent store.SpeculativeResult
	// parentDue: the parent's write is not sent yet (a read found the
	// key's item missing before any write).
	parentDue bool
}

// firstSight is what sightFirst read when it found the item of key (shard
// 0 of the acquire's resource) missing: the entity's record (found: it
// exists).
type firstSight struct {
	key   store.BucketKey
	meta  Entity
	found bool
}

// missingItem reports whether s (nil: no read, or the item exists) found
// key's item missing.
func (s *firstSight) missingItem(key store.BucketKey) bool {
	return s != nil && s.key == key
}

// specEntries turns a successful speculative result into lease entries, one
// per resolved limit, as the slow path does: a limit the request did not
// name can still be adjusted within the lease. The write was conditioned on
// the item storing these limits.
func specEntries(res store.SpeculativeResult, consume Consume, limits []store.Limit) []*leaseEntry {
	// One backing array for the entries: two allocations whatever the
	// number of limits.
	return appendSpecEntries(make([]*leaseEntry, 0, len(limits)), make([]leaseEntry, 0, len(limits)), res, consume, limits)
}

// specLease1, specLease2 and specLease4 are a lease and its entries in
// one allocation, for an acquire of one, two, or up to four limits (a
// parent's entries, appended later, get a block of their own when there is
// no room left). Sized to the limits, so that a lease of one limit does not
// allocate and clear room for four.
type specLease1 struct {
	lease   Lease
	ptrs    [1]*leaseEntry
	backing [1]leaseEntry
}

type specLease2 struct {
	lease   Lease
	ptrs    [2]*leaseEntry
	backing [2]leaseEntry
}

type specLease4 struct {
	lease   Lease
	ptrs    [4]*leaseEntry
	backing [4]leaseEntry
}

// newSpecLease returns a lease holding specEntries(res, consume, limits):
// one allocation for up to four limits.
func newSpecLease(rl *RateLimiter, res store.SpeculativeResult, consume Consume, limits []store.Limit) *Lease {
	switch n := len(limits); {
	case n <= 1:
		b := &specLease1{}
		b.lease = Lease{rl: rl, entries: appendSpecEntries(b.ptrs[:0], b.backing[:0], res, consume, limits)}
		return &b.lease
	case n == 2:
		b := &specLease2{}
		b.lease = Lease{rl: rl, entries: appendSpecEntries(b.ptrs[:0], b.backing[:0], res, consume, limits)}
		return &b.lease
	case n <= 4:
		b := &specLease4{}
		b.lease = Lease{rl: rl, entries: appendSpecEntries(b.ptrs[:0], b.backing[:0], res, consume, limits)}
		return &b.lease
	}
	return &Lease{rl: rl, entries: specEntries(res, consume, limits)}
}

// appendSpecEntries appends to out the entries of specEntries, stored in
// backing, which must have room for them.
func appendSpecEntries(out []*leaseEntry, backing []leaseEntry, res store.SpeculativeResult, consume Consume, limits []store.Limit) []*leaseEntry {
	for _, l := range limits {
		s, ok := res.Bucket.State(l.Name)
		if !ok {
			continue
		}
		amount := consume[l.Name]
		backing = append(backing, leaseEntry{
			key: res.Key, limit: l, state: s,
			consumed: amount, initialConsumed: amount,
			originalTokensMilli: s.TokensMilli, originalRfMs: s.LastRefillMs,
			inc: res.Bucket.Incarnation,
		})
		out = append(out, &backing[len(backing)-1])
	}
	return out
}

// appliedItem returns the lease entries of item it, whose speculative
// write res applied at now, and its statuses: Available is what the item
// held before the write, refilled to now.
func appliedItem(res store.SpeculativeResult, it *batchItem, now int64) ([]*leaseEntry, []LimitStatus) {
	entries := specEntries(res, it.consume, it.group.limits)
	var statuses []LimitStatus
	for _, e := range entries {
		before := e.state
		before.TokensMilli = bucketmath.AddMilli(before.TokensMilli, e.consumed)
		statuses = append(statuses, LimitStatus{
			EntityID: e.key.EntityID, Resource: e.key.Resource, LimitName: e.limit.Name, Limit: Limit(e.limit),
			Available: calculateAvailable(before, now), Requested: e.consumed,
		})
	}
	return entries, statuses
}

// refusedItem decides item it of a plan from res, its speculative write
// refused at now, as the read-then-write path would from the item as it
// was, refilled to now: its statuses, and whether it is exceeded. decides
// is false when the read-then-write path must decide (the item is missing
// or expired, holds other limits, or is due a refill).
func refusedItem(res store.SpeculativeResult, it *batchItem, now int64) (statuses []LimitStatus, exceeded, decides bool) {
	switch res.Reason {
	case store.RefusedBucketMissing, store.RefusedExpired, store.RefusedLimitMissing, store.RefusedLimitsChanged, store.RefusedRefillDue:
		return nil, false, false
	}
	g := it.group
	g.bucket = res.Bucket
	_, statuses, exceeded = consumeGroup(g, g.resource, it.consume, now)
	return statuses, exceeded, true
}
