package redisserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStandalone: the shared server answers, keeps what is written, and a
// prefix is unique per call.
func TestStandalone(t *testing.T) {
	ctx := context.Background()
	c := Client(t)
	p := Prefix(t)
	if p == Prefix(t) {
		t.Fatal("Prefix returned the same prefix twice")
	}
	if err := c.Set(ctx, p+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, p+"k").Result(); err != nil || v != "v" {
		t.Fatalf("get = %q, %v", v, err)
	}
}

// TestRestart: a killed server refuses connections; a restarted one
// answers on the same port, without the data and scripts of the old one.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	s := Private(t)
	c := redis.NewClient(ClientOptions(s.Addr()))
	defer c.Close()
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a killed server answered PING")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var pingErr error
	for range 3 { // the pool may hand out a connection to the old process once
		if pingErr = c.Ping(ctx).Err(); pingErr == nil {
			break
		}
	}
	if pingErr != nil {
		t.Fatalf("ping after restart: %v", pingErr)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("key after restart: %d, %v", n, err)
	}
	if err := c.EvalSha(ctx, sha, nil).Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("EVALSHA after restart: %v, want NOSCRIPT", err)
	}
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
		if err := c.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		shards, err := c.ClusterShards(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(r.Start) <= slot && slot <= int64(r.End) {
					masters[sh.Nodes[0].ID] = true
				}
			}
		}
	}
	if len(masters) != ClusterMasters {
		t.Fatalf("30 keys landed on %d masters, want %d", len(masters), ClusterMasters)
	}
}
