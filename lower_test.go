package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestLowerTokens: LowerTokens lowers a balance (refilled to now) to the
// amount given and never raises one; a negative amount is a debt that makes
// the next acquire wait until refill has paid it off. On DynamoDB Local and
// on the memory backend.
func TestLowerTokens(t *testing.T) {
	for _, backend := range []string{"dynamodb", "memory"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var repo limiter.Repository = memorystore.New()
			if backend == "dynamodb" {
				r, err := limiter.OpenDynamoDB(ctx, ddblocal.Client(t, ddblocal.WithoutStreams), func(o *limiter.DynamoDBOptions) {
					o.Table, o.CreateTable = ddblocal.TableName(t), true
				})
				require.NoError(t, err)
				repo = r
			}
			now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
			defer rl.Close()
			limits := limiter.WithLimits(limiter.PerMinute("rpm", 600), limiter.PerMinute("tpm", 60_000))
			avail := func() map[string]int64 {
				a, err := rl.Available(ctx, "k", "m", limits)
				require.NoError(t, err)
				return a
			}

			ok, err := rl.LowerTokens(ctx, "k", "m", limiter.Consume{"tpm": 100})
			require.NoError(t, err)
			assert.False(t, ok, "no bucket yet: nothing to lower")

			lease, err := rl.Acquire(ctx, "k", "m", limiter.Consume{"rpm": 1, "tpm": 1000}, limits)
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
			now = now.Add(500 * time.Millisecond) // refills 500 tpm, 5 rpm (capped)

			ok, err = rl.LowerTokens(ctx, "k", "m", limiter.Consume{"tpm": 20_000})
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, map[string]int64{"rpm": 600, "tpm": 20_000}, avail())

			ok, err = rl.LowerTokens(ctx, "k", "m", limiter.Consume{"tpm": 30_000})
			require.NoError(t, err)
			assert.False(t, ok, "never raised")
			assert.Equal(t, int64(20_000), avail()["tpm"])

			ok, err = rl.LowerTokens(ctx, "k", "m", limiter.Consume{"tpm": -3_000}) // 3 s of refill
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, int64(-3_000), avail()["tpm"])
			_, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"rpm": 1, "tpm": 1}, limits)
			var denied *limiter.RateLimitExceededError
			require.ErrorAs(t, err, &denied)
			assert.InDelta(t, 3*time.Second, denied.RetryAfter, float64(100*time.Millisecond))
			now = now.Add(3100 * time.Millisecond)
			lease, err = rl.Acquire(ctx, "k", "m", limiter.Consume{"rpm": 1, "tpm": 1}, limits)
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))

			_, err = rl.LowerTokens(ctx, "k", "m", limiter.Consume{"tpm": -1})
			require.NoError(t, err)
			_, err = rl.LowerTokens(ctx, "k", "", limiter.Consume{"tpm": 1})
			assert.ErrorIs(t, err, limiter.ErrValidation)
		})
	}
}
