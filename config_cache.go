// Layer 3, rules: the resolution of stored limits (entity, entity default,
// resource, system) and their cache.

package limiter

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// cacheKeyString is a store.ConfigKey as one string (to share loads).
func cacheKeyString(k store.ConfigKey) string {
	return string(rune('0'+k.Level)) + "\x00" + k.EntityID + "\x00" + k.Resource
}

// configLoader fetches the given slots in one round trip. Keys absent from
// the result have no stored config; a slot without limits is "no config at
// this level" (negative caching).
type configLoader func(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error)

// configCache is a lazy TTL cache over a configLoader: no background
// goroutine, expiry is checked on read, concurrent identical misses are
// collapsed into one load. It holds at most maxEntries slots (negative
// ones included); the least recently used goes first, expired ones before
// it. It is safe for concurrent use.
type configCache struct {
	ttl   time.Duration
	now   func() time.Time
	load  configLoader
	event cacheEventFunc // nil: events are not reported

	hits, misses atomic.Int64

	mu         sync.Mutex // guards the fields below
	flights    map[string]*configFlight
	entries    *lru.Cache[store.ConfigKey, store.Config]
	generation uint64        // bumped by every eviction; stale loads are not stored
	remembered OnUnavailable // last non-empty system on_unavailable
}

// configFlight is one load in progress, shared by the callers that need
// the same slots.
type configFlight struct {
	done chan struct{} // closed when the load ended
	got  map[store.ConfigKey]store.Config
	err  error
}

func newConfigCache(ttl time.Duration, maxEntries int, now func() time.Time, load configLoader) *configCache {
	return &configCache{ttl: ttl, now: now, load: load, entries: lru.New[store.ConfigKey, store.Config](maxEntries, ttl),
		flights: make(map[string]*configFlight)}
}

// fillKeys writes into keys the slots consulted for (entityID, resource),
// in precedence order, and returns how many. The entity-wide bucket
// (AllResources) takes the entity's own config on it, then the resource
// defaults of AllResources: neither the entity's DefaultResource config
// nor the system defaults, which each resource gets a copy of, apply to
// it.
func fillKeys(keys *[4]store.ConfigKey, entityID, resource string) int {
	n := 0
	keys[n], n = store.EntityConfig(entityID, resource), n+1
	if resource == AllResources {
		keys[n], n = store.ResourceConfig(resource), n+1
		return n
	}
	if resource != DefaultResource {
		keys[n], n = store.EntityConfig(entityID, DefaultResource), n+1
	}
	keys[n], keys[n+1], n = store.ResourceConfig(resource), store.SystemConfig(), n+2
	return n
}

func sourceOf(keys []store.ConfigKey, i int) ConfigSource {
	switch k := keys[i]; {
	case k.Level == store.LevelSystem:
		return SourceSystem
	case k.Level == store.LevelResource:
		return SourceResource
	case i > 0:
		return SourceEntityDefault
	default:
		return SourceEntity
	}
}

// firstLimits returns the limits of the first of values with a non-empty
// limit list, and its source (none: nil), and the switch records that may
// apply to them on resource (see switchSet): those of that config and,
// for defaults of a resource or the system, the system config's. It does
// not allocate.
func firstLimits(keys []store.ConfigKey, values []store.Config, resource string) ([]store.Limit, ConfigSource, switchSet) {
	for i, v := range values {
		if len(v.Limits) == 0 {
			continue
		}
		var sw switchSet
		if len(v.Switches) > 0 {
			sw.own = v.Switches
			for _, after := range values[i+1:] {
				if len(after.Limits) > 0 {
					sw.inherited = after.Limits
					break
				}
			}
		}
		if last := len(keys) - 1; keys[i].Level != store.LevelEntity && keys[last].Level == store.LevelSystem {
			sw.sys = values[last].Switches
		}
		if sw.own != nil || sw.sys != nil {
			sw.entityID, sw.resource = keys[0].EntityID, resource
		}
		return v.Limits, sourceOf(keys, i), sw
	}
	return nil, "", switchSet{}
}

