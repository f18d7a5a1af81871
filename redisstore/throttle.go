package redisstore

import (
	"context"
	"strings"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// Algorithm selects how [Store.Allow] keeps the state of a key.
type Algorithm int

const (
	// TokenBucket keeps a balance and a refill time per key and runs the
	// limiter's bucket math (integer millitokens, the refill of a
	// [limiter.Limit], Retry-After as the limiter computes it) in the
	// script. A key admits a burst of the limit's capacity.
	TokenBucket Algorithm = iota
	// GCRA, the generic cell rate algorithm, keeps one integer per key:
	// the theoretical arrival time (TAT). The emission interval is the
	// refill period divided by the refill amount and the tolerance is the
	// capacity times the interval; a request of n is refused while
	// now < max(TAT, now) + (n−1)×interval − tolerance, with Retry-After
	// that difference, else the TAT moves to max(TAT, now) + n×interval.
	// With this tolerance an idle key admits a burst of capacity + 1 (one
	// more than the token bucket), then both admit at the refill rate.
	GCRA
)

// String returns "token_bucket" or "gcra".
func (a Algorithm) String() string {
	if a == GCRA {
		return "gcra"
	}
	return "token_bucket"
}

// AllowResult is the outcome of [Store.Allow].
type AllowResult struct {
	// Allowed reports whether the tokens were taken.
	Allowed bool
	// Remaining is the whole tokens the key could still give now (after
	// the request when it was allowed).
	Remaining int64
	// RetryAfter is how long until the request would be allowed; zero
	// when it was.
	RetryAfter time.Duration
}

// Allow takes n tokens of limit from key when it can, in one script: a
// plain throttle on single-limit keys for callers that need no leases,
// entities or stored limits (a login form, a webhook sender), with the
// algorithm of the store ([Options.Algorithm]). Its keys are apart from
// the limiter's buckets. The clock is [Options.Now]. limit must be valid,
// key non-empty and without braces, n ≥ 0.
func (s *Store) Allow(ctx context.Context, key string, limit limiter.Limit, n int64) (AllowResult, error) {
	if err := limit.Validate(); err != nil {
		return AllowResult{}, err
	}
	if key == "" || strings.ContainsAny(key, "{}") {
		return AllowResult{}, &limiter.ValidationError{Field: "key", Value: key, Reason: "must be non-empty and hold no braces"}
	}
	if n < 0 || n > (1<<63-1)/1000 {
		return AllowResult{}, &limiter.ValidationError{Field: "n", Value: itoa(n), Reason: "must be between 0 and MaxInt64/1000"}
	}
	now := s.opts.Now().UnixMilli()
	var v any
	var err error
	if s.opts.Algorithm == GCRA {
		v, err = s.run(ctx, scriptGCRA, []string{s.keys.throttle(key, "gcra")},
			itoa(now), itoa(limit.Capacity), itoa(limit.RefillAmount), itoa(limit.RefillPeriod.Milliseconds()), itoa(n))
	} else {
		v, err = s.run(ctx, scriptTokenBucket, []string{s.keys.throttle(key, "tb")},
			itoa(now), itoa(store.MilliTokens(limit.Capacity)), itoa(store.MilliTokens(limit.RefillAmount)), itoa(limit.RefillPeriod.Milliseconds()), itoa(n))
	}
	if err != nil {
		return AllowResult{}, err
	}
	res, _ := v.([]any)
	if len(res) != 3 {
		return AllowResult{}, wrap("allow", errUnexpected)
	}
	allowed, _ := res[0].(int64)
	remaining, _ := res[1].(string)
	retry, _ := res[2].(string)
	return AllowResult{Allowed: allowed == 1, Remaining: atoi(remaining), RetryAfter: durationFromMillis(retry)}, nil
}

// ResetKey forgets key's state under the store's algorithm: the next Allow
// finds it full.
func (s *Store) ResetKey(ctx context.Context, key string) error {
	kind := "tb"
	if s.opts.Algorithm == GCRA {
		kind = "gcra"
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return wrap("reset key", s.client.Del(ctx, s.keys.throttle(key, kind)).Err())
}
