package llmhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/internal/pricecheck"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// The money limit end to end: calls through the transport with
// Options.CostLimit against the fake provider, on the memory backend and on
// DynamoDB Local.

// costLimits are the per-call limits of the money tests: rpm and tpm that
// never refuse, and "usd" in micro-dollars with a refill of one
// micro-dollar an hour, so that with the frozen clock no refund is ever
// cut by the refill since its acquire.
var costLimits = limiter.WithLimits(
	limiter.PerMinute("rpm", 1_000_000_000), limiter.PerMinute("tpm", 1_000_000_000),
	limiter.Limit{Name: "usd", Capacity: 1_000_000 * llmhttp.USD, RefillAmount: 1, RefillPeriod: time.Hour},
)

// onCostBackends runs fn on the memory backend and on DynamoDB Local, with
// a limiter on a frozen clock, and gives it the repository to read buckets
// from and the backend's name.
func onCostBackends(t *testing.T, fn func(t *testing.T, backend string, repo limiter.Repository, rl *limiter.RateLimiter)) {
	for _, backend := range []string{"memory", "dynamodb"} {
		t.Run(backend, func(t *testing.T) {
			var repo limiter.Repository = memorystore.New()
			if backend == "dynamodb" {
				r, err := limiter.OpenDynamoDB(context.Background(), ddblocal.Client(t, ddblocal.WithoutStreams), func(o *limiter.DynamoDBOptions) {
					o.Table, o.CreateTable = ddblocal.TableName(t), true
				})
				require.NoError(t, err)
				repo = r
			}
			clk := newManualClock()
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
			t.Cleanup(func() { _ = rl.Close() })
			fn(t, backend, repo, rl)
		})
	}
}

// consumedMicroUSD returns the "usd" limit's total consumed (b_usd_tc) of
// the entity's bucket, in micro-dollars, and its millitokens.
func consumedMicroUSD(t *testing.T, repo limiter.Repository) (int64, int64) {
	t.Helper()
	b, err := repo.GetBucket(context.Background(), store.BucketKey{EntityID: entity, Resource: resource})
	require.NoError(t, err)
	require.NotNil(t, b)
	for _, st := range b.States {
		if st.LimitName == "usd" {
			return st.TotalConsumedMilli / 1000, st.TotalConsumedMilli
		}
	}
	t.Fatal("the bucket has no usd limit")
	return 0, 0
}

// costOutcome is what happens to one seeded call.
type costOutcome int

const (
	costOK          costOutcome = iota // read to the end: the exact cost
	costServerError                    // 5xx: rolled back
	costRefused                        // 429 (provider feedback on): the money is given back
	costHang                           // no answer, the caller cancels: rolled back
	costCloseEarly                     // a few bytes read, then Close: the estimate
	costCancelBody                     // a stream stalls after its first event, the caller cancels: the estimate
	costMalformed                      // a negative count in the usage: the estimate
)

func (o costOutcome) String() string {
	return [...]string{"ok", "server error", "refused", "hang", "close early", "cancel body", "malformed"}[o]
}

// costCall is one seeded call: its body and how it goes.
type costCall struct {
	id        int
	refused   bool // the limiter's acquire failed (ErrUnavailable): nothing sent
	anthropic bool
	stream    bool
	model     string
	body      string
	ceiling   int64 // the body's output ceiling; 0 for none
	outcome   costOutcome
	shape     llmtest.Shape
	fast, us  bool // Anthropic's fast mode and US-only inference
	tier      string
}

var (
	costOpenAIModels    = []string{"gpt-4o-mini", "gpt-6.1-terra", "gpt-5", "o4-mini", "gpt-6-sol"}
	costAnthropicModels = []string{"claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-5-5", "claude-opus-5"}
)

