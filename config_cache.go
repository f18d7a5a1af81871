package limiter

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// configLevel is one level of the config hierarchy.
type configLevel int

const (
	levelEntity   configLevel = iota // entity + resource (or entity + _default_)
	levelResource                    // resource defaults
	levelSystem                      // system defaults
)

// configKey names one slot of the config cache.
type configKey struct {
	level    configLevel
	entityID string // levelEntity only
	resource string // levelEntity (a resource or DefaultResource) and levelResource
}

func (k configKey) String() string {
	return string(rune('0'+k.level)) + "\x00" + k.entityID + "\x00" + k.resource
}

// configValue is the content of one config slot. A slot without limits is
// "no config at this level" (negative caching).
type configValue struct {
	limits        []Limit
	onUnavailable OnUnavailable // system level only; "" when unset
}

// configLoader fetches the given slots in one round trip. Keys absent from
// the result have no stored config.
type configLoader func(ctx context.Context, keys []configKey) (map[configKey]configValue, error)

// CacheStats reports the config cache's effectiveness.
type CacheStats struct {
	// Hits and Misses count slot lookups since creation.
	Hits, Misses int64
	// Size is the number of cached slots (including negative entries).
	Size int
	// TTL is the configured time-to-live; zero means caching is disabled.
	TTL time.Duration
}

type cacheEntry struct {
	value     configValue
	expiresAt time.Time
}

// configCache is a lazy TTL cache over a configLoader: no background
// goroutine, expiry is checked on read, concurrent identical misses are
// collapsed into one load. It is safe for concurrent use.
type configCache struct {
	ttl   time.Duration
	now   func() time.Time
	load  configLoader
	group singleflight.Group

	hits, misses atomic.Int64

	mu         sync.Mutex // guards the fields below
	entries    map[configKey]cacheEntry
	generation uint64        // bumped by every eviction; stale loads are not stored
	remembered OnUnavailable // last non-empty system on_unavailable
}

func newConfigCache(ttl time.Duration, now func() time.Time, load configLoader) *configCache {
	return &configCache{ttl: ttl, now: now, load: load, entries: make(map[configKey]cacheEntry)}
}

// resolutionKeys returns the slots consulted for (entityID, resource), in
// precedence order.
func resolutionKeys(entityID, resource string) []configKey {
	keys := []configKey{{level: levelEntity, entityID: entityID, resource: resource}}
	if resource != DefaultResource {
		keys = append(keys, configKey{level: levelEntity, entityID: entityID, resource: DefaultResource})
	}
	return append(keys,
		configKey{level: levelResource, resource: resource},
		configKey{level: levelSystem})
}

func sourceOf(keys []configKey, i int) ConfigSource {
	switch k := keys[i]; {
	case k.level == levelSystem:
		return SourceSystem
	case k.level == levelResource:
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
	ou := values[len(values)-1].onUnavailable
	for i, v := range values {
		if len(v.limits) > 0 {
			return v.limits, sourceOf(keys, i), ou, nil
		}
	}
	return nil, "", ou, nil
}

// system returns the system slot.
func (c *configCache) system(ctx context.Context) (configValue, error) {
	values, err := c.get(ctx, []configKey{{level: levelSystem}})
	if err != nil {
		return configValue{}, err
	}
	return values[0], nil
}

// resolveOnUnavailable returns the stored system on_unavailable, else the
// last one seen, else block. It never fails: a read error falls back too.
func (c *configCache) resolveOnUnavailable(ctx context.Context) OnUnavailable {
	v, err := c.system(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && v.onUnavailable.Valid() {
		c.remembered = v.onUnavailable
	}
	if c.remembered != "" {
		return c.remembered
	}
	return OnUnavailableBlock
}

// get returns the values of keys, in order, from the cache or one load.
func (c *configCache) get(ctx context.Context, keys []configKey) ([]configValue, error) {
	out := make([]configValue, len(keys))
	var missing []int
	if c.ttl > 0 {
		now := c.now()
		c.mu.Lock()
		for i, k := range keys {
			if e, ok := c.entries[k]; ok && !now.After(e.expiresAt) {
				out[i] = e.value
				continue
			}
			missing = append(missing, i)
		}
		c.mu.Unlock()
		c.hits.Add(int64(len(keys) - len(missing)))
		c.misses.Add(int64(len(missing)))
	} else {
		for i := range keys {
			missing = append(missing, i)
		}
		c.misses.Add(int64(len(keys)))
	}
	if len(missing) == 0 {
		return out, nil
	}

	fetch := make([]configKey, len(missing))
	names := make([]string, len(missing))
	for j, i := range missing {
		fetch[j] = keys[i]
		names[j] = keys[i].String()
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
			expires := c.now().Add(c.ttl)
			c.mu.Lock()
			if c.generation == gen {
				for _, k := range fetch {
					c.entries[k] = cacheEntry{value: got[k], expiresAt: expires}
				}
			}
			c.mu.Unlock()
		}
		return got, nil
	})
	if err != nil {
		return nil, err
	}
	got := res.(map[configKey]configValue)
	for _, i := range missing {
		out[i] = got[keys[i]]
	}
	return out, nil
}

// evict drops one slot (called after every write or delete of that config).
func (c *configCache) evict(k configKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, k)
	c.generation++
}

// invalidate drops every slot and forgets the remembered on_unavailable.
func (c *configCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.generation++
	c.remembered = ""
}

func (c *configCache) stats() CacheStats {
	c.mu.Lock()
	size := len(c.entries)
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Size: size, TTL: c.ttl}
}
