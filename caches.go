package limiter

import (
	"fmt"
	"time"
)

// This file holds the bounds of the limiter's per-key caches: their
// ceilings and age limits, their statistics, and their metrics.
//
// Every structure a RateLimiter keeps per entity or per bucket is bounded
// in size and age, so that a service that sees a steady stream of new keys
// for weeks keeps a flat heap:
//
//   - the config cache (stored limits, negative entries included): at most
//     [DefaultConfigCacheSize] slots, each for [WithConfigCacheTTL];
//   - the entity cache (cascade settings and shard counts, the
//     speculative path's hints): at most [DefaultEntityCacheSize]
//     entities, each for [DefaultEntityCacheTTL];
//   - the over-limit cache, when on: at most [DefaultOverLimitCacheSize]
//     buckets, each for at most its maxWait;
//   - group commit's per-item queues exist only while a write for the
//     item is in flight, so they are bounded by the number of concurrent
//     callers and never outlive the write.
//
// When a cache is full, an expired entry makes room first, else the least
// recently used one. Nothing runs in the background: expiry is checked on
// read, and each insertion drops a few expired entries. Eviction changes
// cost, never correctness: every entry is a copy of something stored, and a
// key that comes back is read again.

// Default ceilings and age limits of the per-key caches.
const (
	// DefaultConfigCacheSize is the default ceiling of the config cache,
	// in slots. An acquire on an entity without its own limits keeps two
	// negative slots for it (resource-specific and _default_) and shares
	// the resource and system slots: the default holds the configs of
	// about 10,000 entities.
	DefaultConfigCacheSize = 20_000
	// DefaultEntityCacheSize is the default ceiling of the entity cache,
	// in entities.
	DefaultEntityCacheSize = 10_000
	// DefaultEntityCacheTTL is how long an entity's cascade settings are
	// trusted after they were read ([WithEntityCacheTTL]).
	DefaultEntityCacheTTL = 10 * time.Minute
	// DefaultOverLimitCacheSize is the default ceiling of the over-limit
	// cache ([WithOverLimitCache]), in buckets.
	DefaultOverLimitCacheSize = 10_000
)

// CacheName names one of the per-key caches of a [RateLimiter], for
// [WithCacheSize], [RateLimiter.CacheStats] and [CacheMetrics].
type CacheName int

// The per-key caches of a RateLimiter.
const (
	// CacheConfigs holds stored limits per config slot (entity and
	// resource, entity default, resource, system), negative entries
	// included ([WithConfigCacheTTL]).
	CacheConfigs CacheName = iota
	// CacheEntities holds per entity its cascade settings and the shard
	// count of its buckets ([WithEntityCacheTTL]).
	CacheEntities
	// CacheOverLimit holds buckets found exhausted ([WithOverLimitCache]).
	CacheOverLimit
	numCaches
)

var cacheNames = [numCaches]string{"config", "entity", "over_limit"}

// String returns the cache's name, e.g. "config".
func (c CacheName) String() string {
	if c < 0 || c >= numCaches {
		return fmt.Sprintf("CacheName(%d)", int(c))
	}
	return cacheNames[c]
}

// CacheEvent is what happened in a per-key cache, for [CacheMetrics].
type CacheEvent int

// Events of the per-key caches.
const (
	// CacheHit: a lookup found a live entry.
	CacheHit CacheEvent = iota
	// CacheMiss: a lookup found nothing, or an expired entry.
	CacheMiss
	// CacheEviction: a live entry was dropped to make room for a new
	// one. A steady rate means the cache is smaller than the working set.
	CacheEviction
	numCacheEvents
)

var cacheEventNames = [numCacheEvents]string{"hit", "miss", "eviction"}

// String returns the event's name, e.g. "eviction".
func (e CacheEvent) String() string {
	if e < 0 || e >= numCacheEvents {
		return fmt.Sprintf("CacheEvent(%d)", int(e))
	}
	return cacheEventNames[e]
}

