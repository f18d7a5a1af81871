package costcap_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/store"
)

// TestMain starts DynamoDB Local and redis-server on first use.
func TestMain(m *testing.M) {
	os.Exit(redisserver.Main(redisserver.RunnerFunc(func() int { return ddblocal.Main(m) })))
}

// The key of every call.
const (
	entity   = "api-key-1"
	resource = "gpt-4o"
)

// manualClock is one clock for the limiter, moved by the test only.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// consumedMicroUSD returns the "usd" limit's total consumed (b_usd_tc) of
// the entity's bucket, in micro-dollars, and its millitokens.
func consumedMicroUSD(t *testing.T, repo limiter.Repository) (int64, int64) {
	t.Helper()
	b, err := repo.GetBucket(context.Background(), store.BucketKey{EntityID: entity, Resource: resource})
	require.NoError(t, err)
	require.NotNil(t, b)
	for _, st := range b.States {
		if st.LimitName == "usd" {
			return st.TotalConsumedMilli / 1000, st.TotalConsumedMilli
		}
	}
	t.Fatal("the bucket has no usd limit")
	return 0, 0
}
