// Package faultproxy is an HTTP proxy that sits between a DynamoDB client
// and DynamoDB Local and injects faults into chosen requests: it can hang a
// request, answer it late after DynamoDB applied it, answer 500 after
// DynamoDB applied it, or throttle it without forwarding it. Tests point a
// real SDK client at [Proxy.URL] and so exercise the real network and retry
// behaviour of the SDK against the real emulator. [TCP] does the same for
// a TCP server such as redis-server: it drops the answer of a request the
// server ran, closing the connection.
//
// Rules are matched in the order they were added against the DynamoDB
// operation of each request (its X-Amz-Target, e.g. "UpdateItem"); a rule
// applies to its next Times requests (0: all of them) and is then spent.
package faultproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind is what a rule does to a request.
type Kind int

const (
	// Hang holds the request without forwarding it until the proxy is
	// released ([Proxy.Release]) or closed, or the client goes away; then
	// it is forwarded (after a release) or dropped.
	Hang Kind = iota
	// DelayAfter forwards the request, then holds DynamoDB's answer for
	// Delay before returning it: the write has applied, the client does not
	// know yet.
	DelayAfter
	// Error500After forwards the request and answers 500 InternalServerError
	// whatever DynamoDB said: the write has applied, the client is told it
	// failed.
	Error500After
	// Throttle answers 400 ThrottlingException without forwarding: nothing
	// applied.
	Throttle
	// Blackhole holds the request without an answer until the client goes
	// away or the proxy is closed, and never forwards it (not even after a
	// Release): a network that swallows packets.
	Blackhole
	// DelayBefore holds the request for Delay, then forwards it (unless the
	// client went away meanwhile): a slow store, nothing applied until it
	// answers.
	DelayBefore
	// Drop closes the request's connection without an answer and without
	// forwarding it: nothing applied, the client sees a broken connection.
	Drop
)

// Rule is one fault.
type Rule struct {
	// Op is the DynamoDB operation to match, e.g. "UpdateItem"; "" matches
	// every operation.
	Op    string
	Kind  Kind
	Delay time.Duration // DelayAfter, DelayBefore
	// Times is how many matching requests the rule applies to; 0 means
	// every one.
	Times int
	// Every, when above 1, applies the rule to every Every-th matching
	// request only (the others go on to the next rules): with Every 3 the
	// 3rd, 6th, ... Times counts the requests it applied to.
	Every int
	// FirstAttempts limits the rule to the SDK's first attempts: a
	// request whose amz-sdk-request header names a later attempt (a
	// retry of a request, possibly of one the rule faulted) goes on to the
	// next rules, and Every does not count it.
	FirstAttempts bool

	seen int // matching requests, for Every
}

// Proxy is a running fault-injecting proxy. It is safe for concurrent use.
type Proxy struct {
	// URL is the proxy's endpoint, to be used as the client's BaseEndpoint.
	URL string

	srv     *http.Server
	ln      net.Listener
	forward *httputil.ReverseProxy

	mu       sync.Mutex // guards the fields below
	rules    []*Rule
	released chan struct{} // closed by Release; replaced by Hold
	counts   map[string]int
	faults   map[string]int
	held     int  // requests held now (Hang, Blackhole, DelayBefore)
	down     bool // Down: connections are refused
	conns    map[net.Conn]struct{}
	closing  chan struct{} // closed by Close: held requests are dropped
	addr     string
}

// Start runs a proxy to target (DynamoDB Local's endpoint) on a loopback
// port; it is closed when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	p := &Proxy{
		URL:      "http://" + ln.Addr().String(),
		addr:     ln.Addr().String(),
		ln:       ln,
		forward:  httputil.NewSingleHostReverseProxy(u),
		released: make(chan struct{}),
		counts:   map[string]int{},
		faults:   map[string]int{},
		conns:    map[net.Conn]struct{}{},
		closing:  make(chan struct{}),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second, ConnState: p.track}
	go p.srv.Serve(ln)
	t.Cleanup(p.Close)
	return p
}

// track keeps the open connections, for Down.
func (p *Proxy) track(c net.Conn, state http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch state {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// Down makes the proxy refuse connections, as a port where nothing
// listens does: it stops listening and closes every open connection
// (requests in progress on them get no answer). Up listens again.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return
	}
	p.down = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
}

// Up listens again, on the same port, after Down.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 { // the port may take a moment to be free again
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
	}
	p.ln, p.down = ln, false
	go p.srv.Serve(ln)
	return nil
}

// Held returns how many requests the proxy holds now (Hang, Blackhole,
// DelayBefore).
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// hold counts a held request until the returned function is called.
func (p *Proxy) hold() func() {
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}
}

// Add adds a rule after the existing ones.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &r)
}

// Clear removes every rule (hung requests stay hung until Release).
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Release lets every hung request through, and the ones that will hang
// until the next Hold.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
	default:
		close(p.released)
	}
}

// Hold makes Hang rules hold requests again after a Release.
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
		p.released = make(chan struct{})
	default:
	}
}

// Count returns how many requests of op (all when "") the proxy received.
func (p *Proxy) Count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op == "" {
		n := 0
		for _, c := range p.counts {
			n += c
		}
		return n
	}
	return p.counts[op]
}

// Faults returns how many requests of op (all when "") got a fault.
func (p *Proxy) Faults(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if op == "" {
		n := 0
		for _, c := range p.faults {
			n += c
		}
		return n
	}
	return p.faults[op]
}

// Close stops the proxy; hung requests are dropped.
func (p *Proxy) Close() {
	p.mu.Lock()
	select {
	case <-p.closing:
	default:
		close(p.closing)
	}
	p.mu.Unlock()
	p.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.srv.Shutdown(ctx)
}

// match returns the rule for op (a retry when retry is set), spending one
// of its uses, or nil.
func (p *Proxy) match(op string, retry bool) (*Rule, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[op]++
	for i, r := range p.rules {
		if r.Op != "" && r.Op != op || r.FirstAttempts && retry {
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
		p.faults[op]++
		rule := *r
		return &rule, p.released
	}
	return nil, p.released
}

func operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

// retried reports whether r is a retry: the SDK's amz-sdk-request header
// names an attempt after the first.
func retried(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return n != "1"
		}
	}
	return false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	rule, released := p.match(operation(r), retried(r))
	if rule == nil {
		p.forward.ServeHTTP(w, r)
		return
	}
	if rule.Kind == Hang || rule.Kind == Blackhole || rule.Kind == DelayBefore {
		// Read the request first: the server notices a client that goes
		// away (and ends r's context) only once the body was read.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	switch rule.Kind {
	case Hang:
		defer p.hold()()
		select {
		case <-released:
			if r.Context().Err() == nil { // a client that went away sent nothing
				p.forward.ServeHTTP(w, r)
			}
		case <-r.Context().Done():
		}
	case Blackhole:
		defer p.hold()()
		select {
		case <-r.Context().Done():
		case <-p.closing:
		}
	case DelayBefore:
		release := p.hold()
		select {
		case <-time.After(rule.Delay):
			release()
			if r.Context().Err() == nil {
				p.forward.ServeHTTP(w, r)
			}
		case <-r.Context().Done():
			release()
		case <-p.closing:
			release()
		}
	case Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	case Throttle:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`)
	case DelayAfter, Error500After:
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		p.forward.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
		if rule.Kind == Error500After {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-ErrorType", "InternalServerError")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error (injected after the request applied)"}`)
			return
		}
		select {
		case <-time.After(rule.Delay):
		case <-r.Context().Done():
			return
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		io.Copy(w, &rec.body)
	}
}

// recorder holds a forwarded answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }
