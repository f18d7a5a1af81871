package limiter

import (
	"context"
	"sync"
	"time"
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

// Close waits until every write the limiter still runs for callers that
// gave up has ended (each within 10 s) and its tokens were given back.
// Call it when the limiter is no longer used: after it returns, no
// goroutine of the limiter runs. Acquires after Close start new writes
// that Close did not wait for.
func (rl *RateLimiter) Close() error {
	rl.bg.wg.Wait()
	return nil
}
