// Layer 2, the contract: the circuit breaker of the limiter's store calls.

package limiter

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// The circuit breaker.
//
// When the store fails, every acquire would wait for its own failure: a
// store timeout each, and as many calls piled up on a store that does not
// answer. The breaker counts the store calls that failed for want of the
// store (no answer within the bound, a refused or broken connection, a
// server error) over a run: from the first failure until a call is
// answered. It opens when the run holds at least failures of them (the
// minimum number of calls) and is more than one stall: concurrent calls
// that time out together tell one thing, that the store paused while they
// were out. So a run of timeouts opens the breaker only once a call
// started after the run began has failed too, or once the calls made
// since go unanswered for a grace of three fifths of the store timeout
// (300 ms by default) after the failure that reached the minimum. A pause
// longer than the store timeout under many concurrent callers thus fails
// the calls it caught, and no more when it ends within the grace (a pause
// of 700 ms with the default timeout of 500 ms); a store that stops
// answering opens the breaker about 1.7 store timeouts after it stopped
// (850 ms by default). Other failures
// (a refused connection, a 5xx) come back at once and count as they
// come.
//
// Open, store calls fail at once with [ErrCircuitOpen], and acquires
// decide at once by their on-unavailable mode (allow: a no-op lease;
// block: an *[UnavailableError]) without a call. After cooldown the next
// call goes to the store as a probe (half open: one at a time, the others
// still fail at once): its success closes the breaker, its failure opens
// it for another cooldown.
//
// Answers of a working store are not failures: a refused conditional
// write, a transaction conflict, throttling, a missing entity, a refusal
// for want of permission, any other 4xx. Nor is a call its caller gave up
// on before its bound passed.
//
// On the fast path the breaker costs an atomic load before a call and one
// after; it reads the clock only while open and on failures.

// circuitState is the state of a breaker.
type circuitState int32

const (
	circuitClosed   circuitState = iota // calls go to the store
	circuitOpen                         // calls fail at once until the cooldown has passed
	circuitHalfOpen                     // one call, the probe, is at the store; the others fail at once
)

var circuitStateNames = [...]string{"closed", "open", "half_open"}

func (s circuitState) String() string { return circuitStateNames[s] }

// callOutcome is what a store call tells the breaker.
type callOutcome int

const (
	callAnswered callOutcome = iota // the store answered (success, or a refusal of its own)
	callFailed                      // the store failed
	callTimedOut                    // the store did not answer within the bound
	callGaveUp                      // the caller gave up first: tells nothing
)

