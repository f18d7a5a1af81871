package httplimit

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/zaelimiter/limiter"
)

// KeyFunc maps a request to what it is charged: the entity (an API key,
// a tenant), the resource (a model, a route group) and the amounts to take
// before the handler runs, e.g. limiter.Consume{"rpm": 1, "tpm": estimate}. An error
// means the request cannot be attributed; [Middleware] answers it with
// 400 Bad Request.
type KeyFunc func(r *http.Request) (entityID, resource string, consume limiter.Consume, err error)

// Options configures [Middleware]. The zero value is ready to use.
type Options struct {
	// AcquireOptions are passed to every Acquire, e.g. [limiter.WithLimits] or
	// [limiter.WithOnUnavailable].
	AcquireOptions []limiter.AcquireOption
	// ErrorHandler writes the response of a request that is not served:
	// status is 400 (key error), 429 (rate limited; the Retry-After and
	// X-RateLimit-* headers are already set), 503 (DynamoDB unavailable in
	// block mode) or 500 (anything else, e.g. no limits configured). Nil
	// means [http.Error] with the status text; for a 400 the text is
	// followed by the error, the key function's reason ("Bad Request:
	// missing X-API-Key"), since the client caused it. Other errors stay out
	// of the body.
	ErrorHandler func(w http.ResponseWriter, r *http.Request, status int, err error)
	// OnCommitError is called when the Commit after the handler fails. The
	// response is already written and the acquired amounts stay consumed;
	// only the adjustment is lost, and the request's slots in flight, if
	// any, come back within the slot TTL ([limiter.Options.SlotTTL]) instead
	// of at once. Nil ignores the error.
	OnCommitError func(r *http.Request, err error)
}

// leaseContextKey is the context key of the request's lease.
type leaseContextKey struct{}

// LeaseFromContext returns the lease that [Middleware] acquired for the
// request whose context is ctx, or nil when there is none. Handlers use it
// to reconcile an estimate, e.g. lease.Adjust(limiter.Consume{"tpm": actual - est}).
func LeaseFromContext(ctx context.Context) *limiter.Lease {
	l, _ := ctx.Value(leaseContextKey{}).(*limiter.Lease)
	return l
}

