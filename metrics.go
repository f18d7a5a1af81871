// Layer 1, math and models: what the limiter reports: acquire outcomes, the
// Metrics hook, the caches' names, events and statistics, and the logger.

package limiter

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// This file holds the observability options: structured logging of the
// limiter's decisions ([Options.Logger]) and a metrics hook ([Options.Metrics]).
// Both are off by default and then cost one nil check per event.

// This file holds the bounds of the limiter's per-key caches: their
// statistics and their metrics (their default ceilings and age limits,
// defaultConfigCacheSize and the like, are with the limiter's other
// defaults).
//
// Every structure a RateLimiter keeps per entity or per bucket is bounded
// in size and age, so that a service that sees a steady stream of new keys
// for weeks keeps a flat heap:
//
//   - the config cache (stored limits, negative entries included): at most
//     [Options.ConfigCacheSize] slots, each for [Options.ConfigCacheTTL];
//   - the entity cache (cascade settings and shard counts, the
//     speculative path's hints): at most [Options.EntityCacheSize]
//     entities, each for [Options.EntityCacheTTL];
//   - the over-limit cache, when on: at most [Options.OverLimitCacheSize]
//     buckets, each for at most [Options.OverLimitCacheMaxWait];
//   - group commit's per-item queues exist only while a write for the
//     item is in flight, so they are bounded by the number of concurrent
//     callers and never outlive the write.
//
// When a cache is full, an expired entry makes room first, else the least
// recently used one. Nothing runs in the background: expiry is checked on
// read, and each insertion drops a few expired entries. Eviction changes
// cost, never correctness: every entry is a copy of something stored, and a
// key that comes back is read again.

// AcquireOutcome classifies how one [RateLimiter.Acquire] ended, for
// [Metrics.AcquireDone].
type AcquireOutcome int

// Outcomes of [RateLimiter.Acquire].
const (
	// AcquireAdmitted: a lease was returned.
	AcquireAdmitted AcquireOutcome = iota
	// AcquireRateLimited: a limit refused (*RateLimitExceededError).
	AcquireRateLimited
	// AcquireFailOpen: the backend failed and the on-unavailable mode was
	// allow, so a no-op lease was returned.
	AcquireFailOpen
	// AcquireUnavailable: the backend failed and the on-unavailable mode was
	// block (*UnavailableError).
	AcquireUnavailable
	// AcquireInvalid: the input was invalid or no limits are configured
	// (*ValidationError).
	AcquireInvalid
	// AcquireCanceled: the context was canceled or its deadline passed.
	AcquireCanceled
	numAcquireOutcomes
)

var acquireOutcomeNames = [numAcquireOutcomes]string{
	"admitted", "rate_limited", "fail_open", "unavailable", "invalid", "canceled",
}

// String returns the outcome's name, e.g. "rate_limited".
func (o AcquireOutcome) String() string {
	if o < 0 || o >= numAcquireOutcomes {
		return fmt.Sprintf("AcquireOutcome(%d)", int(o))
	}
	return acquireOutcomeNames[o]
}

// Metrics receives measurements from a [RateLimiter] configured with
// [Options.Metrics]. Its methods are called synchronously on the request path,
// from many goroutines at once: they must be safe for concurrent use, fast,
// and must not block. The package otelmetrics implements it with
// OpenTelemetry instruments.
//
// Latencies are wall-clock durations measured with [time.Now], whatever
// clock [Options.Clock] sets for the bucket math.
type Metrics interface {
	// AcquireDone is called once per [RateLimiter.Acquire] (and so once per
	// attempt of [RateLimiter.Wait], and per [RateLimiter.Do]) when it
	// returns, with how it ended and how long it took, validation
	// included. ctx is the caller's.
	AcquireDone(ctx context.Context, outcome AcquireOutcome, latency time.Duration)
	// SpeculativeOutcome is called once for each outcome counted by
	// [RateLimiter.Stats], as it is counted: once per acquire
	// that tries the speculative path, and once more for each round it
	// runs again after a refusal of one item while its write to the other
	// (a cascade's child or parent) had applied.
	SpeculativeOutcome(outcome store.SpeculativeOutcome)
	// StoreCall is called after every bucket operation and config load
	// the limiter and its leases make on the repository, with its latency
	// and error. An error matching [store.ErrConditionFailed] is a normal
	// outcome (a refused conditional write); [store.ErrTransactionConflict] is
	// retried. Administrative calls are not reported, nor the calls the
	// open circuit breaker refused (they never reached the store).
	StoreCall(ctx context.Context, op store.StoreOp, latency time.Duration, err error)
}

