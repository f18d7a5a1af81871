package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// SpeculativeOutcome classifies what happened to an acquire on the
// speculative fast path.
type SpeculativeOutcome int

// Outcomes counted by [RateLimiter.SpeculativeStats].
const (
	// SpecSuccess: served by one conditional write per bucket, no read.
	SpecSuccess SpeculativeOutcome = iota
	// SpecFastRejection: refused from the old item without any write
	// applied, because refill would not help.
	SpecFastRejection
	// SpecShardRetrySuccess: served after retrying on another shard.
	SpecShardRetrySuccess
	// SpecParentOnlyPath: the child was served speculatively, the parent by
	// the parent-only slow path.
	SpecParentOnlyPath
	// SpecFallbackBucketMissing: fell back because the bucket item does not
	// exist (yet).
	SpecFallbackBucketMissing
	// SpecFallbackExpired: fell back because the bucket's TTL has passed.
	SpecFallbackExpired
	// SpecFallbackLimitMissing: fell back because a requested limit is not
	// in the bucket (config changed).
	SpecFallbackLimitMissing
	// SpecFallbackRefillWouldHelp: fell back to refill (tokens short now,
	// enough after refill).
	SpecFallbackRefillWouldHelp
	// SpecFallbackWCUExhausted: fell back because the bucket's write
	// capacity token was spent but refills in time.
	SpecFallbackWCUExhausted
	// SpecFallbackShardDoubled: the partition takes more than 1000
	// writes/s; its shard count was doubled and the acquire fell back.
	SpecFallbackShardDoubled
	// SpecFallbackParent: the parent's write was refused in a way the
	// parent-only path could not settle; the child was compensated and
	// the acquire fell back to the full slow path.
	SpecFallbackParent
	numSpecOutcomes
)

var specOutcomeNames = [numSpecOutcomes]string{
	"success", "fast_rejection", "shard_retry_success", "parent_only_path",
	"bucket_missing", "bucket_expired", "limit_missing", "refill_would_help",
	"wcu_exhausted", "shard_doubled", "parent_fallback",
}

// String returns the outcome's name, e.g. "bucket_missing".
func (o SpeculativeOutcome) String() string {
	if o < 0 || o >= numSpecOutcomes {
		return fmt.Sprintf("SpeculativeOutcome(%d)", int(o))
	}
	return specOutcomeNames[o]
}

// SpeculativeStats counts speculative-path outcomes since the limiter was
// created: the fast-path hit rate is Counts[SpecSuccess] / Attempts.
type SpeculativeStats struct {
	// Attempts is the number of acquires that tried the fast path.
	Attempts int64
	// Counts holds one counter per outcome.
	Counts [numSpecOutcomes]int64
}

// Fallbacks returns the number of attempts that went on to the slow path.
func (s SpeculativeStats) Fallbacks() int64 {
	var n int64
	for o := SpecFallbackBucketMissing; o < numSpecOutcomes; o++ {
		n += s.Counts[o]
	}
	return n
}

type specStats struct {
	attempts atomic.Int64
	counts   [numSpecOutcomes]atomic.Int64
}

func (s *specStats) count(o SpeculativeOutcome) { s.counts[o].Add(1) }

// SpeculativeStats returns the speculative-path counters.
func (rl *RateLimiter) SpeculativeStats() SpeculativeStats {
	var out SpeculativeStats
	out.Attempts = rl.stats.attempts.Load()
	for i := range out.Counts {
		out.Counts[i] = rl.stats.counts[i].Load()
	}
	return out
}

// pickShard chooses a random shard of (entityID, resource) from the entity
// cache's shard count.
func (rl *RateLimiter) pickShard(entityID, resource string) bucketKey {
	key := bucketKey{entityID: entityID, resource: resource}
	if n := rl.repo.entities().shardCount(entityID, resource); n > 1 {
		key.shard = rl.intN(n)
	}
	return key
}

// learn records what a speculative result tells about the entity: its shard
// count and, unless known from META, its cascade settings.
func (rl *RateLimiter) learn(res specResult) {
	if res.bucket == nil {
		return
	}
	cache := rl.repo.entities()
	cache.setShards(res.key.entityID, res.key.resource, res.bucket.shardCount)
	if res.ok {
		cache.learnFromBucket(res.key.entityID, res.bucket.cascade, res.bucket.parentID)
	}
}