// Middleware returns net/http middleware that rate-limits every request
// with rl: key maps the request to (entity, resource, consume), Acquire
// takes the amounts before next runs, and the lease is committed after next
// returns — with whatever the handler changed through [LeaseFromContext]. If
// next panics the lease is rolled back and the panic goes on. A handler that
// wants its consumption back (say, the upstream call failed) calls Rollback
// on the lease itself; the middleware's Commit then does nothing.
//
// Requests in flight: with an in-flight limit in force
// ([limiter.InFlight], e.g. limiter.InFlight("inflight", 8)) and key
// returning its name in consume (limiter.Consume{"inflight": 1, ...}), a
// request holds its slot from the acquire until the handler returns, a
// panic or a client that went away included (the handler returns when it
// notices r.Context() is done; the commit runs on a context detached from
// it), and gives it back then. A request refused for want of a slot gets
// 429 Too Many Requests, as for any limit of the key: the client caused
// it and may retry, while 503 would say the server is down for everyone
// (it is kept for a store that fails in block mode). Its Retry-After is 1
// (second): a slot comes back when a request holding it ends, at no time
// the limiter can foretell. No header claims a reset time for a slot: the
// in-flight limit's RateLimit-Policy entry has the draft's quota unit
// qu="concurrency" and no window, its RateLimit entry no t, and
// X-RateLimit-Reset is left out when the limit it describes is in-flight.
// Its r is the slots free (on a served response, after the request took
// its own). In the allow on-unavailable mode a request served while the
// store fails holds no slot.
//
// Every response of a rate-limited request carries the same limits: those
// the acquire is checked against ([limiter.RateLimiter.LimitsInForce]), the
// entity's own and, when it cascades, its parent's. The IETF fields list
// them all, each named "ENTITY:LIMIT" (e.g. "key-1:rpm", "proj-1:rpm"),
// or "ENTITY:*:LIMIT" for an entity-wide limit ([limiter.AllResources],
// e.g. "proj-1:*:usd", on the responses of every resource), the entity's
// before its parent's, each entity's resource limits before its
// entity-wide ones, each by limit name:
// RateLimit-Policy gives each limit's quota q (its capacity) and window w
// (the seconds it takes to fill from empty; for a calendar limit, the
// length of its period at the limiter's clock, [limiter.RateLimiter.Now]),
// RateLimit its remaining tokens r (at least 0) and t, in whole seconds
// rounded up. On a served response t is the time until that bucket is
// full again (a calendar limit's: until its next period starts; a prepaid
// balance's: 0, it never fills by itself), from the lease
// ([limiter.Lease.Statuses]); a calendar or prepaid budget the request
// has no amount for (a request of rpm alone on a key with a monthly usd
// budget) is listed too, as it stands: its bucket is read
// ([limiter.RateLimiter.Available]), not charged. X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (seconds until full)
// describe the limit with the smallest share of its capacity left among
// those the lease holds. Requests that are not served get:
//
//   - 402 Payment Required when a prepaid balance cannot cover the
//     request ([limiter.ErrBalanceExhausted]): no wait refills a balance,
//     only a top-up, so there is no Retry-After, no X-RateLimit-Reset,
//     and the balance's entry in RateLimit has no t; X-RateLimit-Limit
//     and X-RateLimit-Remaining and the IETF fields are as for a 429;
//   - 429 Too Many Requests when a limit refuses, with Retry-After (whole
//     seconds plus one, [limiter.RateLimitExceededError.RetryAfterHeader]),
//     X-RateLimit-Limit (the capacity of the limit that refused — the
//     violation with the longest wait), X-RateLimit-Remaining (its
//     available tokens, at least 0), X-RateLimit-Reset (the seconds until
//     it covers the request) and the RateLimit-Policy and RateLimit fields
//     of every limit in force, t the seconds until that limit covers the
//     request (0 for one that covers it now). A refusal decided on the
//     entity's own bucket does not read the parent's: the middleware then
//     reads it (one read of the store) to report the parent's limits too;
//   - 400 Bad Request when key fails, or when the entity ID it returns is
//     not a valid identifier ([limiter.ErrInvalidIdentifier]); the body carries the
//     reason;
//   - 503 Service Unavailable when DynamoDB fails and the on-unavailable
//     mode is block ([limiter.ErrUnavailable]); in allow mode the request is served
//     with a no-op lease, without rate-limit headers;
//   - 500 Internal Server Error for any other error, e.g. when no limits
//     are configured for the entity and resource.
//
// Middleware panics when rl or key is nil: a programming error at setup.
// The middleware is safe for concurrent use.
func Middleware(rl *limiter.RateLimiter, key KeyFunc, optFns ...func(*Options)) func(http.Handler) http.Handler {
	if rl == nil {
		panic("httplimit: Middleware: nil RateLimiter")
	}
	if key == nil {
		panic("httplimit: Middleware: nil KeyFunc")
	}
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	o.AcquireOptions = slices.Clone(o.AcquireOptions)
	if o.ErrorHandler == nil {
		o.ErrorHandler = defaultError
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entityID, resource, consume, err := key(r)
			if err != nil {
				o.ErrorHandler(w, r, http.StatusBadRequest, err)
				return
			}
			ctx := r.Context()
			lease, err := rl.Acquire(ctx, entityID, resource, consume, o.AcquireOptions...)
			if err != nil {
				var rle *limiter.RateLimitExceededError
				if errors.As(err, &rle) {
					setRefusalHeaders(ctx, w.Header(), request{rl: rl, opts: o.AcquireOptions,
						entityID: entityID, resource: resource, consume: consume, err: rle})
				}
				o.ErrorHandler(w, r, httpStatus(err), err)
				return
			}
			setLeaseHeaders(ctx, w.Header(), request{rl: rl, opts: o.AcquireOptions,
				entityID: entityID, resource: resource, consume: consume}, lease)
			served := false
			defer func() {
				if !served { // next panicked: give everything back
					_ = lease.Rollback(ctx)
				}
			}()
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, leaseContextKey{}, lease)))
			served = true
			if err := lease.Commit(ctx); err != nil && !errors.Is(err, limiter.ErrLeaseDone) && o.OnCommitError != nil {
				o.OnCommitError(r, err)
			}
		})
	}
}

// defaultError is the ErrorHandler of [Options] when none is set.
func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	text := http.StatusText(status)
	if status == http.StatusBadRequest && err != nil {
		text += ": " + err.Error()
	}
	http.Error(w, text, status)
}

// httpStatus maps an Acquire error to a status code.
func httpStatus(err error) int {
	switch {
	case errors.Is(err, limiter.ErrBalanceExhausted):
		return http.StatusPaymentRequired
	case errors.Is(err, limiter.ErrRateLimited):
		return http.StatusTooManyRequests
	case errors.Is(err, limiter.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, limiter.ErrValidation):
		// The request's key or amounts are invalid (a negative estimate,
		// say); missing limits are the server's configuration problem.
		var ve *limiter.ValidationError
		if errors.As(err, &ve) && ve.Field == "limits" {
			return http.StatusInternalServerError
		}
		return http.StatusBadRequest
	default:
		return http.StatusInternalServerError
	}
}