// levelConfig is what the stored configs say of one entity for an acquire
// on a resource: the limits of its (entity, resource) bucket and of its
// entity-wide bucket (nil for an acquire on AllResources itself), each
// with its source, and the system's on_unavailable.
type levelConfig struct {
	limits     []store.Limit
	source     ConfigSource
	switches   switchSet
	wide       []store.Limit
	wideSource ConfigSource
	wideSw     switchSet
	ou         OnUnavailable
}

// resolve returns the limits of the first level with a non-empty limit list
// (entity > entity _default_ > resource > system) and its source; limits is
// nil when no level has any. The system level's on_unavailable is returned
// too. Cached slots cost nothing; all missing slots are fetched in one load.
func (c *configCache) resolve(ctx context.Context, entityID, resource string) ([]store.Limit, ConfigSource, OnUnavailable, error) {
	lc, err := c.resolveSlots(ctx, entityID, resource, false)
	return lc.limits, lc.source, lc.ou, err
}

// resolveLevel resolves, for an acquire of entityID on resource, the
// limits of the (entity, resource) bucket and of the entity's entity-wide
// bucket: when a slot is missing from the cache, the slots of both are
// fetched in one load, so that an acquire reads its configs in one round
// trip whether or not the entity has entity-wide limits. The
// on_unavailable is the system slot's ("" for an AllResources acquire,
// which does not read it).
func (c *configCache) resolveLevel(ctx context.Context, entityID, resource string) (levelConfig, error) {
	return c.resolveSlots(ctx, entityID, resource, true)
}

// resolveSlots is resolveLevel, or resolve when wide is false (the
// entity-wide bucket's slots are then neither read nor resolved).
func (c *configCache) resolveSlots(ctx context.Context, entityID, resource string, wide bool) (levelConfig, error) {
	if wide {
		if lc, ok := c.resolveLevelCached(entityID, resource); ok {
			return lc, nil
		}
	} else if lc, ok := c.resolveCached(entityID, resource); ok {
		return lc, nil
	}
	var buf [6]store.ConfigKey
	var own [4]store.ConfigKey
	n := fillKeys(&own, entityID, resource)
	keys := append(buf[:0], own[:n]...)
	if wide && resource != AllResources {
		keys = append(keys, store.EntityConfig(entityID, AllResources), store.ResourceConfig(AllResources))
	}
	values, err := c.get(ctx, keys)
	if err != nil {
		return levelConfig{}, err
	}
	return levelFrom(keys, values, n), nil
}

// levelFrom builds a levelConfig from the values of keys: the first n are
// the resource's slots, the rest the entity-wide bucket's.
func levelFrom(keys []store.ConfigKey, values []store.Config, n int) levelConfig {
	var lc levelConfig
	if keys[n-1].Level == store.LevelSystem {
		lc.ou = values[n-1].OnUnavailable
	}
	lc.limits, lc.source, lc.switches = firstLimits(keys[:n], values[:n], keys[0].Resource)
	if len(keys) > n {
		lc.wide, lc.wideSource, lc.wideSw = firstLimits(keys[n:], values[n:], AllResources)
	}
	return lc
}

// resolveCached is resolve's resolveSlots when every slot it needs is
// cached and fresh: no allocation, one lock. ok is false when a load is
// needed.
func (c *configCache) resolveCached(entityID, resource string) (levelConfig, bool) {
	if c.ttl <= 0 {
		return levelConfig{}, false
	}
	var keys [4]store.ConfigKey
	n := fillKeys(&keys, entityID, resource)
	now := c.now()
	var values [4]store.Config
	c.mu.Lock()
	for i, k := range keys[:n] {
		v, ok := c.entries.Get(k, now)
		if !ok {
			c.mu.Unlock()
			return levelConfig{}, false
		}
		values[i] = v
	}
	c.mu.Unlock()
	c.count(int64(n), 0)
	return levelFrom(keys[:n], values[:n], n), true
}

