package llmhttp_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestCostLimitEntityWideBudget: a key without a usd limit of its own
// spends its project's entity-wide budget (usd on limiter.AllResources)
// on calls to two resources: each call holds the caller's estimate of
// $0.003 and settles at the fixture's cost, $0.001973, so a budget of
// $0.01 admits four calls whatever resource they name, and the fifth is
// refused without being sent.
func TestCostLimitEntityWideBudget(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	t.Cleanup(func() { _ = rl.Close() })
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", 10_000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
	srv, hits := fixtureServer(t, "openai_chat.json", "application/json", http.StatusOK)
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.CostLimit = "usd" })
	client := &http.Client{Transport: tr}
	admitted := 0
	for i := range 6 {
		resource := []string{"gpt-4o", "gpt-4o-eu"}[i%2]
		cctx := llmhttp.ContextWithCall(ctx, "key", resource, limiter.Consume{"rpm": 1, "usd": 3000})
		resp, err := post(t, client, cctx, srv.URL, `{"model":"gpt-4o"}`)
		if err != nil {
			require.ErrorIs(t, err, limiter.ErrRateLimited, "call %d", i)
			continue
		}
		admitted++
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
	}
	require.Equal(t, 4, admitted)
	require.Equal(t, int64(4), hits.Load(), "refused calls are not sent")
	left, err := rl.Available(ctx, "proj", limiter.AllResources)
	require.NoError(t, err)
	require.Equal(t, int64(10_000-4*1973), left["usd"])
}
