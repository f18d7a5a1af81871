// Package limiter is a token-bucket rate limiter for LLM APIs, backed by
// DynamoDB: a Go port of zae-limiter that shares its table layout with the
// Python library.
//
// One bucket item holds every limit (requests per minute, tokens per minute,
// ...) of an (entity, resource) pair. Services wrap each LLM call in
// Acquire → Adjust → Commit: Acquire writes the estimated consumption before
// the call, Adjust records the real token count afterwards, and Commit writes
// the difference; Rollback undoes the acquire when the call fails.
//
// Limits come from the call ([WithLimits]) or are stored per entity and
// resource, per entity, per resource or for the whole namespace
// ([RateLimiter.SetLimits] and friends). An entity created with Cascade also
// charges its parent. [HTTPMiddleware] applies all of this to net/http
// handlers.
//
// [RateLimiter.Wait] blocks until a request fits instead of failing, for
// batch jobs. [WithLogger] logs the limiter's decisions with log/slog and
// [WithMetrics] reports acquire outcomes, latencies and store calls; the
// otelmetrics package reports them to OpenTelemetry.
//
// # Guarantees
//
// The limit an operator sets is the limit enforced. No request is admitted
// beyond a limit's capacity plus its refill, under any concurrency, on any
// backend. A limit change takes effect on the next acquire (in another
// process, within its config cache TTL). Invalid input — a negative amount,
// a limit name no limit has, an entity that would be its own ancestor — is
// a *[ValidationError] before anything is written. An Acquire returns within
// its context's deadline even when the store hangs, and what a write took
// after its caller gave up is given back: the consumption counters equal
// what the committed leases consumed.
//
// # Backends
//
// [New] takes a [Repository]: [OpenDynamoDB] for production; the
// memorystore package for unit tests and single-process services (the same
// semantics in the process's memory); redisstore for teams that run Redis;
// or a backend of your own. The contract is [Repository] plus optional
// capabilities ([store.SpeculativeStore], [store.BatchStore], [store.ShardStore], [store.AuditLog],
// [store.ConfigLister], [store.UsageStore], [store.CapacityReader], [store.NamespaceRegistry]),
// each saying what the limiter does without it. The rules — validation, the
// precedence of stored limits and their cache, bucket math, TTLs, audit
// events — are the limiter's: a backend only stores. The storetest package
// checks a backend against the contract and against the shipped backends'
// behaviour.
//
// # Options
//
// Two option styles, each where it fits. The limiter and each call take
// With… options ([Option], [AcquireOption]): there are many, they compose
// per call, and most users set none. Constructors of backends and helpers
// take a function over an options struct (func(*[DynamoDBOptions]),
// func(*[HTTPOptions])), the AWS SDK's style, which users already write
// for the SDK's clients: a backend's options are configuration, set once.
//
// # Hot keys
//
// Group commit ([WithGroupCommit], on by default) merges concurrent writes
// to one bucket item from this process into one conditional write; the
// over-limit cache ([WithOverLimitCache], opt-in) refuses requests for a
// bucket just found exhausted without a store call, for a bounded time.
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
// Limits are configured in whole tokens and whole-second periods. Buckets are
// stored in millitokens (tokens × 1000) and epoch milliseconds; the
// [store.BucketState] type exposes them as stored.
package limiter
