package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// budgetKey charges the request to key-1 on "chat": one rpm, and the usd
// and credit amounts of the X-Usd and X-Credit headers when set.
func budgetKey(r *http.Request) (string, string, limiter.Consume, error) {
	c := limiter.Consume{"rpm": 1}
	for _, name := range []string{"usd", "credit"} {
		if v := r.Header.Get("X-" + strings.ToUpper(name[:1]) + name[1:]); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", "", nil, err
			}
			c[name] = n
		}
	}
	return "key-1", "chat", c, nil
}

// eachStore runs fn with a limiter on env's clock over the memory store
// and DynamoDB Local, each path.
func eachStore(t *testing.T, fn func(t *testing.T, env *testEnv, rl *limiter.RateLimiter)) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		for _, b := range []struct {
			name string
			repo limiter.Repository
		}{{"memory", memorystore.New()}, {"dynamodb", env.repo}} {
			repo := b.repo
			t.Run(b.name, func(t *testing.T) {
				rl := limiter.New(repo, func(o *limiter.Options) { o.SpeculativeWrites = env.spec }, func(o *limiter.Options) { o.Clock = env.clock.now })
				defer rl.Close()
				fn(t, env, rl)
			})
		}
	})
}

// TestHTTPHeadersShowEveryBudget: the RateLimit fields of a served
// request list every budget in force for the resource, the calendar
// (usd, monthly) and prepaid (credit) ones the request has no amount for
// included, read and not charged; a refusal by the prepaid balance is a
// 402 Payment Required with no Retry-After and no X-RateLimit-Reset
// (only a top-up helps), and the balance has no t. On the memory store
// and DynamoDB Local, each path. The clock is 2026-01-02T03:04:05.678Z:
// the next month starts 2,580,954.322 s later.
func TestHTTPHeadersShowEveryBudget(t *testing.T) {
	eachStore(t, func(t *testing.T, env *testEnv, rl *limiter.RateLimiter) {
		ctx := context.Background()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "chat"}, []limiter.Limit{
			limiter.PerMinute("rpm", 100), limiter.PerCalendarMonth("usd", 500), limiter.Prepaid("credit"),
		}))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "key-1", Resource: "chat", Limit: "credit", Amount: 50, ID: "pay-1"})
		require.NoError(t, err)
		h := Middleware(rl, budgetKey)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		send := func(usd, credit string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat", nil)
			if usd != "" {
				r.Header.Set("X-Usd", usd)
			}
			if credit != "" {
				r.Header.Set("X-Credit", credit)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		untilFeb := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).Sub(env.clock.now())
		month := ceilSeconds(untilFeb)
		require.Equal(t, int64(2580955), month)
		policy := fmt.Sprintf(`"key-1:credit";q=%d;w=0, "key-1:rpm";q=100;w=60, "key-1:usd";q=500;w=2678400`, limiter.Prepaid("credit").Capacity)
		avail := func() map[string]int64 {
			t.Helper()
			av, err := rl.Available(ctx, "key-1", "chat")
			require.NoError(t, err)
			return av
		}

		// Every budget charged.
		w := send("120", "20")
		require.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, policy, w.Header().Get("RateLimit-Policy"))
		assert.Equal(t, fmt.Sprintf(`"key-1:credit";r=30;t=0, "key-1:rpm";r=99;t=1, "key-1:usd";r=380;t=%d`, month), w.Header().Get("RateLimit"))

		// rpm alone: the budgets are shown as they stand, and not charged.
		for range 2 {
			w = send("", "")
			require.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, policy, w.Header().Get("RateLimit-Policy"), "rpm alone")
		}
		assert.Equal(t, fmt.Sprintf(`"key-1:credit";r=30;t=0, "key-1:rpm";r=97;t=2, "key-1:usd";r=380;t=%d`, month), w.Header().Get("RateLimit"), "rpm alone")
		av := avail()
		assert.Equal(t, int64(380), av["usd"], "usd after two rpm-only requests")
		assert.Equal(t, int64(30), av["credit"], "credit after two rpm-only requests")

		// The balance short: 402, no wait to give.
		w = send("", "31")
		require.Equal(t, http.StatusPaymentRequired, w.Code, "the balance cannot cover 31")
		for _, k := range []string{"Retry-After", "X-RateLimit-Reset"} {
			assert.Empty(t, w.Header().Values(k), k)
		}
		assert.Equal(t, "30", w.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, policy, w.Header().Get("RateLimit-Policy"), "refused by the balance")
		assert.Equal(t, `"key-1:credit";r=30, "key-1:rpm";r=97;t=0, "key-1:usd";r=380;t=0`, w.Header().Get("RateLimit"), "refused by the balance")

		// A budget refusal still says when to come back.
		w = send("381", "")
		require.Equal(t, http.StatusTooManyRequests, w.Code, "over the month's usd")
		assert.Equal(t, strconv.FormatInt(int64(untilFeb/time.Second)+1, 10), w.Header().Get("Retry-After"), "whole seconds + 1")
		assert.Equal(t, fmt.Sprintf(`"key-1:credit";r=30;t=0, "key-1:rpm";r=97;t=0, "key-1:usd";r=380;t=%d`, month), w.Header().Get("RateLimit"), "over the month's usd")
		assert.Equal(t, int64(30), avail()["credit"], "nothing charged by the refusals")
	})
}
