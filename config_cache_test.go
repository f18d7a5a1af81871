package limiter

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// fakeConfigStore is an in-memory configLoader that counts loads.
type fakeConfigStore struct {
	mu     sync.Mutex
	data   map[store.ConfigKey]store.Config
	loads  [][]store.ConfigKey
	failed error
}

func (s *fakeConfigStore) load(_ context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads = append(s.loads, append([]store.ConfigKey(nil), keys...))
	if s.failed != nil {
		return nil, s.failed
	}
	out := make(map[store.ConfigKey]store.Config)
	for _, k := range keys {
		if v, ok := s.data[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (s *fakeConfigStore) set(k store.ConfigKey, v store.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[k] = v
}

func (s *fakeConfigStore) loadCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loads)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var (
	sysKey = store.SystemConfig()
)

func entityKey(e, r string) store.ConfigKey { return store.EntityConfig(e, r) }
func resourceKey(r string) store.ConfigKey  { return store.ResourceConfig(r) }

func newTestCache(ttl time.Duration) (*configCache, *fakeConfigStore, *fakeClock) {
	fcs := &fakeConfigStore{data: map[store.ConfigKey]store.Config{}}
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return newConfigCache(ttl, defaultConfigCacheSize, clock.now, fcs.load), fcs, clock
}

func TestConfigCachePrecedence(t *testing.T) {
	ctx := context.Background()
	sys := []Limit{PerMinute("rpm", 1)}
	res := []Limit{PerMinute("rpm", 2)}
	def := []Limit{PerMinute("rpm", 3)}
	ent := []Limit{PerMinute("rpm", 4)}
	for _, tc := range []struct {
		name       string
		data       map[store.ConfigKey]store.Config
		resource   string
		wantLimits []Limit
		wantSource ConfigSource
	}{
		{"nothing", nil, "gpt", nil, ""},
		{"system", map[store.ConfigKey]store.Config{sysKey: {Limits: storeLimits(sys)}}, "gpt", sys, SourceSystem},
		{"resource beats system", map[store.ConfigKey]store.Config{sysKey: {Limits: storeLimits(sys)}, resourceKey("gpt"): {Limits: storeLimits(res)}}, "gpt", res, SourceResource},
		{"entity default beats resource", map[store.ConfigKey]store.Config{resourceKey("gpt"): {Limits: storeLimits(res)}, entityKey("e", DefaultResource): {Limits: storeLimits(def)}}, "gpt", def, SourceEntityDefault},
		{"entity beats all", map[store.ConfigKey]store.Config{sysKey: {Limits: storeLimits(sys)}, entityKey("e", DefaultResource): {Limits: storeLimits(def)}, entityKey("e", "gpt"): {Limits: storeLimits(ent)}}, "gpt", ent, SourceEntity},
		{"empty entity falls through", map[store.ConfigKey]store.Config{entityKey("e", "gpt"): {}, sysKey: {Limits: storeLimits(sys)}}, "gpt", sys, SourceSystem},
		{"other resource ignored", map[store.ConfigKey]store.Config{entityKey("e", "other"): {Limits: storeLimits(ent)}, resourceKey("other"): {Limits: storeLimits(res)}}, "gpt", nil, ""},
		{"_default_ resource", map[store.ConfigKey]store.Config{entityKey("e", DefaultResource): {Limits: storeLimits(def)}}, DefaultResource, def, SourceEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fcs, _ := newTestCache(time.Minute)
			for k, v := range tc.data {
				fcs.set(k, v)
			}
			limits, source, _, err := c.resolve(ctx, "e", tc.resource)
			require.NoError(t, err)
			if assert.Len(t, limits, len(tc.wantLimits), "resolve = %v, want %v", limits, tc.wantLimits) && len(limits) > 0 {
				assert.Equal(t, store.Limit(tc.wantLimits[0]), limits[0], "resolve = %v", limits)
			}
			assert.Equal(t, tc.wantSource, source, "resolve: source")
			assert.Equal(t, 1, fcs.loadCount(), "loads, want one batched load")
			wantKeys := 4
			if tc.resource == DefaultResource {
				wantKeys = 3
			}
			got := len(fcs.loads[0])
			assert.Equal(t, wantKeys, got, "first load fetched %d keys, want %d", got, wantKeys)
		})
	}
}

func TestConfigCacheHitsMissesAndTTL(t *testing.T) {
	ctx := context.Background()
	c, fcs, clock := newTestCache(time.Minute)
	fcs.set(sysKey, store.Config{Limits: storeLimits([]Limit{PerMinute("rpm", 1)}), OnUnavailable: OnUnavailableAllow})

	_, _, ou, err := c.resolve(ctx, "e", "gpt")
	require.NoError(t, err, "resolve")
	require.Equal(t, OnUnavailableAllow, ou, "resolve: on_unavailable")
	_, _, _, err = c.resolve(ctx, "e", "gpt")
	require.NoError(t, err)
	n := fcs.loadCount()
	require.EqualValues(t, 1, n, "loads after cached resolve = %d, want 1", n)
	st := c.stats()
	require.EqualValues(t, 4, st.Hits, "stats = %+v", st)
	require.EqualValues(t, 4, st.Misses, "stats = %+v", st)
	require.Equal(t, 4, st.Size, "stats = %+v", st)
	require.Equal(t, time.Minute, st.TTL, "stats = %+v", st)
	// Partial: another entity only misses its two entity slots.
	_, _, _, err = c.resolve(ctx, "f", "gpt")
	require.NoError(t, err)
	got := len(fcs.loads[1])
	assert.EqualValues(t, 2, got, "partial miss fetched %d keys, want 2", got)
	// Expiry: exactly at TTL still cached, just after is a miss.
	clock.advance(time.Minute)
	c.resolve(ctx, "e", "gpt")
	n = fcs.loadCount()
	require.EqualValues(t, 2, n, "loads at expiry boundary = %d, want 2", n)
	clock.advance(time.Nanosecond)
	c.resolve(ctx, "e", "gpt")
	n = fcs.loadCount()
	require.EqualValues(t, 3, n, "loads after expiry = %d, want 3", n)
}

func TestConfigCacheDisabled(t *testing.T) {
	c, fcs, _ := newTestCache(0)
	for range 3 {
		_, _, _, err := c.resolve(context.Background(), "e", "gpt")
		require.NoError(t, err)
	}
	n := fcs.loadCount()
	require.EqualValues(t, 3, n, "loads = %d, want 3 with TTL 0", n)
	st := c.stats()
	require.Zero(t, st.Size, "stats = %+v", st)
	require.Zero(t, st.Hits, "stats = %+v", st)
}

func TestConfigCacheEvictAndInvalidate(t *testing.T) {
	ctx := context.Background()
	c, fcs, _ := newTestCache(time.Minute)
	c.resolve(ctx, "e", "gpt")
	fcs.set(entityKey("e", "gpt"), store.Config{Limits: storeLimits([]Limit{PerMinute("tpm", 5)})})
	cached, _, _, _ := c.resolve(ctx, "e", "gpt")
	require.Nil(t, cached, "negative entry not cached")
	c.evict(entityKey("e", "gpt"))
	limits, source, _, _ := c.resolve(ctx, "e", "gpt")
	require.Len(t, limits, 1, "after evict: %v", limits)
	require.Equal(t, SourceEntity, source, "after evict: source")
	got := len(fcs.loads[len(fcs.loads)-1])
	assert.EqualValues(t, 1, got, "evict refetched %d keys, want 1", got)
	c.invalidate()
	st := c.stats()
	require.EqualValues(t, 0, st.Size, "size after invalidate = %d", st.Size)
}

func TestConfigCacheResolveOnUnavailable(t *testing.T) {
	ctx := context.Background()
	c, fcs, clock := newTestCache(time.Minute)
	got := c.resolveOnUnavailable(ctx)
	require.EqualValues(t, OnUnavailableBlock, got, "default = %q, want block", got)
	fcs.set(sysKey, store.Config{OnUnavailable: OnUnavailableAllow})
	c.evict(sysKey)
	got = c.resolveOnUnavailable(ctx)
	require.EqualValues(t, OnUnavailableAllow, got, "stored = %q, want allow", got)
	// A failing read falls back to the remembered value, never an error.
	fcs.failed = errors.New("boom")
	clock.advance(2 * time.Minute)
	got = c.resolveOnUnavailable(ctx)
	require.EqualValues(t, OnUnavailableAllow, got, "on error = %q, want remembered allow", got)
	c.invalidate()
	got = c.resolveOnUnavailable(ctx)
	require.EqualValues(t, OnUnavailableBlock, got, "after invalidate = %q, want block", got)
}

func TestConfigCacheLoadErrorNotCached(t *testing.T) {
	ctx := context.Background()
	c, fcs, _ := newTestCache(time.Minute)
	fcs.failed = errors.New("throttled")
	_, _, _, err := c.resolve(ctx, "e", "gpt")
	require.ErrorIs(t, err, fcs.failed, "err = %v", err)
	fcs.failed = nil
	_, _, _, err = c.resolve(ctx, "e", "gpt")
	require.NoError(t, err)
	st := c.stats()
	require.EqualValues(t, 4, st.Size, "size = %d, want 4", st.Size)
}

func TestConfigCacheConcurrentMissesCollapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fcs := &fakeConfigStore{data: map[store.ConfigKey]store.Config{}}
		release := make(chan struct{})
		slow := func(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
			<-release
			return fcs.load(ctx, keys)
		}
		c := newConfigCache(time.Minute, defaultConfigCacheSize, time.Now, slow)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, _, _, err := c.resolve(ctx, "e", "gpt")
				assert.NoError(t, err)
			})
		}
		synctest.Wait() // every goroutine is now blocked: one in the loader, seven waiting on its flight
		close(release)
		wg.Wait()
		n := fcs.loadCount()
		require.EqualValues(t, 1, n, "loads = %d, want 1", n)
	})
}

