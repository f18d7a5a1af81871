// Layer 4, mechanics: the RateLimiter, its options and New, which put the
// rules and the mechanics together.

package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// RateLimiter rate-limits calls per (entity, resource) against a
// [Repository]. It owns every rule — validation, the precedence of stored
// limits and their cache, bucket math and TTLs, audit events — and keeps
// the per-key state of this process (config cache, entity cache, group
// commit, over-limit cache); the repository only stores. It is safe for
// concurrent use. The zero value is not usable; call [New].
//
// # Guarantees
//
// The limit an operator sets is the limit enforced. No request is admitted
// beyond a limit's capacity plus its refill, under any concurrency, on any
// backend. A limit change takes effect on the next acquire (in another
// process, within its config cache TTL). Invalid input — a negative amount,
// a limit name no limit has, an entity that would be its own ancestor — is
// a *[ValidationError] before anything is written. An Acquire returns
// within its context's deadline even when the store hangs, and each store
// call ends within the store timeout ([WithStoreTimeout]); in allow mode
// the no-op lease comes before the deadline, and once the store failed
// repeatedly the circuit breaker ([WithCircuitBreaker]) decides at once.
// What a write took after its caller gave up is given back when its
// answer comes within the store timeout: the consumption counters equal
// what the committed leases consumed.
//
// # Options
//
// The limiter and each call take With… options ([Option], [AcquireOption]):
// there are many, they compose per call, and most users set none.
// Constructors of backends and helpers take a function over an options
// struct (func(*DynamoDBOptions), func(*httplimit.Options)), the AWS SDK's
// style: a backend's options are configuration, set once.
//
// # Hot keys
//
// Group commit ([WithGroupCommit], on by default) merges concurrent writes
// to one bucket item from this process into one conditional write; the
// over-limit cache ([WithOverLimitCache], opt-in) refuses requests for a
// bucket just found exhausted without a store call, for a bounded time.
// [WithLogger] logs the limiter's decisions with log/slog and [WithMetrics]
// reports acquire outcomes, latencies and store calls (package otelmetrics
// reports them to OpenTelemetry).
//
// # Memory
//
// Everything a RateLimiter keeps per key (stored limits, entity hints,
// exhausted buckets) is bounded in size and in age, so that a long-running
// service that sees a steady stream of new keys keeps a flat heap:
// [WithCacheSize], [WithEntityCacheTTL], [RateLimiter.CacheStats] and
// [CacheMetrics]. An evicted key costs a read when it comes back, never a
// wrong decision.
//
// # Units
//
// Limits are configured in whole tokens and whole-second periods. Buckets
// are stored in millitokens (tokens × 1000) and epoch milliseconds, as
// package store's BucketState exposes them.
type RateLimiter struct {
	rules // the repository, the clock, the caches and settings of the rules

	speculative bool
	// pairWrites is set when an acquire of one or two bucket items is
	// cheaper as one conditional write per item than as one atomic batch
	// (DynamoDB; see itemsShape).
	pairWrites bool
	slotTTL    time.Duration // of in-flight limits; 0 is DefaultSlotTTL
	slotWaits  slotWaiters   // the Waits refused by an in-flight limit, per item
	slotViews  slotViews     // the free slots those Waits read, per item
	slotItems  slotGens      // the generations of in-flight slots items hold
	// slotGenFlights holds the acquires preparing an item's generations
	// (addSlotGens), per item.
	slotGenFlights slowFlights
	stats          specStats
	slowFlights    slowFlights // read-then-write acquires in flight, per bucket item
	// slotPoll, when positive, is the longest a slot keeper sleeps before
	// it reads the clock again; zero sleeps until the renewal is due. Only
	// tests set it: their clock (WithClock) jumps ahead of the real time
	// a keeper's timer counts.
	slotPoll time.Duration

	// Bounds of the per-key caches.
	cacheSizes   [numCaches]int
	cacheSizeSet [numCaches]bool
	entityTTL    time.Duration
	cacheEvent   cacheEventFunc // nil: cache events are not reported

	// Hot keys: group commit and the over-limit cache.
	noGroupCommit    bool
	overLimitMaxWait time.Duration
	gc               *groupCommit // nil when group commit is off
	backgroundCommit bool
	commits          *commits        // nil when background commit is off
	olc              *overLimitCache // nil when the over-limit cache is off

	// The store's bound and circuit breaker.
	storeTimeout    time.Duration
	circuitFailures int
	circuitCooldown time.Duration

	gate closeGate // the calls in progress, and Close
}

