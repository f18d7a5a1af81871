// Package limiter is a DynamoDB-backed token-bucket rate limiter for LLM APIs,
// a faithful Go port of zae-limiter.
//
// One DynamoDB item holds every limit (requests per minute, tokens per minute,
// ...) of an (entity, resource) pair. Services wrap each LLM call in
// Acquire → Adjust → Commit: Acquire writes the estimated consumption before
// the call, Adjust records the real token count afterwards, and Commit writes
// the difference; Rollback undoes the acquire when the call fails.
//
// Limits come from the call ([WithLimits]) or from the table, where they are
// stored per entity and resource, per entity, per resource or for the whole
// namespace ([RateLimiter.SetLimits] and friends). An entity created with
// Cascade also charges its parent. [HTTPMiddleware] applies all of this to
// net/http handlers, answering 429 with Retry-After when a limit refuses.
//
// [RateLimiter.Wait] blocks until a request fits instead of failing, for
// batch jobs. [WithLogger] logs the limiter's decisions with log/slog and
// [WithMetrics] reports acquire outcomes, latencies and store calls; the
// otelmetrics sub-package reports them to OpenTelemetry.
//
// # Backends
//
// [New] takes a [Repository]: [OpenDynamoDB] for production, [NewMemory] for
// unit tests and single-process services (same semantics, bounded memory),
// or any implementation of the [BucketStore] contract plus the admin
// methods. The conformance suite runs the same behaviour on both.
//
// # Hot keys
//
// Group commit ([WithGroupCommit], on by default) merges concurrent writes
// to one bucket item from this process into one conditional UpdateItem; the
// over-limit cache ([WithOverLimitCache], opt-in) refuses requests for a
// bucket just found exhausted without a DynamoDB call, for a bounded time.
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
// [BucketState] type exposes them as stored.
package limiter
