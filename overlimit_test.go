package limiter

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// TestOverLimitCacheDenialStorm: 32 goroutines keep retrying an exhausted
// bucket. With the over-limit cache at most 1 in 20 refusals costs a
// DynamoDB call, and every refusal carries the Retry-After (and
// availability) a limiter without the cache computes from DynamoDB at the
// same moment, for that request's amount.
func TestOverLimitCacheDenialStorm(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute })
	ref := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.GroupCommit = false }) // no cache: asks DynamoDB
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 100, "tpm": 10}, lim))

	// want returns what DynamoDB says about n rpm now.
	want := func(n int64) *RateLimitExceededError {
		t.Helper()
		_, err := ref.Acquire(env.ctx, "k", "api", Consume{"rpm": n, "tpm": 1}, lim)
		return rateLimited(t, err)
	}
	// refusal is what a local refusal must repeat of DynamoDB's.
	type refusal struct {
		RetryAfter time.Duration
		Limit      string
		Available  int64
		Statuses   int
	}
	view := func(e *RateLimitExceededError) refusal {
		return refusal{e.RetryAfter, e.Primary.LimitName, e.Primary.Available, len(e.Statuses)}
	}
	wants := map[int64]*RateLimitExceededError{1: want(1), 2: want(2), 3: want(3)}
	env.rec.Reset()

	const goroutines, each = 32, 25
	var mu sync.Mutex
	refused := 0
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				n := int64(1 + (g+i)%3)
				_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": n, "tpm": 1}, lim)
				rle := rateLimited(t, err)
				assert.Equal(t, view(wants[n]), view(rle), "%d rpm, want DynamoDB's refusal", n)
				mu.Lock()
				refused++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	calls := len(env.rec.Calls())
	t.Logf("%d refused, %d DynamoDB calls (%s), %d local refusals", refused, calls, env.calls(), rl.Stats().OverLimitHits)
	assert.LessOrEqual(t, float64(calls), 0.05*float64(refused), "calls for %d refused acquires: want ≤ 0.05 per refusal", refused)

	// Later, while the entry lives (it lives until the first refusal's
	// Retry-After, 601 ms): refused locally, Retry-After as DynamoDB's now.
	env.clock.advance(300 * time.Millisecond)
	w := want(3)
	env.rec.Reset()
	_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": 3, "tpm": 1}, lim)
	rle := rateLimited(t, err)
	assert.Equal(t, view(w), view(rle), "after 300 ms, want DynamoDB's refusal as of now")
	assert.Empty(t, env.calls(), "after 300 ms: calls")
	// Past it, DynamoDB decides again: tpm has refilled to its capacity,
	// so the write is the item refilled to now, computed from the item as
	// the last refusal returned it, and it admits (rpm has refilled 1).
	env.clock.advance(400 * time.Millisecond)
	env.rec.Reset()
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 1, "tpm": 1}, lim))
	assert.Equal(t, "UpdateItem", env.calls(), "after the entry expired: calls")
}

// TestOverLimitCacheClearedByRollback: a rollback through the limiter gives
// tokens back and clears the bucket's entry, so the next acquire goes to
// DynamoDB and is admitted.
func TestOverLimitCacheClearedByRollback(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute })
	lim := WithLimits(PerMinute("rpm", 100))
	held := mustAcquire(t, rl, "k", "api", Consume{"rpm": 5}, lim)
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 95}, lim))
	for range 2 {
		_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": 5}, lim)
		require.Error(t, err, "admitted from an empty bucket")
	}
	hits := rl.Stats().OverLimitHits
	require.EqualValues(t, 1, hits, "local refusals %d, want 1", hits)
	err := held.Rollback(env.ctx)
	require.NoError(t, err)
	env.rec.Reset()
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 5}, lim))
	got := env.calls()
	assert.EqualValues(t, "UpdateItem", got, "after the rollback: calls %q, want one UpdateItem", got)
}

