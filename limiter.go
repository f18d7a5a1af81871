// Layer 4, mechanics: the RateLimiter, its options and New, which put the
// rules and the mechanics together.

package limiter

import (
	"context"
	"fmt"
	"log/slog"
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
	rules // the repository, the clock, the caches and settings of the rules (rules.go)

	speculative bool
	stats       specStats
	slowFlights slowFlights // read-then-write acquires in flight, per bucket item

	// Bounds of the per-key caches.
	cacheSizes   [numCaches]int
	cacheSizeSet [numCaches]bool
	entityTTL    time.Duration
	cacheEvent   cacheEventFunc // nil: cache events are not reported

	// Hot keys (groupcommit.go, overlimit.go).
	noGroupCommit    bool
	overLimitMaxWait time.Duration
	gc               *groupCommit // nil when group commit is off
	backgroundCommit bool
	commits          *commits        // nil when background commit is off
	olc              *overLimitCache // nil when the over-limit cache is off

	// The store's bound and circuit breaker (storebound.go, breaker.go).
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
	// DefaultCircuitFailures is how many consecutive failed store calls
	// open the circuit breaker ([WithCircuitBreaker]).
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

// Option configures a [RateLimiter].
type Option func(*RateLimiter)

// WithSpeculativeWrites turns the speculative fast path (one conditional
// write, no read) on or off. It is on by default; it needs a repository
// that implements [store.SpeculativeStore].
func WithSpeculativeWrites(on bool) Option { return func(rl *RateLimiter) { rl.speculative = on } }

// WithClock sets the clock of the bucket math, TTLs, the config cache and
// audit timestamps. Nil means time.Now, the default.
func WithClock(now func() time.Time) Option {
	return func(rl *RateLimiter) {
		if now != nil {
			rl.now = now
		}
	}
}

// WithConfigCacheTTL sets how long stored limits, once read, are reused
// before they are read again ([DefaultConfigCacheTTL] by default). A
// change made through this limiter takes effect at once; a change made by
// another process is seen within this time. Zero or less disables the
// cache: every acquire reads the configs. The cache holds at most
// [DefaultConfigCacheSize] slots ([WithCacheSize]).
func WithConfigCacheTTL(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.configTTL = max(d, 0) }
}

// WithBucketTTL sets how long an idle bucket of default config (resource
// or system level) lives: its time to fill from empty times multiplier
// ([DefaultBucketTTLMultiplier] by default). Buckets of entity-level
// config never expire. Zero or less disables bucket TTLs.
func WithBucketTTL(multiplier int64) Option {
	return func(rl *RateLimiter) { rl.ttlMultiplier = multiplier }
}

// WithPrincipal sets who entity and limit changes are audited as made by
// (an ARN, or an identifier), when the context carries none (see
// [ContextWithPrincipal]). Empty, the default, records no principal.
func WithPrincipal(principal string) Option {
	return func(rl *RateLimiter) { rl.principal = principal }
}

// WithAuditRetention sets how long audit events are kept
// ([DefaultAuditRetention] by default; zero or less means the default).
func WithAuditRetention(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.auditRetention = d }
}

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

// WithLogger makes the limiter log its decisions to logger (nil, the
// default, logs nothing and costs nothing):
//
//   - Debug "limiter: speculative fallback": the speculative path handed
//     over to the read-then-write path, with the outcome (e.g.
//     bucket_missing, refill_would_help).
//   - Info "limiter: shard count doubled": a bucket took more than about
//     1000 writes/s and its shard count was doubled.
//   - Info "limiter: transaction conflict, retrying": a multi-item write
//     collided and is retried after the logged backoff.
//   - Warn "limiter: backend unavailable": the store failed during an
//     acquire, with the on-unavailable decision (allow: a no-op lease;
//     block: an *UnavailableError) and the cause; Debug while the circuit
//     breaker is open (the cause is then [ErrCircuitOpen]).
//   - Warn "limiter: circuit open": consecutive store calls failed and the
//     circuit breaker opened ([WithCircuitBreaker]); Info "limiter:
//     circuit probe failed" when a probe failed and it opened again, Debug
//     "limiter: circuit half-open" when a probe goes, Info "limiter:
//     circuit closed" when one succeeded.
//   - Warn "limiter: background commit failed": an adjustment queued by
//     Commit ([WithBackgroundCommit]) failed or may not have applied.
//   - Debug "limiter: wait": [RateLimiter.Wait] sleeps before retrying.
//
// Errors the limiter returns are not logged otherwise (the caller decides): rate
// limiting is not logged.
func WithLogger(logger *slog.Logger) Option {
	return func(rl *RateLimiter) { rl.obs.log = logger }
}

