// Layer 2, the contract: the bound of every store call, and the errors of
// a call that the bound or the circuit breaker ended.

package limiter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The bound of a store call.
//
// Every call the limiter makes on its repository for an acquire, a lease
// or a write that gives tokens back ends within the store timeout
// ([Options.StoreTimeout]), whatever the caller's context allows, and never
// later than the caller's deadline when the caller waits for it. The bound
// is a context deadline, so on DynamoDB it covers the whole call: every
// attempt of the SDK's retryer and the backoff between them.
//
// A context.WithTimeout per call would cost a few allocations and two
// clock reads on the fast path. Calls instead share the context of an
// epoch: one context per period of a tenth of the bound (the slack), with
// a deadline bound+slack after the epoch began. A call started during the
// epoch thus gets between bound and bound+slack. A timer marks the epoch
// stale when its period ends; the next call starts a new one. A limiter
// that makes no calls arms no timer.

// storeBound hands out the deadlines of store calls.
type storeBound struct {
	d     time.Duration // the bound; ≤ 0: calls are not bounded
	slack time.Duration // the period of an epoch: how much longer than d a call may get

	cur atomic.Pointer[boundEpoch] // the current epoch; nil before the first call

	mu   sync.Mutex    // guards live; serialises new epochs
	live []*boundEpoch // epochs whose context may not have ended
}

// boundEpoch is the deadline shared by the store calls started during one
// period.
type boundEpoch struct {
	ctx      context.Context // no values; ends at deadline
	cancel   context.CancelFunc
	deadline time.Time
	started  int64       // when the period began, in monoNow's nanoseconds
	stale    atomic.Bool // set when the period ended: calls take a new epoch
	timer    *time.Timer // sets stale
}

// epoch returns the current epoch, starting one when there is none or it
// is stale.
func (b *storeBound) epoch() *boundEpoch {
	if e := b.cur.Load(); e != nil && !e.stale.Load() {
		return e
	}
	return b.next()
}

func (b *storeBound) next() *boundEpoch {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.cur.Load(); e != nil && !e.stale.Load() {
		return e
	}
	// Forget the epochs whose deadline passed (their contexts ended and
	// released their timers).
	live := b.live[:0]
	for _, e := range b.live {
		if e.ctx.Err() == nil {
			live = append(live, e)
		} else {
			e.cancel()
		}
	}
	clear(b.live[len(live):])
	e := &boundEpoch{deadline: time.Now().Add(b.d + b.slack), started: monoNow()}
	e.ctx, e.cancel = context.WithDeadline(context.Background(), e.deadline)
	e.timer = time.AfterFunc(b.slack, func() { e.stale.Store(true) })
	b.live = append(live, e)
	b.cur.Store(e)
	return e
}

// closing starts the last epoch, which never goes stale: every call
// started from now on, queued ones included, ends within one bound of now,
// so that the limiter's Close, which waits for them, returns within about
// the bound. close ends it.
func (b *storeBound) closing() {
	if b.d <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := &boundEpoch{deadline: time.Now().Add(b.d), started: monoNow()}
	e.ctx, e.cancel = context.WithDeadline(context.Background(), e.deadline)
	e.timer = time.NewTimer(time.Hour) // never fires before close stops it
	b.live = append(b.live, e)
	b.cur.Store(e)
}

// close ends every epoch and stops its timers: calls still running on
// one end with context.Canceled. A call after close starts a new epoch.
func (b *storeBound) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.live {
		e.timer.Stop()
		e.stale.Store(true)
		e.cancel()
	}
	b.live = nil
	b.cur.Store(nil)
}

// bind returns the context of one store call made with ctx: ctx's values
// and cancellation, and a deadline at most the bound away. e is the epoch
// whose deadline applies (nil when calls are not bounded); cancel, when
// not nil, must be called once the call ended.
//
// A context that can never end (context.Background(), or a context
// detached from its caller's) costs no allocation when it carries no
// values, one when it does; a context that can end and whose deadline is
// later than the bound's, a context.WithDeadline.
func (b *storeBound) bind(ctx context.Context) (_ context.Context, e *boundEpoch, cancel context.CancelFunc) {
	if b.d <= 0 {
		return ctx, nil, nil
	}
	e = b.epoch()
	switch {
	case ctx == context.Background() || ctx == context.TODO():
		return e.ctx, e, nil
	case ctx.Done() == nil:
		values := ctx
		if d, ok := ctx.(*detachedCtx); ok {
			values = d.parent // its Value is the parent's
		}
		return &boundCtx{values: values, bound: e.ctx}, e, nil
	}
	if dl, ok := ctx.Deadline(); ok && !dl.After(e.deadline) {
		return ctx, e, nil
	}
	c, cancel := context.WithDeadline(ctx, e.deadline)
	return c, e, cancel
}