// TestOverLimitCacheParent: children refused because their parent is
// exhausted are refused locally afterwards, for every child of that parent
// the limiter knows, with the parent's statuses.
func TestOverLimitCacheParent(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute })
	for _, e := range []Entity{{ID: "P"}, {ID: "C1", ParentID: "P", Cascade: true}, {ID: "C2", ParentID: "P", Cascade: true}} {
		_, err := rl.Admin().CreateEntity(env.ctx, e)
		require.NoError(t, err)
	}
	lim := WithLimits(PerMinute("rpm", 10))
	mustCommit(t, mustAcquire(t, rl, "C1", "api", Consume{"rpm": 1}, lim))
	mustCommit(t, mustAcquire(t, rl, "C2", "api", Consume{"rpm": 9}, lim)) // P is empty now
	_, err := rl.Acquire(env.ctx, "C1", "api", Consume{"rpm": 1}, lim)
	require.Error(t, err, "admitted with the parent empty")
	env.rec.Reset()
	for _, child := range []string{"C1", "C2"} {
		_, err := rl.Acquire(env.ctx, child, "api", Consume{"rpm": 1}, lim)
		rle := rateLimited(t, err)
		assert.Equal(t, "P", rle.Primary.EntityID, "%s: primary %+v", child, rle.Primary)
		assert.Equal(t, bucketmath.RetryAfter(1000, 10_000, 60_000), rle.RetryAfter, "%s: retry after", child)
	}
	got := env.calls()
	assert.EqualValues(t, "", got, "calls %q, want none", got)
}

// TestOverLimitCacheClearedBySetLimits: raising the stored limits through
// the limiter clears the cache, so the raised refill rate decides at once
// instead of the kept item's old one.
func TestOverLimitCacheClearedBySetLimits(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute })
	err := rl.Admin().SetLimits(env.ctx, Scope{Entity: "k", Resource: "api"}, []Limit{PerMinute("rpm", 10)})
	require.NoError(t, err)
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 10}))
	for range 2 {
		_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": 1})
		require.Error(t, err, "admitted from an empty bucket")
	}
	hits := rl.Stats().OverLimitHits
	require.EqualValues(t, 1, hits, "local refusals %d, want 1", hits)
	// 100 ms refill 10 rpm at the new rate (100/s), 0.016 at the old one.
	err = rl.Admin().SetLimits(env.ctx, Scope{Entity: "k", Resource: "api"}, []Limit{PerSecond("rpm", 100)})
	require.NoError(t, err)
	env.clock.advance(100 * time.Millisecond)
	env.rec.Reset()
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 5}))
	assert.NotEmpty(t, env.calls(), "after SetLimits: calls, want the store to decide")
	assert.EqualValues(t, 1, rl.Stats().OverLimitHits, "after SetLimits: local refusals, want the store to decide")
}

// TestOverLimitCacheClearedByLimitChanges: every limit change and entity
// deletion through the limiter empties the cache.
func TestOverLimitCacheClearedByLimitChanges(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute })
	lim := WithLimits(PerMinute("rpm", 10))
	ops := map[string]func() error{
		"SetResourceDefaults": func() error {
			return rl.Admin().SetLimits(env.ctx, Scope{Resource: "api"}, []Limit{PerMinute("rpm", 10)})
		},
		"DeleteResourceDefaults": func() error { return rl.Admin().DeleteLimits(env.ctx, Scope{Resource: "api"}) },
		"SetSystemDefaults":      func() error { return rl.Admin().SetLimits(env.ctx, Scope{}, []Limit{PerMinute("rpm", 10)}) },
		"DeleteSystemDefaults":   func() error { return rl.Admin().DeleteLimits(env.ctx, Scope{}) },
		"DeleteLimits":           func() error { return rl.Admin().DeleteLimits(env.ctx, Scope{Entity: "k", Resource: "api"}) },
		"DeleteEntity":           func() error { return rl.Admin().DeleteEntity(env.ctx, "k") },
	}
	for name, op := range ops {
		mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 10}, lim))
		_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": 1}, lim)
		require.Error(t, err, "%s: admitted from an empty bucket", name)
		n := rl.olc.entries.Len()
		require.EqualValues(t, 1, n, "%s: %d cache entries before, want 1", name, n)
		err = op()
		require.NoError(t, err, "%s: %v", name, err)
		n = rl.olc.entries.Len()
		assert.EqualValues(t, 0, n, "%s: %d cache entries after, want 0", name, n)
		env.clock.advance(time.Minute) // refill for the next round
	}
}
