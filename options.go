// Layer 4, the limiter: the options of New and of each acquire.

package limiter

import (
	"log/slog"
	"os"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// Options configures [New]. New fills every field with its default
// before calling the option functions, so a function sees the defaults and
// changes only what it names:
//
//	rl := limiter.New(repo, func(o *limiter.Options) {
//		o.Logger = slog.Default()
//		o.StoreTimeout = 2 * time.Second
//	})
type Options struct {
	// Clock is the clock of the bucket math, TTLs, the config cache and
	// audit timestamps. Nil means time.Now, the default.
	Clock func() time.Time

	// Logger receives the limiter's decisions (nil, the default, logs
	// nothing and costs nothing):
	//
	//   - Debug "limiter: speculative fallback": the speculative path
	//     handed over to the read-then-write path, with the outcome (e.g.
	//     bucket_missing, refill_would_help).
	//   - Info "limiter: shard count doubled": a bucket took more than
	//     about 1000 writes/s and its shard count was doubled.
	//   - Info "limiter: transaction conflict, retrying": a multi-item
	//     write collided and is retried after the logged backoff.
	//   - Warn "limiter: backend unavailable": the store failed during an
	//     acquire, with the on-unavailable decision (allow: a lease that
	//     holds nothing; block: an *UnavailableError) and the cause; Debug
	//     while the circuit breaker is open (the cause is then
	//     [ErrCircuitOpen]).
	//   - Warn "limiter: circuit open": half of the store calls counted or
	//     more failed, and the circuit breaker opened; Info "limiter:
	//     circuit probe failed" when a probe failed and it opened again,
	//     Debug "limiter: circuit half-open" when a probe goes, Info
	//     "limiter: circuit closed" when one succeeded.
	//   - Warn "limiter: background commit failed": an adjustment queued
	//     by Commit (BackgroundCommit) failed or may not have applied.
	//   - Debug "limiter: wait": [RateLimiter.Wait] sleeps before retrying.
	//
	// Errors the limiter returns are not logged otherwise (the caller
	// decides): rate limiting is not logged.
	Logger *slog.Logger

	// Metrics receives acquire outcomes and latencies, speculative
	// outcomes and store calls (see [Metrics]). Nil, the default, reports
	// nothing and costs nothing.
	Metrics Metrics

	// StoreTimeout bounds every call the limiter makes on its store for
	// an acquire, a lease, a background commit or a give-back: 500 ms by
	// default, or $ZAEL_STORE_TIMEOUT when that holds a duration
	// (time.ParseDuration: "2s", "750ms"), which lets a deployment or a
	// test on a loaded machine widen the bound without a code change; up
	// to a tenth more for a given call. On DynamoDB the bound covers the
	// whole call, the SDK's retries and their backoff included (a write
	// answered with a 5xx after it applied is sent again and charged
	// once). A call that does not end in time fails as unavailable (and
	// counts as a failure of the store for the circuit breaker); a write
	// that got no answer may have applied all the same, and what it took
	// then stays taken. A caller never waits past its own context's
	// deadline; in allow mode, when that deadline comes first, the
	// acquire stops waiting a few milliseconds before it and answers with
	// a lease that holds nothing (block mode returns the context's error
	// at the deadline). Zero or less: no bound (calls wait as long as
	// their context lets them). On Redis the bound cuts a call only on a
	// client with ContextTimeoutEnabled; otherwise the client's read and
	// write timeouts bound it. Administrative calls ([Admin]) are not
	// bounded: their context decides.
	StoreTimeout time.Duration

	// CircuitFailures and CircuitCooldown set the circuit breaker of the
	// limiter's store calls (5 calls and 1 s by default). It counts the
	// store calls that failed for want of the store (no answer within
	// StoreTimeout, a refused or broken connection, a 5xx) and those
	// answered, over a window of 10 s (or ten store timeouts when longer)
	// from its oldest failure: when at least CircuitFailures calls are
	// counted and half of them or more failed (or so since the current
	// pause began), store calls fail at once with [ErrCircuitOpen], and
	// acquires decide at once by their on-unavailable mode (allow: a
	// lease that holds nothing; block: an *[UnavailableError]) without
	// calling the store. A store failing now and then among many answers
	// does not open it. After CircuitCooldown one call goes to the store
	// as a probe (the others still fail at once): its success closes the
	// breaker and empties the window, its failure opens it for another
	// cooldown. Calls that time out together are one pause of the store,
	// counted as one failure, placed by the calls' own bounds (not by when
	// a loaded machine gets round to counting their timeouts): in full
	// only once a call made after the pause showed times out too, or when
	// the store has answered no call made since it began by three fifths
	// of the store timeout after it showed. So one pause of 700 ms under
	// many concurrent callers fails the calls it caught and does not open
	// it, and a store that stops answering opens it in about 850 ms
	// (default store timeout). Refusals of a working store (a limit, a
	// refused conditional write, throttling, a missing entity, access
	// denied) are not failures. The changes are logged (Logger) and
	// reported to a [CircuitMetrics]. CircuitFailures ≤ 0 turns the
	// breaker off; CircuitCooldown ≤ 0 means the default.
	CircuitFailures int
	CircuitCooldown time.Duration

	// SpeculativeWrites turns the speculative fast path (one conditional
	// write, no read) on or off. It is on by default; it needs a store
	// that implements [store.SpeculativeStore].
	SpeculativeWrites bool

	// GroupCommit turns group commit on or off (see Hot keys in
	// [RateLimiter]): while a write for a bucket item is in flight, this
	// limiter's later acquires, commits and rollbacks for the same item
	// queue and go out together. It never admits more than the requests
	// one at a time would, and never refuses a request that would fit
	// alone: when a batch is refused, each member is decided alone on the
	// item the store returned, or written again alone. A batch's combined
	// write is decided at the limiter's time when it goes out (never
	// earlier than its members asked), as a request sent alone then would
	// be. It is on by default; sequential use makes exactly the calls it
	// makes without it.
	GroupCommit bool

	// BackgroundCommit turns background commit on or off (off by
	// default): Commit queues a lease's adjustment and returns at once;
	// the adjustment is written within a few milliseconds, and always
	// before this limiter's next read or write of the same bucket item
	// decides anything (folded into the next acquire's write when that is
	// exact: one write for both on DynamoDB). The limiter thus admits and
	// leaves balances exactly as with synchronous commits, with a
	// synchronous Commit's guarantees except that its error is logged and
	// counted instead of returned. Close writes the queued adjustments and
	// waits for them.
	BackgroundCommit bool

	// ConfigCacheTTL is how long stored limits, once read, are reused
	// before they are read again (1 minute by default). A change made
	// through this limiter takes effect at once; a change made by another
	// process is seen within this time. Zero or less disables the cache:
	// every acquire reads the configs.
	ConfigCacheTTL time.Duration
	// ConfigCacheSize is the ceiling of the config cache, in slots (20,000
	// by default). An acquire on an entity without its own limits keeps
	// two negative slots for it (resource-specific and _default_) and
	// shares the resource and system slots: the default holds the configs
	// of about 10,000 entities. Size it to twice the entities acquired
	// within ConfigCacheTTL, plus the entities with limits of their own
	// for each resource, and one slot per resource.
	ConfigCacheSize int

	// EntityCacheTTL is how long the entity cache trusts an entity's
	// cascade settings after reading them (10 minutes by default). They
	// do not change while the entity exists; the age limit bounds how
	// long this process may keep using the settings of an entity that
	// another process deleted and created again differently. Zero or less
	// means no age limit (only the ceiling bounds the cache).
	EntityCacheTTL time.Duration
	// EntityCacheSize is the ceiling of the entity cache, in entities
	// (10,000 by default): the entities acquired within EntityCacheTTL.
	// The speculative path reads an entity it does not hold (its record
	// with its item, one read) before its first write to it; with the
	// cache off (zero or less) it writes without that read.
	EntityCacheSize int

	// OverLimitCacheMaxWait turns the over-limit cache on: after a fast
	// rejection with Retry-After R, acquires on that bucket that the
	// stored state, refilled to now, still cannot satisfy are refused
	// locally, without a store call, until min(R, OverLimitCacheMaxWait).
	// A commit or rollback by this limiter on the bucket clears it. It may
	// refuse for up to that long what another process's refunds would have
	// allowed (bounded under-admission); it never over-admits. Zero or
	// less turns it off, the default.
	OverLimitCacheMaxWait time.Duration
	// OverLimitCacheSize is the ceiling of the over-limit cache, in
	// buckets (10,000 by default).
	//
	// For every cache ceiling: when the cache is full, an expired entry
	// makes room first, else the least recently used one; zero or less
	// keeps nothing, so every lookup misses (the config cache then reads
	// the configs on every acquire, the entity cache forgets every hint,
	// the over-limit cache refuses nothing locally). A config or entity
	// entry costs about 200 bytes plus its entity id, an over-limit entry
	// (which holds a bucket) about 500; see docs/performance.md, "Memory
	// sizing".
	OverLimitCacheSize int

	// BucketTTLPeriods sets how long an idle bucket of default config
	// (resource or system level) lives, in times to fill from empty (7 by
	// default). Buckets of entity-level config never expire, except the
	// period buckets of calendar limits, which expire a day after the
	// period that follows theirs ends, whatever their level. A bucket
	// below its capacity is kept at least until it has refilled, plus one
	// time to fill: a bucket in debt (a lease committed over its
	// estimate) is never deleted, and created full again, before its debt
	// is repaid. A period bucket left in debt at the end of its period
	// still expires on its schedule: the next period has a bucket of its
	// own, which the debt does not reach. Zero or less disables bucket
	// TTLs.
	BucketTTLPeriods int64

	// SlotTTL is the slot TTL of in-flight limits (30 s by default; zero
	// or less means the default): the slots held by a process that stops
	// renewing them (it died, or lost the store for that long) are free
	// again within this time. A live lease renews its slots once every
	// half TTL.
	SlotTTL time.Duration

	// Principal is who entity and limit changes are audited as made by
	// (an ARN, or an identifier) when the context carries none (see
	// [ContextWithPrincipal]). Empty, the default, records no principal.
	Principal string

	// AuditRetention is how long audit events are kept (90 days by
	// default; zero or less means the default).
	AuditRetention time.Duration
}

// defaultOptions returns the options New starts from.
func defaultOptions() Options {
	o := Options{
		Clock:              time.Now,
		StoreTimeout:       defaultStoreTimeout,
		CircuitFailures:    defaultCircuitFailures,
		CircuitCooldown:    defaultCircuitCooldown,
		SpeculativeWrites:  true,
		GroupCommit:        true,
		ConfigCacheTTL:     defaultConfigCacheTTL,
		ConfigCacheSize:    defaultConfigCacheSize,
		EntityCacheTTL:     defaultEntityCacheTTL,
		EntityCacheSize:    defaultEntityCacheSize,
		OverLimitCacheSize: defaultOverLimitCacheSize,
		BucketTTLPeriods:   defaultBucketTTLPeriods,
		SlotTTL:            defaultSlotTTL,
		AuditRetention:     defaultAuditRetention,
	}
	if d, err := time.ParseDuration(os.Getenv(envStoreTimeout)); err == nil {
		o.StoreTimeout = d
	}
	return o
}

// The defaults of [Options].
const (
	defaultConfigCacheTTL   = time.Minute
	defaultBucketTTLPeriods = 7
	defaultAuditRetention   = 90 * 24 * time.Hour
	defaultStoreTimeout     = 500 * time.Millisecond
	// envStoreTimeout names the environment variable that, set to a
	// duration, replaces defaultStoreTimeout.
	envStoreTimeout           = "ZAEL_STORE_TIMEOUT"
	defaultCircuitFailures    = 5
	defaultCircuitCooldown    = time.Second
	defaultConfigCacheSize    = 20_000
	defaultEntityCacheSize    = 10_000
	defaultEntityCacheTTL     = 10 * time.Minute
	defaultOverLimitCacheSize = 10_000
	defaultSlotTTL            = 30 * time.Second
)

// AcquireOption configures one Acquire, Do, Available or TimeUntilAvailable
// call.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	limits        []store.Limit
	override      bool
	onUnavailable OnUnavailable
	// checked is set when limitsErr holds validateLimits(limits), done
	// once by WithLimits rather than on every call.
	checked   bool
	limitsErr error
	// caps bound the entity's resolved limits (WithLimitCaps); capsErr is
	// their validation.
	caps    []store.Limit
	capsErr error
	// wide, when wideOverride is set, are the limits of the entity-wide
	// buckets (WithEntityWideLimits); wideErr is their validation.
	wide         []store.Limit
	wideOverride bool
	wideErr      error
	// reqLimits holds, per request of an AcquireAll, its Limits as the
	// backends' type, converted and validated once (nil for a request
	// without limits of its own).
	reqLimits [][]store.Limit
	// readFirst makes the acquire read its buckets before it writes (no
	// speculative write): a limit was switched back (switchedBackIn).
	readFirst bool
}

