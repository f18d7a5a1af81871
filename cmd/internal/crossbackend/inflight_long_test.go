package crossbackend_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestInFlightLongCallSoak (SOAK=1 only: it lasts 3 minutes) holds one
// call for 3 minutes with the default 30 s slot TTL on redis-server, cap
// 1: through six TTLs of renewals, every other acquire, tried each
// 500 ms, is refused; its Commit gives the slot back at once.
func TestInFlightLongCallSoak(t *testing.T) {
	if os.Getenv(envSoak) == "" {
		t.Skip("3 minutes: SOAK=1 (make soak)")
	}
	const length = 3 * time.Minute
	rl := limiter.New(openRedis(t), func(o *limiter.Options) { o.SlotTTL = 30 * time.Second })
	defer rl.Close()
	ctx := context.Background()
	opt := limiter.WithLimits(limiter.InFlight("calls", 1))
	call := limiter.Consume{"calls": 1}
	lease, err := rl.Acquire(ctx, "k", "gpt", call, opt)
	require.NoError(t, err)
	tries := 0
	for end := time.Now().Add(length); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "gpt", call, opt)
		require.ErrorIs(t, err, limiter.ErrRateLimited, "the long call lost its slot after %d refusals", tries)
		free, err := rl.Available(ctx, "k", "gpt", opt)
		require.NoError(t, err)
		require.Equal(t, int64(0), free["calls"], "a free slot while the call holds it")
		tries++
	}
	t.Logf("%d acquires refused over %v (slot TTL %v)", tries, length, 30*time.Second)
	require.NoError(t, lease.Commit(ctx))
	next, err := rl.Acquire(ctx, "k", "gpt", call, opt)
	require.NoError(t, err, "the committed slot is free at once")
	require.NoError(t, next.Commit(ctx))
}
