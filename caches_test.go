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
	fcs.set(entityKey("e1", "gpt"), store.Config{Limits: own})
	fcs.set(resourceKey("gpt"), store.Config{Limits: []Limit{PerMinute("rpm", 100)}})

	// e1 takes the 4 slots; e2 hits the resource and system slots and
	// loads its two, evicting e1's (least recently used).
	for _, e := range []string{"e1", "e2"} {
		_, _, _, err := c.resolve(ctx, e, "gpt")
		require.NoError(t, err)
	}
	st := c.stats()
	require.False(t, st.Size != 4 || st.MaxEntries != 4 || st.Evictions != 2, "stats %+v, want size 4 of 4 and 2 evictions", st)
	got := len(fcs.loads[1])
	assert.EqualValues(t, 2, got, "e2 loaded %d slots, want 2", got)
	// e1 comes back: its slots are read again, and a change made meanwhile
	// (by another process: no eviction here) is seen.
	own = []Limit{PerMinute("rpm", 9)}
	fcs.set(entityKey("e1", "gpt"), store.Config{Limits: own})
	limits, source, _, err := c.resolve(ctx, "e1", "gpt")
	require.NoError(t, err)
	assert.False(t, source != SourceEntity || len(limits) != 1 || limits[0] != own[0], "e1 resolved to %v from %s, want %v from the entity", limits, source, own)
	if n, got := fcs.loadCount(), len(fcs.loads[2]); n != 3 || got != 2 {
		t.Errorf("%d loads, the last of %d slots; want 3, and e1's 2 slots", n, got)
	}
	// The hot resource and system slots were never evicted.
	if st := c.stats(); st.Misses != 8 || st.Hits != 4 {
		t.Errorf("stats %+v, want 8 misses (4 + 2 + 2) and 4 hits", st)
	}
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
	if e, ok := c.get("c"); !ok || !e.cascade || e.parentID != "p" || c.shardCount("c", "gpt") != 4 {
		t.Fatalf("at 60s: %+v, %v, shards %d; want cascade to p, 4 shards", e, ok, c.shardCount("c", "gpt"))
	}
	clock.advance(time.Nanosecond)
	e, ok := c.get("c")
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
	assert.False(t, st.Hits != 2 || st.Misses != 1 || st.TTL != time.Minute || st.MaxEntries != 10, "stats %+v", st)
}

// TestEvictedEntityCascadesAgain: with an entity cache of one entity, an
// acquire on another entity evicts the cascading child; when the child
// comes back, its parent is charged again, on both paths. The cascade is
// relearned, never lost.
func TestEvictedEntityCascadesAgain(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		ctx := env.ctx
		rl := env.limiter(WithCacheSize(CacheEntities, 1))
		for _, e := range []Entity{{ID: "P"}, {ID: "C", ParentID: "P", Cascade: true}} {
			_, err := rl.CreateEntity(ctx, e)
			require.NoError(t, err)
		}
		err := rl.SetResourceDefaults(ctx, "api", []Limit{PerMinute("rpm", 100)})
		require.NoError(t, err)
		for i, id := range []string{"C", "X", "C", "Y", "C"} {
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}))
			st := rl.CacheStats(CacheEntities)
			require.False(t, st.Size > 1, "after acquire %d: %d entities cached, ceiling 1", i, st.Size)
		}
		tc := func(id string) int64 { return env.n(env.bucket(id, "api"), bucketAttr("rpm", fieldTotalConsumed)) }
		c, p := tc("C"), tc("P")
		assert.False(t, c != 3000 || p != 3000, "total consumed C %d, P %d; want 3000 each (3 acquires on C, each charged to P)", c, p)
		st := rl.CacheStats(CacheEntities)
		assert.False(t, st.Evictions < 4, "entity cache %+v, want at least 4 evictions", st)
	})
}

// TestEvictedEntityExpires: past the entity cache's age limit an entity's
// cascade is read (or learned) again; the parent is still charged.
func TestEvictedEntityExpires(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		ctx := env.ctx
		rl := env.limiter(WithEntityCacheTTL(time.Minute))
		for _, e := range []Entity{{ID: "P"}, {ID: "C", ParentID: "P", Cascade: true}} {
			_, err := rl.CreateEntity(ctx, e)
			require.NoError(t, err)
		}
		lim := WithLimits(PerHour("rph", 100))
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rph": 1}, lim))
		before := rl.CacheStats(CacheEntities)
		env.clock.advance(2 * time.Minute)
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rph": 1}, lim))
		after := rl.CacheStats(CacheEntities)
		assert.False(t, after.Misses == before.Misses, "no entity cache miss after the age limit: before %+v, after %+v", before, after)
		tc := func(id string) int64 { return env.n(env.bucket(id, "api"), bucketAttr("rph", fieldTotalConsumed)) }
		c, p := tc("C"), tc("P")
		assert.False(t, c != 2000 || p != 2000, "total consumed C %d, P %d; want 2000 each (both charged twice)", c, p)
	})
}

// TestOverLimitCacheCeiling: the over-limit cache keeps at most its ceiling
// of buckets; an evicted bucket's refusals go to the store again, which
// refuses them the same way.
func TestOverLimitCacheCeiling(t *testing.T) {
	env := newTestEnv(t)
	rl := New(env.repo, WithClock(env.clock.now), WithOverLimitCache(time.Minute), WithCacheSize(CacheOverLimit, 1))
	lim := WithLimits(PerMinute("rpm", 1))
	for _, id := range []string{"a", "b"} {
		mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}, lim))
		_, err := rl.Acquire(env.ctx, id, "api", Consume{"rpm": 1}, lim)
		rateLimited(t, err)
	}
	st := rl.CacheStats(CacheOverLimit)
	require.False(t, st.Size != 1 || st.Evictions != 1, "over-limit cache %+v, want 1 entry and 1 eviction", st)
	check := env.callChecker(t)
	check("b, cached", "", func() {
		_, err := rl.Acquire(env.ctx, "b", "api", Consume{"rpm": 1}, lim)
		rateLimited(t, err)
	})
	check("a, evicted: the store refuses", "UpdateItem!", func() {
		_, err := rl.Acquire(env.ctx, "a", "api", Consume{"rpm": 1}, lim)
		if rle := rateLimited(t, err); rle.RetryAfter <= 0 {
			t.Errorf("retry after %v", rle.RetryAfter)
		}
	})
}

// TestCacheSizeZero: a ceiling of zero keeps nothing, and the limiter
// still decides correctly (every lookup misses).
func TestCacheSizeZero(t *testing.T) {
	ctx := context.Background()
	rl := New(newMemory(), WithCacheSize(CacheConfigs, 0), WithCacheSize(CacheEntities, 0))
	if err := rl.SetResourceDefaults(ctx, "api", []Limit{PerMinute("rpm", 2)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 1}))
	}
	_, err := rl.Acquire(ctx, "k", "api", Consume{"rpm": 1})
	rateLimited(t, err)
	for _, c := range []CacheName{CacheConfigs, CacheEntities} {
		st := rl.CacheStats(c)
		assert.False(t, st.Size != 0 || st.Hits != 0 || st.Misses == 0 || st.MaxEntries != 0, "%s cache %+v, want empty, all misses", c, st)
	}
	if st := rl.ConfigCacheStats(); st != rl.CacheStats(CacheConfigs) {
		t.Errorf("ConfigCacheStats %+v, CacheStats(CacheConfigs) %+v", st, rl.CacheStats(CacheConfigs))
	}
	st := rl.CacheStats(CacheOverLimit)
	assert.False(t, st != (CacheStats{}), "over-limit cache off: stats %+v, want zero", st)
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