// WithLimits makes the call use limits instead of the stored config (no
// config read at all), for the entity and each ancestor it cascades to.
// An empty list checks nothing. It charges no entity-wide bucket
// ([AllResources]) unless the call also has [WithEntityWideLimits].
func WithLimits(limits ...Limit) AcquireOption {
	// Copied once: every call of the option shares the copy, which
	// nothing writes to.
	own := storeLimits(limits)
	err := validateLimits(own)
	return func(o *acquireOptions) {
		o.limits, o.override, o.checked, o.limitsErr = own, true, true, err
	}
}

// WithEntityWideLimits makes the call use limits for the entity-wide
// bucket ([AllResources]) of its entity, and of each ancestor it cascades
// to, instead of their stored entity-wide config, as [WithLimits] does for
// the (entity, resource) bucket. An empty list charges no entity-wide
// bucket. Without it, a call with [WithLimits] charges no entity-wide
// bucket either (WithLimits reads no config at all); a call with neither
// charges the stored entity-wide limits.
func WithEntityWideLimits(limits ...Limit) AcquireOption {
	own := storeLimits(limits)
	err := validateLimits(own)
	return func(o *acquireOptions) { o.wide, o.wideOverride, o.wideErr = own, true, err }
}

// WithOnUnavailable sets what the call does when the store fails, overriding
// the stored system default (itself defaulting to block).
func WithOnUnavailable(mode OnUnavailable) AcquireOption {
	return func(o *acquireOptions) { o.onUnavailable = mode }
}

// WithLimitCaps bounds the limits of the call's entity (per name) by caps,
// after they are resolved from [WithLimits] or the stored config: each
// limit named in caps takes the lower capacity of the two and the lower
// refill rate of the two (its own refill amount scaled down, its refill
// period kept). A cap never raises a limit and never adds one: a cap whose
// name the entity has no limit for is ignored, and the parent's limits
// (with cascade) are left alone. It is meant for limits learned from an
// outside authority (an LLM provider's rate-limit headers), which may only
// lower what the configuration admits. The last WithLimitCaps of a call
// wins.
func WithLimitCaps(caps ...Limit) AcquireOption {
	own := storeLimits(caps)
	err := validateLimits(own)
	return func(o *acquireOptions) { o.caps, o.capsErr = own, err }
}
