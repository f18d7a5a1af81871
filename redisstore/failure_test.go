package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// privateStore returns a store on a server of the test's own, with the
// client options changed by opt and the store's by storeOpts.
func privateStore(t *testing.T, opt func(*redis.Options), storeOpts ...func(*redisstore.Options)) (*redisstore.Store, *redisserver.Server) {
	t.Helper()
	return privateStoreOn(t, redisserver.Private(t), opt, storeOpts...)
}

// privateStoreOn returns a store on srv.
func privateStoreOn(t *testing.T, srv *redisserver.Server, opt func(*redis.Options), storeOpts ...func(*redisstore.Options)) (*redisstore.Store, *redisserver.Server) {
	t.Helper()
	o := redisserver.ClientOptions(srv.Addr())
	if opt != nil {
		opt(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(c, storeOpts...)
	require.NoError(t, err)
	return s, srv
}

// scriptsOnly makes a store run its Lua code as scripts.
func scriptsOnly(o *redisstore.Options) { o.DisableFunctions = true }

var tenRPM = limiter.WithLimits(limiter.PerMinute("rpm", 10))

// acquire takes one rpm for "k" and commits; it returns the lease.
func acquire(ctx context.Context, rl *limiter.RateLimiter, opts ...limiter.AcquireOption) (*limiter.Lease, error) {
	lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1}, append([]limiter.AcquireOption{tenRPM}, opts...)...)
	if err == nil {
		err = lease.Commit(ctx)
	}
	return lease, err
}

// libraries returns the names of the function libraries on the server of
// c.
func libraries(t *testing.T, c *redis.Client) []string {
	t.Helper()
	libs, err := c.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	require.NoError(t, err)
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// TestLuaCodeRecovery: the store's Lua code survives the server forgetting
// it. With functions (the default) the library is loaded on the first call
// and again after FUNCTION FLUSH; with scripts, a script is sent again
// after SCRIPT FLUSH. Acquires and Allow (both algorithms) succeed after
// the flush, and the counts show the code was sent again.
func TestLuaCodeRecovery(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		opts      []func(*redisstore.Options)
		functions bool
		flush     func(c redis.UniversalClient) error
	}{
		{"functions", nil, true, func(c redis.UniversalClient) error { return c.FunctionFlush(ctx).Err() }},
		{"scripts", []func(*redisstore.Options){scriptsOnly}, false, func(c redis.UniversalClient) error { return c.ScriptFlush(ctx).Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := privateStore(t, nil, tc.opts...)
			gcra, err := redisstore.New(s.Client(), append(tc.opts, func(o *redisstore.Options) { o.Algorithm = redisstore.GCRA })...)
			require.NoError(t, err)
			rl := limiter.New(s)
			_, err = acquire(ctx, rl)
			require.NoError(t, err)
			assert.Equal(t, tc.functions, s.UsesFunctions())
			c := s.Client().(*redis.Client)
			if tc.functions {
				assert.Equal(t, []string{redisstore.LibraryName()}, libraries(t, c))
			} else {
				assert.Empty(t, libraries(t, c))
			}
			before := s.ScriptReloads()
			require.NoError(t, tc.flush(s.Client()))
			_, err = acquire(ctx, rl)
			require.NoError(t, err, "acquire after the flush")
			assert.Greater(t, s.ScriptReloads(), before, "the code was not sent again after the flush")
			for _, st := range []*redisstore.Store{s, gcra} {
				require.NoError(t, tc.flush(s.Client()))
				r, err := st.Allow(ctx, "user", store.Limit(limiter.PerMinute("rpm", 10)), 1)
				require.NoError(t, err, "Allow after the flush")
				assert.True(t, r.Allowed)
			}
			b, err := s.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "gpt"})
			require.NoError(t, err)
			require.NotNil(t, b)
			assert.Equal(t, int64(2000), b.States[0].TotalConsumedMilli)
		})
	}
}