// CacheName names one of the per-key caches of a [RateLimiter], for
// [Options.ConfigCacheSize], [RateLimiter.Stats] and [CacheMetrics].
type CacheName int

// The per-key caches of a RateLimiter.
const (
	// CacheConfigs holds stored limits per config slot (entity and
	// resource, entity default, resource, system), negative entries
	// included ([Options.ConfigCacheTTL]).
	CacheConfigs CacheName = iota
	// CacheEntities holds per entity its cascade settings and the shard
	// count of its buckets ([Options.EntityCacheTTL]).
	CacheEntities
	// CacheOverLimit holds buckets found exhausted ([Options.OverLimitCacheMaxWait]).
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
// to [Options.Metrics] implements it too, the limiter reports the lookups and
// evictions of its per-key caches. Like Metrics, it is called synchronously
// on the request path, from many goroutines at once, never with a lock
// held: it must be safe for concurrent use, fast, and must not block.
//
// What a lookup is depends on the cache: for [CacheConfigs], one config
// slot (an acquire looks up to four); for [CacheEntities], one entity's
// cascade settings; for [CacheOverLimit], one bucket (an acquire on a
// cascading entity looks up two). The same counts, since the limiter was
// created, are returned by [RateLimiter.Stats].
type CacheMetrics interface {
	// CacheEvent reports n events of one kind in one cache.
	CacheEvent(cache CacheName, event CacheEvent, n int64)
}

// IndexMetrics receives what the DynamoDB repository's index queries drop
// ([DynamoDBOptions].Metrics): entries whose item lies in another
// namespace (the store behind [DynamoDBRepository] counts them: ForeignIndexItems). It is called
// synchronously from many goroutines at once: it must be safe for
// concurrent use, fast, and must not block. The package otelmetrics
// implements it.
type IndexMetrics interface {
	// ForeignIndexItems reports n entries of index (GSI1 to GSI4) that a
	// query found in the namespace's partition of the index but whose item
	// belongs to another namespace; they were dropped.
	ForeignIndexItems(ctx context.Context, index string, n int64)
}

// CircuitMetrics is an optional extension of [Metrics]: when the value
// given to [Options.Metrics] implements it too, the limiter reports the
// openings and closings of its circuit breaker ([Options.CircuitFailures]).
// Like Metrics, it is called synchronously, from any goroutine, never with
// a lock held: it must be safe for concurrent use, fast, and must not
// block.
type CircuitMetrics interface {
	// CircuitChange reports that the breaker of the store named store
	// ([Repository] Name: the DynamoDB table, "redis", ...) opened (open:
	// store calls fail at once; a probe that fails keeps it open and is not
	// reported) or closed again (a probe succeeded).
	CircuitChange(store string, open bool)
}

// cacheEventFunc is CacheMetrics.CacheEvent, or nil.
type cacheEventFunc func(cache CacheName, event CacheEvent, n int64)

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
	// MaxEntries is the cache's ceiling ([Options.ConfigCacheSize]).
	MaxEntries int
	// TTL is the longest an entry is kept; zero means the config cache is
	// disabled, or an entity cache without age limit.
	TTL time.Duration
}

// observer holds the optional logger and metrics of a RateLimiter.
type observer struct {
	log     *slog.Logger // nil: no logging
	metrics Metrics      // nil: no metrics
}

// logging reports whether a record at level would be written.
func (o *observer) logging(ctx context.Context, level slog.Level) bool {
	return o.log != nil && o.log.Enabled(ctx, level)
}

type specStats struct {
	attempts atomic.Int64
	counts   [len(store.SpeculativeStats{}.Counts)]atomic.Int64
	// hook, when set (Options.Metrics), hears every counted outcome.
	hook func(store.SpeculativeOutcome)
}

func (s *specStats) count(o store.SpeculativeOutcome) {
	s.counts[o].Add(1)
	if s.hook != nil {
		s.hook(o)
	}
}
