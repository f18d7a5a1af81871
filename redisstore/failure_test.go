package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// privateStore returns a store on a server of the test's own, with the
// client options changed by opt.
func privateStore(t *testing.T, opt func(*redis.Options)) (*redisstore.Store, *redisserver.Server) {
	t.Helper()
	srv := redisserver.Private(t)
	o := redisserver.ClientOptions(srv.Addr())
	if opt != nil {
		opt(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

var tenRPM = limiter.WithLimits(limiter.PerMinute("rpm", 10))

// acquire takes one rpm for "k" and commits; it returns the lease.
func acquire(ctx context.Context, rl *limiter.RateLimiter, opts ...limiter.AcquireOption) (*limiter.Lease, error) {
	lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1}, append([]limiter.AcquireOption{tenRPM}, opts...)...)
	if err == nil {
		err = lease.Commit(ctx)
	}
	return lease, err
}

// TestScriptFlushRecovery: when the server forgets its scripts (SCRIPT
// FLUSH, as after a restart or failover), the store sends them again and
// the acquire succeeds.
func TestScriptFlushRecovery(t *testing.T) {
	ctx := context.Background()
	s, _ := privateStore(t, nil)
	rl := limiter.New(s)
	if _, err := acquire(ctx, rl); err != nil {
		t.Fatal(err)
	}
	before := s.ScriptReloads()
	if err := s.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := acquire(ctx, rl); err != nil {
		t.Fatalf("acquire after SCRIPT FLUSH: %v", err)
	}
	if s.ScriptReloads() == before {
		t.Fatal("no script was sent again after SCRIPT FLUSH")
	}
	b, err := s.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "gpt"})
	if err != nil || b == nil || b.States[0].TotalConsumedMilli != 2000 {
		t.Fatalf("bucket after two acquires: %+v, %v", b, err)
	}
}

// TestRestartMidRun: redis-server is killed while a limiter uses it. While
// it is down every acquire fails fast: with the block mode as an
// *UnavailableError, with allow as a no-op lease — the fail-closed and
// fail-open of a throttle. Restarted (empty, without its scripts), it
// serves again: the scripts are sent again after NOSCRIPT.
func TestRestartMidRun(t *testing.T) {
	ctx := context.Background()
	s, srv := privateStore(t, nil)
	rl := limiter.New(s)
	for range 3 {
		if _, err := acquire(ctx, rl); err != nil {
			t.Fatal(err)
		}
	}
	batch := []limiter.AcquireRequest{{EntityID: "k", Resource: "gpt", Consume: limiter.Consume{"rpm": 1}}, {EntityID: "j", Resource: "gpt", Consume: limiter.Consume{"rpm": 1}}}
	if _, _, err := rl.AcquireAll(ctx, batch, tenRPM); err != nil { // the entities are known from now on
		t.Fatal(err)
	}
	srv.Kill()
	start := time.Now()
	_, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableBlock))
	var ue *limiter.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, limiter.ErrUnavailable) || ue.Table != "redis" {
		t.Fatalf("block while down: %v, want an UnavailableError", err)
	}
	lease, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
	if err != nil || !lease.Noop() {
		t.Fatalf("allow while down: %v (noop %v), want a no-op lease", err, lease != nil && lease.Noop())
	}
	if _, _, err := rl.AcquireAll(ctx, batch, tenRPM, limiter.WithOnUnavailable(limiter.OnUnavailableBlock)); !errors.As(err, &ue) {
		t.Fatalf("AcquireAll, block, while down: %v, want an UnavailableError", err)
	}
	if lease, _, err := rl.AcquireAll(ctx, batch, tenRPM, limiter.WithOnUnavailable(limiter.OnUnavailableAllow)); err != nil || !lease.Noop() {
		t.Fatalf("AcquireAll, allow, while down: %v, want a no-op lease", err)
	}
	t.Logf("down: refused and allowed in %v", time.Since(start))
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	before := s.ScriptReloads()
	var last error
	admitted := 0
	for range 3 {
		// A pooled connection to the dead process may fail once.
		if _, last = acquire(ctx, rl); last == nil {
			admitted++
		}
	}
	if admitted < 2 {
		t.Fatalf("after the restart %d of 3 acquires passed; last error %v", admitted, last)
	}
	if s.ScriptReloads() == before {
		t.Fatal("the restarted server ran the scripts without NOSCRIPT recovery")
	}
}

// TestTimeoutIsUnavailable: a server that stops answering (CLIENT PAUSE)
// makes the call time out after the client's read timeout; the limiter
// treats the timeout as unavailability.
func TestTimeoutIsUnavailable(t *testing.T) {
	ctx := context.Background()
	s, srv := privateStore(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	rl := limiter.New(s)
	if _, err := acquire(ctx, rl); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(redisserver.ClientOptions(srv.Addr()))
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableBlock))
	if !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("block while paused: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 1400*time.Millisecond {
		t.Fatalf("the acquire waited %v: not the 200 ms read timeout", took)
	}
	lease, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
	if err != nil || !lease.Noop() {
		t.Fatalf("allow while paused: %v, want a no-op lease", err)
	}
}

// TestClusterSlots: on a Cluster the bucket items of a resource share a
// slot (a cascade is one script) and the resources spread over the
// masters; a write spanning resources whose second part fails gives the
// first part back.
func TestClusterSlots(t *testing.T) {
	ctx := context.Background()
	s := newClusterStore(t)
	cc := s.Client().(*redis.ClusterClient)
	rl := limiter.New(s)
	for _, e := range []limiter.Entity{{ID: "proj"}, {ID: "key", ParentID: "proj", Cascade: true}} {
		if _, err := rl.CreateEntity(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	slots := map[int64]bool{}
	for i := range 12 {
		resource := "model-" + string(rune('a'+i))
		lease, err := rl.Acquire(ctx, "key", resource, limiter.Consume{"rpm": 1}, tenRPM)
		if err != nil {
			t.Fatal(err)
		}
		lease.Commit(ctx)
		var keySlots []int64
		for _, id := range []string{"key", "proj"} {
			k := s.BucketKeyName(store.BucketKey{EntityID: id, Resource: resource})
			if n, err := cc.Exists(ctx, k).Result(); err != nil || n != 1 {
				t.Fatalf("bucket %s: exists %d, %v", k, n, err)
			}
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			keySlots = append(keySlots, slot)
		}
		if keySlots[0] != keySlots[1] {
			t.Fatalf("child and parent buckets of %s in slots %v", resource, keySlots)
		}
		slots[keySlots[0]] = true
	}
	if len(slots) < 6 {
		t.Fatalf("12 resources used only %d slots", len(slots))
	}
	// A two-resource write: the second condition fails, the first part is
	// given back.
	a := store.BucketKey{EntityID: "key", Resource: "model-a"}
	bk := store.BucketKey{EntityID: "key", Resource: "model-b"}
	take := func(k store.BucketKey, expected int64) store.BucketWrite {
		return store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: time.Now().UnixMilli(),
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: expected}}}
	}
	err := s.WriteBuckets(ctx, []store.BucketWrite{take(a, 2000), take(bk, 50_000)})
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("cross-slot write with a failing part: %v, want ErrConditionFailed", err)
	}
	got, _ := s.GetBucket(ctx, a)
	if st, _ := got.State("rpm"); st.TokensMilli != 9000 || st.TotalConsumedMilli != 1000 {
		t.Fatalf("the first part was not given back: %+v", st)
	}
}