// newCostCall draws call id of the seeded run: its own generator, so that
// the calls do not depend on the order the workers take them in.
func newCostCall(seed uint64, id int) costCall {
	rnd := rand.New(rand.NewPCG(seed, uint64(id)))
	c := costCall{id: id, anthropic: rnd.IntN(2) == 0, stream: rnd.IntN(2) == 0}
	switch p := rnd.IntN(100); {
	case p < 55:
		c.outcome = costOK
	case p < 63:
		c.outcome = costServerError
	case p < 68:
		c.outcome = costRefused
	case p < 75:
		c.outcome = costHang
	case p < 84:
		c.outcome = costCloseEarly
	case p < 92:
		c.outcome = costCancelBody
	default:
		c.outcome = costMalformed
	}
	if c.outcome == costCancelBody {
		c.stream = true
	}
	letters := make([]byte, 1+rnd.IntN(1200))
	for i := range letters {
		letters[i] = "abcdefgh ijklmnop qrstuvwxyz"[rnd.IntN(28)]
	}
	prompt := string(letters)
	var b strings.Builder
	if c.anthropic {
		c.model = costAnthropicModels[rnd.IntN(len(costAnthropicModels))]
		c.ceiling = 1 + rnd.Int64N(300)
		fmt.Fprintf(&b, `{"x_call":%d,"model":%q,"max_tokens":%d,`, id, c.model, c.ceiling)
		long := rnd.IntN(3) == 0
		if long {
			b.WriteString(`"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral","ttl":"1h"}}],`)
		}
		if strings.HasPrefix(c.model, "claude-opus") {
			c.fast, c.us = rnd.IntN(3) == 0, rnd.IntN(3) == 0
			if c.fast {
				b.WriteString(`"speed":"fast",`)
			}
			if c.us {
				b.WriteString(`"inference_geo":"us",`)
			}
		}
		fmt.Fprintf(&b, `"messages":[{"role":"user","content":%q}]`, prompt)
		c.shape.CacheRead, c.shape.CacheWrite = rnd.Int64N(400), rnd.Int64N(400)
		if long {
			c.shape.CacheWriteLong = rnd.Int64N(c.shape.CacheWrite + 1)
		}
	} else {
		c.model = costOpenAIModels[rnd.IntN(len(costOpenAIModels))]
		fmt.Fprintf(&b, `{"x_call":%d,"model":%q,`, id, c.model)
		if rnd.IntN(10) < 7 {
			c.ceiling = 1 + rnd.Int64N(300)
			fmt.Fprintf(&b, `"max_completion_tokens":%d,`, c.ceiling)
		}
		if rnd.IntN(4) == 0 {
			// Writes the usage does not split by lifetime are charged
			// at the long lifetime's rate.
			b.WriteString(`"prompt_cache_retention":"24h",`)
		}
		switch rnd.IntN(4) {
		case 0:
			c.tier, c.shape.ServiceTier = "flex", "flex"
		case 1:
			c.tier, c.shape.ServiceTier = "priority", "priority"
		}
		if c.tier != "" {
			fmt.Fprintf(&b, `"service_tier":%q,`, c.tier)
		}
		fmt.Fprintf(&b, `"messages":[{"role":"user","content":%q}]`, prompt)
		c.shape.CacheRead, c.shape.CacheWrite = rnd.Int64N(400), rnd.Int64N(400)
	}
	c.shape.Reasoning = rnd.Int64N(100)
	if c.stream {
		b.WriteString(`,"stream":true`)
		if !c.anthropic {
			b.WriteString(`,"stream_options":{"include_usage":true}`)
		}
	}
	b.WriteString("}")
	c.body = b.String()
	switch c.outcome {
	case costServerError:
		c.shape.Status = 500 + rnd.IntN(4)
	case costRefused:
		c.shape.Status = http.StatusTooManyRequests
	case costHang:
		c.shape.Hang = true
	case costCancelBody:
		c.shape.Stall = true
	case costMalformed:
		c.shape.EditUsage = func(u map[string]any) {
			for _, k := range []string{"prompt_tokens", "input_tokens"} {
				if _, ok := u[k]; ok {
					u[k] = -1
				}
			}
		}
	}
	if c.fast || c.us {
		fast, us, edit := c.fast, c.us, c.shape.EditUsage
		c.shape.EditUsage = func(u map[string]any) {
			if fast {
				u["speed"] = "fast"
			}
			if us {
				u["inference_geo"] = "us"
			}
			if edit != nil {
				edit(u)
			}
		}
	}
	return c
}

// costOutputTokens is the fake provider's answer length in the money
// tests.
const costOutputTokens = 120