// TestFunctionsUnavailable: on a server that does not offer functions to
// the store (FUNCTION or FCALL renamed away, as managed services do), the
// store turns to scripts by itself and works: acquires, Allow, and
// recovery after SCRIPT FLUSH.
func TestFunctionsUnavailable(t *testing.T) {
	ctx := context.Background()
	for _, command := range []string{"FUNCTION", "FCALL"} {
		t.Run(command, func(t *testing.T) {
			s, _ := privateStoreOn(t, redisserver.Private(t, "--rename-command", command, ""), nil)
			require.True(t, s.UsesFunctions(), "before the first call")
			rl := limiter.New(s)
			_, err := acquire(ctx, rl)
			require.NoError(t, err)
			assert.False(t, s.UsesFunctions(), "still on functions")
			r, err := s.Allow(ctx, "user", store.Limit(limiter.PerMinute("rpm", 10)), 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed)
			require.NoError(t, s.Client().ScriptFlush(ctx).Err())
			before := s.ScriptReloads()
			_, err = acquire(ctx, rl)
			require.NoError(t, err)
			assert.Greater(t, s.ScriptReloads(), before)
		})
	}
}

// TestRestartMidRun: redis-server is killed while a limiter uses it. While
// it is down every acquire fails fast: with the block mode as an
// *UnavailableError, with allow as a no-op lease — the fail-closed and
// fail-open of a throttle. Restarted (empty, without its functions or
// scripts), it serves again: the library is loaded again (or the scripts
// sent again after NOSCRIPT).
func TestRestartMidRun(t *testing.T) {
	t.Run("functions", func(t *testing.T) { restartMidRun(t) })
	t.Run("scripts", func(t *testing.T) { restartMidRun(t, scriptsOnly) })
}

func restartMidRun(t *testing.T, storeOpts ...func(*redisstore.Options)) {
	ctx := context.Background()
	s, srv := privateStore(t, nil, storeOpts...)
	rl := limiter.New(s)
	for range 3 {
		_, err := acquire(ctx, rl)
		require.NoError(t, err)
	}
	batch := []limiter.AcquireRequest{{EntityID: "k", Resource: "gpt", Consume: limiter.Consume{"rpm": 1}}, {EntityID: "j", Resource: "gpt", Consume: limiter.Consume{"rpm": 1}}}
	_, _, err := rl.AcquireAll(ctx, batch, tenRPM) // the entities are known from now on
	require.NoError(t, err)
	srv.Kill()
	start := time.Now()
	_, err = acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableBlock))
	var ue *limiter.UnavailableError
	require.ErrorAs(t, err, &ue, "block while down")
	assert.ErrorIs(t, err, limiter.ErrUnavailable)
	assert.Equal(t, "redis", ue.Table)
	lease, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
	require.NoError(t, err, "allow while down")
	assert.True(t, lease.FailedOpen(), "allow while down: a no-op lease")
	_, _, err = rl.AcquireAll(ctx, batch, tenRPM, limiter.WithOnUnavailable(limiter.OnUnavailableBlock))
	assert.ErrorAs(t, err, &ue, "AcquireAll, block, while down")
	lease, _, err = rl.AcquireAll(ctx, batch, tenRPM, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
	require.NoError(t, err, "AcquireAll, allow, while down")
	assert.True(t, lease.FailedOpen(), "AcquireAll, allow, while down: a no-op lease")
	t.Logf("down: refused and allowed in %v", time.Since(start))
	require.NoError(t, srv.Restart(ctx))
	before := s.ScriptReloads()
	var last error
	admitted := 0
	for range 3 {
		// A pooled connection to the dead process may fail once.
		if _, last = acquire(ctx, rl); last == nil {
			admitted++
		}
	}
	require.GreaterOrEqual(t, admitted, 2, "acquires passed after the restart; last error %v", last)
	assert.Greater(t, s.ScriptReloads(), before, "the restarted server ran the Lua code without sending it again")
}

