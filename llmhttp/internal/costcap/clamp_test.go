package costcap_test

import (
	"context"
	"errors"
	"fmt"
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
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.CostLimit = "usd"
			o.AcquireOptions = []limiter.AcquireOption{capLimits}
		})
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
				req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, entity, resource, nil), http.MethodPost,
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
		consumed, _ := consumedMicroUSD(t, repoOf(rl))
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
