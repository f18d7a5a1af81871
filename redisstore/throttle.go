package redisstore

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
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
	var res []int64
	var err error
	if s.opts.Algorithm == GCRA {
		res, err = s.runInts(ctx, scriptGCRA, s.keys.throttle(key, "g"),
			now, limit.Capacity, limit.RefillAmount, limit.RefillPeriod.Milliseconds(), n)
	} else {
		res, err = s.runInts(ctx, scriptTokenBucket, s.keys.throttle(key, "t"),
			now, limiter.MilliTokens(limit.Capacity), limiter.MilliTokens(limit.RefillAmount), limit.RefillPeriod.Milliseconds(), n)
	}
	if err != nil {
		return AllowResult{}, err
	}
	if len(res) != 3 {
		return AllowResult{}, wrap("allow", errUnexpected)
	}
	return AllowResult{Allowed: res[0] == 1, Remaining: res[1], RetryAfter: durationFromMs(res[2])}, nil
}

// runInts runs sc on key with five integer arguments and returns its
// reply, an array of integers. The arguments are held in one allocation
// and passed by pointer, so that none is boxed on its own, and the reply
// is read without boxing.
func (s *Store) runInts(ctx context.Context, sc *script, key string, a, b, c, d, e int64) ([]int64, error) {
	x := &intArgs{key: key, v: [5]int64{a, b, c, d, e}}
	x.full = [9]any{nil, nil, 1, &x.key, &x.v[0], &x.v[1], &x.v[2], &x.v[3], &x.v[4]}
	cmd, err := s.exec(ctx, sc, x.full[:], replyInts)
	if err != nil {
		return nil, wrap(sc.name, err)
	}
	return cmd.(*redis.IntSliceCmd).Val(), nil
}

// intArgs are the arguments of runInts.
type intArgs struct {
	key  string
	v    [5]int64
	full [9]any
}

// durationFromMs converts a whole number of milliseconds to a Duration,
// saturating as the limiter's bucket math does; a negative number means
// never.
func durationFromMs(ms int64) time.Duration {
	const maxMs = (1<<63 - 1) / int64(time.Millisecond)
	if ms < 0 || ms > maxMs {
		return 1<<63 - 1
	}
	return time.Duration(ms) * time.Millisecond
}

// ResetKey forgets key's state under the store's algorithm: the next Allow
// finds it full.
func (s *Store) ResetKey(ctx context.Context, key string) error {
	kind := "t"
	if s.opts.Algorithm == GCRA {
		kind = "g"
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return wrap("reset key", s.client.Del(ctx, s.keys.throttle(key, kind)).Err())
}
