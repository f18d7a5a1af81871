package redisstore

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter/store"
)

// Algorithm selects how [Store.Allow] keeps the state of a key.
type Algorithm int

const (
	// TokenBucket keeps a balance and a refill time per key and runs the
	// limiter's bucket math (integer millitokens, the refill of a
	// [store.Limit], Retry-After as the limiter computes it) in the
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
func (s *Store) Allow(ctx context.Context, key string, limit store.Limit, n int64) (AllowResult, error) {
	if err := limit.Validate(); err != nil {
		return AllowResult{}, err
	}
	if key == "" || strings.ContainsAny(key, "{}") {
		return AllowResult{}, &store.ValidationError{Field: "key", Value: key, Reason: "must be non-empty and hold no braces"}
	}
	if n < 0 || n > (1<<63-1)/1000 {
		return AllowResult{}, &store.ValidationError{Field: "n", Value: itoa(n), Reason: "must be between 0 and MaxInt64/1000"}
	}
	now := s.opts.Now().UnixMilli()
	req := allowReq{key: s.keys.throttle(key, "t"),
		v: [5]int64{now, store.MilliTokens(limit.Capacity), store.MilliTokens(limit.RefillAmount), limit.RefillPeriod.Milliseconds(), n}}
	if s.opts.Algorithm == GCRA {
		req = allowReq{key: s.keys.throttle(key, "g"), v: [5]int64{now, limit.Capacity, limit.RefillAmount, limit.RefillPeriod.Milliseconds(), n}}
	}
	if s.sharded {
		// Every key has a slot of its own: nothing to batch.
		return s.allowOne(ctx, req)
	}
	return s.allows.do(ctx, "", req)
}

// allowReq is one request of Store.Allow: the key and the script's five
// arguments.
type allowReq struct {
	key string
	v   [5]int64
}

// allowScript is the script of the store's algorithm.
func (s *Store) allowScript() *script {
	if s.opts.Algorithm == GCRA {
		return scriptGCRA
	}
	return scriptTokenBucket
}

// allowOne sends one request of Store.Allow. Its arguments are held in one
// allocation and passed by pointer, so that none is boxed on its own, and
// the reply is read without boxing.
func (s *Store) allowOne(ctx context.Context, req allowReq) (AllowResult, error) {
	x := &struct {
		allowReq
		full [9]any
	}{allowReq: req}
	x.full = [9]any{nil, nil, 1, &x.key, &x.v[0], &x.v[1], &x.v[2], &x.v[3], &x.v[4]}
	var res [1]AllowResult
	if err := s.allowRun(ctx, x.full[:], res[:]); err != nil {
		return AllowResult{}, err
	}
	return res[0], nil
}

// allowMany sends requests of Store.Allow as one call, which decides each
// on its own, one after the other.
func (s *Store) allowMany(ctx context.Context, reqs []allowReq) ([]AllowResult, error) {
	s.allowBatches.Add(1)
	full := make([]any, 3+6*len(reqs))
	full[2] = len(reqs)
	args := full[3+len(reqs):]
	for i := range reqs {
		full[3+i] = &reqs[i].key
		for j := range reqs[i].v {
			args[5*i+j] = &reqs[i].v[j]
		}
	}
	out := make([]AllowResult, len(reqs))
	if err := s.allowRun(ctx, full, out); err != nil {
		return nil, err
	}
	return out, nil
}

// allowRun runs the store's Allow script with the command arguments full
// on len(out) keys and writes their results into out.
func (s *Store) allowRun(ctx context.Context, full []any, out []AllowResult) error {
	sc := s.allowScript()
	cmd, err := s.exec(ctx, sc, full, replyInts)
	if err != nil {
		return wrap(sc.name, err)
	}
	v := cmd.(*redis.IntSliceCmd).Val()
	if len(v) != 3*len(out) {
		return wrap("allow", errUnexpected)
	}
	for i := range out {
		out[i] = AllowResult{Allowed: v[3*i] == 1, Remaining: v[3*i+1], RetryAfter: durationFromMs(v[3*i+2])}
	}
	return nil
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