// resolveLevelCached is resolveLevel's resolveSlots from the cache: the
// slots are looked up in order of precedence, and each chain (the
// resource's, then the entity-wide bucket's) stops at its first slot
// with limits, as the slots after it cannot change what is resolved; the
// system slot is looked up whatever the limits' level, for its
// on_unavailable (so that an expired one is loaded again). A warm
// acquire so looks up two slots for an entity's own limits, four for a
// resource's defaults or the system's, then one or two for the
// entity-wide bucket (one when the entity has its own). No allocation,
// one lock; ok is false when a slot it reaches is missing or expired.
func (c *configCache) resolveLevelCached(entityID, resource string) (levelConfig, bool) {
	if c.ttl <= 0 {
		return levelConfig{}, false
	}
	var own [4]store.ConfigKey
	n := fillKeys(&own, entityID, resource)
	wideKeys := [2]store.ConfigKey{store.EntityConfig(entityID, AllResources), store.ResourceConfig(AllResources)}
	var lc levelConfig
	now := c.now()
	c.mu.Lock()
	var looked, m int
	var ok bool
	chain := own[:n]
	if sys := own[n-1]; sys.Level == store.LevelSystem {
		// The system slot is looked up whatever the limits' level, for
		// its on_unavailable (and so that an expired one is loaded
		// again); its limits come last.
		chain = own[:n-1]
		var v store.Config
		if v, ok = c.entries.Get(sys, now); ok {
			lc.ou = v.OnUnavailable
			looked++
			lc.limits, lc.source, m, ok = c.firstCached(chain, now)
			looked += m
			if ok && lc.limits == nil && len(v.Limits) > 0 {
				lc.limits, lc.source = v.Limits, SourceSystem
			}
		}
	} else {
		lc.limits, lc.source, looked, ok = c.firstCached(chain, now)
	}
	if ok && resource != AllResources {
		lc.wide, lc.wideSource, m, ok = c.firstCached(wideKeys[:], now)
		looked += m
	}
	c.mu.Unlock()
	if !ok {
		return levelConfig{}, false
	}
	c.count(int64(looked), 0)
	return lc, true
}

// firstCached returns the limits of the first of keys whose cached slot
// has limits, and its source (none: nil), and how many slots it looked
// up; ok is false when it reached a slot missing from the cache. c.mu
// must be held.
func (c *configCache) firstCached(keys []store.ConfigKey, now time.Time) (limits []store.Limit, source ConfigSource, looked int, ok bool) {
	for i, k := range keys {
		v, found := c.entries.Get(k, now)
		if !found {
			return nil, "", i + 1, false
		}
		if len(v.Limits) > 0 {
			return v.Limits, sourceOf(keys, i), i + 1, true
		}
	}
	return nil, "", len(keys), true
}

// system returns the system slot.
func (c *configCache) system(ctx context.Context) (store.Config, error) {
	values, err := c.get(ctx, []store.ConfigKey{store.SystemConfig()})
	if err != nil {
		return store.Config{}, err
	}
	return values[0], nil
}