// speculativeAcquire is the fast path (reference §6.3): one conditional
// UpdateItem per bucket, no read. It returns (nil, nil) when the slow path
// must decide.
func (rl *RateLimiter) speculativeAcquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (*Lease, error) {
	rl.stats.attempts.Add(1)
	now := rl.nowMs()
	info, _ := rl.repo.entities().get(entityID)
	parentID := info.cascadeParent()

	key := rl.pickShard(entityID, resource)
	var child, parent specResult
	parallel := parentID != ""
	if parallel {
		// The cache knows the parent: both writes in one round trip.
		pkey := rl.pickShard(parentID, resource)
		var wg sync.WaitGroup
		var perr error
		wg.Go(func() { parent, perr = rl.repo.speculativeConsume(ctx, pkey, consume, now) })
		var err error
		child, err = rl.repo.speculativeConsume(ctx, key, consume, now)
		wg.Wait()
		if err != nil || perr != nil {
			return nil, errors.Join(err, perr, rl.compensateIf(ctx, child, consume), rl.compensateIf(ctx, parent, consume))
		}
		rl.learn(parent)
	} else {
		var err error
		if child, err = rl.repo.speculativeConsume(ctx, key, consume, now); err != nil {
			return nil, err
		}
	}
	rl.learn(child)

	retried := false
	if !child.ok {
		if err := rl.compensateIf(ctx, parent, consume); err != nil {
			return nil, err
		}
		var err error
		if retried, err = rl.childRefused(ctx, &child, consume, now); err != nil || !retried {
			return nil, err
		}
		parallel = false // the parent's write, if any, was undone
	}
	countSuccess := func() {
		if !retried {
			rl.stats.count(SpecSuccess)
		}
	}

	entries := specEntries(child, consume)
	if !parallel {
		if !info.known && child.bucket.cascade {
			parentID = child.bucket.parentID
		}
		if parentID == "" {
			countSuccess()
			return &Lease{rl: rl, entries: entries}, nil
		}
		var err error
		if parent, err = rl.repo.speculativeConsume(ctx, rl.pickShard(parentID, resource), consume, now); err != nil {
			return nil, errors.Join(err, rl.compensate(ctx, child.key, consume))
		}
		rl.learn(parent)
	}
	if parent.ok {
		countSuccess()
		return &Lease{rl: rl, entries: append(entries, specEntries(parent, consume)...)}, nil
	}
	return rl.parentRefused(ctx, child, entries, parent, consume, o, now)
}

// childRefused handles a refused child write. It reports retried=true when a
// retry on another shard succeeded (child then holds that result); it
// returns a *RateLimitExceededError for a fast rejection, and (false, nil)
// for a fallback to the slow path.
func (rl *RateLimiter) childRefused(ctx context.Context, child *specResult, consume Consume, now int64) (bool, error) {
	b := child.bucket
	if child.reason == specWCUExhausted || child.reason == specBothExhausted {
		if !wcuRefillWouldHelp(b, now) {
			// More than 1000 writes/s on this partition: spread the load.
			if _, err := rl.repo.bumpShardCount(ctx, child.key.entityID, child.key.resource, b.shardCount); err != nil {
				return false, err
			}
			rl.stats.count(SpecFallbackShardDoubled)
			return false, nil
		}
		if child.reason == specWCUExhausted {
			rl.stats.count(SpecFallbackWCUExhausted)
			return false, nil
		}
	}
	if child.reason == specAppExhausted && b.shardCount > 1 {
		untried := make([]int, 0, b.shardCount-1)
		for k := range b.shardCount {
			if k != child.key.shard {
				untried = append(untried, k)
			}
		}
		for attempt := 0; attempt < 2 && len(untried) > 0; attempt++ {
			i := rl.intN(len(untried))
			shard := untried[i]
			untried = append(untried[:i], untried[i+1:]...)
			key := child.key
			key.shard = shard
			res, err := rl.repo.speculativeConsume(ctx, key, consume, now)
			if err != nil {
				return false, err
			}
			if res.ok {
				rl.learn(res)
				rl.stats.count(SpecShardRetrySuccess)
				*child = res
				return true, nil
			}
		}
	}
	return false, rl.checkRefused(*child, consume, now)
}

// checkRefused decides a refused write from the old item without another
// read: fall back (nil) when the item or a limit is missing or refill would
// help, or reject (*RateLimitExceededError, nothing written).
func (rl *RateLimiter) checkRefused(res specResult, consume Consume, now int64) error {
	switch {
	case res.bucket == nil:
		rl.stats.count(SpecFallbackBucketMissing)
		return nil
	case res.reason == specExpired:
		rl.stats.count(SpecFallbackExpired)
		return nil
	case res.reason == specLimitMissing:
		rl.stats.count(SpecFallbackLimitMissing)
		return nil
	}
	ok, statuses := wouldRefillSatisfy(res.bucket.states, positive(consume), now)
	if ok {
		rl.stats.count(SpecFallbackRefillWouldHelp)
		return nil
	}
	rl.stats.count(SpecFastRejection)
	return newRateLimitExceededError(statuses)
}

