package limiter

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/faultproxy"
)

// The tests of this file answer writes with a 500 after DynamoDB applied
// them (internal/faultproxy): each write carries a write identifier, so
// the SDK's retry of it is refused and recognised as applied, and the
// tokens are charged once.

// TestServerErrorAfterApplyChargedOnce: a write of each kind that DynamoDB
// applied but answered with a 500 is sent again; the retry, refused
// because the item holds its identifier (or, for a transaction, answered
// from its idempotency token), counts as applied: the acquire or commit
// succeeds, and its tokens are charged once.
func TestServerErrorAfterApplyChargedOnce(t *testing.T) {
	t.Parallel()
	lim := WithLimits(PerMinute("rpm", 100))
	cascade := func(t *testing.T, env *testEnv, rl *RateLimiter) {
		for _, e := range []Entity{{ID: "p"}, {ID: "e", ParentID: "p", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(env.ctx, e)
			require.NoError(t, err)
		}
	}
	var lease *Lease // the adjustment's
	for _, tc := range []struct {
		name string
		op   string // the operation answered 500
		opts []func(*Options)
		// setup runs before the fault; run is what it hits.
		setup func(t *testing.T, env *testEnv, rl *RateLimiter)
		run   func(t *testing.T, env *testEnv, rl *RateLimiter) error
		// tc is what the bucket(s) of e (and p) consumed in the end.
		tc       int64
		entities []string
	}{
		{name: "speculative write", op: "UpdateItem", tc: 6000,
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
			}},
		{name: "exact write of a full bucket", op: "UpdateItem", tc: 6000,
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
				env.clock.advance(time.Minute) // full again: the refilled state, from the kept item
			}},
		{name: "adjustment", op: "UpdateItem", tc: 3000,
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
				lease = mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim)
				require.NoError(t, lease.Adjust(Consume{"rpm": 1}))
			},
			run: func(t *testing.T, env *testEnv, rl *RateLimiter) error { return lease.Commit(env.ctx) }},
		{name: "read-then-write", op: "UpdateItem", tc: 6000, opts: []func(*Options){func(o *Options) { o.SpeculativeWrites = false }},
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
			}},
		{name: "new bucket", op: "PutItem", tc: 5000, opts: []func(*Options){func(o *Options) { o.SpeculativeWrites = false }}},
		{name: "cascade, new buckets", op: "TransactWriteItems", tc: 5000, opts: []func(*Options){func(o *Options) { o.SpeculativeWrites = false }},
			setup: cascade, entities: []string{"e", "p"}},
		{name: "cascade, read-then-write", op: "TransactWriteItems", tc: 6000, opts: []func(*Options){func(o *Options) { o.SpeculativeWrites = false }},
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				cascade(t, env, rl)
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
			}, entities: []string{"e", "p"}},
		{name: "commit folded into the next acquire", op: "UpdateItem", tc: 8000, opts: []func(*Options){func(o *Options) { o.BackgroundCommit = true }},
			setup: func(t *testing.T, env *testEnv, rl *RateLimiter) {
				mustAcquireWithin(t, rl, "e", Consume{"rpm": 1}, lim)
				lease := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim)
				require.NoError(t, lease.Adjust(Consume{"rpm": 1}))
				require.NoError(t, lease.Commit(env.ctx)) // queued: written with the next acquire
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			rl, p := proxiedLimiter(t, env, append([]func(*Options){func(o *Options) { o.GroupCommit = false }}, tc.opts...)...)
			if tc.setup != nil {
				tc.setup(t, env, rl)
			}
			p.Add(faultproxy.Rule{Op: tc.op, Kind: faultproxy.Error500After, Times: 1})
			before := p.Count(tc.op)
			run := tc.run
			if run == nil {
				run = func(t *testing.T, env *testEnv, rl *RateLimiter) error {
					lease, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 5}, lim)
					if err != nil {
						return err
					}
					return lease.Commit(env.ctx)
				}
			}
			require.NoError(t, run(t, env, rl), "a write answered 500 after it applied")
			require.NoError(t, rl.Close())
			assert.Equal(t, 1, p.Faults(tc.op), "the fault hit no %s: the test did not test", tc.op)
			assert.Equal(t, 2, p.Count(tc.op)-before, "%s requests: the one answered 500, then its retry", tc.op)
			entities := tc.entities
			if entities == nil {
				entities = []string{"e"}
			}
			for _, e := range entities {
				assert.Equal(t, tc.tc, env.n(env.bucket(e, "api"), "b_rpm_tc"), "%s: charged once", e)
			}
		})
	}
}