// WithMetrics makes the limiter report acquire outcomes and latencies,
// speculative outcomes and repository calls to m (see [Metrics]). Nil, the
// default, reports nothing and costs nothing.
func WithMetrics(m Metrics) Option {
	return func(rl *RateLimiter) { rl.obs.metrics = m }
}

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
	close(g.closed)
	return nil
}

// WithStoreTimeout bounds every call the limiter makes on its repository
// for an acquire, a lease, a background commit or a give-back
// ([DefaultStoreTimeout] by default, or $ZAEL_STORE_TIMEOUT; up to a
// tenth more for a given call).
// On DynamoDB the bound covers the whole call, the SDK's retries and their
// backoff included (a write answered with a 5xx after it applied is sent
// again and charged once, see [DynamoDBRepository]). A call that does not
// end in time fails as unavailable (and counts as a failure of the store
// for [WithCircuitBreaker]); a write that got no answer may have applied
// all the same, and what it took then stays taken. A caller never waits
// past its own context's deadline; in allow mode, when that deadline comes
// first, the acquire stops waiting a few milliseconds before it and
// answers with a no-op lease (block mode returns the context's error at
// the deadline). Zero or less: no bound (calls wait as long as their
// context lets them). On Redis the bound cuts a call only on a client with
// ContextTimeoutEnabled; otherwise the client's read and write timeouts
// bound it. Administrative methods (limits, entities,
// audit, usage) are not bounded: their context decides.
func WithStoreTimeout(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.storeTimeout = d }
}

// WithCircuitBreaker sets the circuit breaker of the limiter's store calls
// ([DefaultCircuitFailures] and [DefaultCircuitCooldown] by default): after
// failures consecutive calls failed for want of the store (no answer
// within [WithStoreTimeout], a refused or broken connection, a 5xx), store
// calls fail at once with [ErrCircuitOpen], and acquires decide at once by
// their on-unavailable mode (allow: a no-op lease; block: an
// *[UnavailableError]) without calling the store. After cooldown one call
// goes to the store as a probe (the others still fail at once): its
// success closes the breaker, its failure opens it for another cooldown.
// Refusals of a working store (a limit, a refused conditional write,
// throttling, a missing entity, access denied) are not failures. The
// changes are logged ([WithLogger]) and reported to a [CircuitMetrics].
// failures ≤ 0 turns the breaker off; cooldown ≤ 0 means the default.
func WithCircuitBreaker(failures int, cooldown time.Duration) Option {
	return func(rl *RateLimiter) {
		rl.circuitFailures = failures
		rl.circuitCooldown = cooldown
		if cooldown <= 0 {
			rl.circuitCooldown = DefaultCircuitCooldown
		}
	}
}

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

// WithGroupCommit turns group commit on or off (see groupcommit.go): while
// a write for a bucket item is in flight, this limiter's later acquires,
// commits and rollbacks for the same item queue and go out together. It
// never admits more than the requests one at a time would, and never
// refuses a request that would fit alone: when a batch is refused, each
// member is decided alone on the item the store returned, or written again
// alone. It is on by default; sequential use makes exactly the calls it
// makes without it.
func WithGroupCommit(on bool) Option { return func(rl *RateLimiter) { rl.noGroupCommit = !on } }
