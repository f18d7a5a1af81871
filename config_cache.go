package limiter

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/zaelimiter/limiter/internal/lru"
)

// cacheKeyString is a ConfigKey as one string (for singleflight).
func cacheKeyString(k ConfigKey) string {
	return string(rune('0'+k.Level)) + "\x00" + k.EntityID + "\x00" + k.Resource
}

// configLoader fetches the given slots in one round trip. Keys absent from
// the result have no stored config; a slot without limits is "no config at
// this level" (negative caching).
type configLoader func(ctx context.Context, keys []ConfigKey) (map[ConfigKey]Config, error)

// CacheStats reports the effectiveness and size of one of the limiter's
// per-key caches (see [CacheName]).
type CacheStats struct {
	// Hits and Misses count lookups since creation.
	Hits, Misses int64
	// Evictions counts live entries dropped to make room for new ones
	// since creation: a steady rate means the cache is smaller than the
	// working set (expired entries are not counted).
	Evictions int64
	// Size is the number of entries held (negative config entries and
	// expired entries not yet dropped included).
	Size int
	// MaxEntries is the cache's ceiling ([WithCacheSize]).
	MaxEntries int
	// TTL is the longest an entry is kept; zero means the config cache is
	// disabled, or an entity cache without age limit.
	TTL time.Duration
}

// configCache is a lazy TTL cache over a configLoader: no background
// goroutine, expiry is checked on read, concurrent identical misses are
// collapsed into one load. It holds at most maxEntries slots (negative
// ones included); the least recently used goes first, expired ones before
// it. It is safe for concurrent use.
type configCache struct {
	ttl   time.Duration
	now   func() time.Time
	load  configLoader
	group singleflight.Group
	event cacheEventFunc // nil: events are not reported

	hits, misses atomic.Int64

	mu         sync.Mutex // guards the fields below
	entries    *lru.Cache[ConfigKey, Config]
	generation uint64        // bumped by every eviction; stale loads are not stored
	remembered OnUnavailable // last non-empty system on_unavailable
}

func newConfigCache(ttl time.Duration, maxEntries int, now func() time.Time, load configLoader) *configCache {
	return &configCache{ttl: ttl, now: now, load: load, entries: lru.New[ConfigKey, Config](maxEntries, ttl)}
}

// resolutionKeys returns the slots consulted for (entityID, resource), in
// precedence order.
func resolutionKeys(entityID, resource string) []ConfigKey {
	keys := []ConfigKey{EntityConfig(entityID, resource)}
	if resource != DefaultResource {
		keys = append(keys, EntityConfig(entityID, DefaultResource))
	}
	return append(keys, ResourceConfig(resource), SystemConfig())
}

func sourceOf(keys []ConfigKey, i int) ConfigSource {
	switch k := keys[i]; {
	case k.Level == LevelSystem:
		return SourceSystem
	case k.Level == LevelResource:
		return SourceResource
	case i > 0:
		return SourceEntityDefault
	default:
		return SourceEntity
	}
}

// resolve returns the limits of the first level with a non-empty limit list
// (entity > entity _default_ > resource > system) and its source; limits is
// nil when no level has any. The system level's on_unavailable is returned
// too. Cached slots cost nothing; all missing slots are fetched in one load.
func (c *configCache) resolve(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, OnUnavailable, error) {
	keys := resolutionKeys(entityID, resource)
	values, err := c.get(ctx, keys)
	if err != nil {
		return nil, "", "", err
	}
	ou := values[len(values)-1].OnUnavailable
	for i, v := range values {
		if len(v.Limits) > 0 {
			return v.Limits, sourceOf(keys, i), ou, nil
		}
	}
	return nil, "", ou, nil
}

// system returns the system slot.
func (c *configCache) system(ctx context.Context) (Config, error) {
	values, err := c.get(ctx, []ConfigKey{SystemConfig()})
	if err != nil {
		return Config{}, err
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

// get returns the values of keys, in order, from the cache or one load.
func (c *configCache) get(ctx context.Context, keys []ConfigKey) ([]Config, error) {
	out := make([]Config, len(keys))
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

	fetch := make([]ConfigKey, len(missing))
	names := make([]string, len(missing))
	for j, i := range missing {
		fetch[j] = keys[i]
		names[j] = cacheKeyString(keys[i])
	}
	sort.Strings(names)
	res, err, _ := c.group.Do(strings.Join(names, "\x01"), func() (any, error) {
		c.mu.Lock()
		gen := c.generation
		c.mu.Unlock()
		got, err := c.load(ctx, fetch)
		if err != nil {
			return nil, err
		}
		if c.ttl > 0 {
			now := c.now()
			evicted := 0
			c.mu.Lock()
			if c.generation == gen {
				for _, k := range fetch {
					evicted += c.entries.Add(k, got[k], now)
				}
			}
			c.mu.Unlock()
			if evicted > 0 && c.event != nil {
				c.event(CacheConfigs, CacheEviction, int64(evicted))
			}
		}
		return got, nil
	})
	if err != nil {
		return nil, err
	}
	got := res.(map[ConfigKey]Config)
	for _, i := range missing {
		out[i] = got[keys[i]]
	}
	return out, nil
}

// evict drops one slot (called after every write or delete of that config).
func (c *configCache) evict(k ConfigKey) {
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
	c.entries.RemoveFunc(func(k ConfigKey, _ Config) bool { return k.Level == LevelEntity && k.EntityID == entityID })
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