// TestServerErrorsEveryThirdWriteChargedOnce: every third write (of every
// kind: speculative, exact, adjustments, read-then-write, creates,
// transactions) is answered with a 500 after DynamoDB applied it, while
// sequences of acquire, adjust and commit run on a plain entity and a
// cascading one. The tokens charged equal exactly those of the admitted
// and committed calls, and at most a tenth of the calls fail (none, as
// each write's retry is the next request).
func TestServerErrorsEveryThirdWriteChargedOnce(t *testing.T) {
	// The four cases run at once (see commitModesAtOnce): their time is
	// mostly round trips through the fault proxy, and no check bounds it.
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, path := range []struct {
		name string
		opts []func(*Options)
	}{
		{"speculative", nil},
		{"read-then-write", []func(*Options){func(o *Options) { o.SpeculativeWrites = false }}},
	} {
		wg.Go(func() {
			t.Run(path.name, func(t *testing.T) {
				commitModesAtOnce(t, func(t *testing.T, mode []func(*Options)) {
					env := newTestEnv(t)
					rl, p := proxiedLimiter(t, env, slices.Concat(path.opts, mode)...)
					chargedOnce(t, env, rl, p, false)
				})
			})
		})
	}
}

// TestServerErrorsEveryThirdWriteConcurrent is the same with four
// goroutines at once and group commit: every third first attempt of a
// write is answered with a 500 after it applied (so that the retries of
// one write, interleaved with the others' requests, are not all hit).
func TestServerErrorsEveryThirdWriteConcurrent(t *testing.T) {
	commitModes(t, func(t *testing.T, mode []func(*Options)) {
		t.Parallel()
		env := newTestEnv(t)
		rl, p := proxiedLimiter(t, env, mode...)
		chargedOnce(t, env, rl, p, true)
	})
}

// chargedOnce runs 60 sequences of acquire, adjust and commit on rl (four
// goroutines when concurrent) while every third write is answered 500
// after it applied, then checks that each bucket's consumption is exactly
// that of the admitted and committed sequences, and that at most 10 % of
// the sequences failed. The clock stands still: nothing refills.
func chargedOnce(t *testing.T, env *testEnv, rl *RateLimiter, p *faultproxy.Proxy, concurrent bool) {
	t.Helper()
	lim := WithLimits(PerMinute("rpm", 1000), PerMinute("tpm", 1_000_000))
	for _, e := range []Entity{{ID: "p"}, {ID: "c", ParentID: "p", Cascade: true}, {ID: "solo"}} {
		_, err := rl.Admin().CreateEntity(env.ctx, e)
		require.NoError(t, err)
	}
	for _, op := range []string{"UpdateItem", "PutItem", "TransactWriteItems"} {
		p.Add(faultproxy.Rule{Op: op, Kind: faultproxy.Error500After, Every: 3, FirstAttempts: concurrent})
	}
	const sequences = 60
	var (
		mu      sync.Mutex
		charged = map[string]int64{} // entity → tpm millitokens of the admitted and committed sequences
		failed  []error
	)
	sequence := func(i int) {
		entity := []string{"solo", "c"}[i%2]
		est, actual := int64(100+i), int64(50+3*i) // some commits charge more, some give back
		lease, err := rl.Acquire(env.ctx, entity, "api", Consume{"rpm": 1, "tpm": est}, lim)
		if err == nil {
			err = lease.Adjust(Consume{"tpm": actual - est})
			if err == nil {
				err = lease.Commit(env.ctx)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, fmt.Errorf("sequence %d on %s: %w", i, entity, err))
			return
		}
		charged[entity] += actual * 1000
		if entity == "c" {
			charged["p"] += actual * 1000
		}
	}
	if concurrent {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 4 {
			wg.Go(func() {
				for i := range next {
					sequence(i)
				}
			})
		}
		for i := range sequences {
			next <- i
		}
		close(next)
		wg.Wait()
	} else {
		for i := range sequences {
			sequence(i)
		}
	}
	require.NoError(t, rl.Close())
	faults := p.Faults("")
	p.Clear()
	t.Logf("%d writes answered 500 after they applied; %d of %d sequences failed: %v", faults, len(failed), sequences, errors.Join(failed...))
	require.Greater(t, faults, sequences/3, "too few faults: the test did not test")
	for _, err := range failed {
		require.ErrorIs(t, err, ErrUnavailable, "a sequence failed otherwise")
	}
	assert.LessOrEqual(t, len(failed), sequences/10, "more than 10 %% of the sequences failed: %v", errors.Join(failed...))
	for _, e := range []string{"solo", "c", "p"} {
		b := env.bucket(e, "api")
		assert.Equal(t, charged[e], env.n(b, "b_tpm_tc"), "%s: tpm consumed = the committed sequences'", e)
		assert.Equal(t, 1_000_000_000-charged[e], env.n(b, "b_tpm_tk"), "%s: tpm balance", e)
	}
}
