package httplimit_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/httplimit"
	"github.com/zaelimiter/limiter/memorystore"
)

// callLLM stands for a call to a language model; it returns the tokens the
// call really used.
func callLLM(context.Context, string) (tokens int64, err error) { return 320, nil }

// newLimiter returns a limiter on a new memory store with a frozen clock,
// where every key gets 100 rpm and 1,000 tpm on gpt-4o.
func newLimiter() *limiter.RateLimiter {
	frozen := func() time.Time { return time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) }
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = frozen })
	if err := rl.Admin().SetLimits(context.Background(), limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{
		limiter.PerMinute("rpm", 100),
		limiter.PerMinute("tpm", 1_000),
	}); err != nil {
		log.Fatal(err)
	}
	return rl
}

// The middleware charges each request to the API key in a header: one
// request plus the tpm estimate before the handler, the real count after.
func ExampleMiddleware() {
	key := func(r *http.Request) (string, string, limiter.Consume, error) {
		apiKey := r.Header.Get("X-API-Key")
		if apiKey == "" {
			return "", "", nil, errors.New("missing X-API-Key") // 400
		}
		return apiKey, "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 500}, nil
	}
	chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actual, err := callLLM(r.Context(), "Hello!")
		lease := httplimit.LeaseFromContext(r.Context())
		if err != nil {
			lease.Rollback(r.Context()) // the middleware's Commit is then a no-op
			http.Error(w, "upstream failed", http.StatusBadGateway)
			return
		}
		lease.Adjust(limiter.Consume{"tpm": actual - 500})
		w.Header().Set("X-Tokens-Used", strconv.FormatInt(actual, 10))
	})
	mw := httplimit.Middleware(newLimiter(), key, func(o *httplimit.Options) {
		o.AcquireOptions = []limiter.AcquireOption{limiter.WithOnUnavailable(limiter.OnUnavailableAllow)}
		o.OnCommitError = func(r *http.Request, err error) { log.Printf("%s: commit: %v", r.URL.Path, err) }
	})
	http.Handle("/v1/chat", mw(chat)) // 429 + Retry-After when a limit refuses
}