// usage returns the usage the fake provider reports for the call when it
// answers.
func (c costCall) usage(t *testing.T) llmhttp.Usage {
	in, err := llmtest.InputTokens([]byte(c.body))
	require.NoError(t, err)
	out := int64(costOutputTokens)
	if c.ceiling > 0 {
		out = min(out, c.ceiling)
	}
	read := min(c.shape.CacheRead, in)
	write := min(c.shape.CacheWrite, in-read)
	u := llmhttp.Usage{OutputTokens: out, CacheReadTokens: read, CacheCreationTokens: write}
	if c.anthropic {
		u.InputTokens = in - read - write
		u.CacheCreationLongTokens = min(c.shape.CacheWriteLong, write)
		if c.fast {
			u.Speed = "fast"
		}
		if c.us {
			u.InferenceGeo = "us"
		}
	} else {
		u.InputTokens, u.CacheInInput, u.ServiceTier = in, true, c.tier
		if strings.Contains(c.body, `"24h"`) {
			u.CacheCreationLongTokens = write
		}
	}
	return u
}

// refEstimate is the worst case of the call worked out plainly: see
// pricecheck.Estimate.
func refEstimate(t *testing.T, c costCall) int64 {
	m, err := llmhttp.DefaultPrices().Lookup(c.model)
	require.NoError(t, err)
	return pricecheck.Estimate(m, c.body, c.ceiling, c.tier, c.fast, c.us)
}

// run makes the call through client; arrived is closed by the fake
// provider when the request reached it. It reports false when the
// limiter could not acquire (ErrUnavailable: on DynamoDB, the exact
// writes of one item lost every retry to the other callers; nothing was
// acquired or sent).
func (c costCall) run(t *testing.T, client *http.Client, url string, arrived <-chan struct{}) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := "/v1/chat/completions"
	if c.anthropic {
		path = "/v1/messages"
	}
	req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, entity, resource, nil), http.MethodPost, url+path, strings.NewReader(c.body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k1")
	if c.outcome == costHang {
		go func() {
			select {
			case <-arrived:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	resp, err := client.Do(req)
	if errors.Is(err, limiter.ErrUnavailable) {
		return false
	}
	if c.outcome == costHang {
		require.ErrorIs(t, err, context.Canceled, "call %d", c.id)
		return true
	}
	require.NoError(t, err, "call %d", c.id)
	defer resp.Body.Close()
	switch c.outcome {
	case costCloseEarly:
		// At most ten bytes: no usage is among them.
		_, err := resp.Body.Read(make([]byte, 10))
		require.NoError(t, err, "call %d", c.id)
		require.NoError(t, resp.Body.Close())
	case costCancelBody:
		// The first event, then the stream stalls.
		_, err := resp.Body.Read(make([]byte, 64))
		require.NoError(t, err, "call %d", c.id)
		cancel()
		_, err = io.Copy(io.Discard, resp.Body)
		require.Error(t, err, "call %d", c.id)
	default:
		_, err := io.Copy(io.Discard, resp.Body)
		require.NoError(t, err, "call %d", c.id)
		want := http.StatusOK
		if c.shape.Status != 0 {
			want = c.shape.Status
		}
		require.Equal(t, want, resp.StatusCode, "call %d", c.id)
	}
	return true
}

// costCalls is the size of the seeded run: 3,000 calls on the memory
// backend, 500 on DynamoDB Local, so that make test stays short;
// ZAEL_LLM_COST_CALLS sets both (make soak runs 10,000).
func costCalls(t *testing.T, backend string) int {
	n := 3_000
	if backend == "dynamodb" {
		n = 500
	}
	if v := os.Getenv("ZAEL_LLM_COST_CALLS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "ZAEL_LLM_COST_CALLS")
	}
	return n
}

// TestCostLimitSeededCalls: 10,000 seeded random calls of both providers,
// JSON and streams, through a transport with CostLimit "usd" and
// eight callers at once: answered (with cache reads and writes, reasoning,
// service tiers, fast mode and US-only inference), failed with a 5xx,
// refused with a 429, cancelled before any answer, closed early,
// cancelled in a stalled stream, or with a malformed usage. The usd
// limit's total consumed (b_usd_tc) equals, to the micro-dollar, the sum of
// what each call must cost: its exact cost (worked out plainly) when its
// usage was read; nothing when the provider billed nothing (5xx, 429, no
// answer); its worst-case estimate when the body ended before its usage or
// the usage was malformed. The estimate is also checked to be at least the
// exact cost of every such call, so that such a call is charged at least
// what it showed. The transport's Stats.Cost sums the exact costs it read.
func TestCostLimitSeededCalls(t *testing.T) {
	const seed = 40
	onCostBackends(t, func(t *testing.T, backend string, repo limiter.Repository, rl *limiter.RateLimiter) {
		n := costCalls(t, backend)
		calls := make([]costCall, n)
		for i := range calls {
			calls[i] = newCostCall(seed, i)
		}
		var arrivedMu sync.Mutex
		arrived := make(map[int]chan struct{})
		arrival := func(id int) chan struct{} {
			arrivedMu.Lock()
			defer arrivedMu.Unlock()
			ch, ok := arrived[id]
			if !ok {
				ch = make(chan struct{})
				arrived[id] = ch
			}
			return ch
		}
		srv := llmtest.NewServer(llmtest.Config{RPM: 1_000_000_000, TPM: 1_000_000_000_000, OutputTokens: costOutputTokens,
			Shape: func(body []byte) llmtest.Shape {
				// The call's number opens its body: {"x_call":N,
				digits, _, _ := strings.Cut(strings.TrimPrefix(string(body), `{"x_call":`), ",")
				id, err := strconv.Atoi(digits)
				if err != nil || id < 0 || id >= len(calls) {
					return llmtest.Shape{Status: http.StatusBadRequest}
				}
				close(arrival(id))
				return calls[id].shape
			}})
		defer srv.Close()
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.CostLimit = "usd"
			o.AcquireOptions = []limiter.AcquireOption{costLimits}
		})
		client := &http.Client{Transport: tr}

		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(calls) || t.Failed() {
						return
					}
					calls[i].refused = !calls[i].run(t, client, srv.URL, arrival(i))
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())

		var want, exact int64
		byOutcome := map[costOutcome]int{}
		refused := 0
		prices := llmhttp.DefaultPrices()
		for _, c := range calls {
			if c.refused {
				refused++
				continue
			}
			byOutcome[c.outcome]++
			m, err := prices.Lookup(c.model)
			require.NoError(t, err)
			full := refCost(m, c.usage(t))
			switch c.outcome {
			case costOK:
				want += full
				exact += full
			case costCloseEarly, costCancelBody, costMalformed:
				est := refEstimate(t, c)
				require.GreaterOrEqual(t, est, full, "call %d (%s): the estimate covers the whole answer", c.id, c.outcome)
				want += est
			}
		}
		t.Logf("%d calls %v, %d not acquired (ErrUnavailable): %d micro-dollars", len(calls), byOutcome, refused, want)
		assert.Less(t, refused, len(calls)/10, "calls the limiter could not acquire")
		got, milli := consumedMicroUSD(t, repo)
		assert.Equal(t, want, got, "b_usd_tc, micro-dollars")
		assert.Equal(t, got*1000, milli, "whole micro-dollars")
		st := tr.Stats()
		assert.Equal(t, exact, st.Cost, "Stats.Cost")
		assert.Equal(t, int64(byOutcome[costOK]), st.UsageSeen)
		assert.Equal(t, int64(byOutcome[costMalformed]), st.UsageMalformed)
		assert.Equal(t, int64(byOutcome[costCloseEarly]+byOutcome[costCancelBody]), st.EndedWithoutUsage)
		assert.Zero(t, st.EndErrors)
		assert.Zero(t, st.Denied)
	})
}

