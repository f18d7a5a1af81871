package redisserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStandalone: the shared server answers, keeps what is written, and a
// prefix is unique per call.
func TestStandalone(t *testing.T) {
	ctx := context.Background()
	c := Client(t)
	p := Prefix(t)
	require.NotEqual(t, Prefix(t), p, "Prefix returned the same prefix twice")
	require.NoError(t, c.Set(ctx, p+"k", "v", 0).Err())
	v, err := c.Get(ctx, p+"k").Result()
	require.NoError(t, err, "get = %q", v)
	require.Equal(t, "v", v, "get = %q", v)
}

// TestRestart: a killed server refuses connections; a restarted one
// answers on the same port, without the data and scripts of the old one.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	s := Private(t)
	c := redis.NewClient(ClientOptions(s.Addr()))
	defer c.Close()
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	s.Kill()
	require.Error(t, c.Ping(ctx).Err(), "a killed server answered PING")
	require.NoError(t, s.Restart(ctx))
	var pingErr error
	for range 3 { // the pool may hand out a connection to the old process once
		if pingErr = c.Ping(ctx).Err(); pingErr == nil {
			break
		}
	}
	require.NoError(t, pingErr, "ping after restart")
	n, err := c.Exists(ctx, "k").Result()
	require.NoError(t, err, "key after restart: %d", n)
	require.EqualValues(t, 0, n, "key after restart: %d", n)
	err = c.EvalSha(ctx, sha, nil).Err()
	require.Error(t, err, "EVALSHA after restart, want NOSCRIPT")
	require.True(t, redis.HasErrorPrefix(err, "NOSCRIPT"), "EVALSHA after restart, want NOSCRIPT")
}

// TestCluster: the cluster serves keys of every master's slots.
func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := ClusterClient(t)
	p := Prefix(t)
	masters := map[string]bool{}
	for i := range 30 {
		k := p + string(rune('a'+i%26)) + string(rune('0'+i/26))
		require.NoError(t, c.Set(ctx, k, i, 0).Err())
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err)
		shards, err := c.ClusterShards(ctx).Result()
		require.NoError(t, err)
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(r.Start) <= slot && slot <= int64(r.End) {
					masters[sh.Nodes[0].ID] = true
				}
			}
		}
	}
	require.Len(t, masters, ClusterMasters, "30 keys landed on %d masters, want %d", len(masters), ClusterMasters)
}
