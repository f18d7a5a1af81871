package llmhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// The worst case bounds the bill: every choice, every script, the input a
// body does not carry. Each test gives a money budget, prepaid or monthly,
// to concurrent calls against a provider that bills what a real one does,
// and checks that the budget is never overspent.

// budget is a money limit of one kind, on the memory backend with a
// frozen clock.
type budget struct {
	kind   string // "prepaid" or "monthly"
	amount int64
	rl     *limiter.RateLimiter
	opts   limiter.AcquireOption
}

// budgetKinds are the two kinds of money budget.
var budgetKinds = []string{"prepaid", "monthly"}

// newBudget returns a budget of amount micro-dollars for (entity,
// resource): a prepaid balance topped up with it, or a calendar month's
// allowance.
func newBudget(t *testing.T, kind string, amount int64) *budget {
	t.Helper()
	return newBudgetOn(t, kind, amount, memorystore.New())
}

// newBudgetOn is newBudget on repo.
func newBudgetOn(t *testing.T, kind string, amount int64, repo limiter.Repository) *budget {
	t.Helper()
	clk := newManualClock()
	rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
	t.Cleanup(func() { _ = rl.Close() })
	usd := limiter.PerCalendarMonth("usd", amount)
	if kind == "prepaid" {
		usd = limiter.Prepaid("usd")
	}
	b := &budget{kind: kind, amount: amount, rl: rl,
		opts: limiter.WithLimits(limiter.PerMinute("rpm", 1_000_000_000), limiter.PerMinute("tpm", 1_000_000_000), usd)}
	if kind == "prepaid" {
		res, err := rl.TopUp(context.Background(), limiter.TopUpRequest{Entity: entity, Resource: resource, Limit: "usd", Amount: amount, ID: "payment-1"}, b.opts)
		require.NoError(t, err)
		require.True(t, res.Applied)
	}
	return b
}

// left returns what the budget has left.
func (b *budget) left(t *testing.T) int64 {
	t.Helper()
	a, err := b.rl.Available(context.Background(), entity, resource, b.opts)
	require.NoError(t, err)
	return a["usd"]
}

// outcome is what one call through the transport came to.
type outcome struct {
	status int   // the provider's answer, 0 when none
	err    error // the refusal, or a failure reading the answer
}

// callAll makes the calls at once through client, each POSTing body to
// url with ctx, and reads every answer to its end.
func callAll(t *testing.T, client *http.Client, url string, ctx context.Context, bodies []string) []outcome {
	t.Helper()
	out := make([]outcome, len(bodies))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			<-start
			req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, entity, resource, nil), http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				out[i].err = err
				return
			}
			req.Header.Set("Authorization", "Bearer k1")
			resp, err := client.Do(req)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			out[i].status = resp.StatusCode
			_, out[i].err = io.Copy(io.Discard, resp.Body)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// checkBudget asserts the bound: the budget not overspent, no response
// billed above its reservation, and every call answered 200 or refused
// with an error matching one of refusals. It returns the calls admitted.
func checkBudget(t *testing.T, b *budget, tr *llmhttp.Transport, outs []outcome, refusals ...error) int {
	return checkBudgetFrom(t, b, tr, 0, outs, refusals...)
}

// checkBudgetFrom is checkBudget for a transport whose Stats.Cost was
// before when the calls began.
func checkBudgetFrom(t *testing.T, b *budget, tr *llmhttp.Transport, before int64, outs []outcome, refusals ...error) int {
	t.Helper()
	admitted := 0
	for i, o := range outs {
		if o.status != 0 {
			admitted++
			assert.Equal(t, http.StatusOK, o.status, "call %d", i)
			assert.NoError(t, o.err, "call %d", i)
			continue
		}
		matched := false
		for _, r := range refusals {
			matched = matched || errors.Is(o.err, r)
		}
		assert.True(t, matched, "call %d: refused with %v", i, o.err)
	}
	left := b.left(t)
	st := tr.Stats()
	st.Cost -= before
	assert.GreaterOrEqual(t, left, int64(0), "%s: what is left", b.kind)
	assert.Equal(t, b.amount-left, st.Cost, "%s: the spend is the exact cost of the answers", b.kind)
	assert.LessOrEqual(t, st.Cost, b.amount, "%s: the spend", b.kind)
	assert.Zero(t, st.OverReserved, "%s: no answer billed above its reservation", b.kind)
	t.Logf("%s: %d of %d calls admitted, spent %d of %d micro-dollars (%d clamped)", b.kind, admitted, len(outs), st.Cost, b.amount, st.Clamped)
	return admitted
}

