// Layer 2, the contract: the circuit breaker of the limiter's store calls.

package limiter

import (
	"sync"
	"sync/atomic"
	"time"
)

// The circuit breaker.
//
// When the store fails, every acquire would wait for its own failure: a
// store timeout each, and as many calls piled up on a store that does not
// answer. The breaker counts the store calls that failed for want of the
// store (no answer within the bound, a refused or broken connection, a
// server error) and the calls it answered over a window (circuitWindow,
// or ten store timeouts when longer), from the oldest failure in it: it
// opens when the window holds at least failures calls (the minimum
// number of calls) and at least half of them failed, or when the calls
// since the current stall's first timeout do (so that the answers of a
// busy stretch before a store stops answering do not delay the opening).
// A store that fails now and then among many answers does not open it;
// one that fails every call opens it after failures of them.
//
// Calls that time out together are one stall, counted as one failure:
// they tell one thing, that the store paused while they were out. A stall
// is placed by the calls' own bounds, not by when their timeouts are
// counted (which a loaded machine delays): it begins with the epoch of
// the earliest call it caught (started, see storeBound) and shows at that
// epoch's deadline (started plus the longest bound, span). A timeout of a
// call made before the stall showed is part of it. The stall ends when the
// store answers, after the stall's first timeout was counted, a call made
// two epochs or more after the stall began: the store then answered a call
// it took after it paused (the answers of calls it had taken before tell
// nothing: a store that stops answering may still answer those). It is
// counted in full (each of its timeouts a failure) once a call made after
// it showed times out too, or when it has not ended by a grace of three
// fifths of the store timeout after it showed. Both are times of the
// calls' bounds: a timeout counted late is measured against them, and a
// stall whose grace passed before its timeouts were counted is counted in
// full at once. So a pause longer than the store timeout under many
// concurrent callers fails the calls it caught and counts once when the
// store answers within the grace (a pause of 700 ms with the default
// timeout of 500 ms); a store that stops answering opens the breaker 1.7
// store timeouts after the first epoch it caught began (800 to 850 ms
// after it stopped by default), however late the timeouts are counted,
// once failures of its calls were. Other failures (a refused connection,
// a 5xx) come back at once and count as they come.
//
// Open, store calls fail at once with [ErrCircuitOpen], and acquires
// decide at once by their on-unavailable mode (allow: a no-op lease;
// block: an *[UnavailableError]) without a call. After cooldown the next
// call goes to the store as a probe (half open: one at a time, the others
// still fail at once): its success closes the breaker and empties the
// window, its failure opens it for another cooldown.
//
// Answers of a working store are not failures: a refused conditional
// write, a transaction conflict, throttling, a missing entity, a refusal
// for want of permission, any other 4xx. Nor is a call its caller gave up
// on before its bound passed.
//
// On the fast path (no failure in the window) the breaker costs an atomic
// load before a call and one after; answers are counted (an atomic add)
// only while the window holds a failure. It reads the clock only while
// open, on failures, and every 1,024 answers counted.

// circuitWindow is the shortest window of the breaker.
const circuitWindow = 10 * time.Second

// maxWindowEvents bounds the failures the window remembers: the oldest go
// first (the ratio is then taken over a shorter window).
const maxWindowEvents = 1024

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
	failures int32         // the minimum number of calls of the window that opens it; ≤ 0: it never opens
	cooldown time.Duration // how long it stays open before a probe
	grace    time.Duration // how long after it showed a stall may go unanswered and count once; 0: no grace
	window   time.Duration // how far back the window reaches
	span     int64         // the longest bound of a call from its epoch's start (ns): when a stall shows
	epoch    int64         // the period of an epoch (ns)

	state    atomic.Int32 // a circuitState
	reopenAt atomic.Int64 // open: when a probe may go, in monoNow's nanoseconds
	// active is set while the window holds a failure: answers are then
	// counted in answers (a running count), and fresh is the latest epoch
	// start of a call answered since the current stall's first timeout
	// was counted (monoNow's nanoseconds; 0: none).
	active  atomic.Bool
	answers atomic.Int64
	fresh   atomic.Int64
	timer   atomic.Pointer[time.Timer] // the grace timer last set
	// changed hears every change of state, with the failures counted and
	// the error that caused it (nil for a probe or a success); nil: nobody.
	changed func(from, to circuitState, failures int, cause error)

	mu     sync.Mutex    // guards the fields below
	events []windowEvent // the failures counted in the window, oldest first
	stall  stall         // the current stall
	gen    int64         // bumped by each stall and when the window is emptied: stale grace timers do nothing
}

