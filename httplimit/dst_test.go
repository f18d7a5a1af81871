package httplimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestHTTPCalendarHeadersSkippedMidnight: on the evening before America/
// Santiago skips midnight (2026-09-06, clocks go from 00:00 to 01:00), a
// daily budget's reset and Retry-After count to the real start of the
// next day, 01:00 local, and that day's window is 23 hours.
func TestHTTPCalendarHeadersSkippedMidnight(t *testing.T) {
	loc, err := time.LoadLocation("America/Santiago")
	require.NoError(t, err)
	now := time.Date(2026, 9, 6, 3, 30, 0, 0, time.UTC) // 23:30 local on 09-05
	day := limiter.PerCalendarDay("tpm", 1000).InLocation(loc)
	require.Equal(t, int64(1800), secondsToCover(day, 1, now))
	require.Equal(t, int64(82800), windowSeconds(day, now.Add(time.Hour)), "09-06 has 23 hours")

	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	defer rl.Close()
	ctx := context.Background()
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "chat"}, []limiter.Limit{limiter.PerMinute("rpm", 100), day}))
	calls := 0
	h := Middleware(rl, llmKey)(usesTokens(t, 1000, &calls))
	w := serve(h, "key-1", 1000)
	require.Equal(t, http.StatusOK, w.Code)
	w = serve(h, "key-1", 1)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "1801", w.Header().Get("Retry-After"), "whole seconds plus one")
	require.Equal(t, "1800", w.Header().Get("X-RateLimit-Reset"))
	require.Equal(t, 1, calls)
}
