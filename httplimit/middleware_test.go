package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
)

// llmKey charges a request to the API key in X-API-Key on resource
// "chat": one request and the tpm estimate in X-Estimate.
func llmKey(r *http.Request) (string, string, limiter.Consume, error) {
	id := r.Header.Get("X-API-Key")
	if id == "" {
		return "", "", nil, errors.New("missing X-API-Key")
	}
	est, err := strconv.ParseInt(r.Header.Get("X-Estimate"), 10, 64)
	if err != nil {
		return "", "", nil, fmt.Errorf("X-Estimate: %w", err)
	}
	return id, "chat", limiter.Consume{"rpm": 1, "tpm": est}, nil
}

// serve sends one request for apiKey with a tpm estimate through h.
func serve(h http.Handler, apiKey string, estimate int64) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat", strings.NewReader("{}"))
	if apiKey != "" {
		r.Header.Set("X-API-Key", apiKey)
	}
	r.Header.Set("X-Estimate", strconv.FormatInt(estimate, 10))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// usesTokens is a handler that reports `used` tpm through the request's
// lease and counts its calls.
func usesTokens(t *testing.T, used int64, calls *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		lease := LeaseFromContext(r.Context())
		if !assert.NotNil(t, lease, "no lease in the request context") {
			return
		}
		// The estimate from the request, not lease.Consumed(): with cascade
		// that sums the entity's and the parent's amounts.
		est, _ := strconv.ParseInt(r.Header.Get("X-Estimate"), 10, 64)
		err := lease.Adjust(limiter.Consume{"tpm": used - est})
		assert.NoError(t, err, "Adjust: %v", err)
		io.WriteString(w, "ok")
	})
}

// TestHTTPMiddlewareAdmitsAndDenies: admitted requests commit the handler's
// adjustment; a denied one gets 429 with Retry-After and X-RateLimit-*
// from the violated limit, and never reaches the handler.
func TestHTTPMiddlewareAdmitsAndDenies(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1000))
		calls := 0
		h := Middleware(rl, llmKey, func(o *Options) { o.AcquireOptions = []limiter.AcquireOption{lim} })(usesTokens(t, 700, &calls))

		for i := range 2 { // 1000 - 700 = 300, then 300 - 700 = -400 (debt)
			w := serve(h, "key-1", 200)
			require.Equal(t, http.StatusOK, w.Code, "request %d: status", i+1)
			require.Equal(t, "ok", w.Body.String(), "request %d: body", i+1)
		}
		got := env.tokens("key-1", "chat", "tpm")
		require.EqualValues(t, -400_000, got, "tpm tokens = %d, want -400000 (both adjustments committed)", got)

		w := serve(h, "key-1", 200)
		require.EqualValues(t, http.StatusTooManyRequests, w.Code, "third request: %d %q, want 429", w.Code, w.Body.String())
		// 600 tokens short at 1000/min: 36 s (+1 ms) → "37".
		for header, want := range map[string]string{
			"Retry-After": "37", "X-RateLimit-Limit": "1000", "X-RateLimit-Remaining": "0",
		} {
			got := w.Header().Get(header)
			assert.Equal(t, want, got, "%s = %q, want %q", header, got, want)
		}
		assert.EqualValues(t, 2, calls, "handler ran %d times, want 2", calls)
		got = env.tokens("key-1", "chat", "rpm")
		assert.EqualValues(t, 98_000, got, "rpm tokens = %d, want 98000 (the denial took nothing)", got)
	})
}

