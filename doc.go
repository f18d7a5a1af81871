// Package limiter is a token-bucket rate limiter for LLM APIs, backed by
// DynamoDB (sharing its table layout with the Python zae-limiter), Redis or
// memory.
//
// One bucket item holds every limit (requests per minute, tokens per minute,
// ...) of an (entity, resource) pair. Each LLM call goes Acquire (the
// estimate) → Adjust (the real count) → Commit, or Rollback when it fails.
// Limits come from the call ([WithLimits]) or are stored per entity, resource
// or namespace; an entity created with Cascade also charges its parent.
//
// [New] takes a [Repository]: [OpenDynamoDB], memorystore, redisstore, or
// your own against package store (the backend contract); httplimit serves
// net/http. [RateLimiter] documents the guarantees, hot keys and memory.
package limiter
