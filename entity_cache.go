// Layer 3, rules: what the limiter knows of entities (cascade, parent, shard
// count), for the cascade and the fast path.

package limiter

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/internal/lru"
)

// entityInfo is what the limiter remembers about an entity: its cascade
// settings (immutable once created) and the shard count of each resource.
type entityInfo struct {
	// known is set once cascade/parentID are known, from the META record
	// (meta set) or from a bucket item's denormalised copy.
	known    bool
	meta     bool // cascade/parentID come from the META record (or its absence)
	exists   bool // a META record was seen
	cascade  bool
	parentID string
	shards   map[string]int // resource → shard count (absent means 1)
}

// cascadeParent returns the parent entity id cascades to, or "". An entity
// recorded as its own parent (which another client may have written)
// cascades to nobody: it is charged once.
func (e entityInfo) cascadeParent(id string) string {
	if e.cascade && e.parentID != id {
		return e.parentID
	}
	return ""
}

// entityCache remembers, per entity, what the speculative path needs
// without a read: whether and where the entity cascades, and the shard
// count of each of its buckets. Every entry is a hint: a missing or evicted
// one costs a read, never a wrong decision. It holds at most maxEntries
// entities, the least recently used going first, each for at most ttl
// after its cascade settings were read (a shard count learned later does
// not extend that). It is safe for concurrent use. Each RateLimiter owns
// one.
type entityCache struct {
	now   func() time.Time
	event cacheEventFunc // nil: events are not reported

	hits, misses atomic.Int64

	mu      sync.Mutex // guards entries
	entries *lru.Cache[string, *entityInfo]
}

// newEntityCache returns an empty cache holding at most maxEntries
// entities (none when maxEntries ≤ 0), each for at most ttl (no age limit
// when ttl ≤ 0), on the clock now.
func newEntityCache(maxEntries int, ttl time.Duration, now func() time.Time) *entityCache {
	return &entityCache{now: now, entries: lru.New[string, *entityInfo](maxEntries, ttl)}
}

// evicted reports n evictions (called without c.mu held).
func (c *entityCache) evicted(n int) {
	if n > 0 && c.event != nil {
		c.event(CacheEntities, CacheEviction, int64(n))
	}
}

// get returns what is known about id (a lookup counted in the stats).
func (c *entityCache) get(id string) (entityInfo, bool) {
	e, ok := c.peek(id)
	c.counted(ok)
	return e, ok
}

// peek is get without counting a lookup in the stats.
func (c *entityCache) peek(id string) (entityInfo, bool) {
	now := c.now()
	c.mu.Lock()
	p, ok := c.entries.Get(id, now)
	var e entityInfo
	if ok {
		e = *p
	}
	c.mu.Unlock()
	return e, ok
}

// counted counts a lookup, a hit when ok.
func (c *entityCache) counted(ok bool) {
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	if c.event != nil {
		ev := CacheMiss
		if ok {
			ev = CacheHit
		}
		c.event(CacheEntities, ev, 1)
	}
}

// setEntity records an entity's cascade settings as read from its META
// record (exists false: there is none), keeping its shard counts. The
// entry's age starts again.
func (c *entityCache) setEntity(id string, exists, cascade bool, parentID string) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries.Get(id, now)
	if !ok {
		e = &entityInfo{}
	}
	e.known, e.meta, e.exists, e.cascade, e.parentID = true, true, exists, cascade, parentID
	n := c.entries.Add(id, e, now)
	c.mu.Unlock()
	c.evicted(n)
}

// learnFromBucket records cascade settings denormalised in a bucket item,
// unless the META record's are already known (they win: the copy on a bucket may be stale).
func (c *entityCache) learnFromBucket(id string, cascade bool, parentID string) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries.Get(id, now)
	switch {
	case ok && e.meta:
		c.mu.Unlock()
		return
	case !ok:
		e = &entityInfo{}
	}
	e.known, e.cascade, e.parentID = true, cascade, parentID
	n := c.entries.Add(id, e, now)
	c.mu.Unlock()
	c.evicted(n)
}

// setShards records the shard count of (id, resource); it never lowers it.
func (c *entityCache) setShards(id, resource string, count int) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries.Get(id, now)
	if ok && e.shards[resource] >= count {
		c.mu.Unlock()
		return
	}
	if !ok {
		e = &entityInfo{}
	}
	if e.shards == nil {
		e.shards = make(map[string]int)
	}
	e.shards[resource] = count
	n := 0
	if !ok {
		n = c.entries.Add(id, e, now) // else updated in place: the entry keeps its age
	}
	c.mu.Unlock()
	c.evicted(n)
}

// lookup is get(id) and shardCount(id, resource) under one lock, at now
// (the acquire's one reading of the clock): what the fast path asks of the
// cache per acquire.
func (c *entityCache) lookup(id, resource string, now time.Time) (entityInfo, int) {
	c.mu.Lock()
	p, ok := c.entries.Get(id, now)
	var e entityInfo
	shards := 1
	if ok {
		e = *p
		shards = max(e.shards[resource], 1)
	}
	c.mu.Unlock()
	c.counted(ok)
	return e, shards
}

// learn is setShards(id, resource, count) and, when fromBucket,
// learnFromBucket(id, cascade, parentID), under one lock, at now (the
// acquire's reading of the clock): what the fast path tells the cache
// after each write.
func (c *entityCache) learn(id, resource string, count int, fromBucket, cascade bool, parentID string, now time.Time) {
	c.mu.Lock()
	e, ok := c.entries.Get(id, now)
	if !ok {
		e = &entityInfo{}
	}
	if !ok || e.shards[resource] < count {
		if e.shards == nil {
			e.shards = make(map[string]int)
		}
		e.shards[resource] = count
	}
	n := 0
	switch {
	case fromBucket && !e.meta:
		e.known, e.cascade, e.parentID = true, cascade, parentID
		n = c.entries.Add(id, e, now) // its age starts again, as in learnFromBucket
	case !ok:
		n = c.entries.Add(id, e, now)
	}
	c.mu.Unlock()
	c.evicted(n)
}

// shardCount returns the known shard count of (id, resource), at least 1.
func (c *entityCache) shardCount(id, resource string) int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries.Get(id, now); ok {
		if n := e.shards[resource]; n > 1 {
			return n
		}
	}
	return 1
}

// forget drops an entity (after DeleteEntity).
func (c *entityCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries.Remove(id)
}

func (c *entityCache) stats() CacheStats {
	c.mu.Lock()
	size, evictions, maxEntries, ttl := c.entries.Len(), c.entries.Evictions(), c.entries.MaxEntries(), c.entries.TTL()
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: evictions, Size: size, MaxEntries: maxEntries, TTL: ttl}
}