// TestConfigCacheLevelLookups: a warm resolveLevel (an acquire's) looks
// up the system slot and the resource's slots up to the first with
// limits, then the entity-wide bucket's up to the first with limits,
// and resolves what the full resolution resolves; a slot past the first
// with limits may expire without a load; an expired slot it reaches is
// loaded again.
func TestConfigCacheLevelLookups(t *testing.T) {
	ctx := context.Background()
	c, fcs, clock := newTestCache(time.Minute)
	own := []Limit{PerMinute("rpm", 7)}
	def := []Limit{PerMinute("rpm", 100)}
	wide := []Limit{PerDay("usd", 1000)}
	fcs.set(sysKey, store.Config{OnUnavailable: OnUnavailableAllow})
	fcs.set(entityKey("own", "gpt"), store.Config{Limits: storeLimits(own)})
	fcs.set(resourceKey("gpt"), store.Config{Limits: storeLimits(def)})
	fcs.set(entityKey("wide", AllResources), store.Config{Limits: storeLimits(wide)})
	for _, tc := range []struct {
		entity   string
		lookups  int64
		limits   []Limit
		source   ConfigSource
		wide     []Limit
		wideFrom ConfigSource
	}{
		{"own", 4, own, SourceEntity, nil, ""},               // system, own; both entity-wide slots
		{"other", 6, def, SourceResource, nil, ""},           // system, 3 slots; 2
		{"wide", 5, def, SourceResource, wide, SourceEntity}, // system, 3 slots; 1
	} {
		cold, err := c.resolveLevel(ctx, tc.entity, "gpt") // loads what is missing
		require.NoError(t, err)
		before := c.stats().Hits
		loads := fcs.loadCount()
		warm, err := c.resolveLevel(ctx, tc.entity, "gpt")
		require.NoError(t, err)
		require.Equal(t, loads, fcs.loadCount(), "%s: a warm resolution loaded", tc.entity)
		require.Equal(t, tc.lookups, c.stats().Hits-before, "%s: lookups", tc.entity)
		require.Equal(t, cold, warm, tc.entity)
		require.Equal(t, levelConfig{limits: storeLimits(tc.limits), source: tc.source, wide: storeLimits(tc.wide), wideSource: tc.wideFrom, ou: OnUnavailableAllow}, warm, tc.entity)
	}
	// Half a TTL on, the slots "own"'s warm resolution reaches are read
	// again; at the TTL the two it does not reach expire, and it needs
	// no load; at the next TTL those it reaches expire: one load.
	c.invalidate()
	_, err := c.resolveLevel(ctx, "own", "gpt")
	require.NoError(t, err)
	clock.advance(30 * time.Second)
	for _, k := range []store.ConfigKey{sysKey, entityKey("own", "gpt"), entityKey("own", AllResources), resourceKey(AllResources)} {
		c.evict(k)
	}
	_, err = c.resolveLevel(ctx, "own", "gpt")
	require.NoError(t, err)
	loads := fcs.loadCount()
	clock.advance(30*time.Second + time.Nanosecond)
	lc, err := c.resolveLevel(ctx, "own", "gpt")
	require.NoError(t, err)
	require.Equal(t, storeLimits(own), lc.limits)
	require.Equal(t, loads, fcs.loadCount(), "a slot past the first with limits expired: loaded")
	clock.advance(30 * time.Second)
	lc, err = c.resolveLevel(ctx, "own", "gpt")
	require.NoError(t, err)
	require.Equal(t, storeLimits(own), lc.limits)
	require.Equal(t, loads+1, fcs.loadCount(), "expired slots it reaches are loaded again")
}

// TestConfigCacheLevelNoAlloc: a warm resolveLevel allocates nothing.
func TestConfigCacheLevelNoAlloc(t *testing.T) {
	ctx := context.Background()
	c, fcs, _ := newTestCache(time.Minute)
	fcs.set(entityKey("e", "gpt"), store.Config{Limits: storeLimits([]Limit{PerMinute("rpm", 7)})})
	_, err := c.resolveLevel(ctx, "e", "gpt")
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.resolveLevel(ctx, "e", "gpt"); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
