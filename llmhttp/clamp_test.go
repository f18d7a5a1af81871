package llmhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestClampBody: the ceilings a body names are lowered, the one its API
// uses is added where it names none, and a stream's body is lowered too.
func TestClampBody(t *testing.T) {
	srvBodies := make(chan string, 10)
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 500, Shape: func(body []byte) llmtest.Shape {
		srvBodies <- string(body)
		return llmtest.Shape{}
	}})
	defer srv.Close()
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":4000,"messages":[]}`, `"max_tokens":%d`},
		{"/v1/chat/completions", `{"model":"gpt-4o","max_completion_tokens":4000,"max_tokens":4000,"messages":[]}`, `"max_completion_tokens":%d,"max_tokens":%d`},
		{"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, `"messages":[],"max_completion_tokens":%d}`},
		{"/v1/chat/completions", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, `"max_completion_tokens":%d}`},
		{"/v1/messages", `{"model":"gpt-4o","messages":[]}`, `"max_tokens":%d}`},
		{"/v1/responses", `{"model":"gpt-4o","input":"hi"}`, `"max_output_tokens":%d}`},
	} {
		t.Run(tc.path+tc.body, func(t *testing.T) {
			r := llmhttp.RequestFromBody([]byte(tc.body))
			r.OutputCeiling = 300
			budget := m.Estimate(r) // exactly 300 output tokens
			b := newBudget(t, "prepaid", budget)
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			outs := callAll(t, &http.Client{Transport: tr}, srv.URL+tc.path, context.Background(), []string{tc.body})
			require.NoError(t, outs[0].err)
			sent := <-srvBodies
			// The largest ceiling whose worst case, of the body sent,
			// the budget pays.
			got := llmhttp.RequestFromBody([]byte(sent))
			assert.LessOrEqual(t, m.Estimate(got), budget)
			assert.Contains(t, sent, strings.ReplaceAll(tc.want, "%d", fmt.Sprint(got.OutputCeiling)))
			assert.InDelta(t, 300, got.OutputCeiling, 10)
			got.OutputCeiling++
			assert.Greater(t, m.Estimate(got), budget)
			assert.Equal(t, int64(1), tr.Stats().Clamped)
			assert.GreaterOrEqual(t, b.left(t), int64(0))
		})
	}
	// Off: refused instead; below the floor: refused.
	body := `{"model":"gpt-4o","max_tokens":4000,"messages":[]}`
	r := llmhttp.RequestFromBody([]byte(body))
	r.OutputCeiling = 300
	for _, opt := range []func(*llmhttp.Options){
		func(o *llmhttp.Options) { o.OutputClamp = llmhttp.ClampOff },
		func(o *llmhttp.Options) { o.MinOutputTokens = 301 },
	} {
		b := newBudget(t, "prepaid", m.Estimate(r))
		tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
			o.CostLimit = "usd"
			o.AcquireOptions = []limiter.AcquireOption{b.opts}
		}, opt)
		outs := callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", context.Background(), []string{body})
		require.ErrorIs(t, outs[0].err, limiter.ErrBalanceExhausted)
		assert.Zero(t, tr.Stats().Clamped)
	}
	assert.Empty(t, srvBodies, "nothing sent")
}

// TestClampCascadeParent: a key that cascades to its organization, the
// key with $1 a month and the organization with $0.02: ceilings are
// lowered to what the organization has left (the least of every bucket
// the acquire charges), so that 20 concurrent calls, each asking for
// 4,000 tokens ($0.04 at the worst), spend the organization's budget to at
// least 95 % and never past it.
func TestClampCascadeParent(t *testing.T) {
	ctx := context.Background()
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 4_000})
	defer srv.Close()
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = newManualClock().now })
	t.Cleanup(func() { _ = rl.Close() })
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: entity, ParentID: "org", Cascade: true})
	require.NoError(t, err)
	const orgBudget = 20_000
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: resource}, []limiter.Limit{limiter.PerCalendarMonth("usd", orgBudget)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: entity, Resource: resource}, []limiter.Limit{limiter.PerCalendarMonth("usd", llmhttp.USD),
		limiter.PerMinute("rpm", 1_000_000), limiter.PerMinute("tpm", 1_000_000_000)}))
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.MinOutputTokens = 16
	})
	body := `{"model":"gpt-4o","max_tokens":4000,"messages":[{"role":"user","content":"A long story, please."}]}`
	bodies := make([]string, 20)
	for i := range bodies {
		bodies[i] = body
	}
	for round := 0; round < 5; round++ {
		outs := callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", ctx, bodies)
		for i, o := range outs {
			if o.status == 0 {
				require.ErrorIs(t, o.err, limiter.ErrRateLimited, "call %d", i)
			}
		}
	}
	org, err := rl.Available(ctx, "org", resource)
	require.NoError(t, err)
	key, err := rl.Available(ctx, entity, resource)
	require.NoError(t, err)
	st := tr.Stats()
	assert.GreaterOrEqual(t, org["usd"], int64(0), "the organization's budget")
	assert.Equal(t, orgBudget-org["usd"], st.Cost)
	assert.Equal(t, llmhttp.USD-key["usd"], st.Cost)
	assert.GreaterOrEqual(t, st.Cost, int64(orgBudget*95/100))
	assert.Positive(t, st.Clamped)
	assert.Zero(t, st.OverReserved)
	t.Logf("organization: spent %d of %d micro-dollars, %d calls clamped", st.Cost, orgBudget, st.Clamped)
}

// TestClampTokensOnly: without a money limit, OutputClamp = ClampOn lowers
// a ceiling to what a token limit has left: 1,000 tokens per minute, a
// call asking for 4,000 is sent asking for what is left after its prompt,
// and a second call while the first holds its worst case is refused below
// the floor and not sent.
func TestClampTokensOnly(t *testing.T) {
	bodies := make(chan string, 4)
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 50, Shape: func(body []byte) llmtest.Shape {
		bodies <- string(body)
		return llmtest.Shape{}
	}})
	defer srv.Close()
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = newManualClock().now })
	t.Cleanup(func() { _ = rl.Close() })
	opts := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1_000))
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.AcquireOptions = []limiter.AcquireOption{opts}
		o.OutputClamp = llmhttp.ClampOn
		o.NoFeedback = true
	})
	client := &http.Client{Transport: tr}
	body := `{"model":"gpt-4o","max_tokens":4000,"messages":[{"role":"user","content":"hello"}]}`
	resp, err := postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+"/v1/chat/completions", body)
	require.NoError(t, err)
	sent := llmhttp.RequestFromBody([]byte(<-bodies))
	assert.Equal(t, 1_000-sent.PromptTokens, sent.OutputCeiling, "the ceiling is what the tokens left pay for")
	assert.Equal(t, int64(1), tr.Stats().Clamped)

	// While the first call's lease holds its worst case, nothing is left.
	_, err = postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+"/v1/chat/completions", body)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
	assert.Equal(t, int64(1), tr.Stats().ClampRefused)
	assert.Empty(t, bodies)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
}
