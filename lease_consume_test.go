package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestConsumeRefillsOnce: Lease.Consume checks the lease's own view of the
// bucket, refilled to now; refilling it again at the same instant credits
// nothing. A limit refilling more than a millitoken a millisecond (7e12
// tokens per 3 s: 2,333,333,333,333.3 millitokens a millisecond), emptied
// at t = 0 by the acquire: at t = 1 ms the bucket earned 2,333,333,333,333
// millitokens, so after a Consume of 2e9 tokens 333,333,333.333 remain —
// four more Consumes of 2e9 at the same instant are refused, and so is
// one of 333,333,334, by 667 millitokens (RetryAfter 1 ms). Refilling
// from the drift-compensated refill time, a millisecond early, credited
// that millisecond again at every call: all five were admitted.
func TestConsumeRefillsOnce(t *testing.T) {
	for _, spec := range []bool{true, false} {
		now := int64(1_800_000_000_000)
		rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.SpeculativeWrites = spec },
			func(o *limiter.Options) { o.Clock = func() time.Time { return time.UnixMilli(now) } })
		ctx := context.Background()
		l := limiter.Limit{Name: "tpm", Capacity: 1e13, RefillAmount: 7e12, RefillPeriod: 3 * time.Second}
		lease, err := rl.Acquire(ctx, "e1", "api", limiter.Consume{"tpm": 1e13}, limiter.WithLimits(l))
		require.NoError(t, err)
		now++
		require.NoError(t, lease.Consume(limiter.Consume{"tpm": 2_000_000_000}), "speculative %v", spec)
		for i := range 4 {
			require.ErrorIs(t, lease.Consume(limiter.Consume{"tpm": 2_000_000_000}), limiter.ErrRateLimited, "speculative %v: Consume %d at the same instant", spec, i+2)
		}
		err = lease.Consume(limiter.Consume{"tpm": 333_333_334})
		var rle *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &rle, "speculative %v", spec)
		require.Equal(t, time.Millisecond, rle.RetryAfter, "speculative %v: 667 millitokens short", spec)
		require.NoError(t, lease.Consume(limiter.Consume{"tpm": 333_333_333}), "speculative %v: what is left fits", spec)
		require.NoError(t, lease.Commit(ctx))
		require.NoError(t, rl.Close())
	}
}
