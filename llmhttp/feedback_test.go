package llmhttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// simCall sends one chat completion (OpenAI) or message (Anthropic) of the
// fake provider through client, charged to entity/resource, and returns
// its status (0 with the error for a transport error).
func simCall(t *testing.T, client *http.Client, srv *llmtest.Server, anthropic bool) (int, error) {
	t.Helper()
	path, body := "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	if anthropic {
		path, body = "/v1/messages", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	}
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k1")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func realLimiter(t *testing.T, tpm int64, opts ...func(*limiter.Options)) *limiter.RateLimiter {
	t.Helper()
	rl := limiter.New(memorystore.New(), opts...)
	t.Cleanup(func() { _ = rl.Close() })
	require.NoError(t, rl.Admin().SetLimits(context.Background(), limiter.Scope{Entity: entity, Resource: resource}, []limiter.Limit{limiter.PerMinute("rpm", 10_000), limiter.PerMinute("tpm", tpm)}))
	return rl
}

// TestFeedbackCorrectsAndLearns: the provider's limit (60,000 tpm) is half
// the configured one and a hidden consumer has used most of it: after one
// response the shared bucket holds no more than the provider said was
// left, and the lower limit is enforced.
func TestFeedbackCorrectsAndLearns(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		srv := llmtest.NewServer(llmtest.Config{TPM: 60_000, OutputTokens: 100})
		rl := realLimiter(t, 120_000)
		tr := llmhttp.NewTransport(rl, nil)
		client := &http.Client{Transport: tr}
		status, err := simCall(t, client, srv, anthropic)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		st := tr.Stats()
		assert.Equal(t, int64(1), st.Corrections, "anthropic=%v", anthropic)
		assert.Equal(t, int64(1), st.LimitsLearned)
		assert.Positive(t, st.TokensRemoved)
		left, err := rl.Available(context.Background(), entity, resource)
		require.NoError(t, err)
		// The provider's remaining figure less the reserve, 1 % of the
		// 120,000 capacity the lease saw.
		assert.LessOrEqual(t, left["tpm"], int64(60_000-1_200), "lowered below the provider's remaining figure")
		assert.Greater(t, left["tpm"], int64(60_000-1_200-1_000))

		// The next acquire enforces the learned limit: a call larger than the
		// provider's 60,000 is refused, though 120,000 are configured.
		ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 70_000})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{}`))
		_, err = client.Do(req)
		var denied *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &denied)
		assert.Equal(t, int64(60_000), denied.Primary.Limit.Capacity)
		srv.Close()
	}
}

// TestFeedbackCooldown: after a provider 429, the limiter refuses the next
// call itself, with about the provider's retry time, and nothing is sent.
func TestFeedbackCooldown(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{TPM: 600, OutputTokens: 100})
	defer srv.Close()
	rl := realLimiter(t, 600) // configured like the provider, but the provider has a hidden consumer...
	// ...simulated by draining the provider's bucket behind the limiter's back.
	hidden := &http.Client{}
	for {
		status, err := simCall(t, hidden, srv, false)
		require.NoError(t, err)
		if status == http.StatusTooManyRequests {
			break
		}
	}
	tr := llmhttp.NewTransport(rl, nil)
	client := &http.Client{Transport: tr}
	status, err := simCall(t, client, srv, false)
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, int64(1), tr.Stats().Cooldowns)
	before := srv.Stats("k1").Requests

	_, err = simCall(t, client, srv, false)
	var denied *limiter.RateLimitExceededError
	require.ErrorAs(t, err, &denied)
	assert.Greater(t, denied.RetryAfter, 5*time.Second, "the provider asked for about 12 s")
	assert.Less(t, denied.RetryAfter, 40*time.Second)
	assert.Equal(t, before, srv.Stats("k1").Requests, "refused without sending")
}

// TestFeedbackOff: with feedback off, the bucket keeps the configured
// budget whatever the provider says.
func TestFeedbackOff(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{TPM: 60_000, OutputTokens: 100})
	defer srv.Close()
	rl := realLimiter(t, 120_000)
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.NoFeedback = true })
	status, err := simCall(t, &http.Client{Transport: tr}, srv, false)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	left, err := rl.Available(context.Background(), entity, resource)
	require.NoError(t, err)
	assert.Greater(t, left["tpm"], int64(119_000))
	assert.Zero(t, tr.Stats().Corrections)
}

// TestFeedbackReserve: the reserve sets how far below the provider's
// remaining figure a correction lowers the bucket; a negative one lowers
// it to the figure itself.
func TestFeedbackReserve(t *testing.T) {
	for _, c := range []struct {
		reserve float64
		below   int64 // tokens below the provider's 60,000 (less one call's)
	}{{-1, 0}, {0.05, 6_000}} {
		srv := llmtest.NewServer(llmtest.Config{TPM: 60_000, OutputTokens: 100})
		rl := realLimiter(t, 120_000)
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.FeedbackReserve = c.reserve })
		status, err := simCall(t, &http.Client{Transport: tr}, srv, false)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		left, err := rl.Available(context.Background(), entity, resource)
		require.NoError(t, err)
		assert.LessOrEqual(t, left["tpm"], 60_000-c.below, "reserve %v", c.reserve)
		assert.Greater(t, left["tpm"], 60_000-c.below-200, "reserve %v: one call's tokens below", c.reserve)
		srv.Close()
	}
}
