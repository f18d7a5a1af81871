// Layer 2, the contract: the limiter's goroutines, and the writes that
// outlive their caller's wait.

package limiter

import (
	"context"
	"slices"
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
// caller's; when the caller gives up first, the goroutine waits for the
// outcome (within the store timeout, which bounds every store call) and
// gives back what was applied. A write that got no answer within the store
// timeout may have applied all the same: what it took stays taken
// (under-admission, never a double charge). [RateLimiter.Close] waits for
// these goroutines; none outlives it.

// background runs the limiter's goroutines: writes whose caller may stop
// waiting, give-backs, background commits.
//
// A goroutine that makes a DynamoDB call grows its stack several times
// over (the SDK's call chain is deep), and a new goroutine starts small,
// so a goroutine per write spent about a tenth of an acquire's CPU copying
// stacks. The goroutines are therefore kept: one that ends its work parks
// and takes the next function handed to Go, the most recently parked first
// (its stack is the warmest). A sweep every workerIdle, armed while any is
// parked, tells those that stayed parked for a whole period to exit, so a
// goroutine idles between one and two periods; parking itself starts no
// timer. Close waits for the work (work reaching zero), then tells the
// parked goroutines to exit, and waits for them and the sweep. Work is
// counted under mu, not with a sync.WaitGroup, so that work handed over
// while Close waits (a give-back started by a write Close waits for) is
// waited for too, and work handed over after Close ended runs on the
// caller's goroutine: no goroutine of the limiter outlives Close.
type background struct {
	mu     sync.Mutex    // guards work, closed, idle, period and sweep
	work   int           // work handed to Go (or held with hold) and not ended
	workCh chan struct{} // closed when work drops to zero while wait waits; nil otherwise
	closed bool          // wait has ended: Go runs f inline
	idle   []*worker     // parked goroutines, in the order they parked
	period uint64        // sweeps so far
	sweep  *sweep        // the armed sweep; nil when none is

	running sync.WaitGroup // goroutines alive, and the armed sweep
}

// worker is a goroutine of background. Go hands it work on next (buffered:
// the hand-over never blocks); nil tells it to exit.
type worker struct {
	next chan func()
	// period is the sweep period in which it last parked.
	period uint64
}

// sweep is an armed sweep of background's parked goroutines.
type sweep struct{ t *time.Timer }

// workerIdle is the period of the sweep of parked goroutines.
const workerIdle = time.Second

// Go runs f in a goroutine of b (on the caller's goroutine once b's wait
// has ended).
func (b *background) Go(f func()) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		f()
		return
	}
	b.work++
	if n := len(b.idle); n > 0 {
		w := b.idle[n-1]
		b.idle[n-1] = nil
		b.idle = b.idle[:n-1]
		b.mu.Unlock()
		w.next <- f
		return
	}
	b.mu.Unlock()
	b.running.Add(1)
	go b.loop(&worker{next: make(chan func(), 1)}, f)
}

// hold counts work that runs outside Go (a timer's function) until
// release; it reports false, counting nothing, once b's wait has ended.
func (b *background) hold() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.work++
	return true
}

// release ends work counted by hold; b.mu must not be held.
func (b *background) release() {
	b.mu.Lock()
	b.releaseLocked()
	b.mu.Unlock()
}

func (b *background) releaseLocked() {
	b.work--
	if b.work == 0 && b.workCh != nil {
		close(b.workCh)
		b.workCh = nil
	}
}

// loop runs f, then what Go hands w, until w is told to exit.
func (b *background) loop(w *worker, f func()) {
	defer b.running.Done()
	for f != nil {
		f()
		// Parked as the work is marked done, so that wait, once the work
		// is done, finds every goroutine parked.
		b.mu.Lock()
		w.period = b.period
		b.idle = append(b.idle, w)
		if b.sweep == nil {
			sw := new(sweep)
			b.running.Add(1)
			sw.t = time.AfterFunc(workerIdle, func() { b.sweepIdle(sw) })
			b.sweep = sw
		}
		b.releaseLocked()
		b.mu.Unlock()
		f = <-w.next
	}
}

// sweepIdle tells the goroutines parked since before the previous sweep
// to exit, and arms the next sweep while any stays parked. A sweep that
// Close disarmed as it fired does nothing.
func (b *background) sweepIdle(sw *sweep) {
	defer b.running.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sweep != sw {
		return
	}
	b.period++
	n := 0
	for n < len(b.idle) && b.idle[n].period+1 < b.period {
		b.idle[n].next <- nil
		n++
	}
	b.idle = slices.Delete(b.idle, 0, n)
	if len(b.idle) == 0 {
		b.sweep = nil
		return
	}
	b.running.Add(1)
	sw.t.Reset(workerIdle)
}

// wait waits until the work handed to Go has ended and every goroutine of
// b has exited; work handed to Go afterwards runs inline. It is called
// once, by Close.
func (b *background) wait() {
	b.mu.Lock()
	for b.work > 0 {
		ch := make(chan struct{})
		b.workCh = ch
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
	b.closed = true
	for _, w := range b.idle {
		w.next <- nil
	}
	b.idle = nil
	if b.sweep != nil && b.sweep.t.Stop() {
		b.running.Done() // the armed sweep will not run
	}
	b.sweep = nil
	b.mu.Unlock()
	b.running.Wait()
}

// detachedContext returns a context with ctx's values and no
// cancellation (ctx itself when it can never end). Each store call made
// with it is bounded by the store timeout (storeOps); the cancel function
// releases nothing and is there for the callers' defer.
func detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	return &detachedCtx{parent: ctx}, func() {}
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
