package llmhttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
)

// TestTransportAgainstSimulator: JSON bodies and streams of both providers
// through the transport; the bucket is charged exactly the tokens the
// provider counted, and a provider 429 reaches the caller as a response,
// with its lease rolled back.
func TestTransportAgainstSimulator(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{RPM: 1000, TPM: 2000, OutputTokens: 100})
	defer srv.Close()
	rl := newLimiter(t, tpmLimit)
	// Feedback off: this test checks the usage accounting alone (the
	// provider's figures would lower the bucket).
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.NoFeedback = true })
	client := &http.Client{Transport: tr}
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`},
		{"/v1/messages", `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`},
		{"/v1/messages", `{"model":"claude","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hello"}]}`},
	}
	statuses := map[int]int{}
	for i := 0; i < 40; i++ {
		b := bodies[i%len(bodies)]
		ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, nil)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+b.path, strings.NewReader(b.body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("X-Api-Key", "k1")
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		statuses[resp.StatusCode]++
	}
	st := srv.Stats("k1")
	require.Positive(t, st.RateLimited, "the provider's 2000 tpm ran out")
	assert.Equal(t, int(st.Admitted), statuses[200])
	assert.Equal(t, int(st.RateLimited), statuses[429])
	ts := tr.Stats()
	assert.Equal(t, st.Tokens, ts.Tokens, "usage read by the transport = tokens counted by the provider")
	assert.Equal(t, st.RateLimited, ts.ProviderRateLimited)
	assert.Equal(t, st.RateLimited, ts.RolledBack)
	rpm, tpm := available(t, rl)
	assert.Equal(t, 1000-st.Admitted, rpm)
	assert.Equal(t, tpmLimit-st.Tokens, tpm)
}
