package llmhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// Output ceilings lowered to what a budget has left: the $0.45 cap of
// TestCostCapConcurrent spent to at least 99 %, never past it.

// clampServer is a fake provider for capCall bodies that records the
// worst case of every body that reaches it (after the transport lowered
// its ceiling) and, while hold is set, holds every call until it is
// closed.
type clampServer struct {
	*llmtest.Server
	mu       sync.Mutex
	reserved int64 // Σ worst cases of the bodies that arrived
	arrived  atomic.Int64
	hold     chan struct{}
}

func newClampServer(t *testing.T) *clampServer {
	m, err := llmhttp.DefaultPrices().Lookup(capModel)
	require.NoError(t, err)
	cs := &clampServer{}
	cs.Server = llmtest.NewServer(llmtest.Config{RPM: 1_000_000_000, TPM: 1_000_000_000_000, OutputTokens: capOutputTokens,
		Shape: func(body []byte) llmtest.Shape {
			cs.mu.Lock()
			cs.reserved += m.Estimate(llmhttp.RequestFromBody(body))
			ch := cs.hold
			cs.mu.Unlock()
			cs.arrived.Add(1)
			if ch != nil {
				<-ch
			}
			return llmtest.Shape{}
		}})
	t.Cleanup(cs.Close)
	return cs
}

// floorWorst returns the worst case of body at the default floor, the
// least a call can be sent with.
func floorWorst(t *testing.T, body string) int64 {
	m, err := llmhttp.DefaultPrices().Lookup(capModel)
	require.NoError(t, err)
	r := llmhttp.RequestFromBody([]byte(body))
	r.OutputCeiling = llmhttp.DefaultMinOutputTokens
	return m.Estimate(r)
}

