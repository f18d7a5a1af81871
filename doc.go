// Package limiter is a DynamoDB-backed token-bucket rate limiter for LLM APIs,
// a faithful Go port of zae-limiter.
//
// One DynamoDB item holds every limit (requests per minute, tokens per minute,
// ...) of an (entity, resource) pair. Services wrap each LLM call in
// Acquire → Adjust → Commit: Acquire writes the estimated consumption before
// the call, Adjust records the real token count afterwards, and Commit writes
// the difference; Rollback undoes the acquire when the call fails.
//
// # Units
//
// Limits are configured in whole tokens and whole-second periods. Buckets are
// stored in millitokens (tokens × 1000) and epoch milliseconds; the
// [BucketState] type exposes them as stored.
package limiter