// TestHTTPMiddlewareRemainingFromPrimary: X-RateLimit-* describe the
// violation with the longest wait, here the parent's; the IETF fields name
// the same limits as a served response's.
func TestHTTPMiddlewareRemainingFromPrimary(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		ctx := env.ctx
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key-1", ParentID: "proj", Cascade: true})
		require.NoError(t, err)
		err = rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "chat"}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 500)})
		require.NoError(t, err)
		err = rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-1", Resource: "chat"}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 2000)})
		require.NoError(t, err)
		calls := 0
		h := Middleware(rl, llmKey)(usesTokens(t, 400, &calls))
		w := serve(h, "key-1", 400)
		require.Equal(t, http.StatusOK, w.Code, "first request")
		policy := w.Header().Get("RateLimit-Policy")
		assert.Equal(t, `"key-1:rpm";q=100;w=60, "key-1:tpm";q=2000;w=60, "proj:rpm";q=100;w=60, "proj:tpm";q=500;w=60`, policy)
		w = serve(h, "key-1", 400) // project has 100 left
		require.Equal(t, http.StatusTooManyRequests, w.Code, "second request")
		// 300 tokens short at 500/min: 36 s (+1 ms).
		for k, v := range map[string]string{
			"Retry-After": "37", "X-RateLimit-Limit": "500", "X-RateLimit-Remaining": "100", "X-RateLimit-Reset": "37",
			"RateLimit-Policy": policy,
			"RateLimit":        `"key-1:rpm";r=99;t=0, "key-1:tpm";r=1600;t=0, "proj:rpm";r=99;t=0, "proj:tpm";r=100;t=37`,
		} {
			assert.Equal(t, v, w.Header().Get(k), k)
		}
	})
}

// TestHTTPMiddlewareOwnLimitsNamed: an entity without a parent has its
// limits named with its entity too, on every response.
func TestHTTPMiddlewareOwnLimitsNamed(t *testing.T) {
	env := newTestEnv(t)
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1000))
	calls := 0
	h := Middleware(env.limiter(), llmKey, func(o *Options) { o.AcquireOptions = []limiter.AcquireOption{lim} })(usesTokens(t, 200, &calls))
	const policy = `"key-1:rpm";q=100;w=60, "key-1:tpm";q=1000;w=60`
	w := serve(h, "key-1", 200)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, policy, w.Header().Get("RateLimit-Policy"))
	assert.Equal(t, `"key-1:rpm";r=99;t=1, "key-1:tpm";r=800;t=12`, w.Header().Get("RateLimit"))
	w = serve(h, "key-1", 900)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, policy, w.Header().Get("RateLimit-Policy"))
	// 100 short at 1000/min: 6 s (+1 ms).
	assert.Equal(t, `"key-1:rpm";r=99;t=0, "key-1:tpm";r=800;t=7`, w.Header().Get("RateLimit"))
}

// TestMiddlewareNilArguments: a nil RateLimiter or KeyFunc is refused at
// setup with a message naming it; nil option functions are skipped.
func TestMiddlewareNilArguments(t *testing.T) {
	assert.PanicsWithValue(t, "httplimit: Middleware: nil RateLimiter", func() { Middleware(nil, llmKey) })
	env := newTestEnv(t)
	assert.PanicsWithValue(t, "httplimit: Middleware: nil KeyFunc", func() { Middleware(env.limiter(), nil) })
	assert.NotPanics(t, func() { Middleware(env.limiter(), llmKey, nil) })
}

// TestHTTPMiddlewareErrors: a key error is 400 and an invalid entity ID is
// 400, both without DynamoDB; missing limits are 500; an unreachable
// DynamoDB is 503 in block mode and served in allow mode.
func TestHTTPMiddlewareErrors(t *testing.T) {
	env := newTestEnv(t)
	calls := 0
	h := Middleware(env.limiter(), llmKey)(usesTokens(t, 1, &calls))

	env.rec.Reset()
	// The 400 body carries the reason: the key function's error, or the
	// invalid identifier.
	w := serve(h, "", 10)
	assert.Equal(t, http.StatusBadRequest, w.Code, "no API key: status")
	assert.Equal(t, "Bad Request: missing X-API-Key\n", w.Body.String(), "no API key: body")
	w = serve(h, "bad#key", 10)
	assert.Equal(t, http.StatusBadRequest, w.Code, "invalid entity ID: status")
	assert.Regexp(t, `(?s)^Bad Request: .*entity_id`, w.Body.String(), "invalid entity ID: body, want a 400 naming entity_id")
	w = serve(h, "key-1", -500)
	assert.EqualValues(t, http.StatusBadRequest, w.Code, "negative estimate: %d, want 400", w.Code)
	got := env.calls()
	assert.EqualValues(t, "", got, "DynamoDB calls for rejected requests: %s", got)
	w = serve(h, "key-1", 10)
	assert.Equal(t, http.StatusInternalServerError, w.Code, "no limits configured: status")
	assert.Equal(t, "Internal Server Error\n", w.Body.String(), "no limits configured: body, want only the status text")

	dead := limiter.New(newDeadRepo(t, env), func(o *limiter.Options) { o.Clock = env.clock.now })
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 100))
	var gotStatus int
	var gotErr error
	block := Middleware(dead, llmKey, func(o *Options) {
		o.AcquireOptions = []limiter.AcquireOption{lim, limiter.WithOnUnavailable(limiter.OnUnavailableBlock)}
		o.ErrorHandler = func(w http.ResponseWriter, r *http.Request, status int, err error) {
			gotStatus, gotErr = status, err
			w.WriteHeader(status)
		}
	})(usesTokens(t, 1, &calls))
	w = serve(block, "key-1", 10)
	assert.EqualValues(t, http.StatusServiceUnavailable, w.Code, "DynamoDB down, block: %d, want 503", w.Code)
	assert.Equal(t, http.StatusServiceUnavailable, gotStatus, "ErrorHandler status")
	assert.ErrorIs(t, gotErr, limiter.ErrUnavailable, "ErrorHandler error")
	allow := Middleware(dead, llmKey, func(o *Options) {
		o.AcquireOptions = []limiter.AcquireOption{lim, limiter.WithOnUnavailable(limiter.OnUnavailableAllow)}
	})(usesTokens(t, 1, &calls))
	w = serve(allow, "key-1", 10)
	assert.EqualValues(t, http.StatusOK, w.Code, "DynamoDB down, allow: %d, want 200", w.Code)
	assert.EqualValues(t, 1, calls, "handler ran %d times, want once (allow mode)", calls)
}

