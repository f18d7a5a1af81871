// Package storetest is the conformance suite of the backend contract,
// package store, in the manner of testing/slogtest: a backend's own test
// calls [Run] with a function that returns a fresh repository, and the
// suite checks the contract directly and runs the limiter's behaviour
// (leases, cascade, the config hierarchy, entities and audit, TTLs,
// concurrent admission) on top of it.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Repository {
//			return mystore.New(...) // empty, one per call
//		})
//	}
//
// Every scenario checks its own expectations and also records a
// transcript of what it observed (balances, errors, statuses, config
// sources, audit actions); the transcript must equal the one the shipped
// backends produce (testdata/*.golden), so a backend fails as soon as it
// differs from them in any observed detail.
//
// Scenarios run on the read-then-write path and, when the repository
// implements [store.SpeculativeStore], on the speculative path. The
// suite drives time with [limiter.Options.Clock]; a repository must not need a
// clock of its own for anything the contract covers.
//
// Last, Run's "Model" part replays sequences of operations against an
// exact reference token bucket, in every combination of speculative
// writes, background commit and group commit; its size is set by
// environment variables: ZAEL_MODEL_SEEDS runs the random sequences of
// seeds 1 to N per combination (default 1), ZAEL_MODEL_STEPS sets the
// operations per sequence (default 150), and ZAEL_MODEL_SEED runs the
// sequence of that seed only.
package storetest

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

//go:embed testdata/*.golden
var goldens embed.FS

// updateEnv, set to 1, makes Run rewrite the golden transcripts from the
// backend under test instead of comparing with them (for the maintainers
// of this package, after an intended change of behaviour).
const updateEnv = "STORETEST_UPDATE"

// Epoch is the suite clock's start: 2026-01-02T03:04:05.678Z.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)

// scenario is one behavioural test.
type scenario struct {
	name string
	run  func(t *testing.T, b *backend)
}

// Run runs the conformance suite. newRepo returns a new, empty repository
// each time it is called (one per scenario and path, and one per mode of
// the model test); it may register cleanups with t. The scenarios and the
// model's modes run in parallel (t.Parallel), each on its own repository:
// on a networked backend they mostly wait for round trips.
func Run(t *testing.T, newStore func(t *testing.T) store.Repository) {
	t.Helper()
	// The capabilities are those of the store behind any handle.
	newRepo := func(t *testing.T) store.Repository { return store.Unwrap(newStore(t)) }
	t.Run("Contract", func(t *testing.T) { runContract(t, newRepo) })
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			for _, spec := range []bool{false, true} {
				path := map[bool]string{false: "slow", true: "speculative"}[spec]
				t.Run(path, func(t *testing.T) {
					t.Parallel()
					repo := newRepo(t)
					if _, ok := repo.(store.SpeculativeStore); spec && !ok {
						t.Skip("the repository is no store.SpeculativeStore: the speculative path is the slow one")
					}
					b := &backend{repo: repo, clock: &Clock{t: Epoch}, spec: spec, t: t}
					sc.run(t, b)
					if !t.Failed() {
						b.compare(sc.name + "_" + path)
					}
				})
			}
		})
	}
	t.Run("Model", func(t *testing.T) { runModel(t, newRepo) })
}

// Clock is a settable clock for [limiter.Options.Clock], safe for concurrent
// use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock set to [Epoch].
func NewClock() *Clock { return &Clock{t: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// backend is one repository under test with its clock and transcript.
type backend struct {
	repo  store.Repository
	clock *Clock
	spec  bool
	log   []string
	t     *testing.T
}

// rl returns a limiter on the backend, on the path under test.
func (b *backend) rl(opts ...func(*limiter.Options)) *limiter.RateLimiter {
	return limiter.New(b.repo, append([]func(*limiter.Options){func(o *limiter.Options) { o.SpeculativeWrites = b.spec }, func(o *limiter.Options) { o.Clock = b.clock.Now }}, opts...)...)
}

// Optional capabilities some observations need.
const (
	capConfigLister = "ConfigLister"
	capAuditLog     = "AuditLog"
)

// has reports whether the backend implements the optional capability.
func (b *backend) has(capability string) bool {
	switch capability {
	case capConfigLister:
		_, ok := b.repo.(store.ConfigLister)
		return ok
	case capAuditLog:
		_, ok := b.repo.(store.AuditLog)
		return ok
	}
	return false
}

// noteCap records an observation that needs an optional capability: its
// golden line is tagged with it and left out of the comparison for a
// backend without it.
func (b *backend) noteCap(capability, format string, args ...any) {
	b.note("["+capability+"] "+format, args...)
}

// note records an observation in the transcript.
func (b *backend) note(format string, args ...any) {
	b.log = append(b.log, fmt.Sprintf(format, args...))
}

// noteErr records an error in a backend-neutral form.
func (b *backend) noteErr(what string, err error) {
	var rle *limiter.RateLimitExceededError
	var ve *store.ValidationError
	switch {
	case err == nil:
		b.note("%s: ok", what)
	case errors.As(err, &rle):
		var parts []string
		for _, s := range rle.Statuses {
			parts = append(parts, fmt.Sprintf("%s/%s/%s avail=%d req=%d exc=%v retry=%v",
				s.EntityID, s.Resource, s.LimitName, s.Available, s.Requested, s.Exceeded, s.RetryAfter))
		}
		b.note("%s: rate limited retry=%v [%s]", what, rle.RetryAfter, strings.Join(parts, "; "))
	case errors.As(err, &ve):
		b.note("%s: validation %s", what, ve.Error())
	default:
		b.note("%s: error %T %v", what, err, err)
	}
}

// bucket returns the limits of a shard-0 bucket as "name=tk/tc", or
// "missing".
func (b *backend) bucket(entity, resource string) string {
	b.t.Helper()
	sb, err := b.repo.GetBucket(context.Background(), store.BucketKey{EntityID: entity, Resource: resource})
	if err != nil {
		b.t.Fatalf("GetBucket: %v", err)
	}
	if sb == nil {
		return "missing"
	}
	var parts []string
	for _, s := range sb.States {
		parts = append(parts, fmt.Sprintf("%s=%d/%d", s.LimitName, s.TokensMilli, s.TotalConsumedMilli))
	}
	return strings.Join(parts, " ")
}

// compare checks the transcript against the golden one of name (or
// rewrites it when STORETEST_UPDATE=1).
func (b *backend) compare(name string) {
	t := b.t
	t.Helper()
	got := strings.Join(b.log, "\n") + "\n"
	file := "testdata/" + name + ".golden"
	if os.Getenv(updateEnv) == "1" {
		_, src, _, _ := runtime.Caller(0)
		path := filepath.Join(filepath.Dir(src), file)
		err := os.WriteFile(path, []byte(got), 0o644)
		require.NoError(t, err, "update golden: %v", err)
		return
	}
	raw, err := goldens.ReadFile(file)
	require.NoError(t, err, "no golden transcript %s (run with %s=1 to create it): %v", file, updateEnv, err)
	// Drop the golden observations of capabilities the backend lacks.
	var kept []string
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		if tag, _, ok := strings.Cut(strings.TrimPrefix(line, "["), "] "); ok && strings.HasPrefix(line, "[") && !b.has(tag) {
			continue
		}
		kept = append(kept, line)
	}
	want := strings.Join(kept, "")
	if want == got {
		return
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		require.Equal(t, g, w, "transcript differs from the shipped backends' at observation %d:\n  got:  %s\n  want: %s", i, g, w)
	}
}