// CacheMetrics is an optional extension of [Metrics]: when the value given
// to [WithMetrics] implements it too, the limiter reports the lookups and
// evictions of its per-key caches. Like Metrics, it is called synchronously
// on the request path, from many goroutines at once, never with a lock
// held: it must be safe for concurrent use, fast, and must not block.
//
// What a lookup is depends on the cache: for [CacheConfigs], one config
// slot (an acquire looks up to four); for [CacheEntities], one entity's
// cascade settings; for [CacheOverLimit], one bucket (an acquire on a
// cascading entity looks up two). The same counts, since the limiter was
// created, are returned by [RateLimiter.CacheStats].
type CacheMetrics interface {
	// CacheEvent reports n events of one kind in one cache.
	CacheEvent(cache CacheName, event CacheEvent, n int64)
}

// cacheEventFunc is CacheMetrics.CacheEvent, or nil.
type cacheEventFunc func(cache CacheName, event CacheEvent, n int64)

// WithCacheSize sets the ceiling of one per-key cache, in entries (see
// [CacheName]; the defaults are [DefaultConfigCacheSize],
// [DefaultEntityCacheSize] and [DefaultOverLimitCacheSize]). When the cache
// is full, an expired entry makes room first, else the least recently used
// one. Zero or less keeps nothing: every lookup misses (the config cache
// then reads the configs on every acquire, the entity cache forgets every
// hint, the over-limit cache refuses nothing locally). An unknown cache
// name is ignored.
//
// Size a cache to the keys active within its age limit: the config cache
// to twice the entities acquired within [WithConfigCacheTTL] (plus the
// entities with limits of their own for each resource, and one slot per
// resource), the entity cache to the entities acquired within
// [WithEntityCacheTTL]. A config or entity entry costs about 200 bytes
// plus its entity id, an over-limit entry (which holds a bucket) about
// 500; see docs/performance.md, "Memory sizing".
func WithCacheSize(cache CacheName, maxEntries int) Option {
	return func(rl *RateLimiter) {
		if cache >= 0 && cache < numCaches {
			rl.cacheSizes[cache] = max(maxEntries, 0)
			rl.cacheSizeSet[cache] = true
		}
	}
}

// WithEntityCacheTTL sets how long the entity cache trusts an entity's
// cascade settings after reading them ([DefaultEntityCacheTTL] by default).
// They do not change while the entity exists; the age limit bounds how long
// this process may keep using the settings of an entity that another
// process deleted and created again differently. Zero or less means no age
// limit (only the ceiling bounds the cache).
func WithEntityCacheTTL(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.entityTTL = max(d, 0) }
}

// initCaches creates the per-key caches from the options.
func (rl *RateLimiter) initCaches() {
	defaults := [numCaches]int{DefaultConfigCacheSize, DefaultEntityCacheSize, DefaultOverLimitCacheSize}
	for i := range rl.cacheSizes {
		if !rl.cacheSizeSet[i] {
			rl.cacheSizes[i] = defaults[i]
		}
	}
	if cm, ok := rl.obs.metrics.(CacheMetrics); ok {
		rl.cacheEvent = cm.CacheEvent
	}
	rl.configs = newConfigCache(rl.configTTL, rl.cacheSizes[CacheConfigs], rl.now, rl.store.loadConfigs)
	rl.configs.event = rl.cacheEvent
	rl.ents = newEntityCache(rl.cacheSizes[CacheEntities], rl.entityTTL, rl.now)
	rl.ents.event = rl.cacheEvent
}

// CacheStats returns the statistics of one per-key cache since the limiter
// was created. For [CacheOverLimit] when the over-limit cache is off, it is
// all zero.
func (rl *RateLimiter) CacheStats(cache CacheName) CacheStats {
	switch cache {
	case CacheConfigs:
		return rl.configs.stats()
	case CacheEntities:
		return rl.ents.stats()
	case CacheOverLimit:
		if rl.olc != nil {
			return rl.olc.stats()
		}
	}
	return CacheStats{}
}