// TestTimeoutIsUnavailable: a server that stops answering (CLIENT PAUSE)
// makes the call time out after the client's read timeout; the limiter
// treats the timeout as unavailability.
func TestTimeoutIsUnavailable(t *testing.T) {
	ctx := context.Background()
	s, srv := privateStore(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	rl := limiter.New(s)
	_, err := acquire(ctx, rl)
	require.NoError(t, err)
	admin := redis.NewClient(redisserver.ClientOptions(srv.Addr()))
	defer admin.Close()
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "1500", "ALL").Err())
	start := time.Now()
	_, err = acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableBlock))
	require.ErrorIs(t, err, limiter.ErrUnavailable, "block while paused")
	require.Less(t, time.Since(start), 1400*time.Millisecond, "the acquire waited longer than the 200 ms read timeout")
	lease, err := acquire(ctx, rl, limiter.WithOnUnavailable(limiter.OnUnavailableAllow))
	require.NoError(t, err, "allow while paused")
	assert.True(t, lease.FailedOpen(), "allow while paused: a no-op lease")
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
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err)
	}
	slots := map[int64]bool{}
	for i := range 12 {
		resource := "model-" + string(rune('a'+i))
		lease, err := rl.Acquire(ctx, "key", resource, limiter.Consume{"rpm": 1}, tenRPM)
		require.NoError(t, err)
		lease.Commit(ctx)
		var keySlots []int64
		for _, id := range []string{"key", "proj"} {
			k := s.BucketKeyName(store.BucketKey{EntityID: id, Resource: resource})
			n, err := cc.Exists(ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, int64(1), n, "bucket %s exists", k)
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			keySlots = append(keySlots, slot)
		}
		require.Equal(t, keySlots[0], keySlots[1], "slots of the child and parent buckets of %s", resource)
		slots[keySlots[0]] = true
	}
	assert.GreaterOrEqual(t, len(slots), 6, "slots of 12 resources")
	// A two-resource write: the second condition fails, the first part is
	// given back.
	a := store.BucketKey{EntityID: "key", Resource: "model-a"}
	bk := store.BucketKey{EntityID: "key", Resource: "model-b"}
	take := func(k store.BucketKey, expected int64) store.BucketWrite {
		return store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: time.Now().UnixMilli(),
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: expected}}}
	}
	err := s.WriteBuckets(ctx, []store.BucketWrite{take(a, 2000), take(bk, 50_000)})
	require.ErrorIs(t, err, store.ErrConditionFailed, "cross-slot write with a failing part")
	got, err := s.GetBucket(ctx, a)
	require.NoError(t, err)
	st, _ := got.State("rpm")
	assert.Equal(t, int64(9000), st.TokensMilli, "the first part given back")
	assert.Equal(t, int64(1000), st.TotalConsumedMilli, "the first part given back")
}

// TestClusterLibrary: on a Cluster the function library is loaded on every
// master, so requests on resources and Allow keys in any slot find it;
// after FUNCTION FLUSH on every master it is loaded again, once, on every
// master.
func TestClusterLibrary(t *testing.T) {
	ctx := context.Background()
	s := newClusterStore(t)
	cc := s.Client().(*redis.ClusterClient)
	rl := limiter.New(s)
	gcra, err := redisstore.New(cc, func(o *redisstore.Options) { o.Prefix, o.Algorithm = redisserver.Prefix(t), redisstore.GCRA })
	require.NoError(t, err)
	check := func(what string) {
		for i := range 12 {
			lease, err := rl.Acquire(ctx, "key", "model-"+strconv.Itoa(i), limiter.Consume{"rpm": 1}, tenRPM)
			require.NoError(t, err, what)
			require.NoError(t, lease.Commit(ctx))
			for _, st := range []*redisstore.Store{s, gcra} {
				r, err := st.Allow(ctx, "user-"+strconv.Itoa(i), store.Limit(limiter.PerMinute("rpm", 10)), 1)
				require.NoError(t, err, what)
				assert.True(t, r.Allowed, what)
			}
		}
		var mu sync.Mutex
		libs := map[string][]string{} // by master
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			list, err := m.FunctionList(ctx, redis.FunctionListQuery{}).Result()
			mu.Lock()
			defer mu.Unlock()
			for _, l := range list {
				libs[m.Options().Addr] = append(libs[m.Options().Addr], l.Name)
			}
			return err
		}))
		require.Len(t, libs, redisserver.ClusterMasters, "%s: masters with a library", what)
		for addr, names := range libs {
			assert.Contains(t, names, redisstore.LibraryName(), "%s: master %s", what, addr)
		}
	}
	check("first calls")
	assert.True(t, s.UsesFunctions())
	require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FunctionFlush(ctx).Err()
	}))
	loads := func() int64 { return s.ScriptReloads() + gcra.ScriptReloads() }
	before := loads()
	check("after FUNCTION FLUSH")
	assert.Equal(t, before+1, loads(), "one load, on every master")
}
