package llmhttp

import (
	"errors"
	"io"
	"runtime"
	"sync"
)

// usageBody is the response body handed to the caller: every Read is
// passed through unchanged and unbuffered, and what it returns is also fed
// to a usage parser. The lease ends on the first EOF, read error or Close.
type usageBody struct {
	rc io.ReadCloser
	lc *leaseCall

	mu     sync.Mutex // guards parser, lastOutput and cut against a Close racing a Read
	parser usageParser
	// lastOutput is the output the parser had seen before the last Read;
	// cut is set once the stream passed its reservation.
	lastOutput int64
	cut        bool
}

// ErrReservationExceeded ends the body of an event stream whose output
// passed what its lease reserved (a provider that ignores the output
// ceiling): the stream is closed at the first read past it, and the lease
// settled at what it showed.
var ErrReservationExceeded = errors.New("llmhttp: the stream's output passed its reservation")

// newUsageBody returns the body handed to the caller. A body the caller
// drops without reading it to the end or closing it would hold its lease,
// and the lease's slots in flight, for as long as the limiter lives: once
// the garbage collector finds it unreachable, its lease ends as a body
// closed early does.
func newUsageBody(rc io.ReadCloser, p usageParser, lc *leaseCall) *usageBody {
	b := &usageBody{rc: rc, parser: p, lc: lc}
	runtime.AddCleanup(b, func(lc *leaseCall) {
		if !lc.ended.Load() {
			go lc.dropped() // the store's writes do not hold up other cleanups
		}
	}, lc)
	return b
}

// dropped ends the lease of a body the caller dropped without closing it.
func (lc *leaseCall) dropped() {
	if lc.ended.Load() {
		return
	}
	t := lc.t
	t.warnOnce(&t.warn.dropped, "llmhttp: a response body was dropped without Close; its lease ended when the garbage collector found it",
		"entity", lc.call.entity, "resource", lc.call.resource)
	lc.end(endEarly, parsed{})
}

// Read reads from the provider's body and parses what it returns.
func (b *usageBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.cut {
		b.mu.Unlock()
		return 0, ErrReservationExceeded
	}
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		b.parser.write(p[:n])
		var past bool
		var pp parsed
		if _, sse := b.parser.(*sseUsageParser); sse {
			pp = b.parser.parsed()
			past = pp.outputSeen > b.lastOutput && !pp.final && b.lc.pastReservation(pp)
			b.lastOutput = pp.outputSeen
		}
		b.cut = past
		b.mu.Unlock()
		if past {
			_ = b.rc.Close() // the provider stops generating
			b.lc.end(endCut, pp)
			return 0, ErrReservationExceeded
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		b.finish(true)
	case err != nil:
		b.finish(false)
	}
	return n, err
}

// Close closes the provider's body and ends the lease if a Read has not,
// even when closing the provider's body panics.
func (b *usageBody) Close() error {
	defer b.finish(false)
	return b.rc.Close()
}

// finish ends the lease: at the estimate when a usage was malformed;
// adjusted to the usage when the one reporting the whole response was
// seen; otherwise at the larger of the estimate and what was seen (the
// provider bills an answer it has begun), or rolled back when the body
// ended early and [RollbackOnEarlyClose] says so.
func (b *usageBody) finish(eof bool) {
	if b.lc.ended.Load() {
		return
	}
	b.mu.Lock()
	p := b.parser.parsed()
	b.mu.Unlock()
	switch {
	case p.malformed:
		b.lc.end(endMalformed, p)
	case p.final:
		b.lc.end(endUsage, p)
	case eof:
		b.lc.end(endMissing, p)
	default:
		b.lc.end(endEarly, p)
	}
}
