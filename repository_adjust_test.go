package limiter

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// tpmAdjust is a WriteAdjust of milli on e's tpm (a negative milli is a
// refund) of the item's incarnation inc, with capMilli as the capacity the
// caller expects (0: unknown).
func tpmAdjust(e string, milli, capMilli, inc int64) []store.BucketWrite {
	return []store.BucketWrite{{
		Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: e, Resource: "api"}, Incarnation: inc,
		Limits: []store.LimitWrite{{Name: "tpm", ConsumedMilli: milli, CapacityMilli: capMilli}},
	}}
}

// TestAdjustRefundCases: a refund lifts the balance by its amount while it
// fits under the capacity, caps it at the capacity when it would not, and
// leaves a balance at or above the capacity alone; the total consumed
// always goes down by the refund. With the expected capacity known the
// first case costs one write; otherwise (and in the other cases) the
// refused ADD returns the item and one conditioned write follows.
func TestAdjustRefundCases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		tokens, expectedCap int64
		want                int64
		calls               string
	}{
		{"fits", 50_000, 100_000, 70_000, "UpdateItem"},
		{"fits, capacity unknown", 50_000, 0, 70_000, "UpdateItem!, UpdateItem"},
		{"fits exactly", 80_000, 100_000, 100_000, "UpdateItem"},
		{"capped", 90_000, 100_000, 100_000, "UpdateItem!, UpdateItem"},
		{"capped, capacity unknown", 99_999, 0, 100_000, "UpdateItem!, UpdateItem"},
		{"full", 100_000, 100_000, 100_000, "UpdateItem!, UpdateItem"},
		{"above capacity", 120_000, 0, 120_000, "UpdateItem!, UpdateItem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			rl := env.limiter()
			l, err := rl.Acquire(env.ctx, "e", "api", Consume{"tpm": 1}, WithLimits(PerMinute("tpm", 100)))
			require.NoError(t, err)
			require.NoError(t, l.Commit(env.ctx))
			setTokens(t, env, "e", "tpm", tc.tokens)
			before := env.n(env.bucket("e", "api"), "b_tpm_tc")
			inc := env.n(env.bucket("e", "api"), "inc")
			env.rec.Reset()
			require.NoError(t, env.repo.WriteBuckets(env.ctx, tpmAdjust("e", -20_000, tc.expectedCap, inc)))
			assert.Equal(t, tc.calls, env.calls())
			b := env.bucket("e", "api")
			assert.Equal(t, tc.want, env.n(b, "b_tpm_tk"))
			assert.Equal(t, before-20_000, env.n(b, "b_tpm_tc"))
		})
	}
}

// TestAdjustUnderContention: charges and refunds (with the capacity
// unknown, so every refund takes the written-again path) from many
// goroutines on one item whose balance stays far from its capacity all
// succeed, and the balance and total consumed come out exact. The second
// write of a refund is conditioned on the balance's range, not on the
// value read, so the other writes do not refuse it.
func TestAdjustUnderContention(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	l, err := rl.Acquire(env.ctx, "e", "api", Consume{"tpm": 500_000}, WithLimits(PerMinute("tpm", 1_000_000)))
	require.NoError(t, err)
	require.NoError(t, l.Commit(env.ctx))
	b := env.bucket("e", "api")
	tk0, tc0, inc := env.n(b, "b_tpm_tk"), env.n(b, "b_tpm_tc"), env.n(b, "inc")

	const workers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			milli := int64(1_000) // even workers charge, odd ones refund
			if w%2 == 1 {
				milli = -1_000
			}
			for range each {
				if err := env.repo.WriteBuckets(env.ctx, tpmAdjust("e", milli, 0, inc)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	b = env.bucket("e", "api")
	assert.Equal(t, tk0, env.n(b, "b_tpm_tk"), "as many charges as refunds")
	assert.Equal(t, tc0, env.n(b, "b_tpm_tc"))
}

// TestAdjustYieldsToBusyItem: another client moves the balance across the
// capacity minus the refund between every read and rewrite of a refund
// (full, then three refunds below it, and so on). The exact cases would
// refuse every rewrite; from adjustYieldRound on, a limit read full is
// left as it is, so the refund applies, the total consumed goes down by
// it and the balance never rises above the capacity.
func TestAdjustYieldsToBusyItem(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	l, err := rl.Acquire(env.ctx, "e", "api", Consume{"tpm": 1}, WithLimits(PerMinute("tpm", 100)))
	require.NoError(t, err)
	require.NoError(t, l.Commit(env.ctx))
	const capacity, refund = 100_000, 20_000
	setTokens(t, env, "e", "tpm", capacity)
	before := env.n(env.bucket("e", "api"), "b_tpm_tc")
	inc := env.n(env.bucket("e", "api"), "inc")
	rewrites := 0
	adjustRewriteHook = func(store.BucketKey) {
		rewrites++
		if env.n(env.bucket("e", "api"), "b_tpm_tk") > capacity-refund {
			setTokens(t, env, "e", "tpm", capacity-3*refund)
		} else {
			setTokens(t, env, "e", "tpm", capacity)
		}
	}
	t.Cleanup(func() { adjustRewriteHook = nil })
	require.NoError(t, env.repo.WriteBuckets(env.ctx, tpmAdjust("e", -refund, capacity, inc)))
	b := env.bucket("e", "api")
	assert.LessOrEqual(t, rewrites, adjustYieldRound+2)
	assert.Equal(t, before-refund, env.n(b, "b_tpm_tc"))
	assert.LessOrEqual(t, env.n(b, "b_tpm_tk"), int64(capacity))
}