// TestCostLimitUnknownModel: a request for a model no price table knows
// is refused before anything is acquired or sent, with ErrUnknownModel;
// the resource stands in for a body without a model.
func TestCostLimitUnknownModel(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	srv, hits := fixtureServer(t, "openai_chat.json", "application/json", http.StatusOK)
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{costLimits}
	})
	client := &http.Client{Transport: tr}
	ctx := llmhttp.ContextWithCall(context.Background(), entity, "my-own-model", nil)
	_, err := post(t, client, ctx, srv.URL, `{"model":"gpt-99","messages":[]}`)
	require.ErrorIs(t, err, llmhttp.ErrUnknownModel)
	_, err = post(t, client, ctx, srv.URL, `{"messages":[]}`)
	require.ErrorIs(t, err, llmhttp.ErrUnknownModel)
	assert.Contains(t, err.Error(), `"my-own-model"`)
	assert.Equal(t, int64(0), hits.Load(), "nothing was sent")
	assert.Equal(t, int64(2), tr.Stats().UnknownModels)

	// Priced by the resource, with a table of one's own.
	mine, err := llmhttp.NewPrices(llmhttp.PriceTable{Name: "mine", Models: map[string]llmhttp.ModelPrice{
		"my-own-model": {Rates: llmhttp.Rates{Input: llmhttp.USD, Output: 2 * llmhttp.USD}, MaxOutputTokens: 100},
	}})
	require.NoError(t, err)
	tr = llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.Prices = mine
		o.AcquireOptions = []limiter.AcquireOption{costLimits}
	})
	resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{"messages":[]}`)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	// The fixture's usage: 1117 prompt tokens (1024 cached, priced as
	// input by a table without a cached rate) at $1 and 46 output at $2.
	assert.Equal(t, int64(1117+92), tr.Stats().Cost)
}

// TestCostLimitCallerEstimate: an estimate given with ContextWithCall that names
// the money limit is acquired as given, and adjusted to the exact cost.
func TestCostLimitCallerEstimate(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	t.Cleanup(func() { _ = rl.Close() })
	release := make(chan struct{})
	srv := fixtureStallServer(t, "openai_chat.json", release)
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{costLimits}
	})
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "usd": 5000})
	resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{"model":"gpt-4o"}`)
	require.NoError(t, err)
	usd := func() int64 {
		a, err := rl.Available(context.Background(), entity, resource, costLimits)
		require.NoError(t, err)
		return 1_000_000*llmhttp.USD - a["usd"]
	}
	assert.Equal(t, int64(5000), usd(), "the caller's estimate is held")
	close(release)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, int64(1973), usd(), "the exact cost of the fixture's usage at gpt-4o's prices")
}

