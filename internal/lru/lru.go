// Package lru is the size- and age-bounded map behind the limiter's per-key
// caches: at most a fixed number of entries, each kept at most a fixed time
// after it was stored. When room is needed, an expired entry goes first,
// else the least recently used one.
//
// There is no background goroutine: expiry is checked when an entry is
// read, and every [Cache.Add] also drops a few expired entries from the
// old end, so expired entries do not linger while new ones arrive. Time
// is always passed in by the caller (the limiter's own clock). A Cache is
// not safe for concurrent use: its owner guards it with its own mutex,
// which usually guards more state than the cache (generation counters,
// counters of the owner).
package lru

import "time"

// compactAfter is how many removals, in multiples of the ceiling, the map
// takes before it is copied into a fresh one. A Go map never shrinks, and
// under a steady churn of new keys (insert one, delete another) its
// tables fill with deleted slots that force them to grow: measured on a
// cache of 20,000 entries, about +3.5 MiB over the first million keys
// before it levels off. Copying the live entries after every
// compactAfter × maxEntries removals costs one map insertion per
// compactAfter removals and keeps the map at its size (within 0.1 MiB in
// the same measure).
const compactAfter = 2

// purgePerAdd bounds the expired entries one Add drops besides the ones it
// needs room for: every entry is added once, so the old end keeps up with
// expiry as long as entries are added.
const purgePerAdd = 2

// entry is one key's value, linked in two lists: by last use (for LRU
// eviction) and by the time it was stored (for expiry, oldest first; with
// one TTL for every entry that is also the order of expiry).
type entry[K comparable, V any] struct {
	key     K
	value   V
	expires int64 // UnixNano; 0 when entries never expire

	prev, next   *entry[K, V] // use list: next is less recently used
	older, newer *entry[K, V] // age list
}

// Cache is a map bounded in size and age. The zero value is not usable;
// call [New]. An entry stored at t with TTL d is live up to and including
// t+d.
type Cache[K comparable, V any] struct {
	max int
	ttl time.Duration

	items map[K]*entry[K, V]
	// The use list runs from mru (most recently used) to lru; the age list
	// from newest to oldest. Both are nil when empty.
	mru, lru       *entry[K, V]
	newest, oldest *entry[K, V]

	evictions, expirations int64
	removed                int // removals since the map was last copied
}

// New returns an empty cache that holds at most maxEntries entries (none
// when maxEntries ≤ 0), each for at most ttl after it was stored (no age
// limit when ttl ≤ 0).
func New[K comparable, V any](maxEntries int, ttl time.Duration) *Cache[K, V] {
	return &Cache[K, V]{max: max(maxEntries, 0), ttl: max(ttl, 0), items: make(map[K]*entry[K, V])}
}

// MaxEntries returns the ceiling the cache was created with.
func (c *Cache[K, V]) MaxEntries() int { return c.max }

// TTL returns the age limit the cache was created with (0: none).
func (c *Cache[K, V]) TTL() time.Duration { return c.ttl }

// Len returns the number of entries held, expired ones not yet dropped
// included.
func (c *Cache[K, V]) Len() int { return len(c.items) }

// Evictions returns how many live entries were dropped to make room.
func (c *Cache[K, V]) Evictions() int64 { return c.evictions }

// Expirations returns how many entries were dropped because they had
// expired.
func (c *Cache[K, V]) Expirations() int64 { return c.expirations }

func (c *Cache[K, V]) expired(e *entry[K, V], now time.Time) bool {
	return e.expires != 0 && now.UnixNano() > e.expires
}

// Get returns the value of key when it is held and not expired at now, and
// marks it most recently used. An expired entry is dropped.
func (c *Cache[K, V]) Get(key K, now time.Time) (V, bool) {
	e, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	if c.expired(e, now) {
		c.remove(e)
		c.expirations++
		var zero V
		return zero, false
	}
	c.touch(e)
	return e.value, true
}

// Add stores value under key at now, as the most recently used entry and
// the newest one (its age starts again). When the cache is full, an
// expired entry is dropped to make room, else the least recently used one;
// Add returns how many live entries it dropped (0 or 1).
func (c *Cache[K, V]) Add(key K, value V, now time.Time) (evicted int) {
	if c.max == 0 {
		return 0
	}
	expires := int64(0)
	if c.ttl > 0 {
		expires = now.Add(c.ttl).UnixNano()
	}
	if e, ok := c.items[key]; ok {
		e.value, e.expires = value, expires
		c.touch(e)
		c.unlinkAge(e)
		c.pushAge(e)
		c.purge(now, purgePerAdd)
		return 0
	}
	c.purge(now, purgePerAdd)
	if len(c.items) >= c.max {
		c.remove(c.lru)
		c.evictions++
		evicted = 1
	}
	if c.removed >= compactAfter*c.max {
		c.compact()
	}
	e := &entry[K, V]{key: key, value: value, expires: expires}
	c.items[key] = e
	c.pushUse(e)
	c.pushAge(e)
	return evicted
}

// compact copies the map into a fresh one (see compactAfter).
func (c *Cache[K, V]) compact() {
	items := make(map[K]*entry[K, V], len(c.items)+1)
	for e := c.mru; e != nil; e = e.next {
		items[e.key] = e
	}
	c.items, c.removed = items, 0
}

// purge drops up to n expired entries from the old end.
func (c *Cache[K, V]) purge(now time.Time, n int) {
	for ; n > 0 && c.oldest != nil && c.expired(c.oldest, now); n-- {
		c.remove(c.oldest)
		c.expirations++
	}
}

// Remove drops key and reports whether it was held.
func (c *Cache[K, V]) Remove(key K) bool {
	e, ok := c.items[key]
	if ok {
		c.remove(e)
	}
	return ok
}

// RemoveFunc drops every entry for which drop returns true, and returns how
// many it dropped. It visits every entry.
func (c *Cache[K, V]) RemoveFunc(drop func(K, V) bool) int {
	n := 0
	for e := c.mru; e != nil; {
		next := e.next
		if drop(e.key, e.value) {
			c.remove(e)
			n++
		}
		e = next
	}
	return n
}

// Clear drops every entry. The counters are kept.
func (c *Cache[K, V]) Clear() {
	c.items, c.removed = make(map[K]*entry[K, V]), 0
	c.mru, c.lru, c.newest, c.oldest = nil, nil, nil, nil
}

func (c *Cache[K, V]) remove(e *entry[K, V]) {
	delete(c.items, e.key)
	c.removed++
	c.unlinkUse(e)
	c.unlinkAge(e)
}

// touch makes e the most recently used entry.
func (c *Cache[K, V]) touch(e *entry[K, V]) {
	if c.mru == e {
		return
	}
	c.unlinkUse(e)
	c.pushUse(e)
}

func (c *Cache[K, V]) pushUse(e *entry[K, V]) {
	e.prev, e.next = nil, c.mru
	if c.mru != nil {
		c.mru.prev = e
	}
	c.mru = e
	if c.lru == nil {
		c.lru = e
	}
}

func (c *Cache[K, V]) unlinkUse(e *entry[K, V]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.mru = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.lru = e.prev
	}
	e.prev, e.next = nil, nil
}

func (c *Cache[K, V]) pushAge(e *entry[K, V]) {
	e.newer, e.older = nil, c.newest
	if c.newest != nil {
		c.newest.newer = e
	}
	c.newest = e
	if c.oldest == nil {
		c.oldest = e
	}
}

func (c *Cache[K, V]) unlinkAge(e *entry[K, V]) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		c.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		c.oldest = e.newer
	}
	e.older, e.newer = nil, nil
}