// TestHTTPMiddlewareRollback: a panicking handler's lease is rolled back
// and the panic goes on; a handler that rolls back itself gets its tokens
// back and the middleware's Commit is a no-op, not an error.
func TestHTTPMiddlewareRollback(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1000))
		var commitErr error
		mw := Middleware(rl, llmKey, func(o *Options) {
			o.AcquireOptions = []limiter.AcquireOption{lim}
			o.OnCommitError = func(_ *http.Request, err error) { commitErr = err }
		})
		calls := 0
		w := serve(mw(usesTokens(t, 100, &calls)), "key-1", 100)
		require.EqualValues(t, http.StatusOK, w.Code, "first request: %d", w.Code)

		panics := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("upstream exploded") }))
		func() {
			defer func() {
				r := recover()
				assert.Equal(t, "upstream exploded", r, "recovered, want the handler's panic")
			}()
			serve(panics, "key-1", 300)
		}()
		got := env.tokens("key-1", "chat", "tpm")
		require.EqualValues(t, 900_000, got, "tpm tokens after panic = %d, want 900000 (rolled back)", got)

		givesBack := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := LeaseFromContext(r.Context()).Rollback(r.Context())
			assert.NoError(t, err, "Rollback: %v", err)
			w.WriteHeader(http.StatusBadGateway)
		}))
		w = serve(givesBack, "key-1", 300)
		require.EqualValues(t, http.StatusBadGateway, w.Code, "handler status %d, want 502 passed through", w.Code)
		got = env.tokens("key-1", "chat", "tpm")
		require.EqualValues(t, 900_000, got, "tpm tokens after handler rollback = %d, want 900000", got)
		require.NoError(t, commitErr, "OnCommitError(%v) after the handler's own rollback", commitErr)
	})
}

// TestHTTPMiddlewareCommitError: a failing Commit reaches OnCommitError;
// the response is the handler's.
func TestHTTPMiddlewareCommitError(t *testing.T) {
	env := newTestEnv(t)
	failWrites := false
	injected := errors.New("injected write failure")
	rl := limiter.New(env.withClient(hook(func(op string, _ any) error {
		if failWrites && op == "UpdateItem" {
			return injected
		}
		return nil
	})), func(o *limiter.Options) { o.Clock = env.clock.now })
	var commitErr error
	h := Middleware(rl, llmKey, func(o *Options) {
		o.AcquireOptions = []limiter.AcquireOption{limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1000))}
		o.OnCommitError = func(_ *http.Request, err error) { commitErr = err }
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		LeaseFromContext(r.Context()).Adjust(limiter.Consume{"tpm": 50})
		failWrites = true
		io.WriteString(w, "ok")
	}))
	w := serve(h, "key-1", 100)
	require.Equal(t, http.StatusOK, w.Code, "status, want the handler's 200")
	require.Equal(t, "ok", w.Body.String(), "body, want the handler's")
	require.ErrorIs(t, commitErr, injected, "OnCommitError got %v, want the injected failure", commitErr)
	got := env.tokens("key-1", "chat", "tpm")
	require.EqualValues(t, 900_000, got, "tpm tokens = %d, want 900000 (acquire kept, adjustment lost)", got)
}