// fixtureStallServer answers with the recorded body once release is
// closed.
func fixtureStallServer(t *testing.T, file string, release <-chan struct{}) *httptest.Server {
	t.Helper()
	body := readFile(t, file)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCostLimitRefusedGivesMoneyBack: a 429 keeps its token estimate with
// provider feedback on, but not its money.
func TestCostLimitRefusedGivesMoneyBack(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	srv, _ := fixtureServer(t, "openai_chat.json", "application/json", http.StatusTooManyRequests)
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{costLimits}
	})
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 500})
	resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{"model":"gpt-4o","max_tokens":10}`)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	a, err := rl.Available(context.Background(), entity, resource, costLimits)
	require.NoError(t, err)
	assert.Equal(t, int64(1_000_000_000-500), a["tpm"], "the token estimate stays taken")
	assert.Equal(t, int64(1_000_000*llmhttp.USD), a["usd"], "the money is given back")
	assert.Equal(t, int64(1), tr.Stats().Committed)
}

// TestCostLimitEarlyCloseChargesSeen: a stream closed after Anthropic's
// message_start is charged what that event showed when it is more than
// the estimate (here a caller's estimate of one micro-dollar).
func TestCostLimitEarlyCloseChargesSeen(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":"+
			"{\"input_tokens\":1000,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{costLimits}
	})
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"usd": 1})
	resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true}`)
	require.NoError(t, err)
	buf := make([]byte, 4096)
	var got []byte
	for !strings.Contains(string(got), "\n\n") {
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.NoError(t, resp.Body.Close())
	a, err := rl.Available(context.Background(), entity, resource, costLimits)
	require.NoError(t, err)
	// 1000 × $3 + 2000 × $0.30 + 1 × $15 per million tokens.
	assert.Equal(t, int64(3000+600+15), 1_000_000*llmhttp.USD-a["usd"])
	assert.Equal(t, int64(1), tr.Stats().EndedWithoutUsage)
}

// TestCostLimitLongCacheWithoutSplit: cache writes that the usage does not
// split by lifetime are charged at the long lifetime's rate when the
// request asked for it, and at the short one's otherwise.
func TestCostLimitLongCacheWithoutSplit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"usage":{"prompt_tokens":1000,"completion_tokens":0,"total_tokens":1000,`+
			`"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":1000}}}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		body string
		want int64
	}{
		{`{"model":"gpt-6.1-terra","max_tokens":1}`, 1250},
		{`{"model":"gpt-6.1-terra","max_tokens":1,"prompt_cache_retention":"24h"}`, 2500},
	} {
		rl := newLimiter(t, tpmLimit)
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.CostLimit = "usd"
			o.AcquireOptions = []limiter.AcquireOption{costLimits}
		})
		ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, nil)
		resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, tc.body)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, tc.want, tr.Stats().Cost, tc.body)
	}
}