// TestCostCapClamped: the setup of TestCostCapConcurrent ($0.45, no
// refill; gpt-4o calls reserving $0.026–$0.057 at their own max_tokens,
// costing about $0.012) with output ceilings lowered to what the budget
// has left (on by default with a cost limit), on the memory backend,
// DynamoDB Local and redis-server:
//
//   - held: 50 calls at once, each held by the provider until all are
//     admitted or refused: the worst cases of the bodies that reached
//     the provider (ceilings as lowered) sum to at most the budget — two
//     calls that saw the same balance did not both spend it;
//   - free: 50 goroutines each calling until refused, answers at once:
//     the spend reaches at least 99 % of the budget and never passes it,
//     equals the usd limit's total consumed and the sum of the answers'
//     exact costs, and what is left at the end cannot pay for any call
//     at the floor (no call was refused that the budget could pay the
//     floor of);
//   - sequential: a 1.5 kB prompt with max_tokens 2,000, called until
//     refused, on a fresh $0.45: the same bounds.
func TestCostCapClamped(t *testing.T) {
	onCapBackends(t, func(t *testing.T, rl *limiter.RateLimiter) {
		ctx := context.Background()
		cs := newClampServer(t)
		tr := llmhttp.NewTransport(rl, nil, llmhttp.WithCostLimit("usd"), llmhttp.WithAcquireOptions(capLimits))
		client := &http.Client{Transport: tr}
		balance := func(entity string) int64 {
			a, err := rl.Available(ctx, entity, resource, capLimits)
			require.NoError(t, err)
			return a["usd"]
		}
		var calls []capCall
		for i := range 300 {
			calls = append(calls, newCapCall(t, i))
		}
		var billed atomic.Int64
		call := func(entity string, body string) (bool, error) {
			for retries := 0; ; retries++ {
				req, err := http.NewRequestWithContext(llmhttp.WithCall(ctx, entity, resource, nil), http.MethodPost,
					cs.URL+"/v1/chat/completions", strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer k1")
				resp, err := client.Do(req)
				if errors.Is(err, limiter.ErrUnavailable) && retries < 20 {
					continue
				}
				if err != nil {
					return false, err
				}
				cost, err := readCapAnswer(resp)
				billed.Add(cost)
				return true, err
			}
		}

		// held
		cs.mu.Lock()
		cs.hold = make(chan struct{})
		cs.mu.Unlock()
		var refused atomic.Int64
		var wg sync.WaitGroup
		for g := range capCalls {
			wg.Go(func() {
				ok, err := call(entity, calls[g].body)
				if !ok {
					assert.ErrorIs(t, err, limiter.ErrRateLimited)
					refused.Add(1)
				}
			})
		}
		deadline := time.Now().Add(time.Minute)
		for cs.arrived.Load()+refused.Load() < capCalls && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		cs.mu.Lock()
		reserved := cs.reserved
		close(cs.hold)
		cs.hold = nil
		cs.mu.Unlock()
		wg.Wait()
		assert.LessOrEqual(t, reserved, int64(capMicroUSD), "held: the worst cases sent")
		t.Logf("held: %d admitted, %d refused, %d micro-dollars reserved, %d clamped",
			cs.arrived.Load(), refused.Load(), reserved, tr.Stats().Clamped)

		// free
		var next atomic.Int64
		next.Store(capCalls)
		var lastRefusedFloor atomic.Int64
		for range capCalls {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					require.Less(t, i, len(calls), "calls enough")
					ok, err := call(entity, calls[i].body)
					if !ok {
						assert.ErrorIs(t, err, limiter.ErrRateLimited)
						lastRefusedFloor.Store(floorWorst(t, calls[i].body))
						return
					}
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		st := tr.Stats()
		consumed, _ := consumedMicroUSD(t, rl.Repository())
		left := balance(entity)
		assert.Equal(t, billed.Load(), consumed, "b_usd_tc is the cost of the usages returned")
		assert.Equal(t, consumed, st.Cost, "Stats.Cost")
		assert.LessOrEqual(t, consumed, int64(capMicroUSD), "spend within the budget")
		assert.GreaterOrEqual(t, consumed, int64(capMicroUSD)*99/100, "spend at least 99 %")
		assert.Equal(t, capMicroUSD-consumed, left)
		assert.Less(t, left, lastRefusedFloor.Load(), "what is left cannot pay the last refused call at the floor")
		assert.Positive(t, st.Clamped)
		assert.Zero(t, st.OverReserved)
		t.Logf("free: spent %d of %d micro-dollars (%.2f %%), %d left; %d calls clamped, %d refused below the floor",
			consumed, capMicroUSD, 100*float64(consumed)/capMicroUSD, left, st.Clamped, st.ClampRefused)

		// sequential
		const seqEntity = "api-key-seq"
		body := fmt.Sprintf(`{"model":%q,"max_tokens":2000,"messages":[{"role":"user","content":%q}]}`,
			capModel, strings.Repeat("abcdefgh ", 1500/9))
		before := billed.Load()
		n := 0
		for {
			ok, err := call(seqEntity, body)
			if !ok {
				require.ErrorIs(t, err, limiter.ErrRateLimited)
				break
			}
			require.NoError(t, err)
			n++
			require.Less(t, n, 1_000)
		}
		spent := billed.Load() - before
		left = balance(seqEntity)
		assert.LessOrEqual(t, spent, int64(capMicroUSD))
		assert.GreaterOrEqual(t, spent, int64(capMicroUSD)*99/100, "sequential: spend at least 99 %")
		assert.Equal(t, capMicroUSD-spent, left)
		assert.Less(t, left, floorWorst(t, body), "sequential: what is left cannot pay the floor")
		t.Logf("sequential: %d calls, spent %d of %d micro-dollars (%.2f %%), %d left",
			n, spent, capMicroUSD, 100*float64(spent)/capMicroUSD, left)
	})
}

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
			tr := llmhttp.NewTransport(b.rl, nil, llmhttp.WithCostLimit("usd"), llmhttp.WithAcquireOptions(b.opts))
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
	for _, opt := range []llmhttp.Option{llmhttp.WithOutputClamp(false), llmhttp.WithMinOutputTokens(301)} {
		b := newBudget(t, "prepaid", m.Estimate(r))
		tr := llmhttp.NewTransport(b.rl, nil, llmhttp.WithCostLimit("usd"), llmhttp.WithAcquireOptions(b.opts), opt)
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
	rl := limiter.New(memorystore.New(), limiter.WithClock(newManualClock().now))
	t.Cleanup(func() { _ = rl.Close() })
	_, err := rl.CreateEntity(ctx, limiter.Entity{ID: "org"})
	require.NoError(t, err)
	_, err = rl.CreateEntity(ctx, limiter.Entity{ID: entity, ParentID: "org", Cascade: true})
	require.NoError(t, err)
	const orgBudget = 20_000
	require.NoError(t, rl.SetLimits(ctx, "org", resource, []limiter.Limit{limiter.PerCalendarMonth("usd", orgBudget)}))
	require.NoError(t, rl.SetLimits(ctx, entity, resource, []limiter.Limit{limiter.PerCalendarMonth("usd", llmhttp.USD),
		limiter.PerMinute("rpm", 1_000_000), limiter.PerMinute("tpm", 1_000_000_000)}))
	tr := llmhttp.NewTransport(rl, nil, llmhttp.WithCostLimit("usd"), llmhttp.WithMinOutputTokens(16))
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

// TestClampTokensOnly: without a money limit, WithOutputClamp(true) lowers
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
	rl := limiter.New(memorystore.New(), limiter.WithClock(newManualClock().now))
	t.Cleanup(func() { _ = rl.Close() })
	opts := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 1_000))
	tr := llmhttp.NewTransport(rl, nil, llmhttp.WithAcquireOptions(opts), llmhttp.WithOutputClamp(true), llmhttp.WithFeedback(false))
	client := &http.Client{Transport: tr}
	body := `{"model":"gpt-4o","max_tokens":4000,"messages":[{"role":"user","content":"hello"}]}`
	resp, err := postKey(t, client, llmhttp.WithCall(context.Background(), entity, resource, nil), srv.URL+"/v1/chat/completions", body)
	require.NoError(t, err)
	sent := llmhttp.RequestFromBody([]byte(<-bodies))
	assert.Equal(t, 1_000-sent.PromptTokens, sent.OutputCeiling, "the ceiling is what the tokens left pay for")
	assert.Equal(t, int64(1), tr.Stats().Clamped)

	// While the first call's lease holds its worst case, nothing is left.
	_, err = postKey(t, client, llmhttp.WithCall(context.Background(), entity, resource, nil), srv.URL+"/v1/chat/completions", body)
	require.ErrorIs(t, err, limiter.ErrRateLimited)
	assert.Equal(t, int64(1), tr.Stats().ClampRefused)
	assert.Empty(t, bodies)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
}
