package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	limiter "github.com/zaelimiter/limiter"
)

// The hot cascade: group commit on against off on one hot parent.
//
// Two RateLimiters (as two instances of a service have) × 32 goroutines
// acquire and commit on two keys that cascade to one parent, so that the
// parent's item takes the writes of all 64 goroutines and each key's those
// of 32. "cascade-hot/gc-off" runs it with Options.GroupCommit false and is
// the floor of "cascade-hot", the same with group commit on (the
// default): their ratio of ops/s is what group commit gains or costs on a
// hot item. Both run only when -only names them, and only in the rounds of
// the second concurrency, with their own 64 goroutines, worker w on
// limiter w%2 and key (w/2)%2.
//
// "cascade-150" (floor "cascade-150/gc-off") is the same with every limit
// at 150 per hour, on entities created afresh before each phase: the
// buckets do not exist when the phase starts (all 64 goroutines race to
// create them), 150 acquires are admitted and the rest refused. A phase
// fails unless it admitted exactly 150 (plus the refill of its span) and
// every refusal reported a shortage (no tokens left, a positive
// Retry-After).

// hotGoroutines is the hot cascade's concurrency: two limiters × 32.
const hotGoroutines = 64

// hotParent and hotKeys are the entities of the hot cascade.
var (
	hotParent = "fb-hot-parent"
	hotKeys   = [2]string{"fb-hot-k1", "fb-hot-k2"}
)

// setupHot creates the hot cascade's entities and, with one acquire each,
// their buckets.
func (b *bench) setupHot(ctx context.Context, rl *limiter.RateLimiter) error {
	if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: hotParent}); err != nil {
		return err
	}
	for _, k := range hotKeys {
		if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: k, ParentID: hotParent, Cascade: true}); err != nil {
			return err
		}
		l, err := rl.Acquire(ctx, k, resource, consume, limits)
		if err != nil {
			return fmt.Errorf("create the buckets of %s: %w", k, err)
		}
		if err := l.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}

// hotContenders returns the hot cascade without group commit (the floor)
// and with it.
func (b *bench) hotContenders() []contender {
	run := func(gc bool) op {
		rls := [2]*limiter.RateLimiter{
			limiter.New(b.repo, storeTimeout, func(o *limiter.Options) { o.GroupCommit = gc }),
			limiter.New(b.repo, storeTimeout, func(o *limiter.Options) { o.GroupCommit = gc }),
		}
		return func(ctx context.Context, w int) error {
			l, err := rls[w%2].Acquire(ctx, hotKeys[(w/2)%2], resource, consume, limits)
			if err != nil {
				return err
			}
			return l.Commit(ctx)
		}
	}
	return []contender{
		{name: "cascade-hot/gc-off", floor: "cascade-hot/gc-off", run: run(false), goroutines: hotGoroutines},
		{name: "cascade-hot", floor: "cascade-hot/gc-off", run: run(true), goroutines: hotGoroutines},
		b.drainContender("cascade-150/gc-off", "cascade-150/gc-off", false),
		b.drainContender("cascade-150", "cascade-150/gc-off", true),
	}
}

// drainCapacity is the limit of the cascade-150 contenders: per hour.
const drainCapacity = 150

// drainContender is a cascade-150 contender (see above).
func (b *bench) drainContender(name, floor string, gc bool) contender {
	rls := [2]*limiter.RateLimiter{
		limiter.New(b.repo, storeTimeout, func(o *limiter.Options) { o.GroupCommit = gc }),
		limiter.New(b.repo, storeTimeout, func(o *limiter.Options) { o.GroupCommit = gc }),
	}
	lims := limiter.WithLimits(limiter.PerHour("rpm", drainCapacity))
	var (
		gen               int // the phase's entities; set before the phase
		start             time.Time
		admitted, refused atomic.Int64
		falses            atomic.Int64
		firstFalse        atomic.Pointer[string]
	)
	prefix := fmt.Sprintf("fb-drain-gc-%v-", gc)
	key := func(w int) string { return fmt.Sprintf("%s%d-k%d", prefix, gen, (w/2)%2) }
	return contender{
		name: name, floor: floor, goroutines: hotGoroutines,
		before: func(ctx context.Context, _ int) error {
			gen++
			admitted.Store(0)
			refused.Store(0)
			falses.Store(0)
			parent := fmt.Sprintf("%s%d-parent", prefix, gen)
			if _, err := rls[0].Admin().CreateEntity(ctx, limiter.Entity{ID: parent}); err != nil {
				return err
			}
			for w := range 2 {
				if _, err := rls[0].Admin().CreateEntity(ctx, limiter.Entity{ID: key(2 * w), ParentID: parent, Cascade: true}); err != nil {
					return err
				}
			}
			start = time.Now()
			return nil
		},
		run: func(ctx context.Context, w int) error {
			l, err := rls[w%2].Acquire(ctx, key(w), resource, limiter.Consume{"rpm": 1}, lims)
			var rle *limiter.RateLimitExceededError
			if errors.As(err, &rle) {
				refused.Add(1)
				for _, v := range rle.Violations {
					if rle.RetryAfter <= 0 || v.Available >= v.Requested {
						falses.Add(1)
						msg := err.Error()
						firstFalse.CompareAndSwap(nil, &msg)
						break
					}
				}
				return nil
			}
			if err != nil {
				return err
			}
			admitted.Add(1)
			return l.Commit(ctx)
		},
		after: func() error {
			earned := int64(time.Since(start) / (time.Hour / drainCapacity))
			n := admitted.Load()
			if f := falses.Load(); f > 0 {
				return fmt.Errorf("%d refusals while tokens remained, the first: %s", f, *firstFalse.Load())
			}
			if refused.Load() > 0 && (n < drainCapacity || n > drainCapacity+earned) {
				return fmt.Errorf("admitted %d, want %d (+%d earned)", n, drainCapacity, earned)
			}
			return nil
		},
	}
}
