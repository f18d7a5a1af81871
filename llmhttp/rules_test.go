package llmhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// The providers' rule packs: each counted as its provider documents, and
// a limiter charged by a pack holds what the provider's own remaining
// figures say.

// TestRulePacks: what each pack takes at admission and holds once
// answered, for a request of 1,000 prompt tokens asking for 500 output
// tokens twice (n = 2) or once, and a usage of 600 uncached input tokens,
// 300 cache reads, 100 cache writes and 400 output tokens.
func TestRulePacks(t *testing.T) {
	req := llmhttp.Request{Model: "m", PromptTokens: 1_000, OutputCeiling: 500, Choices: 2}
	// The same usage in each provider's form: OpenAI's input includes the
	// cache counts, Anthropic's excludes them.
	openAI := llmhttp.Usage{InputTokens: 1_000, CacheReadTokens: 300, CacheCreationTokens: 100, OutputTokens: 400, CacheInInput: true}
	anthropic := llmhttp.Usage{InputTokens: 600, CacheReadTokens: 300, CacheCreationTokens: 100, OutputTokens: 400}
	claude4, claude35 := req, req
	claude4.Model, claude4.Choices = "us.anthropic.claude-sonnet-4-5-20250929-v1:0", 1
	claude35.Model, claude35.Choices = "anthropic.claude-3-5-sonnet-20240620-v1:0", 1
	for _, tc := range []struct {
		rules          llmhttp.Rules
		req            llmhttp.Request
		usage          llmhttp.Usage
		admit, settled limiter.Consume
	}{
		{llmhttp.OpenAIRules(), req, openAI,
			limiter.Consume{"rpm": 1, "tpm": 2_000}, limiter.Consume{"rpm": 1, "tpm": 2_000}},
		{llmhttp.AzureOpenAIRules(), req, openAI,
			limiter.Consume{"rpm": 1, "tpm": 2_000}, limiter.Consume{"rpm": 1, "tpm": 2_000}},
		{llmhttp.AnthropicRules(), claude4, anthropic,
			limiter.Consume{"rpm": 1, "itpm": 1_000, "otpm": 500}, limiter.Consume{"rpm": 1, "itpm": 700, "otpm": 400}},
		{llmhttp.BedrockRules(), claude4, anthropic,
			limiter.Consume{"rpm": 1, "tpm": 1_500}, limiter.Consume{"rpm": 1, "tpm": 700 + 5*400}},
		{llmhttp.BedrockRules(), claude35, anthropic,
			limiter.Consume{"rpm": 1, "tpm": 1_500}, limiter.Consume{"rpm": 1, "tpm": 700 + 400}},
		{llmhttp.BedrockOpenAIRules(), req, openAI,
			limiter.Consume{"rpm": 1, "itpm": 1_000, "otpm": 1_000}, limiter.Consume{"rpm": 1, "itpm": 1_000, "otpm": 400}},
	} {
		t.Run(tc.rules.Name+"/"+tc.req.Model, func(t *testing.T) {
			assert.Regexp(t, regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`), tc.rules.AsOf)
			assert.True(t, strings.HasPrefix(tc.rules.Source, "https://"))
			assert.Equal(t, tc.admit, tc.rules.Admit(tc.req))
			assert.Equal(t, tc.settled, tc.rules.Settle(tc.req, tc.usage))
		})
	}
	for model, burn := range map[string]int64{
		"anthropic.claude-3-7-sonnet-20250219-v1:0": 5, "us.anthropic.claude-opus-4-1-20250805-v1:0": 5,
		"anthropic.claude-haiku-4-5-20251001-v1:0": 5, "anthropic.claude-3-5-haiku-20241022-v1:0": 1,
		"amazon.nova-pro-v1:0": 1, "meta.llama3-70b-instruct-v1:0": 1,
	} {
		assert.Equal(t, burn, llmhttp.BedrockBurndown(model), model)
	}
}

// rulesCase is one provider of TestRulesTrackProvider: its pack, path,
// the limits it enforces and the body of a call.
type rulesCase struct {
	rules  llmhttp.Rules
	path   string
	limits map[string]int64 // per minute, by name
	body   func(rnd *rand.Rand) string
	caches bool // the answers report cache reads and writes
}

func rulesCases() []rulesCase {
	prompt := func(rnd *rand.Rand) string {
		var p strings.Builder
		for range 1 + rnd.IntN(30) {
			p.WriteString(scripts[rnd.IntN(len(scripts))])
		}
		b, _ := json.Marshal(p.String())
		return string(b)
	}
	openAIBody := func(rnd *rand.Rand) string {
		return fmt.Sprintf(`{"model":"gpt-4o","max_tokens":%d,"n":%d,"messages":[{"role":"user","content":%s}]}`,
			1+rnd.IntN(400), 1+rnd.IntN(2), prompt(rnd))
	}
	anthropicBody := func(rnd *rand.Rand) string {
		return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":%d,"messages":[{"role":"user","content":%s}]}`,
			1+rnd.IntN(400), prompt(rnd))
	}
	bedrockBody := func(rnd *rand.Rand) string {
		return fmt.Sprintf(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":%d,"messages":[{"role":"user","content":%s}]}`,
			1+rnd.IntN(400), prompt(rnd))
	}
	bedrockOpenAIBody := func(rnd *rand.Rand) string {
		return fmt.Sprintf(`{"model":"openai.gpt-oss-120b-1:0","max_tokens":%d,"messages":[{"role":"user","content":%s}]}`,
			1+rnd.IntN(400), prompt(rnd))
	}
	return []rulesCase{
		{llmhttp.OpenAIRules(), "/v1/chat/completions", map[string]int64{"rpm": 500, "tpm": 60_000}, openAIBody, false},
		{llmhttp.AzureOpenAIRules(), "/v1/chat/completions", map[string]int64{"rpm": 500, "tpm": 60_000}, openAIBody, false},
		{llmhttp.AnthropicRules(), "/v1/messages", map[string]int64{"rpm": 500, "itpm": 40_000, "otpm": 16_000}, anthropicBody, true},
		{llmhttp.BedrockRules(), "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke", map[string]int64{"rpm": 500, "tpm": 100_000}, bedrockBody, true},
		{llmhttp.BedrockOpenAIRules(), "/openai/v1/chat/completions", map[string]int64{"rpm": 500, "itpm": 40_000, "otpm": 16_000}, bedrockOpenAIBody, false},
	}
}

// limitsOf returns the limiter's limits for a provider's.
func limitsOf(limits map[string]int64) []limiter.Limit {
	var out []limiter.Limit
	for name, v := range limits {
		out = append(out, limiter.PerMinute(name, v))
	}
	return out
}

// TestRulesTrackProvider: per provider, 1,000 calls one after another
// (prompts in six scripts, random ceilings, n for OpenAI, cache reads and
// writes for Anthropic and Bedrock, streams one in three, a manual clock
// moving 0–400 ms between calls) through a transport charging by the
// provider's pack, against llmtest counting by the same pack with the
// provider's headers, provider feedback off: after every response, each
// limit's remaining in the limiter is within ±1 % of the limit of the
// provider's own remaining figure, and the provider refuses nothing the
// limiter admitted.
func TestRulesTrackProvider(t *testing.T) {
	for _, tc := range rulesCases() {
		t.Run(tc.rules.Name, func(t *testing.T) {
			clk := newManualClock()
			rnd := rand.New(rand.NewPCG(45, 4))
			var shapeMu sync.Mutex // guards shape
			var shape llmtest.Shape
			tpm := tc.limits["tpm"]
			if tpm == 0 {
				tpm = 1_000_000_000
			}
			srv := llmtest.NewServer(llmtest.Config{RPM: tc.limits["rpm"], TPM: tpm, OutputTokens: 300,
				Rules: &tc.rules, Limits: tc.limits, Now: clk.now,
				Shape: func([]byte) llmtest.Shape { shapeMu.Lock(); defer shapeMu.Unlock(); return shape }})
			defer srv.Close()
			rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = clk.now })
			t.Cleanup(func() { _ = rl.Close() })
			opts := limiter.WithLimits(limitsOf(tc.limits)...)
			tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
				o.Rules = tc.rules
				o.NoFeedback = true
				o.AcquireOptions = []limiter.AcquireOption{opts}
			})
			client := &http.Client{Transport: tr}
			admitted, refused, worst := 0, 0, 0.0
			for i := range 1_000 {
				shapeMu.Lock()
				shape = llmtest.Shape{}
				if tc.caches {
					shape.CacheRead, shape.CacheWrite = rnd.Int64N(200), rnd.Int64N(100)
				}
				shapeMu.Unlock()
				body := tc.body(rnd)
				if rnd.IntN(3) == 0 {
					body = strings.TrimSuffix(body, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
				}
				resp, err := postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+tc.path, body)
				if err != nil {
					require.ErrorIs(t, err, limiter.ErrRateLimited, "call %d", i)
					refused++
				} else {
					require.Equal(t, http.StatusOK, resp.StatusCode, "call %d: the provider admits what the limiter admitted", i)
					_, err = io.Copy(io.Discard, resp.Body)
					require.NoError(t, err)
					require.NoError(t, resp.Body.Close())
					admitted++
				}
				ours, err := rl.Available(context.Background(), entity, resource, opts)
				require.NoError(t, err)
				theirs := srv.Remaining("k1")
				for name, limit := range tc.limits {
					d := math.Abs(float64(ours[name]) - theirs[name])
					worst = max(worst, d/float64(limit))
					require.LessOrEqual(t, d, float64(limit)/100, "call %d, %s: ours %d, the provider's %.1f", i, name, ours[name], theirs[name])
				}
				clk.add(time.Duration(rnd.IntN(400)) * time.Millisecond)
			}
			assert.Positive(t, admitted)
			assert.Positive(t, refused, "the limits were reached")
			assert.Zero(t, srv.Stats("k1").RateLimited)
			t.Logf("%s: %d admitted, %d refused by the limiter, 0 by the provider; largest gap %.4f %% of a limit",
				tc.rules.Name, admitted, refused, 100*worst)
		})
	}
}

