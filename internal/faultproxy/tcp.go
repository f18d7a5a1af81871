package faultproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// TCP is a proxy of a TCP server that speaks request and answer on each
// connection, one at a time (redis-server to a go-redis client that does
// not pipeline), which injects faults into chosen requests: the request is
// forwarded, and the connection closed as soon as the server's answer
// begins, without relaying it — the server ran the command, the client
// sees a broken connection. Tests point a real client at [TCP.Addr].
//
// Each chunk the client writes is one request (go-redis writes a command
// at once). Rules are matched in the order they were added.
type TCP struct {
	// Addr is the proxy's address (host:port), for the client.
	Addr string

	target string
	ln     net.Listener

	mu      sync.Mutex // guards the fields below
	rules   []*TCPRule
	faulted map[string]bool // requests a rule faulted, by their bytes
	count   int             // requests received
	faults  int             // requests faulted
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// TCPRule drops the answer of the requests it matches.
type TCPRule struct {
	// Match selects the requests (by their bytes) the rule applies to.
	Match func(request []byte) bool
	// Every, when above 1, applies the rule to every Every-th matching
	// request only. A request identical to one the rule faulted (the
	// client's retry of it) goes through, and Every does not count it.
	Every int
	// Times is how many requests the rule applies to; 0 means every one.
	Times int

	seen int
}

// StartTCP runs a proxy to target (host:port) on a loopback port; it is
// closed when the test ends.
func StartTCP(t testing.TB, target string) *TCP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	p := &TCP{Addr: ln.Addr().String(), target: target, ln: ln, faulted: map[string]bool{}, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Add adds a rule after the existing ones.
func (p *TCP) Add(r TCPRule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Clear removes every rule.
func (p *TCP) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Count returns how many requests the proxy received.
func (p *TCP) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// Faults returns how many requests got a fault.
func (p *TCP) Faults() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// Close stops the proxy and closes every connection.
func (p *TCP) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *TCP) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Go(func() { p.serve(c) })
		p.mu.Unlock()
	}
}

// track adds c to the connections Close closes; false once closed.
func (p *TCP) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

// match reports whether request gets a fault, spending one use of its
// rule.
func (p *TCP) match(request []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	for i, r := range p.rules {
		if r.Match != nil && !r.Match(request) || p.faulted[string(request)] {
			continue
		}
		if r.Every > 1 {
			if r.seen++; r.seen%r.Every != 0 {
				continue
			}
		}
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			}
		}
		p.faulted[string(request)] = true
		p.faults++
		return true
	}
	return false
}

// serve relays c to a connection of its own to the target.
func (p *TCP) serve(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		c.Close()
		if s != nil {
			s.Close()
		}
		return
	}
	closeBoth := sync.OnceFunc(func() {
		c.Close()
		s.Close()
		p.mu.Lock()
		delete(p.conns, s)
		p.mu.Unlock()
	})
	var drop atomic.Bool // the answer now coming is dropped
	p.wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && drop.Load() {
				closeBoth()
				return
			}
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					closeBoth()
					return
				}
			}
			if err != nil {
				closeBoth()
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if p.match(bytes.Clone(buf[:n])) {
				drop.Store(true)
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				closeBoth()
				return
			}
		}
		if err != nil {
			closeBoth()
			return
		}
	}
}