// TestWorstCaseChoices: chat completions asking for n = 8 choices (every
// one billed by the provider) against a budget that the cost of one choice
// would admit forty calls of: the worst case prices all eight, so that 20
// concurrent calls never overspend a prepaid balance or a monthly budget.
// best_of is priced the same way.
func TestWorstCaseChoices(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 1_000})
	defer srv.Close()
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	body := `{"model":"gpt-4o","n":8,"max_tokens":1000,"messages":[{"role":"user","content":"Eight poems, please."}]}`
	r := llmhttp.RequestFromBody([]byte(body))
	require.Equal(t, int64(8), r.Choices)
	one := r
	one.Choices = 1
	assert.Equal(t, int64(3), llmhttp.RequestFromBody([]byte(`{"model":"gpt-3.5-turbo-instruct","n":2,"best_of":3}`)).Choices)
	for _, kind := range budgetKinds {
		t.Run(kind, func(t *testing.T) {
			b := newBudget(t, kind, 40*m.Estimate(one)) // five eight-choice calls' worth
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			bodies := make([]string, 20)
			for i := range bodies {
				bodies[i] = body
			}
			billed := srv.Stats("k1").Tokens
			outs := callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", context.Background(), bodies)
			admitted := checkBudget(t, b, tr, outs, limiter.ErrRateLimited)
			assert.Positive(t, admitted)
			assert.Less(t, admitted, 20)
			assert.Equal(t, int64(admitted)*8_000, srv.Stats("k1").Tokens-billed-int64(admitted)*llmtestInput(t, body),
				"the provider billed eight choices of every call")
		})
	}
}

// llmtestInput returns the prompt tokens llmtest bills for body.
func llmtestInput(t *testing.T, body string) int64 {
	t.Helper()
	n, err := llmtest.InputTokens([]byte(body))
	require.NoError(t, err)
	return n
}

// scripts are prompts' texts in several scripts, to tokenize worst.
var scripts = []string{
	"The quick brown fox jumps over the lazy dog. ",
	"敏捷的棕色狐狸跳过了懒狗。",
	"Съешь же ещё этих мягких французских булок. ",
	"🦊🐶🎉🚀 ",
	"ÄÖÜ äöü ß — “quoted” ",
	"\u0000\t\"\\ escapes ",
}

// TestCountTokensBoundsEveryScript: for random prompts mixing scripts,
// the prompt's worst case (RequestFromBody) is at least what llmtest
// bills for it, which counts every non-ASCII byte as a token, however
// the body encodes it (raw UTF-8, or \u escapes as json.Marshal with
// ASCII-only output writes them).
func TestCountTokensBoundsEveryScript(t *testing.T) {
	rnd := rand.New(rand.NewPCG(45, 1))
	for i := range 500 {
		var p strings.Builder
		for range 1 + rnd.IntN(40) {
			p.WriteString(scripts[rnd.IntN(len(scripts))])
		}
		body, err := json.Marshal(map[string]any{"model": "gpt-4o", "max_tokens": 10,
			"messages": []any{map[string]any{"role": "user", "content": p.String()}}})
		require.NoError(t, err)
		escaped := asciiJSON(body)
		for _, b := range [][]byte{body, escaped} {
			got := llmhttp.RequestFromBody(b).PromptTokens
			want, err := llmtest.InputTokens(b)
			require.NoError(t, err)
			require.GreaterOrEqual(t, got, want, "prompt %d: %q", i, b)
		}
	}
	// The counts themselves: ASCII at four bytes a token, anything else a
	// byte a token, an escape its character's bytes.
	assert.Equal(t, int64(2), llmhttp.RequestFromBody([]byte(`abcdefgh`)).PromptTokens)
	assert.Equal(t, int64(1+6), llmhttp.RequestFromBody([]byte(`""中文`)).PromptTokens)
	assert.Equal(t, int64(1+3), llmhttp.RequestFromBody([]byte(`"\u4e2d"`)).PromptTokens)
	assert.Equal(t, int64(1+4), llmhttp.RequestFromBody([]byte(`"\ud83e\udd8a"`)).PromptTokens)
	assert.Equal(t, int64(4), llmhttp.RequestFromBody([]byte(`"\u0041\\u4e2d"`)).PromptTokens, "15 ASCII bytes: an escaped backslash starts no escape")
}

