// Package limiter is a token-bucket rate limiter for LLM APIs, backed by
// DynamoDB: a Go port of zae-limiter that shares its table layout with the
// Python library.
//
// One bucket item holds every limit (requests per minute, tokens per minute,
// ...) of an (entity, resource) pair. Services wrap each LLM call in
// Acquire → Adjust → Commit: Acquire takes the estimate before the call,
// Adjust records the real token count, Commit writes the difference, and
// Rollback undoes the acquire when the call fails. Limits come from the call
// ([WithLimits]) or are stored per entity, resource or namespace; an entity
// created with Cascade also charges its parent.
//
// [New] takes a [Repository]: [OpenDynamoDB], memorystore, redisstore, or
// your own against package store (the backend contract); httplimit serves
// net/http. [RateLimiter] documents the guarantees, hot keys and memory.
package limiter
