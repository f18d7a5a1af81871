package limiter

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// The over-limit cache (opt-in, [WithOverLimitCache]): local refusals for a
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
// Entries expire lazily; the cache holds at most [DefaultOverLimitCacheSize]
// of them ([WithCacheSize]), the least recently used going first, so memory
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

// WithOverLimitCache turns the over-limit cache on (see overlimit.go): after
// a fast rejection with Retry-After R, acquires on that bucket that the
// stored state, refilled to now, still cannot satisfy are refused locally,
// without a DynamoDB call, until min(R, maxWait). A commit or rollback by
// this limiter on the bucket clears it. It may refuse for up to maxWait
// what another process's refunds would have allowed (bounded
// under-admission); it never over-admits. maxWait ≤ 0 turns it off, the
// default. It holds at most [DefaultOverLimitCacheSize] buckets
// ([WithCacheSize]).
func WithOverLimitCache(maxWait time.Duration) Option {
	return func(rl *RateLimiter) { rl.overLimitMaxWait = maxWait }
}

// OverLimitCacheHits returns how many acquires the over-limit cache refused
// without a DynamoDB call.
func (rl *RateLimiter) OverLimitCacheHits() int64 {
	if rl.olc == nil {
		return 0
	}
	return rl.olc.hits.Load()
}

// initHotKeys sets up group commit and the over-limit cache from the
// options.
func (rl *RateLimiter) initHotKeys() {
	if !rl.noGroupCommit {
		rl.gc = newGroupCommit(&rl.store, &rl.bg)
	}
	if rl.overLimitMaxWait > 0 {
		rl.olc = newOverLimitCache(rl.overLimitMaxWait, rl.cacheSizes[CacheOverLimit], rl.cacheEvent)
	}
}

// overLimitRefuse refuses an acquire locally when a cached exhausted bucket
// of the entity, or of the parent it cascades to, refilled to now, cannot
// satisfy consume. It returns nil when the store must decide.
func (rl *RateLimiter) overLimitRefuse(entityID, resource string, consume Consume) error {
	c := rl.olc
	if c == nil {
		return nil
	}
	info, _ := rl.ents.get(entityID)
	parentID := info.cascadeParent(entityID)
	now := rl.nowMs()
	child, cok := c.get(store.BucketKey{EntityID: entityID, Resource: resource}, now)
	var parent *store.Bucket
	pok := false
	if parentID != "" {
		parent, pok = c.get(store.BucketKey{EntityID: parentID, Resource: resource}, now)
	}
	if !cok && !pok {
		return nil
	}
	pos := positive(consume)
	refused := false
	var statuses []LimitStatus
	for _, b := range []*store.Bucket{child, parent} {
		if b == nil {
			continue
		}
		ok, st := wouldRefillSatisfy(b.States, pos, now)
		refused = refused || !ok
		statuses = append(statuses, st...)
	}
	if !refused {
		return nil
	}
	c.hits.Add(1)
	return newRateLimitExceededError(statuses)
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

// overLimitRemember caches b, whose stored state refused an acquire at now
// with err (a fast rejection), until min(err.RetryAfter, maxWait).
func (rl *RateLimiter) overLimitRemember(b *store.Bucket, now int64, err *RateLimitExceededError) {
	c := rl.olc
	if c == nil || b == nil || b.ShardCount > 1 || b.Key.Shard != 0 || err.RetryAfter <= 0 {
		return
	}
	wait := min(err.RetryAfter, c.maxWait)
	key := store.BucketKey{EntityID: b.Key.EntityID, Resource: b.Key.Resource}
	c.mu.Lock()
	evicted := c.entries.Add(key, overLimitEntry{bucket: b, expiresMs: now + wait.Milliseconds()}, time.UnixMilli(now))
	c.mu.Unlock()
	if evicted > 0 && c.event != nil {
		c.event(CacheOverLimit, CacheEviction, int64(evicted))
	}
}

// overLimitSeen clears the entry of the bucket w adjusts: a commit or
// rollback by this process may have given tokens back.
func (rl *RateLimiter) overLimitSeen(w store.BucketWrite) {
	c := rl.olc
	if c == nil {
		return
	}
	c.mu.Lock()
	c.entries.Remove(store.BucketKey{EntityID: w.Key.EntityID, Resource: w.Key.Resource})
	c.mu.Unlock()
}

// overLimitReset forgets every entry: stored limits changed through this
// limiter, so a kept item's limits may be stale.
func (rl *RateLimiter) overLimitReset() {
	c := rl.olc
	if c == nil {
		return
	}
	c.mu.Lock()
	c.entries.Clear()
	c.mu.Unlock()
}
