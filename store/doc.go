// Package store is the contract between a [limiter.RateLimiter] and the
// storage behind it, in the manner of database/sql/driver: the
// [Repository] interface every backend implements, the optional
// capabilities a backend may add (SpeculativeStore, AdjustFolder,
// BatchStore, ShardStore, SerialItemWriter, AuditLog, ConfigLister,
// EntityLister, UsageStore, CapacityReader, NamespaceRegistry), the values they exchange (bucket
// items and their writes, stored limit configs, entities, audit events,
// usage snapshots) and the errors that carry meaning between a backend
// and the limiter.
//
// Most programs use package limiter alone, which restates the models a
// caller handles (Limit, Entity, AuditEvent, ...) under their own names;
// this package is for those who write or test a backend, or read one's
// items directly.
//
// The division of labour is strict. The limiter owns every rule: input
// validation, the order of precedence of stored limits and their cache,
// the entity cache, bucket math, bucket TTLs, audit events and the audit
// principal. A backend stores and fetches: it validates nothing the
// limiter already validated, computes no refill, and never decides whether
// a request is admitted — except in [SpeculativeStore.SpeculativeConsume],
// whose condition it evaluates atomically.
//
// Amounts are millitokens (tokens × 1000) unless a field says tokens; times
// are epoch milliseconds unless they are [time.Time]. Package storetest
// checks that a backend honours this contract; packages memorystore and
// redisstore, and limiter's own DynamoDB repository, implement it.
package store
