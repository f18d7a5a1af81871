// Layer 4, mechanics: the over-limit cache, which refuses requests for a
// bucket just found exhausted without a store call.

package limiter

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// The over-limit cache (opt-in, [Options.OverLimitCacheMaxWait]): local refusals for a
// bucket that was just found exhausted, in the spirit of envoy's rate-limit
// service, which caches over-limit keys locally.
//
// A refused speculative write is billed as a write by DynamoDB, and clients
// that keep retrying an exhausted bucket (a denial storm) cost one such
// write per attempt. When the speculative path rejects an acquire from the
// stored item (a fast rejection: refill to now would not help), the limiter
// keeps that item, as it was read, until min(Retry-After, maxWait). Later
// acquires on the same (entity, resource) — or whose parent is that bucket —
// are decided against the kept item refilled to their own now, with the same
// bucket math as the fast rejection (wouldRefillSatisfy): if it still cannot
// satisfy the request, they are refused locally with the same
// *[RateLimitExceededError] (statuses of the bucket that refused, and a
// Retry-After computed for that request); otherwise they go to the store as
// usual. A refused write changes nothing in the item, so as long as no
// other writer touches it, the local decision is exactly the one the store
// path would make.
//
// # Bounded under-admission
//
// Another process (or another limiter) may give tokens back, or the limits
// may be raised, after the item was kept; this process then refuses
// requests the store would have admitted, for at most maxWait after the
// refusal that filled the entry (and never past the refused request's own
// Retry-After). Consumption by others only makes the kept item optimistic:
// such requests go to the store and are decided there. A commit or rollback
// through this limiter on the bucket clears its entry at once, and a change
// of stored limits (or an entity deletion) through this limiter clears the
// whole cache. The cache
// never admits anything: it can only refuse.
//
// Only unsharded buckets are cached (a sharded bucket's shards differ).
// Entries expire lazily; the cache holds at most
// [Options.OverLimitCacheSize] of them, the least recently used going first, so memory
// stays bounded whatever the number of keys.

// overLimitCache holds, per unsharded bucket item (shard 0), the item seen
// at a fast rejection and when to forget it.
type overLimitCache struct {
	maxWait time.Duration
	event   cacheEventFunc // nil: events are not reported
	hits    atomic.Int64   // acquires refused locally
	// found and missed count lookups (CacheStats).
	found, missed atomic.Int64

	mu      sync.Mutex // guards entries
	entries *lru.Cache[store.BucketKey, overLimitEntry]
}

// newOverLimitCache returns an empty cache of at most maxEntries buckets,
// each kept at most maxWait.
func newOverLimitCache(maxWait time.Duration, maxEntries int, event cacheEventFunc) *overLimitCache {
	return &overLimitCache{maxWait: maxWait, event: event, entries: lru.New[store.BucketKey, overLimitEntry](maxEntries, maxWait)}
}

type overLimitEntry struct {
	bucket    *store.Bucket
	expiresMs int64
}

// get returns the live entry of key, dropping it when expired.
func (c *overLimitCache) get(key store.BucketKey, now int64) (*store.Bucket, bool) {
	c.mu.Lock()
	e, ok := c.entries.Get(key, time.UnixMilli(now))
	if ok && now >= e.expiresMs {
		c.entries.Remove(key)
		ok = false
	}
	c.mu.Unlock()
	ev := CacheMiss
	if ok {
		ev = CacheHit
		c.found.Add(1)
	} else {
		c.missed.Add(1)
	}
	if c.event != nil {
		c.event(CacheOverLimit, ev, 1)
	}
	return e.bucket, ok
}

func (c *overLimitCache) stats() CacheStats {
	c.mu.Lock()
	size, evictions, maxEntries := c.entries.Len(), c.entries.Evictions(), c.entries.MaxEntries()
	c.mu.Unlock()
	return CacheStats{Hits: c.found.Load(), Misses: c.missed.Load(), Evictions: evictions, Size: size, MaxEntries: maxEntries, TTL: c.maxWait}
}
