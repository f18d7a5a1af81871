package llmhttp

import (
	"errors"
	"io"
	"sync"
)

// usageBody is the response body handed to the caller: every Read is
// passed through unchanged and unbuffered, and what it returns is also fed
// to a usage parser. The lease ends on the first EOF, read error or Close.
type usageBody struct {
	rc io.ReadCloser
	lc *leaseCall

	mu     sync.Mutex // guards parser against a Close racing a Read
	parser usageParser
}

func newUsageBody(rc io.ReadCloser, p usageParser, lc *leaseCall) *usageBody {
	return &usageBody{rc: rc, parser: p, lc: lc}
}

// Read reads from the provider's body and parses what it returns.
func (b *usageBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.mu.Lock()
		b.parser.write(p[:n])
		b.mu.Unlock()
	}
	switch {
	case errors.Is(err, io.EOF):
		b.finish(true, false)
	case err != nil:
		b.finish(false, true)
	}
	return n, err
}

// Close closes the provider's body and ends the lease if a Read has not.
func (b *usageBody) Close() error {
	err := b.rc.Close()
	b.finish(false, false)
	return err
}

// finish ends the lease: adjusted to the usage when one was seen;
// otherwise committed at the estimate when the body was read to its end,
// or rolled back (as the rollback options say) when it failed or was
// closed early.
func (b *usageBody) finish(eof, failed bool) {
	if b.lc.ended.Load() {
		return
	}
	b.mu.Lock()
	u, ok := b.parser.usage()
	b.mu.Unlock()
	rb := b.lc.t.cfg.rollback
	switch {
	case ok:
		b.lc.end(false, &u)
	case eof:
		b.lc.end(false, nil)
	case failed:
		b.lc.end(rb&RollbackOnTransportError != 0, nil)
	default:
		b.lc.end(rb&RollbackOnEarlyClose != 0, nil)
	}
}