// simClock is a virtual clock for callers that wait: time stands still
// while any caller works, and when every caller waits it jumps to the
// earliest wake-up. Calls take no time; a run's outcome does not depend on
// how fast the machine is.
type simClock struct {
	mu      sync.Mutex
	t       time.Time
	active  int // callers not finished
	waiting []simWaiter
}

type simWaiter struct {
	at time.Time
	ch chan struct{}
}

func (c *simClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// sleepUntil blocks the caller until the clock reaches at.
func (c *simClock) sleepUntil(at time.Time) {
	c.mu.Lock()
	ch := make(chan struct{})
	c.waiting = append(c.waiting, simWaiter{at, ch})
	c.advanceLocked()
	c.mu.Unlock()
	<-ch
}

// done retires a caller.
func (c *simClock) done() {
	c.mu.Lock()
	c.active--
	c.advanceLocked()
	c.mu.Unlock()
}

// advanceLocked moves the clock to the earliest wake-up once every caller
// waits, and wakes those due.
func (c *simClock) advanceLocked() {
	if len(c.waiting) == 0 || len(c.waiting) < c.active {
		return
	}
	next := c.waiting[0].at
	for _, w := range c.waiting {
		if w.at.Before(next) {
			next = w.at
		}
	}
	if next.After(c.t) {
		c.t = next
	}
	kept := c.waiting[:0]
	for _, w := range c.waiting {
		if w.at.After(c.t) {
			kept = append(kept, w)
			continue
		}
		close(w.ch)
	}
	c.waiting = kept
}

// TestRulesFleet: per provider, a fleet of three limiters on one store,
// two callers each, charging by the provider's pack against llmtest
// counting by it (both starting empty), on a virtual clock: each caller
// calls as long as the limiter admits and, when refused, waits its
// RetryAfter, for one minute. The provider refuses nothing (0 429s), and
// the calls consume at least 95 % of what the provider's binding token
// limit granted in the minute. Provider feedback is off: the packs alone
// track the provider. (With it on, a correction read from headers of calls
// that reached the provider in another order than they were admitted
// takes tokens the fleet had already counted: in a run on the wall clock
// OpenAI's tokens fell to 79 %.)
func TestRulesFleet(t *testing.T) {
	const window = time.Minute
	for _, tc := range rulesCases() {
		t.Run(tc.rules.Name, func(t *testing.T) {
			limits := map[string]int64{"rpm": 1_000_000}
			for name, v := range tc.limits {
				if name != "rpm" {
					limits[name] = v
				}
			}
			tpm := limits["tpm"]
			if tpm == 0 {
				tpm = 1_000_000_000
			}
			clk := &simClock{t: newManualClock().now()}
			srv := llmtest.NewServer(llmtest.Config{RPM: limits["rpm"], TPM: tpm, OutputTokens: 300,
				Rules: &tc.rules, Limits: limits, StartEmpty: true, Now: clk.now})
			defer srv.Close()
			start := clk.now()
			srv.Remaining("k1") // the provider's buckets begin now, empty
			repo := memorystore.New()
			opts := limiter.WithLimits(limitsOf(limits)...)
			var fleet []*llmhttp.Transport
			for i := range 3 {
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
				t.Cleanup(func() { _ = rl.Close() })
				if i == 0 {
					// The fleet's bucket starts empty too.
					a, err := rl.Available(context.Background(), entity, resource, opts)
					require.NoError(t, err)
					lease, err := rl.Acquire(context.Background(), entity, resource, limiter.Consume(a), opts)
					require.NoError(t, err)
					require.NoError(t, lease.Commit(context.Background()))
				}
				fleet = append(fleet, llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
					o.Rules = tc.rules
					o.AcquireOptions = []limiter.AcquireOption{opts}
					o.NoFeedback = true
				}))
			}
			deadline := start.Add(window)
			var wg sync.WaitGroup
			var calls, refusals atomic.Int64
			clk.active = 2 * len(fleet)
			for f, tr := range fleet {
				client := &http.Client{Transport: tr}
				for g := range 2 {
					wg.Go(func() {
						defer clk.done()
						rnd := rand.New(rand.NewPCG(45, uint64(2*f+g)))
						for clk.now().Before(deadline) {
							resp, err := postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+tc.path, tc.body(rnd))
							var rle *limiter.RateLimitExceededError
							if errors.As(err, &rle) {
								refusals.Add(1)
								clk.sleepUntil(clk.now().Add(rle.RetryAfter))
								continue
							}
							if !assert.NoError(t, err) {
								return
							}
							calls.Add(1)
							_, _ = io.Copy(io.Discard, resp.Body)
							_ = resp.Body.Close()
						}
					})
				}
			}
			wg.Wait()
			elapsed := clk.now().Sub(start)
			left := srv.Remaining("k1")
			st := srv.Stats("k1")
			assert.Zero(t, st.RateLimited, "provider 429s")
			best := 0.0
			for name, v := range limits {
				if name == "rpm" || v >= 1_000_000_000 {
					continue
				}
				// The buckets started empty and stayed below their
				// capacity: what the provider granted since, less what
				// is left, is what the calls consumed.
				consumed := float64(v)*elapsed.Minutes() - left[name]
				granted := float64(v) * window.Minutes()
				used := consumed / granted
				best = max(best, used)
				t.Logf("%s %s: %.0f consumed of %.0f granted in the minute (%.1f %%)", tc.rules.Name, name, consumed, granted, 100*used)
			}
			assert.GreaterOrEqual(t, best, 0.95, "the binding limit used")
			t.Logf("%s: %d calls answered, %d refusals by the fleet, %d provider 429s", tc.rules.Name, calls.Load(), refusals.Load(), st.RateLimited)
		})
	}
}