// TestHTTPMiddlewareRateLimitHeaders: every response names the same
// limits, "ENTITY:LIMIT", the entity's then its parent's: a served one from
// its lease (t until full, the tightest share in X-RateLimit-*), a 429
// refused by the entity's own bucket with the parent's limits read to
// complete it (t until the limit covers the request), also when the
// over-limit cache refused it without the store (on the speculative path).
func TestHTTPMiddlewareRateLimitHeaders(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter(func(o *limiter.Options) { o.OverLimitCacheMaxWait = time.Minute })
		for _, e := range []limiter.Entity{{ID: "org"}, {ID: "key-1", ParentID: "org", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(env.ctx, e)
			require.NoError(t, err)
		}
		err := rl.Admin().SetLimits(env.ctx, limiter.Scope{Resource: "chat"}, []limiter.Limit{limiter.PerMinute("tpm", 1000), limiter.PerMinute("rpm", 100)})
		require.NoError(t, err)
		err = rl.Admin().SetLimits(env.ctx, limiter.Scope{Entity: "org", Resource: "chat"}, []limiter.Limit{limiter.PerMinute("tpm", 3000).WithBurst(6000), limiter.PerMinute("rpm", 1000)})
		require.NoError(t, err)
		calls := 0
		h := Middleware(rl, llmKey)(usesTokens(t, 400, &calls))
		const policy = `RateLimit-Policy: "key-1:rpm";q=100;w=60, "key-1:tpm";q=1000;w=60, "org:rpm";q=1000;w=60, "org:tpm";q=6000;w=120`
		// check compares the response's headers with lines "Name: value".
		check := func(t *testing.T, w *httptest.ResponseRecorder, want ...string) {
			t.Helper()
			for _, line := range want {
				k, _, _ := strings.Cut(line, ": ")
				assert.Equal(t, line, k+": "+w.Header().Get(k), "%d: %s", w.Code, k)
			}
		}

		w := serve(h, "key-1", 400)
		require.Equal(t, http.StatusOK, w.Code, "served")
		// key-1 has 600 of 1000 tpm left, the tightest share; it refills
		// the 400 in 24 s.
		check(t, w, "X-RateLimit-Limit: 1000", "X-RateLimit-Remaining: 600", "X-RateLimit-Reset: 24", policy,
			`RateLimit: "key-1:rpm";r=99;t=1, "key-1:tpm";r=600;t=24, "org:rpm";r=999;t=1, "org:tpm";r=5600;t=8`)

		env.clock.advance(6 * time.Second) // 100 tpm back: 700 left
		// 100 tokens short at 1000/min: 6.001 s. The parent covers the
		// request: t=0 for its limits, as for key-1's rpm.
		refused := []string{"Retry-After: 7", "X-RateLimit-Limit: 1000", "X-RateLimit-Remaining: 700", "X-RateLimit-Reset: 7", policy,
			`RateLimit: "key-1:rpm";r=100;t=0, "key-1:tpm";r=700;t=7, "org:rpm";r=1000;t=0, "org:tpm";r=5900;t=0`}
		w = serve(h, "key-1", 800)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "over key-1's tpm")
		check(t, w, refused...)
		hits := rl.Stats().OverLimitHits
		w = serve(h, "key-1", 800)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "over key-1's tpm, again")
		if env.spec { // the speculative path remembers its refusals
			require.Equal(t, hits+1, rl.Stats().OverLimitHits, "the over-limit cache refused the second")
		}
		check(t, w, refused...)
		assert.Equal(t, 1, calls, "handler calls")
	})
}