// closeGate counts the calls of the limiter in progress and refuses new
// ones once Close started.
type closeGate struct {
	// state is the number of calls in progress, plus gateClosed once
	// Close started.
	state atomic.Int64
	// life ends when Close starts: it wakes Wait's sleeps.
	life     context.Context
	stopLife context.CancelFunc
	// drained is closed once Close started and no call is in progress.
	drained   chan struct{}
	drainOnce sync.Once
	closeOnce sync.Once
	// closed is closed when Close has ended.
	closed chan struct{}
}

// gateClosed is added to closeGate.state by Close: far above any number
// of calls in progress.
const gateClosed = 1 << 62

// closeWait returns how long Close waits for the calls in progress: every
// store call they make ends within the store timeout of Close's start (the
// last epoch, storeBound.closing), and they get as long again for what
// they do between calls. Without a store timeout, closeWaitUnbounded.
func (rl *RateLimiter) closeWait() time.Duration {
	if d := rl.store.bound.d; d > 0 {
		return 2 * d
	}
	return closeWaitUnbounded
}

// closeWaitUnbounded is closeWait when store calls are not bounded
// (WithStoreTimeout of zero or less).
const closeWaitUnbounded = 20 * time.Second

func (g *closeGate) init() {
	g.life, g.stopLife = context.WithCancel(context.Background())
	g.drained = make(chan struct{})
	g.closed = make(chan struct{})
}

// enter starts a call of the limiter: ErrClosed once Close started;
// otherwise the caller calls exit when the call ends.
func (rl *RateLimiter) enter() error {
	if rl.gate.state.Add(1) >= gateClosed {
		rl.exit()
		return ErrClosed
	}
	return nil
}

// exit ends a call started by enter.
func (rl *RateLimiter) exit() {
	if rl.gate.state.Add(-1) == gateClosed {
		rl.gate.drainOnce.Do(func() { close(rl.gate.drained) })
	}
}