// TestBedrockConverse: a Converse body's ceiling (inferenceConfig.maxTokens)
// bounds its worst case, a Converse answer's camel-case usage is read
// (the input without its cache counts, as Anthropic's), and a Converse
// body whose worst case does not fit is refused, not lowered: its
// ceiling is nested.
func TestBedrockConverse(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":700}}`
	r := llmhttp.RequestFromBody([]byte(body))
	assert.Equal(t, int64(700), r.OutputCeiling)
	answer := `{"output":{"message":{"role":"assistant","content":[{"text":"hello"}]}},"stopReason":"end_turn",` +
		`"usage":{"inputTokens":11,"outputTokens":5,"totalTokens":46,"cacheReadInputTokens":20,"cacheWriteInputTokens":10}}`
	var hits atomic.Int64
	srv := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	})
	const model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = newManualClock().now })
	t.Cleanup(func() { _ = rl.Close() })
	opts := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000))
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.Rules = llmhttp.BedrockRules()
		o.AcquireOptions = []limiter.AcquireOption{opts}
		o.NoFeedback = true
		o.OutputClamp = llmhttp.ClampOn
	})
	resp, err := postKey(t, &http.Client{Transport: tr}, llmhttp.ContextWithCall(context.Background(), entity, resource, nil),
		srv.URL+"/model/"+model+"/converse", body)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	a, err := rl.Available(context.Background(), entity, resource, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(10_000-(11+10+5*5)), a["tpm"], "input + cache writes + five times the output")
	assert.Equal(t, int64(46), tr.Stats().Tokens)

	big := strings.Replace(body, `"maxTokens":700`, `"maxTokens":20000`, 1)
	_, err = postKey(t, &http.Client{Transport: tr}, llmhttp.ContextWithCall(context.Background(), entity, resource, nil),
		srv.URL+"/model/"+model+"/converse", big)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
	assert.Equal(t, int64(1), hits.Load(), "the second call not sent")
	assert.Zero(t, tr.Stats().Clamped)
}

// httptestServer starts a server answering with h.
func httptestServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