// resolveOnUnavailable returns the stored system on_unavailable, else the
// last one seen, else block. It never fails: a read error falls back too.
func (c *configCache) resolveOnUnavailable(ctx context.Context) OnUnavailable {
	v, err := c.system(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && v.OnUnavailable.Valid() {
		c.remembered = v.OnUnavailable
	}
	if c.remembered != "" {
		return c.remembered
	}
	return OnUnavailableBlock
}

// cachedOnUnavailable is resolveOnUnavailable without a store read: the
// cached system on_unavailable, else the last one seen, else block. An
// acquire whose store did not answer decides with it rather than wait for
// the store again.
func (c *configCache) cachedOnUnavailable() OnUnavailable {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.entries.Get(store.SystemConfig(), now); ok && v.OnUnavailable.Valid() {
		c.remembered = v.OnUnavailable
	}
	if c.remembered != "" {
		return c.remembered
	}
	return OnUnavailableBlock
}

// get returns the values of keys, in order, from the cache or one load.
func (c *configCache) get(ctx context.Context, keys []store.ConfigKey) ([]store.Config, error) {
	out := make([]store.Config, len(keys))
	var missing []int
	if c.ttl > 0 {
		now := c.now()
		c.mu.Lock()
		for i, k := range keys {
			if v, ok := c.entries.Get(k, now); ok {
				out[i] = v
				continue
			}
			missing = append(missing, i)
		}
		c.mu.Unlock()
		c.count(int64(len(keys)-len(missing)), int64(len(missing)))
	} else {
		for i := range keys {
			missing = append(missing, i)
		}
		c.count(0, int64(len(keys)))
	}
	if len(missing) == 0 {
		return out, nil
	}

	fetch := make([]store.ConfigKey, len(missing))
	names := make([]string, len(missing))
	for j, i := range missing {
		fetch[j] = keys[i]
		names[j] = cacheKeyString(keys[i])
	}
	sort.Strings(names)
	got, err := c.share(ctx, strings.Join(names, "\x01"), fetch)
	if err != nil {
		return nil, err
	}
	for _, i := range missing {
		out[i] = got[keys[i]]
	}
	return out, nil
}

// share loads fetch, or waits for the load of the same slots another caller
// started. The loading caller reads with its own context; a waiter stops
// waiting when its context ends, and loads itself when the load it waited
// for failed because its caller's context ended.
func (c *configCache) share(ctx context.Context, id string, fetch []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	for {
		c.mu.Lock()
		if f, ok := c.flights[id]; ok {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) && ctx.Err() == nil {
				continue // its caller gave up, not this one: load again
			}
			return f.got, f.err
		}
		f := &configFlight{done: make(chan struct{})}
		c.flights[id] = f
		gen := c.generation
		c.mu.Unlock()

		f.got, f.err = c.load(ctx, fetch)
		evicted := 0
		c.mu.Lock()
		delete(c.flights, id)
		if f.err == nil && c.ttl > 0 && c.generation == gen {
			now := c.now()
			for _, k := range fetch {
				evicted += c.entries.Add(k, f.got[k], now)
			}
		}
		c.mu.Unlock()
		close(f.done)
		if evicted > 0 && c.event != nil {
			c.event(CacheConfigs, CacheEviction, int64(evicted))
		}
		return f.got, f.err
	}
}

// evict drops one slot (called after every write or delete of that config).
func (c *configCache) evict(k store.ConfigKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(k)
	c.generation++
}

// evictEntity drops every entity-level slot of entityID (after the entity
// was deleted).
func (c *configCache) evictEntity(entityID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.RemoveFunc(func(k store.ConfigKey, _ store.Config) bool {
		return k.Level == store.LevelEntity && k.EntityID == entityID
	})
	c.generation++
}

// invalidate drops every slot and forgets the remembered on_unavailable.
func (c *configCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Clear()
	c.generation++
	c.remembered = ""
}

// count records hits and misses, and reports them.
func (c *configCache) count(hits, misses int64) {
	c.hits.Add(hits)
	c.misses.Add(misses)
	if c.event != nil {
		if hits > 0 {
			c.event(CacheConfigs, CacheHit, hits)
		}
		if misses > 0 {
			c.event(CacheConfigs, CacheMiss, misses)
		}
	}
}

func (c *configCache) stats() CacheStats {
	c.mu.Lock()
	size, evictions, maxEntries := c.entries.Len(), c.entries.Evictions(), c.entries.MaxEntries()
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: evictions, Size: size, MaxEntries: maxEntries, TTL: c.ttl}
}
