package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInFlightDynamoDBRenewAndLapse holds a lease on DynamoDB Local, real
// clock, slot TTL 2 s: through three TTLs of renewals its slot stays
// taken (every other acquire over the cap of 2 is refused); a second
// lease abandoned as by a crash (renewal stopped, no Commit) gives its
// slot back within the TTL; the live lease's Commit gives its back at
// once.
func TestInFlightDynamoDBRenewAndLapse(t *testing.T) {
	t.Parallel() // real time, mostly asleep; a table of its own
	const ttl = 2 * time.Second
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.SlotTTL = ttl })
	defer func() { _ = rl.Close() }()
	ctx := context.Background()
	opt := WithLimits(InFlight("calls", 2), PerMinute("rpm", 1000))
	call := Consume{"calls": 1, "rpm": 1}
	live, err := rl.Acquire(ctx, "k", "gpt", call, opt)
	require.NoError(t, err)
	crashed, err := rl.Acquire(ctx, "k", "gpt", call, opt)
	require.NoError(t, err)
	for end := time.Now().Add(3 * ttl / 2); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "gpt", call, opt)
		require.ErrorIs(t, err, ErrRateLimited, "both slots are held")
	}
	AbandonSlots(crashed)
	start := time.Now()
	var third *Lease
	for third == nil {
		third, err = rl.Acquire(ctx, "k", "gpt", call, opt)
		if err != nil {
			require.ErrorIs(t, err, ErrRateLimited)
			require.Less(t, time.Since(start), ttl+time.Second, "the abandoned slot never came back")
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("abandoned slot back after %v (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "gpt", call, opt)
		require.ErrorIs(t, err, ErrRateLimited, "the live lease keeps its slot")
	}
	require.NoError(t, live.Commit(ctx))
	fourth, err := rl.Acquire(ctx, "k", "gpt", call, opt)
	require.NoError(t, err, "a committed slot is free at once")
	require.NoError(t, fourth.Rollback(ctx))
	require.NoError(t, third.Commit(ctx))
	free, err := rl.Available(ctx, "k", "gpt", opt)
	require.NoError(t, err)
	require.Equal(t, int64(2), free["calls"])
}