// breaker is the circuit breaker of one limiter's store.
type breaker struct {
	failures int32         // the failures of a run that open it; ≤ 0: it never opens
	cooldown time.Duration // how long it stays open before a probe
	grace    time.Duration // how long a stall may outlast its timeouts; 0: no grace

	state    atomic.Int32 // a circuitState
	fails    atomic.Int32 // failures of the current run while closed
	reopenAt atomic.Int64 // open: when a probe may go, in monoNow's nanoseconds
	// The current run: when its first failure came (monoNow's nanoseconds,
	// 0: no run), whether it is more than one stall, its number (a success
	// ends it and starts the next) and whether its grace timer is set.
	runStart atomic.Int64
	spread   atomic.Bool
	run      atomic.Int64
	armed    atomic.Bool
	timer    atomic.Pointer[time.Timer] // the grace timer last set
	// changed hears every change of state, with the failures counted and
	// the error that caused it (nil for a probe or a success); nil: nobody.
	changed func(from, to circuitState, failures int, cause error)
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow returns the monotonic clock in nanoseconds.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// admit reports whether a call may go to the store, and whether it is the
// probe of a half-open breaker (which must then be settled).
func (b *breaker) admit() (ok, probe bool) {
	switch circuitState(b.state.Load()) {
	case circuitClosed:
		return true, false
	case circuitOpen:
		if monoNow() >= b.reopenAt.Load() && b.state.CompareAndSwap(int32(circuitOpen), int32(circuitHalfOpen)) {
			b.change(circuitOpen, circuitHalfOpen, 0, nil)
			return true, true
		}
	}
	return false, false
}

// rejecting reports whether a call would fail at once now (without taking
// the probe).
func (b *breaker) rejecting() bool {
	switch circuitState(b.state.Load()) {
	case circuitClosed:
		return false
	case circuitOpen:
		return monoNow() < b.reopenAt.Load()
	}
	return true
}

// settle records the outcome of an admitted call; started is, for a call
// that timed out, when its bound began (monoNow's nanoseconds).
func (b *breaker) settle(probe bool, o callOutcome, cause error, started int64) {
	switch {
	case probe && o == callAnswered:
		b.endRun()
		b.state.Store(int32(circuitClosed))
		b.change(circuitHalfOpen, circuitClosed, 0, nil)
	case probe && o != callGaveUp:
		b.reopenAt.Store(monoNow() + int64(b.cooldown))
		b.state.Store(int32(circuitOpen))
		b.change(circuitHalfOpen, circuitOpen, int(b.fails.Load()), cause)
	case probe:
		// The caller gave up: the next call probes instead.
		b.state.Store(int32(circuitOpen))
	case o == callAnswered:
		if b.fails.Load() != 0 {
			b.endRun()
		}
	case o != callGaveUp && b.failures > 0:
		b.failed(o, cause, started)
	}
}

// failed counts a failure of a call while closed, and opens the breaker
// when the run has enough of them and is more than one stall; when it is
// one stall so far, the breaker opens after the grace unless a call is
// answered meanwhile.
func (b *breaker) failed(o callOutcome, cause error, started int64) {
	now := monoNow()
	if !b.runStart.CompareAndSwap(0, now) && (o != callTimedOut || started > b.runStart.Load()) {
		b.spread.Store(true) // the store failed again after it was seen failing
	}
	if o != callTimedOut || b.grace <= 0 {
		b.spread.Store(true)
	}
	n := b.fails.Add(1)
	if n < b.failures || circuitState(b.state.Load()) != circuitClosed {
		return
	}
	if b.failures == 1 || b.spread.Load() {
		b.open(n, cause)
		return
	}
	if b.armed.CompareAndSwap(false, true) {
		run := b.run.Load()
		b.timer.Store(time.AfterFunc(b.grace, func() {
			if b.run.Load() == run {
				b.open(b.fails.Load(), cause)
			}
		}))
	}
}

// open opens a closed breaker after n failures.
func (b *breaker) open(n int32, cause error) {
	b.reopenAt.Store(monoNow() + int64(b.cooldown))
	if b.state.CompareAndSwap(int32(circuitClosed), int32(circuitOpen)) {
		b.change(circuitClosed, circuitOpen, int(n), cause)
	}
}

// stop stops the grace timer (the limiter closes).
func (b *breaker) stop() {
	if t := b.timer.Load(); t != nil {
		t.Stop()
	}
}

// endRun ends the current run of failures: a call was answered.
func (b *breaker) endRun() {
	b.run.Add(1)
	b.fails.Store(0)
	b.runStart.Store(0)
	b.spread.Store(false)
	b.armed.Store(false)
}

func (b *breaker) change(from, to circuitState, failures int, cause error) {
	if b.changed != nil {
		b.changed(from, to, failures, cause)
	}
}

// answered reports whether err is an answer of a working store: a refused
// conditional write or transaction, invalid input, a missing or existing
// entity, an unsupported call, a refusal for want of permission, or any
// error of an HTTP status 4xx (DynamoDB's throttling and validation
// errors; matched by the HTTPStatusCode method of the AWS SDK's response
// errors, so that the core needs no SDK import).
func answered(err error) bool {
	for _, known := range [...]error{store.ErrConditionFailed, store.ErrTransactionConflict, ErrValidation,
		ErrEntityNotFound, ErrEntityExists, ErrUnsupported, ErrRateLimited, ErrTableNotFound} {
		if errors.Is(err, known) {
			return true
		}
	}
	if isAccessDenied(err) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		code := status.HTTPStatusCode()
		return code >= 400 && code < 500
	}
	return false
}