// parentRefused handles a refused parent write after the child's succeeded
// (variants P and S of reference §6.3): give the child back and fall back,
// reject, or settle the parent on the parent-only slow path.
func (rl *RateLimiter) parentRefused(ctx context.Context, child specResult, childEntries []*leaseEntry, parent specResult,
	consume Consume, o acquireOptions, now int64) (*Lease, error) {
	undoChild := func() error { return rl.compensate(ctx, child.key, consume) }
	if parent.bucket == nil || parent.reason == specExpired || parent.reason == specLimitMissing {
		rl.stats.count(SpecFallbackParent)
		return nil, undoChild()
	}
	ok, parentStatuses := wouldRefillSatisfy(parent.bucket.states, positive(consume), now)
	if !ok {
		if err := undoChild(); err != nil {
			return nil, err
		}
		rl.stats.count(SpecFastRejection)
		// The child passed: report it as it was before its write (fix B2:
		// the hidden wcu limit is never reported).
		var statuses []LimitStatus
		for _, e := range childEntries {
			statuses = append(statuses, LimitStatus{
				EntityID: e.key.entityID, Resource: e.key.resource, LimitName: e.limit.Name, Limit: e.limit,
				Available: floorDiv(addMilli(e.state.TokensMilli, e.consumed), 1000), Requested: e.consumed,
			})
		}
		return nil, newRateLimitExceededError(append(statuses, parentStatuses...))
	}
	lease, err := rl.parentOnlyAcquire(ctx, parent.key.entityID, child.key.resource, consume, o)
	if err != nil || lease == nil {
		rl.stats.count(SpecFallbackParent)
		return nil, errors.Join(err, undoChild())
	}
	rl.stats.count(SpecParentOnlyPath)
	lease.entries = append(childEntries, lease.entries...)
	return lease, nil
}

// parentOnlyAcquire is the parent-only slow path (§6.6): read the parent's
// shard-0 bucket, refill and consume locally with the caller's limits or the
// parent's stored ones (fix B3), and write. It returns (nil, nil) when the
// full slow path must decide.
func (rl *RateLimiter) parentOnlyAcquire(ctx context.Context, parentID, resource string, consume Consume, o acquireOptions) (*Lease, error) {
	limits, source, err := rl.limitsFor(ctx, parentID, resource, o)
	if err != nil {
		return nil, err
	}
	key := bucketKey{entityID: parentID, resource: resource}
	_, buckets, err := rl.repo.loadBuckets(ctx, nil, []bucketKey{key})
	if err != nil {
		return nil, err
	}
	g := entityGroup{entityID: parentID, limits: limits, source: source, bucket: buckets[key]}
	if g.bucket == nil {
		return nil, nil
	}
	now := rl.nowMs()
	entries, _, exceeded := consumeGroup(g, resource, consume, now)
	if exceeded {
		return nil, nil
	}
	for _, e := range entries {
		if e.missingLimit {
			return nil, nil
		}
	}
	lease := &Lease{rl: rl, entries: entries}
	err = rl.commitInitial(ctx, lease, []entityGroup{g})
	if errors.Is(err, ErrRateLimited) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// specEntries turns a successful speculative result into lease entries, one
// per limit of the bucket (wcu excluded), as the slow path does: a limit the
// request did not name can still be adjusted within the lease.
func specEntries(res specResult, consume Consume) []*leaseEntry {
	var out []*leaseEntry
	for _, s := range res.bucket.states {
		if s.LimitName == wcuLimitName {
			continue
		}
		amount := consume[s.LimitName]
		out = append(out, &leaseEntry{
			key: res.key, limit: limitFromBucketState(s), state: s,
			consumed: amount, initialConsumed: amount,
			originalTokensMilli: s.TokensMilli, originalRfMs: s.LastRefillMs,
		})
	}
	return out
}

// compensate gives back consume on key (the shard the speculative write hit,
// fix B5), on a context detached from ctx's cancellation. The wcu token is
// not given back.
func (rl *RateLimiter) compensate(ctx context.Context, key bucketKey, consume Consume) error {
	w := bucketWrite{kind: writeAdjust, key: key}
	for _, name := range consume.names() {
		if a := consume[name]; a != 0 {
			w.limits = append(w.limits, limitWrite{name: name, consumedMilli: -satMul(a, 1000)})
		}
	}
	if len(w.limits) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	if err := rl.repo.writeBuckets(ctx, []bucketWrite{w}); err != nil && !errors.Is(err, errConditionFailed) {
		return fmt.Errorf("compensate %s/%s: %w", key.entityID, key.resource, err)
	}
	return nil
}

// compensateIf compensates res when it was a successful write.
func (rl *RateLimiter) compensateIf(ctx context.Context, res specResult, consume Consume) error {
	if !res.ok {
		return nil
	}
	return rl.compensate(ctx, res.key, consume)
}

// wcuRefillWouldHelp reports whether the bucket's wcu limit, refilled to
// now, holds a write token: if so the partition is not really above 1000
// writes/s and the slow path (which persists the refill) is enough.
func wcuRefillWouldHelp(b *storedBucket, now int64) bool {
	s, ok := b.state(wcuLimitName)
	if !ok {
		return true
	}
	tk, _ := refillBucket(s.TokensMilli, b.rf, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return tk >= wcuWriteCostMilli
}

// positive returns the entries of c with a positive amount: the ones that
// gate admission (fix B9).
func positive(c Consume) Consume {
	out := make(Consume, len(c))
	for k, v := range c {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