// asciiJSON rewrites the non-ASCII characters of a JSON document as \u
// escapes (surrogate pairs above the basic plane).
func asciiJSON(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteRune(r)
		case r < 0x10000:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		}
	}
	return out.Bytes()
}

// TestWorstCaseNonASCII: a Chinese prompt (a token per byte at worst,
// three bytes a character) on a budget of exactly its worst case, then 20
// concurrent calls in several scripts on ten worst cases: never
// overspent, and no answer billed above its reservation.
func TestWorstCaseNonASCII(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 200})
	defer srv.Close()
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	body := func(text string) string {
		b, err := json.Marshal(map[string]any{"model": "gpt-4o", "max_tokens": 200,
			"messages": []any{map[string]any{"role": "user", "content": text}}})
		require.NoError(t, err)
		return string(b)
	}
	chinese := body(strings.Repeat(scripts[1], 40))
	worst := m.Estimate(llmhttp.RequestFromBody([]byte(chinese)))
	for _, kind := range budgetKinds {
		t.Run(kind, func(t *testing.T) {
			b := newBudget(t, kind, worst)
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			outs := callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", context.Background(), []string{chinese})
			require.Equal(t, 1, checkBudget(t, b, tr, outs, limiter.ErrRateLimited))

			b = newBudget(t, kind, 10*worst)
			tr = llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			var bodies []string
			for i := range 20 {
				bodies = append(bodies, body(strings.Repeat(scripts[i%len(scripts)], 30+i)))
			}
			outs = callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", context.Background(), bodies)
			assert.Positive(t, checkBudget(t, b, tr, outs, limiter.ErrRateLimited))
		})
	}
}

