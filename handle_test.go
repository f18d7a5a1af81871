package limiter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// TestHandleUnwrapped: a limiter made on the DynamoDB handle works on the
// store behind it, with its capabilities: a warm acquire is one
// speculative UpdateItem, and store.Unwrap and storetest see them.
func TestHandleUnwrapped(t *testing.T) {
	env := newTestEnv(t)
	h := wrapDynamo(env.repo)
	_, ok := store.Repository(h).(store.SpeculativeStore)
	require.False(t, ok, "the handle itself carries the contract alone")
	_, ok = store.Unwrap(h).(store.SpeculativeStore)
	require.True(t, ok, "the store behind it has every capability")

	rl := New(h, func(o *Options) { o.Clock = env.clock.now })
	defer rl.Close()
	limits := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k", "gpt", Consume{"rpm": 1}, limits))
	env.rec.Reset()
	lease, err := rl.Acquire(env.ctx, "k", "gpt", Consume{"rpm": 1}, limits)
	require.NoError(t, err)
	var ops []string
	for _, c := range env.rec.Calls() {
		ops = append(ops, c.Op)
	}
	require.Equal(t, []string{"UpdateItem"}, ops, "a warm acquire through the handle")
	require.NoError(t, lease.Rollback(env.ctx))
}