// TestHTTPMiddlewareCalendarHeaders: a calendar limit's IETF policy window
// is its period (a day: 86400 s), and its t is the time until the next
// period starts, on the served and the refused response alike; the
// refusal's Retry-After waits until then. The clock starts at
// 2026-01-02T03:04:05.678Z: the next day starts 75,354.322 s later.
func TestHTTPMiddlewareCalendarHeaders(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		_, err := rl.Admin().CreateEntity(env.ctx, limiter.Entity{ID: "key-1"})
		require.NoError(t, err)
		err = rl.Admin().SetLimits(env.ctx, limiter.Scope{Resource: "chat"}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerCalendarDay("tpm", 1000)})
		require.NoError(t, err)
		calls := 0
		h := Middleware(rl, llmKey)(usesTokens(t, 400, &calls))
		const policy = `RateLimit-Policy: "key-1:rpm";q=100;w=60, "key-1:tpm";q=1000;w=86400`
		check := func(t *testing.T, w *httptest.ResponseRecorder, want ...string) {
			t.Helper()
			for _, line := range want {
				k, _, _ := strings.Cut(line, ": ")
				assert.Equal(t, line, k+": "+w.Header().Get(k), "%d: %s", w.Code, k)
			}
		}

		w := serve(h, "key-1", 400)
		require.Equal(t, http.StatusOK, w.Code, "served")
		check(t, w, policy, `RateLimit: "key-1:rpm";r=99;t=1, "key-1:tpm";r=600;t=75355`)

		w = serve(h, "key-1", 800)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "over the day's tpm")
		check(t, w, "Retry-After: 75355", "X-RateLimit-Remaining: 600", "X-RateLimit-Reset: 75355", policy)
		assert.Equal(t, 1, calls, "handler calls")

		// The helpers at the limiter's clock: the next day's start, and
		// a month's window in January (31 days).
		require.Equal(t, int64(75355), secondsToCover(limiter.PerCalendarDay("tpm", 1), 1, rl.Now()))
		require.Equal(t, int64(2678400), windowSeconds(limiter.PerCalendarMonth("usd", 1), rl.Now()), "January")
	})
}

// TestHTTPMiddlewareEntityWideHeaders: an entity-wide budget (the
// parent's tpm on AllResources) appears in the IETF fields of every
// resource, as "ENTITY:*:LIMIT" after the entity's resource limits, on a
// served response and on a refusal.
func TestHTTPMiddlewareEntityWideHeaders(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		for _, e := range []limiter.Entity{{ID: "org"}, {ID: "key-1", ParentID: "org", Cascade: true}} {
			_, err := rl.Admin().CreateEntity(env.ctx, e)
			require.NoError(t, err)
		}
		err := rl.Admin().SetLimits(env.ctx, limiter.Scope{Resource: "chat"}, []limiter.Limit{limiter.PerMinute("tpm", 1000), limiter.PerMinute("rpm", 100)})
		require.NoError(t, err)
		err = rl.Admin().SetLimits(env.ctx, limiter.Scope{Entity: "org", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("tpm", 1500)})
		require.NoError(t, err)
		calls := 0
		h := Middleware(rl, llmKey)(usesTokens(t, 400, &calls))
		w := serve(h, "key-1", 400)
		require.Equal(t, http.StatusOK, w.Code, "served")
		assert.Equal(t, `"key-1:rpm";q=100;w=60, "key-1:tpm";q=1000;w=60, "org:rpm";q=100;w=60, "org:tpm";q=1000;w=60, "org:*:tpm";q=1500;w=60`,
			w.Header().Get("RateLimit-Policy"))
		// 400 of 1500 back at 25 a second: 16 s.
		assert.Equal(t, `"key-1:rpm";r=99;t=1, "key-1:tpm";r=600;t=24, "org:rpm";r=99;t=1, "org:tpm";r=600;t=24, "org:*:tpm";r=1100;t=16`,
			w.Header().Get("RateLimit"))

		w = serve(h, "key-1", 1200)
		require.Equal(t, http.StatusTooManyRequests, w.Code, "over key-1's tpm")
		// Every bucket short: t until each covers 1200 (the budget's 100
		// at 25 a second: 4.001 s).
		assert.Equal(t, `"key-1:rpm";r=99;t=0, "key-1:tpm";r=600;t=37, "org:rpm";r=99;t=0, "org:tpm";r=600;t=37, "org:*:tpm";r=1100;t=5`,
			w.Header().Get("RateLimit"))
		assert.Equal(t, 1, calls, "handler calls")
	})
}
