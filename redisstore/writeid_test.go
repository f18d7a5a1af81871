package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// TestWriteIDHashesExpire: the hashes that keep the write identifiers of
// the calls that change balances (consumes, batched or not, and writes)
// each get a lifetime of 10.2 s at most and hold one field per applied
// call besides their marker: none is left without an expiry, and no call
// creates a key of its own. The client resends (go-redis's default of 3
// retries): only then do calls carry identifiers.
func TestWriteIDHashesExpire(t *testing.T) {
	const n = 40
	c, _, keys := writeIDSequences(t, 3, n)
	ctx := context.Background()
	require.NotEmpty(t, keys, "no write identifier hash: the test did not test")
	require.Less(t, len(keys), n, "a hash per call: identifiers are not sharing hashes")
	fields := 0
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0), "%s has no expiry", k)
		require.LessOrEqual(t, ttl, 10200*time.Millisecond, k)
		h, err := c.HGetAll(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, "1", h["#"], "%s: marker", k)
		fields += len(h) - 1
	}
	// every acquire (a consume, or a create where the item was missing) and
	// every adjustment applied once: a field each
	require.Equal(t, 2*n, fields, "identifiers kept: an acquire and an adjustment per sequence")
}

// TestNoWriteIDsWithoutResends: on a client that never resends (MaxRetries
// -1) every call is sent once, so none records a write identifier: the
// same sequences as TestWriteIDHashesExpire leave no identifier hash, and
// charge each acquire and adjustment once.
func TestNoWriteIDsWithoutResends(t *testing.T) {
	_, s, keys := writeIDSequences(t, -1, 40)
	ctx := context.Background()
	require.Empty(t, keys, "a client that never resends needs no identifier")
	for e := range 4 {
		got, err := s.GetBucket(ctx, store.BucketKey{EntityID: "e" + strconv.Itoa(e), Resource: "api"})
		require.NoError(t, err)
		byName := map[string]int64{}
		for _, st := range got.States {
			byName[st.LimitName] = st.TotalConsumedMilli
		}
		require.Equal(t, map[string]int64{"rpm": 10 * 1000, "tpm": 10 * 110 * 1000}, byName, "e%d: each charged once", e)
	}
}

// clientRetrying returns a client of the server at addr whose MaxRetries
// is maxRetries (-1: go-redis never resends), closed when the test ends.
func clientRetrying(t *testing.T, addr string, maxRetries int) *redis.Client {
	o := redisserver.ClientOptions(addr)
	o.MaxRetries = maxRetries
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// writeIDSequences runs n sequences through a limiter on a store of its
// own, on a client whose MaxRetries is maxRetries, on four entities e0..e3
// (each an acquire of 1 rpm and 100 tpm, an adjustment of 10 tpm more and
// a commit; the clock stands still), closes the limiter, and returns the
// client, the store and the keys of the write identifiers' hashes.
func writeIDSequences(t *testing.T, maxRetries, n int) (*redis.Client, *redisstore.Store, []string) {
	c := clientRetrying(t, redisserver.Addr(t), maxRetries)
	prefix := redisserver.Prefix(t)
	s, err := redisstore.New(c, func(o *redisstore.Options) { o.Prefix = prefix })
	require.NoError(t, err)
	at := time.Unix(1_800_000_000, 0) // nothing refills
	rl := limiter.New(s, func(o *limiter.Options) { o.Clock = func() time.Time { return at } })
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))
	for i := range n {
		lease, err := rl.Acquire(ctx, "e"+strconv.Itoa(i%4), "api", limiter.Consume{"rpm": 1, "tpm": 100}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(limiter.Consume{"tpm": 10}))
		require.NoError(t, lease.Commit(ctx))
	}
	require.NoError(t, rl.Close())
	keys, err := c.Keys(ctx, prefix+"*}:w:*").Result()
	require.NoError(t, err)
	return c, s, keys
}

// TestConsumeCommands: an applied consume is two commands on the server,
// HGETALL and HSET, and a third (the identifier's HSET) only on a client
// that resends. INFO commandstats of a server of the test's own, over 20
// acquires after a first.
func TestConsumeCommands(t *testing.T) {
	for _, tc := range []struct {
		name       string
		maxRetries int
		hsets      int // per consume
	}{
		{"retries off", -1, 1},
		{"resends", 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Private(t)
			c := clientRetrying(t, srv.Addr(), tc.maxRetries)
			s, err := redisstore.New(c)
			require.NoError(t, err)
			at := time.Unix(1_800_000_000, 0)
			rl := limiter.New(s, func(o *limiter.Options) { o.Clock = func() time.Time { return at } })
			t.Cleanup(func() { rl.Close() })
			ctx := context.Background()
			lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000))
			acquire := func() {
				lease, err := rl.Acquire(ctx, "k", "api", limiter.Consume{"rpm": 1}, lim)
				require.NoError(t, err)
				require.NoError(t, lease.Commit(ctx))
			}
			acquire()
			require.NoError(t, c.ConfigResetStat(ctx).Err())
			const n = 20
			for range n {
				acquire()
			}
			stats, err := c.Info(ctx, "commandstats").Result()
			require.NoError(t, err)
			calls := func(cmd string) int64 {
				n, _ := redisserver.CommandStat(stats, cmd)
				return n
			}
			require.Equal(t, int64(n), calls("fcall"), stats)
			require.Equal(t, int64(n), calls("hgetall"), stats)
			require.Equal(t, int64(tc.hsets*n), calls("hset"), stats)
		})
	}
}
