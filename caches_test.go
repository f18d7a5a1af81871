package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestConfigCacheCeiling: the config cache holds at most its ceiling of
// slots, the least recently used going first, and an evicted slot is read
// again when its entity comes back, with its current value.
func TestConfigCacheCeiling(t *testing.T) {
	ctx := context.Background()
	fcs := &fakeConfigStore{data: map[store.ConfigKey]store.Config{}}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	c := newConfigCache(time.Minute, 4, clock.now, fcs.load)
	own := []Limit{PerMinute("rpm", 7)}
	fcs.set(entityKey("e1", "gpt"), store.Config{Limits: storeLimits(own)})
	fcs.set(resourceKey("gpt"), store.Config{Limits: storeLimits([]Limit{PerMinute("rpm", 100)})})

	// e1 takes the 4 slots; e2 hits the resource and system slots and
	// loads its two, evicting e1's (least recently used).
	for _, e := range []string{"e1", "e2"} {
		_, _, _, err := c.resolve(ctx, e, "gpt")
		require.NoError(t, err)
	}
	st := c.stats()
	require.Equal(t, 4, st.Size, "stats %+v", st)
	require.Equal(t, 4, st.MaxEntries, "stats %+v", st)
	require.EqualValues(t, 2, st.Evictions, "stats %+v", st)
	got := len(fcs.loads[1])
	assert.EqualValues(t, 2, got, "e2 loaded %d slots, want 2", got)
	// e1 comes back: its slots are read again, and a change made meanwhile
	// (by another process: no eviction here) is seen.
	own = []Limit{PerMinute("rpm", 9)}
	fcs.set(entityKey("e1", "gpt"), store.Config{Limits: storeLimits(own)})
	limits, source, _, err := c.resolve(ctx, "e1", "gpt")
	require.NoError(t, err)
	assert.Equal(t, SourceEntity, source, "e1 resolved from")
	assert.Equal(t, storeLimits(own), limits, "e1 resolved to")
	assert.Equal(t, 3, fcs.loadCount(), "loads")
	assert.Len(t, fcs.loads[2], 2, "slots of the last load, want e1's 2")
	// The hot resource and system slots were never evicted.
	st = c.stats()
	assert.EqualValues(t, 8, st.Misses, "stats %+v, want 8 misses (4 + 2 + 2)", st)
	assert.EqualValues(t, 4, st.Hits, "stats %+v", st)
}

// TestEntityCacheAge: an entry's age counts from when the entity's cascade
// settings were read (its record, or a bucket item's copy); a shard count
// learned later does not extend it. Past its age limit the entity is
// unknown again.
func TestEntityCacheAge(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	c := newEntityCache(10, time.Minute, clock.now)
	c.setEntity("c", true, true, "p")
	clock.advance(50 * time.Second)
	c.setShards("c", "gpt", 4)
	c.learnFromBucket("c", false, "") // the record's settings win, and keep their age
	clock.advance(10 * time.Second)
	e, ok := c.get("c")
	require.True(t, ok, "at 60s: c unknown")
	require.True(t, e.cascade, "at 60s: %+v, want cascade", e)
	require.Equal(t, "p", e.parentID, "at 60s: %+v", e)
	require.Equal(t, 4, c.shardCount("c", "gpt"), "at 60s: shards")
	clock.advance(time.Nanosecond)
	e, ok = c.get("c")
	require.False(t, ok, "past the age limit: %+v still known", e)
	n := c.shardCount("c", "gpt")
	assert.EqualValues(t, 1, n, "shard count %d after expiry, want 1 (unknown)", n)

	// Settings learned from a bucket item are refreshed by every item.
	c.learnFromBucket("d", true, "p")
	clock.advance(50 * time.Second)
	c.learnFromBucket("d", true, "p")
	clock.advance(50 * time.Second)
	_, ok = c.get("d")
	assert.True(t, ok, "d forgotten 50s after its settings were last read")
	st := c.stats()
	assert.EqualValues(t, 2, st.Hits, "stats %+v", st)
	assert.EqualValues(t, 1, st.Misses, "stats %+v", st)
	assert.Equal(t, time.Minute, st.TTL, "stats %+v", st)
	assert.Equal(t, 10, st.MaxEntries, "stats %+v", st)
}

// TestEvictedEntityCascadesAgain: with an entity cache of one entity, an
// acquire on another entity evicts the cascading child; when the child
// comes back, its parent is charged again, on both paths. The cascade is
// relearned, never lost.
func TestEvictedEntityCascadesAgain(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		ctx := env.ctx
		rl := env.limiter(func(o *Options) { o.EntityCacheSize = 1 })
		for _, e := range []Entity{{ID: "P"}, {ID: "C", ParentID: "P", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(ctx, e)
			require.NoError(t, err)
		}
		err := rl.Admin().SetLimits(ctx, Scope{Resource: "api"}, []Limit{PerMinute("rpm", 100)})
		require.NoError(t, err)
		for i, id := range []string{"C", "X", "C", "Y", "C"} {
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}))
			st := rl.Stats().Entities
			require.LessOrEqual(t, st.Size, 1, "after acquire %d: entities cached, ceiling 1", i)
		}
		tc := func(id string) int64 { return env.n(env.bucket(id, "api"), bucketAttr("rpm", fieldTotalConsumed)) }
		c, p := tc("C"), tc("P")
		assert.EqualValues(t, 3000, c, "total consumed C (3 acquires)")
		assert.EqualValues(t, 3000, p, "total consumed P (each acquire on C charged to P)")
		st := rl.Stats().Entities
		assert.GreaterOrEqual(t, st.Evictions, int64(4), "entity cache %+v", st)
	})
}