// expired reports whether the bound of a call on e has passed.
func (e *boundEpoch) expired() bool { return e != nil && e.ctx.Err() != nil }

// boundCtx is the values of a caller's context (whose cancellation does
// not apply) bound by an epoch's deadline.
type boundCtx struct {
	values context.Context // its cancellation is ignored
	bound  context.Context // an epoch's
}

func (c *boundCtx) Deadline() (time.Time, bool) { return c.bound.Deadline() }
func (c *boundCtx) Done() <-chan struct{}       { return c.bound.Done() }
func (c *boundCtx) Err() error                  { return c.bound.Err() }

// Value returns the value of key in the epoch's context, else in the
// caller's. The epoch's holds no values of its own, but the context package
// finds its cancellation there (and not the caller's): a context derived
// from this one is cancelled with the epoch, without a goroutine of its
// own, and context.Cause reports the epoch's cause.
func (c *boundCtx) Value(key any) any {
	if v := c.bound.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// detachedCtx has the values of parent and none of its cancellation or
// deadline: context.WithoutCancel, whose Value allocates on every call from
// outside the context package (the SDK looks up many keys per request).
// Store calls made with it are bound by storeOps, which then looks the
// values up in parent directly. (context.Cause of a detachedCtx reports
// parent's cause; its Err is always nil.)
type detachedCtx struct{ parent context.Context }

func (*detachedCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detachedCtx) Done() <-chan struct{}       { return nil }
func (*detachedCtx) Err() error                  { return nil }
func (c *detachedCtx) Value(key any) any         { return c.parent.Value(key) }

// decisionMargin is the most an acquire keeps between its decision and its
// caller's deadline (a tenth of the time left when that is less): enough to
// build the answer and return it before the deadline.
const decisionMargin = 20 * time.Millisecond

// beforeBound reports whether ctx's deadline comes before a store call
// started now could end by its bound (with the margin): an acquire in allow
// mode must then stop waiting for the store before the deadline, not at
// it. It costs no clock read.
func (b *storeBound) beforeBound(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && (b.d <= 0 || dl.Sub(b.epoch().deadline) <= b.slack+decisionMargin)
}

// decisionContext returns a context that ends decisionMargin before ctx's
// deadline (a tenth of the time left when that is less), so that an
// acquire stops waiting for the store in time for the on-unavailable mode
// to decide before the caller's deadline.
func decisionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, _ := ctx.Deadline()
	margin := min(decisionMargin, time.Until(dl)/10)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// storeTimeoutError reports a store call that did not end within the store
// timeout ([Options.StoreTimeout]). It matches [ErrUnavailable] and unwraps to
// the call's error (which matches context.DeadlineExceeded).
type storeTimeoutError struct {
	timeout time.Duration
	cause   error
}

func (e *storeTimeoutError) Error() string {
	return fmt.Sprintf("limiter: the store did not answer within %v (Options.StoreTimeout)", e.timeout)
}

func (e *storeTimeoutError) Is(target error) bool { return target == ErrUnavailable }
func (e *storeTimeoutError) Unwrap() error        { return e.cause }
func (e *storeTimeoutError) ownMessage()          {}

// deadlineError reports an acquire that stopped waiting for the store so as
// to decide before its caller's deadline. It matches [ErrUnavailable] and
// context.DeadlineExceeded.
type deadlineError struct{ cause error }

func (e *deadlineError) Error() string {
	return "limiter: the store did not answer before the caller's deadline"
}

func (e *deadlineError) Is(target error) bool {
	return target == ErrUnavailable || target == context.DeadlineExceeded
}
func (e *deadlineError) Unwrap() error { return e.cause }
func (e *deadlineError) ownMessage()   {}