// TestHiddenInputPreviousResponse: OpenAI's Responses API bills a turn
// that continues an earlier response (previous_response_id) for the whole
// earlier conversation, 50,000 tokens here, which the body does not carry.
//
//   - a turn continuing a response the transport did not read is refused
//     before anything is acquired or sent, with a *HiddenInputError that
//     names previous_response_id;
//   - with a per-call bound on hidden input (ContextWithHiddenInputTokens), or a
//     transport-wide one, it is priced at that bound: 10 concurrent calls
//     on a budget of ten of the body's own worst cases, which the old
//     estimate admitted all of (61.5× the credit spent), never overspend;
//   - a turn continuing a response the transport read is priced from that
//     response's usage without a bound: 10 concurrent calls, half of them
//     streams, never overspend.
func TestHiddenInputPreviousResponse(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 100})
	defer srv.Close()
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	first := fmt.Sprintf(`{"model":"gpt-4o","max_output_tokens":100,"input":%q}`, strings.Repeat("abcd", 50_000))
	turn := func(prev string, stream bool) string {
		return fmt.Sprintf(`{"model":"gpt-4o","max_output_tokens":100,"stream":%t,"previous_response_id":%q,"input":"And then?"}`, stream, prev)
	}
	// firstTurn makes the 50,000-token turn through client and returns its
	// response's id.
	firstTurn := func(client *http.Client, ctx context.Context) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(first))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer k1")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var r struct {
			ID string `json:"id"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		require.NotEmpty(t, r.ID)
		return r.ID
	}
	naive := m.Estimate(llmhttp.RequestFromBody([]byte(turn("resp_sim1", false))))
	for _, kind := range budgetKinds {
		t.Run(kind, func(t *testing.T) {
			// Unknown to the transport: refused, nothing sent.
			b := newBudget(t, kind, 10*naive)
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			client := &http.Client{Transport: tr}
			prev := firstTurn(http.DefaultClient, context.Background())
			sent := srv.Stats("k1").Requests
			bodies := make([]string, 10)
			for i := range bodies {
				bodies[i] = turn(prev, i%2 == 0)
			}
			outs := callAll(t, client, srv.URL+"/v1/responses", context.Background(), bodies)
			for i, o := range outs {
				var he *llmhttp.HiddenInputError
				require.ErrorAs(t, o.err, &he, "call %d", i)
				assert.ErrorIs(t, o.err, llmhttp.ErrHiddenInput)
				assert.Equal(t, []string{"previous_response_id"}, he.What)
				assert.Contains(t, o.err.Error(), "ContextWithHiddenInputTokens")
			}
			assert.Equal(t, sent, srv.Stats("k1").Requests, "nothing sent")
			assert.Equal(t, int64(10), tr.Stats().HiddenRefused)
			assert.Equal(t, b.amount, b.left(t))

			// Bounded per call: priced at the bound.
			ctx := llmhttp.ContextWithHiddenInputTokens(context.Background(), 60_000)
			outs = callAll(t, client, srv.URL+"/v1/responses", ctx, bodies)
			assert.Zero(t, checkBudget(t, b, tr, outs, limiter.ErrRateLimited), "no call fits ten of the body's own worst cases")

			// Read by the transport: priced from its usage.
			// About two and a half continuing turns' worth.
			b = newBudget(t, kind, 5*(50_000+200)*m.Input/1_000_000/2)
			tr = llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			client = &http.Client{Transport: tr}
			if kind == "prepaid" {
				_, err := b.rl.TopUp(context.Background(), limiter.TopUpRequest{Entity: "setup", Resource: resource, Limit: "usd", Amount: b.amount, ID: "payment-setup"}, b.opts)
				require.NoError(t, err)
			}
			prev = firstTurn(client, llmhttp.ContextWithCall(context.Background(), "setup", resource, nil))
			for i := range bodies {
				bodies[i] = turn(prev, i%2 == 0)
			}
			before := tr.Stats().Cost
			outs = callAll(t, client, srv.URL+"/v1/responses", context.Background(), bodies)
			admitted := checkBudgetFrom(t, b, tr, before, outs, limiter.ErrRateLimited)
			assert.Positive(t, admitted)
			assert.Less(t, admitted, 10)
		})
	}
}

// TestHiddenInputParts: each part a body names that the provider bills
// without the body carrying it is named in Request.Hidden; with a money
// limit such a call is refused with ErrHiddenInput, nothing sent; with a
// transport-wide bound (Options.MaxHiddenInputTokens) it is sent, and its
// worst case holds the bound: a budget one micro-dollar short of it
// refuses the call (ceilings not lowered), the worst case itself admits
// it.
func TestHiddenInputParts(t *testing.T) {
	for _, tc := range []struct{ name, body, hidden string }{
		{"file by id", `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-1"}]}]}`, "input_file"},
		{"chat file", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "file"},
		{"anthropic document", `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}}]}]}`, "document"},
		{"conversation", `{"model":"gpt-4o","conversation":"conv_1","input":"hi"}`, "conversation"},
		{"stored prompt", `{"model":"gpt-4o","prompt":{"id":"pmpt_1"},"input":"hi"}`, "prompt"},
		{"item reference", `{"model":"gpt-4o","input":[{"type":"item_reference","id":"msg_1"}]}`, "item_reference"},
		{"hosted tool", `{"model":"gpt-4o","tools":[{"type":"web_search"}],"input":"news?"}`, "tool web_search"},
		{"server tool", `{"model":"claude-sonnet-4-5","max_tokens":10,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"messages":[]}`, "tool web_fetch_20250910"},
		{"search options", `{"model":"gpt-4o","web_search_options":{},"messages":[]}`, "web_search_options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := llmhttp.RequestFromBody([]byte(tc.body))
			require.Equal(t, []string{tc.hidden}, r.Hidden)
			if tc.hidden == "document" {
				text := strings.Replace(tc.body, `{"type":"url","url":"https://x/a.pdf"}`, `{"type":"text","media_type":"text/plain","data":"The text."}`, 1)
				assert.Empty(t, llmhttp.RequestFromBody([]byte(text)).Hidden, "a plain-text document carries its text")
			}
			srv, hits := fixtureServer(t, "openai_chat.json", "application/json", http.StatusOK)
			b := newBudget(t, "prepaid", 10*llmhttp.USD)
			tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
				o.CostLimit = "usd"
				o.AcquireOptions = []limiter.AcquireOption{b.opts}
			})
			_, err := post(t, &http.Client{Transport: tr}, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL, tc.body)
			var he *llmhttp.HiddenInputError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, []string{tc.hidden}, he.What)
			assert.Zero(t, hits.Load(), "nothing sent")

			m, err := llmhttp.DefaultPrices().Lookup(r.Model)
			require.NoError(t, err)
			r.HiddenTokens = 5_000
			worst := m.Estimate(r)
			require.Greater(t, worst, m.Estimate(llmhttp.RequestFromBody([]byte(tc.body))))
			for _, amount := range []int64{worst - 1, worst} {
				b := newBudget(t, "prepaid", amount)
				tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
					o.CostLimit = "usd"
					o.AcquireOptions = []limiter.AcquireOption{b.opts}
					o.MaxHiddenInputTokens = 5_000
					o.OutputClamp = llmhttp.ClampOff
				})
				resp, err := post(t, &http.Client{Transport: tr}, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL, tc.body)
				if amount < worst {
					require.ErrorIs(t, err, limiter.ErrBalanceExhausted)
					continue
				}
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				require.NoError(t, resp.Body.Close())
			}
			assert.Equal(t, int64(1), hits.Load(), "sent once: at the bound's worst case")
		})
	}
}