// windowEvent is one or more failures counted at once.
type windowEvent struct {
	at      int64 // monoNow's nanoseconds
	n       int32 // failures
	answers int64 // breaker.answers when they were counted
}

// stall is the timeouts counted as one failure so far.
type stall struct {
	on       bool
	began    int64 // the epoch start of the earliest call it caught (monoNow's nanoseconds)
	counted  int64 // when its first timeout was counted (monoNow's nanoseconds)
	deferred int32 // its timeouts not counted (yet)
	spread   bool  // counted in full: more than one stall, or not ended within the grace
}

// shows returns when the stall showed: the deadline of its first epoch.
func (b *breaker) shows(st *stall) int64 { return st.began + b.span }

// ended reports whether the store answered a call made two epochs or
// more after the stall began (b.mu held).
func (b *breaker) ended(st *stall) bool {
	f := b.fresh.Load()
	return st.on && f != 0 && f >= st.began+2*b.epoch
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

// settle records the outcome of an admitted call; started is when its
// bound began, its epoch's start (monoNow's nanoseconds; 0: unbounded).
func (b *breaker) settle(probe bool, o callOutcome, cause error, started int64) {
	switch {
	case probe && o == callAnswered:
		b.reset()
		b.state.Store(int32(circuitClosed))
		b.change(circuitHalfOpen, circuitClosed, 0, nil)
	case probe && o != callGaveUp:
		b.reopenAt.Store(monoNow() + int64(b.cooldown))
		b.state.Store(int32(circuitOpen))
		b.change(circuitHalfOpen, circuitOpen, b.counted(), cause)
	case probe:
		// The caller gave up: the next call probes instead.
		b.state.Store(int32(circuitOpen))
	case o == callAnswered:
		if b.active.Load() {
			for cur := b.fresh.Load(); started > cur && !b.fresh.CompareAndSwap(cur, started); cur = b.fresh.Load() {
			}
			if n := b.answers.Add(1); n%1024 == 0 {
				b.idle()
			}
		}
	case o != callGaveUp && b.failures > 0:
		b.failed(o, cause, started)
	}
}

// failed counts a failure of a call while closed (a timeout as part of a
// stall, see above), and opens the breaker when the window says so.
func (b *breaker) failed(o callOutcome, cause error, started int64) {
	now := monoNow()
	b.mu.Lock()
	b.active.Store(true)
	answers := b.answers.Load()
	st := &b.stall
	n := int32(1)
	if o == callTimedOut && b.grace > 0 && b.failures > 1 {
		before := st.on && started < b.shows(st) // made before the stall showed
		ended := b.ended(st)
		switch {
		case before && ended:
			n = 0 // a late timeout of a stall that ended
		case before && st.spread:
			// Part of a stall counted in full.
		case before:
			st.deferred++ // part of the current stall
			n = 0
			st.began = min(st.began, started)
		case st.on && !ended && !st.spread:
			// A call made after the stall showed timed out too, with no
			// call made since it began answered: more than one stall.
			n += st.deferred
			st.deferred, st.spread = 0, true
		case st.on && !ended:
			// The store still answers nothing: each timeout counts.
		default:
			// The first timeout of a stall.
			b.gen++
			*st = stall{on: true, began: started, counted: now}
			b.fresh.Store(0)
			gen := b.gen
			b.timer.Store(time.AfterFunc(time.Duration(max(b.shows(st)+int64(b.grace)-now, 0)),
				func() { b.graceOver(gen, cause) }))
		}
		if st.on && !st.spread && !b.ended(st) && now >= b.shows(st)+int64(b.grace) {
			// Counted after its grace passed, the stall not ended.
			n += st.deferred
			st.deferred, st.spread = 0, true
		}
	}
	opens, total := false, int32(0)
	if n > 0 {
		b.record(now, n, answers)
		opens, total = b.opens(answers)
	}
	b.mu.Unlock()
	if opens {
		b.open(total, cause)
	}
}

// graceOver counts in full the stall of generation gen when it has not
// ended within its grace.
func (b *breaker) graceOver(gen int64, cause error) {
	b.mu.Lock()
	st := &b.stall
	answers := b.answers.Load()
	if b.gen != gen || !st.on || st.spread || b.ended(st) {
		b.mu.Unlock()
		return
	}
	n := st.deferred
	st.deferred, st.spread = 0, true
	opens, total := false, int32(0)
	if n > 0 {
		b.record(monoNow(), n, answers)
		opens, total = b.opens(answers)
	}
	b.mu.Unlock()
	if opens {
		b.open(total, cause)
	}
}

// record adds n failures counted at now to the window (b.mu held),
// dropping those older than the window.
func (b *breaker) record(now int64, n int32, answers int64) {
	b.prune(now)
	if len(b.events) >= maxWindowEvents {
		b.events = b.events[1:]
	}
	b.events = append(b.events, windowEvent{at: now, n: n, answers: answers})
}

// prune drops the failures older than the window (b.mu held).
func (b *breaker) prune(now int64) {
	i := 0
	for i < len(b.events) && b.events[i].at < now-int64(b.window) {
		i++
	}
	b.events = b.events[i:]
}

// opens reports whether the window opens the breaker (b.mu held): at
// least b.failures calls since its oldest failure, half of them or more
// failed; or as many since the current stall's first timeout was counted,
// half of them or more failed (answers of the seconds before a store
// stopped answering do not delay the opening). total is the failures
// counted.
func (b *breaker) opens(answers int64) (bool, int32) {
	if len(b.events) == 0 || circuitState(b.state.Load()) != circuitClosed {
		return false, 0
	}
	var failed, stallFailed int64
	stallFrom := -1
	for i, e := range b.events {
		failed += int64(e.n)
		if b.stall.on && e.at >= b.stall.counted {
			if stallFrom < 0 {
				stallFrom = i
			}
			stallFailed += int64(e.n)
		}
	}
	total := int32(min(failed, 1<<30))
	if b.failures == 1 {
		return true, total // every failure opens it
	}
	if calls := failed + answers - b.events[0].answers; calls >= int64(b.failures) && 2*failed >= calls {
		return true, total
	}
	if stallFrom >= 0 {
		calls := stallFailed + answers - b.events[stallFrom].answers
		return calls >= int64(b.failures) && 2*stallFailed >= calls, total
	}
	return false, total
}

// counted returns the failures the window holds.
func (b *breaker) counted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, e := range b.events {
		n += int(e.n)
	}
	return n
}

// idle stops counting answers once the window holds no failure and no
// stall waits for its grace.
func (b *breaker) idle() {
	now := monoNow()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(now)
	st := &b.stall
	if len(b.events) == 0 && (!st.on || st.spread || b.ended(st) || now-st.began > int64(b.window)) {
		b.active.Store(false)
		*st = stall{}
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

// reset empties the window: the probe was answered.
func (b *breaker) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = nil
	b.stall = stall{}
	b.gen++
	b.fresh.Store(0)
	b.active.Store(false)
}

func (b *breaker) change(from, to circuitState, failures int, cause error) {
	if b.changed != nil {
		b.changed(from, to, failures, cause)
	}
}
