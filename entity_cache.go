package limiter

import "sync"

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
// one costs a read, never a wrong decision. It has no TTL; it is safe for
// concurrent use. Each RateLimiter owns one.
type entityCache struct {
	mu         sync.Mutex // guards entries
	entries    map[string]entityInfo
	maxEntries int
}

// newEntityCache returns an empty cache holding at most maxEntries entities
// (an arbitrary one is dropped to make room); maxEntries ≤ 0 means no
// bound.
func newEntityCache(maxEntries int) *entityCache {
	return &entityCache{entries: make(map[string]entityInfo), maxEntries: maxEntries}
}

// put stores e under id, making room first when the cache is full. c.mu
// must be held.
func (c *entityCache) put(id string, e entityInfo) {
	if c.maxEntries > 0 && len(c.entries) >= c.maxEntries {
		if _, ok := c.entries[id]; !ok {
			for k := range c.entries {
				delete(c.entries, k)
				break
			}
		}
	}
	c.entries[id] = e
}

func (c *entityCache) get(id string) (entityInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	return e, ok
}

// setEntity records an entity's cascade settings as read from its META
// record (exists false: there is none), keeping its shard counts.
func (c *entityCache) setEntity(id string, exists, cascade bool, parentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	e.known, e.meta, e.exists, e.cascade, e.parentID = true, true, exists, cascade, parentID
	c.put(id, e)
}

// learnFromBucket records cascade settings denormalised in a bucket item,
// unless the META record's are already known (they win: the copy on a bucket may be stale).
func (c *entityCache) learnFromBucket(id string, cascade bool, parentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e.meta {
		return
	}
	e.known, e.cascade, e.parentID = true, cascade, parentID
	c.put(id, e)
}

// setShards records the shard count of (id, resource); it never lowers it.
func (c *entityCache) setShards(id, resource string, count int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e.shards == nil {
		e.shards = make(map[string]int)
	}
	if count > e.shards[resource] {
		e.shards[resource] = count
	}
	c.put(id, e)
}

// shardCount returns the known shard count of (id, resource), at least 1.
func (c *entityCache) shardCount(id, resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.entries[id].shards[resource]; n > 1 {
		return n
	}
	return 1
}

// forget drops an entity (after DeleteEntity).
func (c *entityCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, id)
}
