package llmhttp_test

import (
	"context"
	"errors"
	"fmt"
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

// A provider that ignores the output ceiling: a stream is cut at the first
// read past its reservation; a JSON answer is settled exactly, and the
// token bucket's debt keeps the next calls out.

// postKey POSTs body to url with ctx and the API key k1.
func postKey(t *testing.T, client *http.Client, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k1")
	return client.Do(req)
}

// spoofTokens is the answer of the provider that ignores max_tokens: 738
// tokens, as measured at a peer (BerriAI/litellm#34223).
const spoofTokens = 738

// TestStreamCutPastReservation: streams of the three APIs asking for one
// output token, from a provider that sends 738 in 20 events: the body
// ends with ErrReservationExceeded at the first read whose output passes
// the call's worst case, the provider's connection is closed, and the
// lease is settled to what the stream showed — more than the worst case
// by less than one event's output.
func TestStreamCutPastReservation(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: spoofTokens, StreamChunks: 20, IgnoreCeiling: true})
	defer srv.Close()
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	perEvent := (int64(spoofTokens)/20 + 1) * m.Output / 1_000_000 // an event's output, rounded up
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":1,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"gpt-4o","max_tokens":1,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"gpt-4o","max_output_tokens":1,"stream":true,"input":"hi"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			worst := m.Estimate(llmhttp.RequestFromBody([]byte(tc.body)))
			b := newBudget(t, "prepaid", llmhttp.USD)
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			resp, err := postKey(t, &http.Client{Transport: tr}, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+tc.path, tc.body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			got, err := io.ReadAll(resp.Body)
			require.ErrorIs(t, err, llmhttp.ErrReservationExceeded)
			require.NoError(t, resp.Body.Close())
			assert.NotContains(t, string(got), `"output_tokens":738`, "cut before the usage")
			assert.Less(t, strings.Count(string(got), "abc "), spoofTokens/2, "cut early")
			st := tr.Stats()
			assert.Equal(t, int64(1), st.StreamsCut)
			assert.Equal(t, int64(1), st.OverReserved)
			spent := llmhttp.USD - b.left(t)
			assert.Greater(t, spent, worst, "settled at what was shown")
			assert.LessOrEqual(t, spent, worst+perEvent, "past the worst case by less than one event")
			_, err = resp.Body.Read(make([]byte, 10))
			assert.ErrorIs(t, err, llmhttp.ErrReservationExceeded, "the body stays ended")
		})
	}
}

// TestSpoofMaxTokensOne: the max_tokens=1 spoof, in which requests asking
// for one output token passed a 60-tokens-per-minute key at a peer while
// the provider answered 738 tokens each. Calls are made one after another,
// one every second of a manual clock for thirty minutes, through a transport
// whose only limits are 600 requests and 60 tokens per minute: each answer
// is settled to its real usage, which puts the token bucket into debt, so
// that the provider's tokens over the thirty minutes overshoot the key's
// allowance (60 a minute, and the bucket's 60 at the start) by at most one
// response. JSON answers and streams (no money limit: nothing is cut).
func TestSpoofMaxTokensOne(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			clk := newManualClock()
			srv := llmtest.NewServer(llmtest.Config{OutputTokens: spoofTokens, IgnoreCeiling: true, Now: clk.now})
			defer srv.Close()
			rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = clk.now })
			t.Cleanup(func() { _ = rl.Close() })
			tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
				o.NoFeedback = true
				o.AcquireOptions = []limiter.AcquireOption{limiter.WithLimits(limiter.PerMinute("rpm", 600), limiter.PerMinute("tpm", 60))}
			})
			client := &http.Client{Transport: tr}
			body := fmt.Sprintf(`{"model":"gpt-4o","max_tokens":1,"stream":%t,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, stream)
			response := spoofTokens + llmtestInput(t, body)
			admitted, refused := 0, 0
			for range 1800 {
				resp, err := postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+"/v1/chat/completions", body)
				if err != nil {
					require.True(t, errors.Is(err, limiter.ErrRateLimited), "%v", err)
					refused++
				} else {
					require.Equal(t, http.StatusOK, resp.StatusCode)
					_, err = io.Copy(io.Discard, resp.Body)
					require.NoError(t, err)
					require.NoError(t, resp.Body.Close())
					admitted++
				}
				clk.add(time.Second)
			}
			billed := srv.Stats("k1").Tokens
			allowance := int64(60 + 30*60)
			assert.LessOrEqual(t, billed, allowance+response, "the provider's tokens overshoot by at most one response")
			assert.Positive(t, admitted)
			t.Logf("%d calls admitted, %d refused; the provider billed %d tokens against an allowance of %d (one response: %d)",
				admitted, refused, billed, allowance, response)
		})
	}
}
