// Package httplimit applies a [limiter.RateLimiter] to net/http handlers,
// as go-limiter's package of the same name does: [Middleware] charges each
// request to the entity, resource and amounts a [KeyFunc] names before the
// handler runs, hands the handler its lease ([LeaseFromContext]) to adjust
// to the real count, and commits it when the handler returns. A refused
// request gets 429 with Retry-After, X-RateLimit-* and the IETF
// RateLimit-Policy and RateLimit fields.
package httplimit
