package limiter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestRefundable: what a refund may give back of a lease's millitokens
// shrinks at the limit's refill rate from the acquire on (the refill
// rounded down, the result not rounded to whole tokens), never below zero,
// and saturates on extreme amounts and times.
func TestRefundable(t *testing.T) {
	e := &leaseEntry{limit: store.Limit(PerMinute("rpm", 100)), acquiredMs: 1_000_000}
	for _, tc := range []struct {
		held, now, want int64
	}{
		{100_000, 1_000_000, 100_000},
		{100_000, 999_000, 100_000},  // a clock that went back: no refill
		{100_000, 1_000_001, 99_999}, // 1.67 refilled: 1
		{100_000, 1_000_599, 99_002}, // 998.3 refilled: 998
		{100_000, 1_000_600, 99_000}, // one token refilled
		{1_000, 1_000_001, 999},      // a one-token lease a millisecond on: 999 back, not 0
		{100_000, 1_030_000, 50_000}, // half a minute
		{100_000, 1_060_000, 0},      // a whole minute
		{100_000, 1_061_000, 0},      // more: never below zero
		{100_000, math.MaxInt64, 0},  // saturating elapsed time
		{0, 1_000_000, 0},            // nothing held
		{math.MaxInt64, 1_000_600, math.MaxInt64 - 1_000},
	} {
		assert.Equal(t, tc.want, e.refundable(tc.held, tc.now), "held %d at %d", tc.held, tc.now)
	}
	e.acquiredMs = math.MinInt64 + 1
	assert.Equal(t, int64(0), e.refundable(100_000, math.MaxInt64), "elapsed time beyond int64")
	e.limit = store.Limit(PerSecond("big", maxAmount))
	e.acquiredMs = 0
	assert.Equal(t, int64(0), e.refundable(math.MaxInt64, math.MaxInt64), "a refill beyond int64")
}

// TestConsumedSaturates: Consumed adds up saturating: 1,001 adjustments
// of the largest amount report math.MaxInt64 millitokens in tokens (the
// sum once wrapped to a negative count).
func TestConsumedSaturates(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	rl := New(newMemory(), func(o *Options) { o.Clock = clock.now })
	lease, err := rl.Acquire(ctx, "e", "api", Consume{"tpm": 1}, WithLimits(PerMinute("tpm", 100)))
	require.NoError(t, err)
	for range 1_001 {
		require.NoError(t, lease.Adjust(Consume{"tpm": maxAmount}))
	}
	assert.Equal(t, int64(maxAmount), lease.Consumed()["tpm"], "math.MaxInt64 millitokens")
	lease.entries = append(lease.entries, lease.entries[0])
	assert.Equal(t, int64(2*maxAmount), lease.Consumed()["tpm"], "two saturated entries")
	lease.entries = lease.entries[:1]
	// A refund of the largest amount gives back no more than was taken.
	require.NoError(t, lease.Adjust(Consume{"tpm": -maxAmount}))
	assert.Equal(t, int64(1), lease.Consumed()["tpm"], "the acquire's token and 0.807 of the saturated sum")
	require.NoError(t, lease.Adjust(Consume{"tpm": -maxAmount}))
	assert.Equal(t, int64(0), lease.Consumed()["tpm"], "nothing left to give back")
}

// TestRefundCutAtCommit: a refund asked for right after the acquire but
// committed a minute later gives nothing back: the cap applies again when
// the refund is written, against the refill since the acquire.
func TestRefundCutAtCommit(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	rl := New(newMemory(), func(o *Options) { o.Clock = clock.now })
	lim := WithLimits(PerMinute("rpm", 100))
	lease, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 100}, lim)
	require.NoError(t, err)
	require.NoError(t, lease.Adjust(Consume{"rpm": -100}))
	assert.Equal(t, int64(0), lease.Consumed()["rpm"], "cut to nothing when asked: nothing refilled yet")
	clock.advance(time.Minute)
	n := 0
	for ; n < 200; n++ {
		l, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
		if err != nil {
			require.ErrorIs(t, err, ErrRateLimited)
			break
		}
		require.NoError(t, l.Commit(ctx))
	}
	require.Equal(t, 100, n, "the refill")
	require.NoError(t, lease.Commit(ctx))
	assert.Equal(t, int64(100), lease.Consumed()["rpm"], "nothing given back a minute later")
	avail, err := rl.Available(ctx, "e", "api", lim)
	require.NoError(t, err)
	assert.Equal(t, int64(0), avail["rpm"])
}