// Defaults of the limiter's options, and the default ceilings and age
// limits of its per-key caches.
const (
	// DefaultConfigCacheTTL is how long resolved stored limits are reused
	// ([WithConfigCacheTTL]).
	DefaultConfigCacheTTL = time.Minute
	// DefaultBucketTTLMultiplier sets how long idle buckets of default
	// config live: their time to fill from empty times this
	// ([WithBucketTTL]).
	DefaultBucketTTLMultiplier = 7
	// DefaultAuditRetention is how long audit events are kept
	// ([WithAuditRetention]).
	DefaultAuditRetention = 90 * 24 * time.Hour
	// DefaultStoreTimeout bounds each store call of an acquire, a lease or
	// a give-back ([WithStoreTimeout]), unless $ZAEL_STORE_TIMEOUT
	// ([EnvStoreTimeout]) sets another default.
	DefaultStoreTimeout = 500 * time.Millisecond
	// EnvStoreTimeout names the environment variable that, when set to a
	// duration (time.ParseDuration: "2s", "750ms"), replaces
	// [DefaultStoreTimeout]; [WithStoreTimeout] still wins. It lets a
	// deployment or a test run on a loaded machine (DynamoDB Local warming
	// up, say) widen the bound without a code change.
	EnvStoreTimeout = "ZAEL_STORE_TIMEOUT"
	// DefaultCircuitFailures is the minimum number of store calls, half of
	// them failed or more, that open the circuit breaker
	// ([WithCircuitBreaker]).
	DefaultCircuitFailures = 5
	// DefaultCircuitCooldown is how long the circuit breaker stays open
	// before a probe ([WithCircuitBreaker]).
	DefaultCircuitCooldown = time.Second
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

// New returns a RateLimiter backed by repo. Nil options are skipped.
//
// A nil repo (also a nil pointer of a repository type, such as the
// *[DynamoDBRepository] of a failed [OpenDynamoDB] whose error went
// unchecked) is a programming error: New panics with "limiter: New: nil
// repository", as [regexp.MustCompile] and net/http's Handle do on misuse
// at setup, rather than failing later at the first call with a nil
// dereference.
func New(repo Repository, opts ...Option) *RateLimiter {
	if isNil(repo) {
		panic(fmt.Sprintf("limiter: New: nil repository (%T)", repo))
	}
	rl := &RateLimiter{
		rules: rules{
			repo:          repo,
			now:           time.Now,
			sleep:         sleepContext,
			intN:          rand.IntN,
			ttlMultiplier: DefaultBucketTTLMultiplier,
			configTTL:     DefaultConfigCacheTTL,
		},
		speculative:     true,
		entityTTL:       DefaultEntityCacheTTL,
		storeTimeout:    DefaultStoreTimeout,
		circuitFailures: DefaultCircuitFailures,
		circuitCooldown: DefaultCircuitCooldown,
	}
	if d, err := time.ParseDuration(os.Getenv(EnvStoreTimeout)); err == nil {
		rl.storeTimeout = d
	}
	for _, o := range opts {
		if o != nil {
			o(rl)
		}
	}
	if rl.auditRetention <= 0 {
		rl.auditRetention = DefaultAuditRetention
	}
	rl.audit, _ = repo.(store.AuditLog)
	rl.store.init(repo, rl.obs.metrics, rl.storeTimeout, rl.circuitFailures, rl.circuitCooldown)
	rl.store.brk.changed = rl.circuitChanged
	if rl.store.spec == nil {
		rl.speculative = false
	}
	_, rl.pairWrites = repo.(*DynamoDBRepository)
	if rl.obs.metrics != nil {
		rl.stats.hook = rl.obs.metrics.SpeculativeOutcome
	}
	rl.initCaches()
	rl.initHotKeys()
	rl.gate.init()
	return rl
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Repository returns the repository the limiter uses.
func (rl *RateLimiter) Repository() Repository { return rl.repo }

// Now returns the limiter's reading of the clock ([WithClock]; the system
// clock by default): the time its acquires and calendar periods are
// computed at.
func (rl *RateLimiter) Now() time.Time { return rl.now() }

// Close shuts the limiter down. It is safe to call while other goroutines
// use the limiter, and more than once (a later call waits for the first
// and returns nil). From the moment it starts, every new call that reads
// or writes buckets or stored settings (Acquire, AcquireAll, Wait, Do,
// Available, TimeUntilAvailable, Lease.Commit, Lease.Rollback,
// LowerTokens, Reset and the administrative writes) fails with
// [ErrClosed] and writes nothing, and a Wait sleeping for a refill wakes
// with it; every store call started from then on ends within one store
// timeout ([WithStoreTimeout]) of the call to Close. Close then waits for
// the calls in progress to end (at most twice the store timeout), writes
// the adjustments queued by background commits ([WithBackgroundCommit]),
// and waits until every write the limiter still runs for callers that gave
// up has ended and its tokens were given back: with a store that does not
// answer, it returns within about the store timeout. After it returns, no
// goroutine of the limiter runs. A lease acquired before Close can no
// longer be committed or rolled back: its acquire stays charged.
func (rl *RateLimiter) Close() error {
	g := &rl.gate
	first := false
	g.closeOnce.Do(func() { first = true })
	if !first {
		<-g.closed
		return nil
	}
	g.stopLife()
	rl.store.bound.closing()
	if g.state.Add(gateClosed) == gateClosed {
		g.drainOnce.Do(func() { close(g.drained) })
	}
	t := time.NewTimer(rl.closeWait())
	select {
	case <-g.drained:
	case <-t.C:
	}
	t.Stop()
	if rl.commits != nil {
		rl.commits.close()
	}
	rl.bg.wait()
	rl.store.bound.close()
	rl.store.brk.stop()
	close(g.closed)
	return nil
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
	if rl.backgroundCommit {
		rl.commits = newCommits(rl)
		rl.store.pending = rl.commits
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