// TestEvictedEntityExpires: past the entity cache's age limit an entity's
// cascade is read (or learned) again; the parent is still charged.
func TestEvictedEntityExpires(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		ctx := env.ctx
		rl := env.limiter(func(o *Options) { o.EntityCacheTTL = time.Minute })
		for _, e := range []Entity{{ID: "P"}, {ID: "C", ParentID: "P", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(ctx, e)
			require.NoError(t, err)
		}
		lim := WithLimits(PerHour("rph", 100))
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rph": 1}, lim))
		before := rl.Stats().Entities
		env.clock.advance(2 * time.Minute)
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rph": 1}, lim))
		after := rl.Stats().Entities
		assert.NotEqual(t, before.Misses, after.Misses, "no entity cache miss after the age limit: before %+v, after %+v", before, after)
		tc := func(id string) int64 { return env.n(env.bucket(id, "api"), bucketAttr("rph", fieldTotalConsumed)) }
		c, p := tc("C"), tc("P")
		assert.EqualValues(t, 2000, c, "total consumed C (charged twice)")
		assert.EqualValues(t, 2000, p, "total consumed P (charged twice)")
	})
}

// TestOverLimitCacheCeiling: the over-limit cache keeps at most its ceiling
// of buckets; an evicted bucket's refusals go to the store again, which
// refuses them the same way.
func TestOverLimitCacheCeiling(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Minute }, func(o *Options) { o.OverLimitCacheSize = 1 })
	lim := WithLimits(PerMinute("rpm", 1))
	for _, id := range []string{"a", "b"} {
		mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}, lim))
		_, err := rl.Acquire(env.ctx, id, "api", Consume{"rpm": 1}, lim)
		rateLimited(t, err)
	}
	st := rl.Stats().OverLimit
	require.Equal(t, 1, st.Size, "over-limit cache %+v", st)
	require.EqualValues(t, 1, st.Evictions, "over-limit cache %+v", st)
	check := env.callChecker(t)
	check("b, cached", "", func() {
		_, err := rl.Acquire(env.ctx, "b", "api", Consume{"rpm": 1}, lim)
		rateLimited(t, err)
	})
	check("a, evicted: the store refuses", "UpdateItem!", func() {
		_, err := rl.Acquire(env.ctx, "a", "api", Consume{"rpm": 1}, lim)
		rle := rateLimited(t, err)
		assert.Positive(t, rle.RetryAfter, "retry after")
	})
}

// TestCacheSizeZero: a ceiling of zero keeps nothing, and the limiter
// still decides correctly (every lookup misses).
func TestCacheSizeZero(t *testing.T) {
	ctx := context.Background()
	rl := New(newMemory(), func(o *Options) { o.ConfigCacheSize = 0 }, func(o *Options) { o.EntityCacheSize = 0 })
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Resource: "api"}, []Limit{PerMinute("rpm", 2)}))
	for range 2 {
		mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 1}))
	}
	_, err := rl.Acquire(ctx, "k", "api", Consume{"rpm": 1})
	rateLimited(t, err)
	for _, c := range []CacheName{CacheConfigs, CacheEntities} {
		st := cacheStats(rl.Stats(), c)
		assert.Zero(t, st.Size, "%s cache %+v, want empty", c, st)
		assert.Zero(t, st.Hits, "%s cache %+v, want all misses", c, st)
		assert.NotZero(t, st.Misses, "%s cache %+v, want all misses", c, st)
		assert.Zero(t, st.MaxEntries, "%s cache %+v", c, st)
	}
	assert.Equal(t, rl.Stats().Configs, rl.Stats().Configs, "ConfigCacheStats, want CacheStats(CacheConfigs)")
	st := rl.Stats().OverLimit
	assert.Equal(t, CacheStats{}, st, "over-limit cache off: stats, want zero")
}

func TestCacheNames(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{CacheConfigs.String(), "config"},
		{CacheEntities.String(), "entity"},
		{CacheOverLimit.String(), "over_limit"},
		{CacheName(7).String(), "CacheName(7)"},
		{CacheHit.String(), "hit"},
		{CacheMiss.String(), "miss"},
		{CacheEviction.String(), "eviction"},
		{CacheEvent(-1).String(), "CacheEvent(-1)"},
	} {
		assert.Equal(t, tc.want, tc.got, "got %q, want %q", tc.got, tc.want)
	}
}
