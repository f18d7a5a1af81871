// Package httplimit applies a [limiter.RateLimiter] to net/http handlers,
// as go-limiter's package of the same name does: [Middleware] charges each
// request to the entity, resource and amounts a [KeyFunc] names before the
// handler runs, hands the handler its lease ([LeaseFromContext]) to adjust
// to the real count, and commits it when the handler returns. A refused
// request gets 429 with Retry-After, X-RateLimit-* and the IETF
// RateLimit-Policy and RateLimit fields (402 Payment Required, without
// Retry-After, when a prepaid balance refused it). With an in-flight limit
// ([limiter.InFlight]) a request holds a slot while its handler runs, so
// that at most n requests of a key run at once across every server
// sharing the store; one refused for want of a slot gets 429 with
// Retry-After 1 and no reset time (see [Middleware]).
//
// Every response of a rate-limited request, served or refused, names the
// same limits in its IETF fields: every limit in force, the budgets the
// request does not spend included, as "ENTITY:LIMIT",
// the parent's of a cascading entity included, and an entity's
// entity-wide limits ([limiter.AllResources]) as "ENTITY:*:LIMIT" on the
// responses of every resource. Their t (seconds) means
// "until the bucket is full" on a served response and "until the limit
// covers the request" on a 429 (0 for a limit that covers it); see
// [Middleware].
package httplimit
