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

// cascadeParent returns the parent to cascade to, or "".
func (e entityInfo) cascadeParent() string {
	if e.cascade {
		return e.parentID
	}
	return ""
}

// entityCache maps entity IDs of one namespace to entityInfo. It has no TTL
// and no bound, like the original (§5.18); it is safe for concurrent use.
type entityCache struct {
	mu      sync.Mutex // guards entries
	entries map[string]entityInfo
}

func newEntityCache() *entityCache { return &entityCache{entries: make(map[string]entityInfo)} }

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
	c.entries[id] = e
}

// learnFromBucket records cascade settings denormalised in a bucket item,
// unless the META record's are already known (they win, fix B8).
func (c *entityCache) learnFromBucket(id string, cascade bool, parentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e.meta {
		return
	}
	e.known, e.cascade, e.parentID = true, cascade, parentID
	c.entries[id] = e
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
	c.entries[id] = e
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
