// Layer 2, the contract: how the limiter calls its Repository: each call
// metered, and a write that outlives its caller given back.

package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Writes that outlive their caller's wait.
//
// An Acquire returns within its context's deadline, whatever the store
// does: every write it makes waits for the store or for the context,
// whichever comes first. But a write that was sent may still apply after
// its caller gave up, and the tokens it takes must not stay taken for a
// lease nobody holds. So a write made for a caller whose context can end
// runs in a goroutine of the limiter, on a context detached from the
// caller's (bounded by refundTimeout); when the caller gives up first, the
// goroutine waits for the outcome and gives back what was applied.
// [RateLimiter.Close] waits for these goroutines; none outlives it.

// storeOps are the repository operations of the limiter's algorithms:
// the required ones and the optional capabilities found on the repository,
// each timed and reported to Metrics.StoreCall when metrics are on.
type storeOps struct {
	repo   Repository
	spec   store.SpeculativeStore // nil: the repository has no speculative path
	shards store.ShardStore       // nil: the repository does not shard
	m      Metrics                // nil: nothing is reported
}

func newStoreOps(repo Repository, m Metrics) storeOps {
	s := storeOps{repo: repo, m: m}
	s.spec, _ = repo.(store.SpeculativeStore)
	s.shards, _ = repo.(store.ShardStore)
	return s
}

func (s *storeOps) done(ctx context.Context, op store.StoreOp, start time.Time, err error) {
	if s.m != nil {
		s.m.StoreCall(ctx, op, time.Since(start), err)
	}
}

// begin returns the start time of a metered call (zero when unmetered: no
// clock read).
func (s *storeOps) begin() time.Time {
	if s.m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (s *storeOps) loadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	start := s.begin()
	out, err := s.repo.LoadConfigs(ctx, keys)
	s.done(ctx, store.StoreLoadConfigs, start, err)
	return out, err
}

func (s *storeOps) loadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]Entity, map[store.BucketKey]*store.Bucket, error) {
	start := s.begin()
	metas, buckets, err := s.repo.LoadBuckets(ctx, entityIDs, keys)
	s.done(ctx, store.StoreLoadBuckets, start, err)
	return metas, buckets, err
}

func (s *storeOps) getBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	start := s.begin()
	b, err := s.repo.GetBucket(ctx, key)
	s.done(ctx, store.StoreGetBucket, start, err)
	return b, err
}

func (s *storeOps) writeBuckets(ctx context.Context, writes []store.BucketWrite) error {
	start := s.begin()
	err := s.repo.WriteBuckets(ctx, writes)
	s.done(ctx, store.StoreWriteBuckets, start, err)
	return err
}

func (s *storeOps) speculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	start := s.begin()
	res, err := s.spec.SpeculativeConsume(ctx, req)
	s.done(ctx, store.StoreSpeculativeConsume, start, err)
	return res, err
}

func (s *storeOps) bumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	start := s.begin()
	n, err := s.shards.BumpShardCount(ctx, entityID, resource, current)
	s.done(ctx, store.StoreBumpShardCount, start, err)
	return n, err
}

// refundTimeout bounds the writes that run detached from their caller's
// context: commits, rollbacks, give-backs, and writes whose caller gave
// up. Accounting must not be lost when a request is cancelled after its
// LLM call.
const refundTimeout = 10 * time.Second

// background tracks the limiter's goroutines.
type background struct {
	wg sync.WaitGroup
}

// Go runs f in a tracked goroutine.
func (b *background) Go(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// detachedContext returns a context with ctx's values, no cancellation and
// a refundTimeout deadline.
func detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
}

// detached runs op and returns its result, or ctx's error as soon as ctx
// is done. In that case op goes on, detached from ctx, and late is called
// with its outcome once it ends (late may be nil). A context that can never
// end runs op inline, on ctx. When ctx is done before op starts, op is not
// run at all, unless must is set (a give-back, which must happen whoever
// waits for it): then it runs in the background.
func detached[T any](b *background, ctx context.Context, must bool, op func(ctx context.Context) (T, error), late func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return op(ctx)
	}
	var zero T
	if err := ctx.Err(); err != nil {
		if must {
			b.Go(func() {
				dctx, cancel := detachedContext(ctx)
				v, err := op(dctx)
				cancel()
				if late != nil {
					late(v, err)
				}
			})
		}
		return zero, err
	}
	type outcome struct {
		v   T
		err error
	}
	var (
		mu        sync.Mutex // guards abandoned and the send on done
		abandoned bool
		done      = make(chan outcome, 1)
	)
	b.Go(func() {
		dctx, cancel := detachedContext(ctx)
		v, err := op(dctx)
		cancel()
		mu.Lock()
		gone := abandoned
		if !gone {
			done <- outcome{v, err}
		}
		mu.Unlock()
		if gone && late != nil {
			late(v, err)
		}
	})
	select {
	case o := <-done:
		return o.v, o.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case o := <-done:
			return o.v, o.err // it ended as ctx did: take its answer
		default:
		}
		abandoned = true
		return zero, ctx.Err()
	}
}
