package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/storetest"
)

// throttleStore returns a store whose Allow uses alg and clock.
func throttleStore(t *testing.T, alg redisstore.Algorithm, clock *storetest.Clock) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) {
		o.Prefix, o.Algorithm, o.Now = redisserver.Prefix(t), alg, clock.Now
	})
	require.NoError(t, err)
	return s
}

// TestAllowRetryAfter: for both algorithms, a refused request is allowed
// exactly when its Retry-After has passed, not a millisecond earlier; and
// the remaining count goes down with each admitted request.
func TestAllowRetryAfter(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []redisstore.Algorithm{redisstore.TokenBucket, redisstore.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			clock := storetest.NewClock()
			s := throttleStore(t, alg, clock)
			l := limiter.PerMinute("rpm", 7) // one token per 8571.43 ms
			var last redisstore.AllowResult
			admitted := 0
			for range 20 {
				r, err := s.Allow(ctx, "user-1", store.Limit(l), 1)
				require.NoError(t, err)
				if !r.Allowed {
					last = r
					break
				}
				require.GreaterOrEqual(t, r.Remaining, int64(0), "remaining after %d admitted", admitted+1)
				if admitted > 0 {
					require.LessOrEqual(t, r.Remaining, last.Remaining, "remaining after %d admitted", admitted+1)
				}
				last = r
				admitted++
			}
			require.False(t, last.Allowed, "after %d admitted: a refusal", admitted)
			require.Positive(t, last.RetryAfter, "after %d admitted: a wait", admitted)
			require.Zero(t, last.Remaining, "after %d admitted: nothing remaining", admitted)
			clock.Advance(last.RetryAfter - time.Millisecond)
			r, err := s.Allow(ctx, "user-1", store.Limit(l), 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed, "allowed 1 ms before Retry-After (%v)", last.RetryAfter)
			clock.Advance(time.Millisecond)
			r, err = s.Allow(ctx, "user-1", store.Limit(l), 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed, "not allowed at Retry-After (%v)", last.RetryAfter)
			require.NoError(t, s.ResetKey(ctx, "user-1"))
			r, err = s.Allow(ctx, "user-1", store.Limit(l), 7)
			require.NoError(t, err)
			assert.True(t, r.Allowed, "a reset key is not full")
			_, err = s.Allow(ctx, "bad{key}", store.Limit(l), 1)
			assert.Error(t, err, "a key with braces was accepted")
		})
	}
}

// TestAlgorithmsSameTrace drives the token bucket and GCRA with one trace
// of requests on a limit of 5 per second (capacity 5, one token every
// 200 ms) and compares their admissions. They differ in exactly one way:
// GCRA's tolerance (capacity × interval) lets a full (idle) key take one
// request more in a burst — the 6th of the first burst and the 6th of the
// burst after a pause. At a sustained rate after the burst (a request
// every 100 ms, twice the limit) both admit every other request, at the
// same times.
func TestAlgorithmsSameTrace(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerSecond("rps", 5)
	type step struct {
		at   time.Duration // since the start
		name string
	}
	var trace []step
	for i := range 8 {
		trace = append(trace, step{0, fmt.Sprintf("burst1-%d", i+1)})
	}
	for i := range 20 { // then 10 per second for 2 s
		trace = append(trace, step{time.Duration(i+1) * 100 * time.Millisecond, fmt.Sprintf("steady-%d", i+1)})
	}
	for i := range 8 { // after an idle second (both are full again)
		trace = append(trace, step{5 * time.Second, fmt.Sprintf("burst2-%d", i+1)})
	}
	admissions := map[redisstore.Algorithm][]bool{}
	for _, alg := range []redisstore.Algorithm{redisstore.TokenBucket, redisstore.GCRA} {
		clock := storetest.NewClock()
		s := throttleStore(t, alg, clock)
		start := clock.Now()
		for _, st := range trace {
			clock.Advance(start.Add(st.at).Sub(clock.Now()))
			r, err := s.Allow(ctx, "k", store.Limit(l), 1)
			require.NoError(t, err)
			admissions[alg] = append(admissions[alg], r.Allowed)
		}
	}
	count := func(alg redisstore.Algorithm, prefix string) int {
		n := 0
		for i, st := range trace {
			if strings.HasPrefix(st.name, prefix) && admissions[alg][i] {
				n++
			}
		}
		return n
	}
	var differ []string
	for i, st := range trace {
		if admissions[redisstore.TokenBucket][i] != admissions[redisstore.GCRA][i] {
			differ = append(differ, fmt.Sprintf("%s(tb=%v,gcra=%v)", st.name, admissions[redisstore.TokenBucket][i], admissions[redisstore.GCRA][i]))
		}
	}
	t.Logf("token bucket: burst1 %d, steady %d, burst2 %d; gcra: burst1 %d, steady %d, burst2 %d; differ at %v",
		count(redisstore.TokenBucket, "burst1"), count(redisstore.TokenBucket, "steady"), count(redisstore.TokenBucket, "burst2"),
		count(redisstore.GCRA, "burst1"), count(redisstore.GCRA, "steady"), count(redisstore.GCRA, "burst2"), differ)
	want := []string{"burst1-6(tb=false,gcra=true)", "burst2-6(tb=false,gcra=true)"}
	assert.Equal(t, want, differ, "where the admissions differ")
	assert.Equal(t, 5, count(redisstore.TokenBucket, "burst1"), "token bucket burst")
	assert.Equal(t, 10, count(redisstore.TokenBucket, "steady"), "token bucket at the rate")
	assert.Equal(t, 10, count(redisstore.GCRA, "steady"), "GCRA at the rate")
}

// TestAllowConcurrentExact: 32 goroutines call Allow on one key of
// capacity 100 with the clock stopped, for both algorithms. Under this
// contention the store sends queued requests together, and still exactly
// 100 are admitted (GCRA: 101, its burst is one more).
func TestAllowConcurrentExact(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []redisstore.Algorithm{redisstore.TokenBucket, redisstore.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			s := throttleStore(t, alg, storetest.NewClock())
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for range 10 {
						r, err := s.Allow(ctx, "k", store.Limit(limiter.PerMinute("rpm", 100)), 1)
						if !assert.NoError(t, err) {
							return
						}
						if r.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			want := int64(100)
			if alg == redisstore.GCRA {
				want = 101
			}
			assert.Equal(t, want, admitted.Load())
			t.Logf("%d calls for queued requests", s.AllowBatches())
			assert.Positive(t, s.AllowBatches(), "nothing was batched")
		})
	}
}