// TestOverReservationSettledAndCounted: a provider that bills a prompt ten
// times what the body holds (more than any worst case can see) overdraws a
// prepaid balance of exactly the call's worst case: the response is
// settled to its exact cost, the balance goes below zero by exactly what
// the cost exceeded the reservation by, Stats counts it, and it is logged
// — the one way a budget is overdrawn.
func TestOverReservationSettledAndCounted(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 10, EditUsage: func(u map[string]any) {
		if p, ok := u["prompt_tokens"].(int64); ok {
			u["prompt_tokens"] = 10 * p
		}
	}})
	defer srv.Close()
	body := `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"Hello there, how are you today?"}]}`
	m, err := llmhttp.DefaultPrices().Lookup("gpt-4o")
	require.NoError(t, err)
	worst := m.Estimate(llmhttp.RequestFromBody([]byte(body)))
	in := llmtestInput(t, body)
	cost := refCost(m, llmhttp.Usage{InputTokens: 10 * in, OutputTokens: 10, CacheInInput: true})
	require.Greater(t, cost, worst)

	var logs bytes.Buffer
	b := newBudget(t, "prepaid", worst)
	tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{b.opts}
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	outs := callAll(t, &http.Client{Transport: tr}, srv.URL+"/v1/chat/completions", context.Background(), []string{body})
	require.NoError(t, outs[0].err)
	require.Equal(t, http.StatusOK, outs[0].status)
	st := tr.Stats()
	assert.Equal(t, cost, st.Cost, "settled exactly")
	assert.Equal(t, int64(1), st.OverReserved)
	assert.Equal(t, cost-worst, st.OverReservedCost)
	assert.Equal(t, worst-cost, b.left(t), "the balance overdrawn by exactly the excess")
	assert.Contains(t, logs.String(), "billed more than its worst case")
}

// TestRequestFromBodyExactNames: the members are read by their exact
// names, as the providers read them: a body that names "MODEL" or
// "MAX_TOKENS" beside "model" and "max_tokens" is priced by the latter
// (a case-insensitive decode would price a dear model as a cheap one, or
// a large ceiling as one token); numbers written as fractions or strings
// count, rounded up; a later duplicate wins, as with the providers.
func TestRequestFromBodyExactNames(t *testing.T) {
	r := llmhttp.RequestFromBody([]byte(`{"model":"gpt-5","max_tokens":5000,"n":2,"MODEL":"gpt-4o-mini","Max_Tokens":1,"N":1}`))
	assert.Equal(t, "gpt-5", r.Model)
	assert.Equal(t, int64(5000), r.OutputCeiling)
	assert.Equal(t, int64(2), r.Choices)
	r = llmhttp.RequestFromBody([]byte(`{"model":"gpt-4o","n":"8","max_completion_tokens":99.5,"best_of":2.0}`))
	assert.Equal(t, int64(8), r.Choices)
	assert.Equal(t, int64(100), r.OutputCeiling)
	r = llmhttp.RequestFromBody([]byte(`{"model":"gpt-4o-mini","max_tokens":1,"model":"gpt-5","max_tokens":9000}`))
	assert.Equal(t, "gpt-5", r.Model)
	assert.Equal(t, int64(9000), r.OutputCeiling)
}
