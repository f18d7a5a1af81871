package costcap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/internal/pricecheck"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/redisstore"
)

// A dollar budget that concurrent calls cannot overspend, on the memory
// backend, DynamoDB Local and redis-server.

const (
	// capMicroUSD is the budget: $0.45.
	capMicroUSD = 450_000
	// capCalls is the number of calls of each wave, released together.
	capCalls = 50
	// capModel is the model of every call, priced by DefaultPrices:
	// $2.50 per million input tokens, $10 per million output tokens.
	capModel = "gpt-4o"
	// capOutputTokens is the fake provider's answer length: below every
	// call's max_tokens, so that every call costs less than its estimate.
	capOutputTokens = 1_000
)

// capLimits are the per-call limits: rpm and tpm that never refuse, and
// "usd" holding the budget, with a refill of one micro-dollar an hour
// that the frozen clock never grants.
var capLimits = limiter.WithLimits(
	limiter.PerMinute("rpm", 1_000_000_000), limiter.PerMinute("tpm", 1_000_000_000),
	limiter.Limit{Name: "usd", Capacity: capMicroUSD, RefillAmount: 1, RefillPeriod: time.Hour},
)

// capCall is one call of the test, with its worst-case estimate and
// exact cost worked out before it is made, and its outcome.
type capCall struct {
	id       int
	body     string
	estimate int64 // what the transport reserves: ModelPrice.Estimate
	cost     int64 // what the answer costs: the provider's usage, priced plainly

	made     bool  // the call was made
	admitted bool  // the transport sent it: the limiter admitted it
	billed   int64 // the cost of the usage its answer returned, priced plainly
	err      error // the refusal, or a failure to read the answer
	retries  int   // attempts that failed with ErrUnavailable (nothing acquired or sent)
}

// newCapCall builds call id: its prompt grows by 40 bytes and its
// max_tokens by 60 with id modulo capCalls, so that the estimates run from
// about $0.026 to $0.057 (eight to seventeen of them fill the budget) and
// the costs from about $0.0112 to $0.0124.
func newCapCall(t *testing.T, id int) capCall {
	prompt := strings.Repeat("abcdefgh ", (1800+40*(id%capCalls))/9)
	maxTokens := int64(2500 + 60*(id%capCalls))
	body := fmt.Sprintf(`{"x_call":%d,"model":%q,"max_tokens":%d,"messages":[{"role":"user","content":%q}]}`,
		id, capModel, maxTokens, prompt)
	m, err := llmhttp.DefaultPrices().Lookup(capModel)
	require.NoError(t, err)
	c := capCall{id: id, body: body, estimate: m.Estimate(llmhttp.RequestFromBody([]byte(body)))}
	require.Equal(t, pricecheck.Estimate(m, body, maxTokens, "", false, false), c.estimate, "call %d: the estimate", id)
	in, err := llmtest.InputTokens([]byte(body))
	require.NoError(t, err)
	c.cost = pricecheck.Cost(m, llmhttp.Usage{InputTokens: in, OutputTokens: min(capOutputTokens, maxTokens), CacheInInput: true})
	require.Less(t, c.cost, c.estimate, "call %d: the answer costs less than its worst case", id)
	return c
}

// openBackend opens a store of backend ("memory", "dynamodb" or
// "redis"): a memory store, a table of its own on the package's DynamoDB
// Local, or a key prefix of its own on redis-server.
func openBackend(t *testing.T, backend string) limiter.Repository {
	switch backend {
	case "dynamodb":
		r, err := limiter.OpenDynamoDB(context.Background(), ddblocal.Client(t, ddblocal.WithoutStreams), func(o *limiter.DynamoDBOptions) {
			o.Table, o.CreateTable = ddblocal.TableName(t), true
		})
		require.NoError(t, err)
		return r
	case "redis":
		r, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
		require.NoError(t, err)
		return r
	}
	return memorystore.New()
}

// onCapBackends runs fn on the memory backend, DynamoDB Local and
// redis-server, each with a limiter on a frozen clock.
// repos holds the store of each limiter onCapBackends made, for
// consumedMicroUSD.
var repos sync.Map // *limiter.RateLimiter -> limiter.Repository

// repoOf returns the store of rl, made by onCapBackends.
func repoOf(rl *limiter.RateLimiter) limiter.Repository {
	r, _ := repos.Load(rl)
	return r.(limiter.Repository)
}

func onCapBackends(t *testing.T, fn func(t *testing.T, rl *limiter.RateLimiter)) {
	for _, backend := range []string{"memory", "dynamodb", "redis"} {
		t.Run(backend, func(t *testing.T) {
			clk := newManualClock()
			repo := openBackend(t, backend)
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
			repos.Store(rl, repo)
			t.Cleanup(func() { repos.Delete(rl); _ = rl.Close() })
			fn(t, rl)
		})
	}
}

// capWave makes calls through client from capCalls goroutines released
// together, goroutine g starting with calls[g]. Without loop each makes
// that one call; with loop each goes on, while its calls are admitted,
// with the next call not yet made, and stops at its first refusal (it
// reports false if it ran out of calls). When release is not nil the fake
// provider holds every call it receives until release is closed: capWave
// closes it once each of the capCalls calls has been admitted (it reached
// the provider: arrivals) or refused, after running checkHeld, so that
// checkHeld runs before any estimate is settled. A call that fails with
// ErrUnavailable (DynamoDB: its conditional write lost every retry to the
// others; nothing was acquired or sent) is made again, at most 20 times.
func capWave(t *testing.T, srvURL string, client *http.Client, calls []capCall, loop bool,
	arrivals *atomic.Int64, release chan struct{}, checkHeld func()) bool {
	t.Helper()
	start := make(chan struct{})
	var refused, next atomic.Int64
	var ranOut atomic.Bool
	next.Store(capCalls)
	var wg sync.WaitGroup
	for g := range capCalls {
		wg.Go(func() {
			<-start
			for i := g; ; {
				c := &calls[i]
				c.made = true
				makeCapCall(srvURL, client, c)
				if !c.admitted {
					refused.Add(1)
				}
				if !loop || !c.admitted || c.err != nil {
					return
				}
				if i = int(next.Add(1) - 1); i >= len(calls) {
					ranOut.Store(true)
					return
				}
			}
		})
	}
	close(start)
	if release != nil {
		deadline := time.Now().Add(time.Minute)
		for arrivals.Load()+refused.Load() < capCalls && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		decided := arrivals.Load() + refused.Load()
		if decided == capCalls {
			checkHeld()
		}
		close(release) // after a timeout too, so that the goroutines end
		assert.Equal(t, int64(capCalls), decided, "calls admitted or refused within a minute")
	}
	wg.Wait()
	return !ranOut.Load()
}

// makeCapCall makes c and records its outcome.
func makeCapCall(srvURL string, client *http.Client, c *capCall) {
	for {
		ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, nil)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srvURL+"/v1/chat/completions", strings.NewReader(c.body))
		if err != nil {
			c.err = err
			return
		}
		req.Header.Set("Authorization", "Bearer k1")
		resp, err := client.Do(req)
		if errors.Is(err, limiter.ErrUnavailable) && c.retries < 20 {
			c.retries++
			continue
		}
		if err != nil {
			c.err = err
			return
		}
		c.admitted = true
		c.billed, c.err = readCapAnswer(resp)
		return
	}
}

// readCapAnswer reads a 200 answer to its end and returns the cost of the
// usage it reports, priced plainly at capModel's rates.
func readCapAnswer(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	var answer struct {
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return 0, err
	}
	m, err := llmhttp.DefaultPrices().Lookup(capModel)
	if err != nil {
		return 0, err
	}
	u := answer.Usage
	return pricecheck.Cost(m, llmhttp.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens, CacheInInput: true}), nil
}

// TestCostCapConcurrent: a budget of $0.45 ("usd", 450,000 micro-dollars,
// no refill on the frozen clock) is not overspent by calls made at once
// through a transport with CostLimit "usd", on the memory backend,
// DynamoDB Local and redis-server. Every call is a gpt-4o chat completion
// whose worst-case estimate (the body's bytes / 4 at $2.50 per million
// tokens plus max_tokens at $10 per million) is $0.026 to $0.057, and whose
// answer (the fake provider's 1,000 output tokens) costs $0.0112 to
// $0.0124: less than its estimate, so that each settlement gives money
// back. Two waves, each of 50 goroutines released together:
//
//   - held: one call each, and the provider answers none until every one
//     is admitted or refused, so that nothing is settled while another
//     call acquires. Nothing given back and no refill: the balance only
//     falls during the wave, which makes admission exact and checkable.
//     The estimates of the admitted calls sum to at most the budget, the
//     balance then is the budget less that sum (read with Available), and
//     every refused call's estimate exceeds it (the balance when it was
//     refused was at least that): no call admitted that the balance could
//     not cover, none refused that it could;
//   - free: the provider answers at once, and each goroutine makes calls
//     until one is refused, so that settlements (money given back) race
//     with the others' acquires and the spend is driven close to the
//     budget. It starts from what the held wave left: at least the largest
//     estimate, so that a call is admitted.
//
// The bound: a reservation is admitted only when the balance covers it,
// and settled to the exact cost, so spend ≤ budget + Σ over admitted calls
// of max(0, cost − estimate). Every cost here is below its estimate
// (checked call by call), so the bound is the budget itself, to the
// micro-dollar. After each wave the usd limit's total consumed (b_usd_tc),
// the transport's Stats.Cost and the sum of the costs of the usages the
// answers returned (priced in the test) are equal and at most $0.45; the
// balance is the budget less that spend, and not negative; and the free
// wave never admits more calls than the budget pays for at the cheapest
// cost. At the end, a reservation of one micro-dollar more than the
// balance is refused and one of the balance is admitted. Every call is
// either answered 200 or fails with an error matching
// limiter.ErrRateLimited (one that fails with ErrUnavailable, having
// acquired and sent nothing, is made again and logged), and each wave
// admits at least one call and refuses at least one.
func TestCostCapConcurrent(t *testing.T) {
	onCapBackends(t, func(t *testing.T, rl *limiter.RateLimiter) {
		ctx := context.Background()
		// The held wave's calls, then the free wave's: enough for the
		// budget at the cheapest cost, and capCalls refusals.
		var all []capCall
		minCost, maxEstimate := int64(capMicroUSD), int64(0)
		for i := range 2*capCalls + capMicroUSD/11_000 {
			c := newCapCall(t, i)
			all = append(all, c)
			minCost, maxEstimate = min(minCost, c.cost), max(maxEstimate, c.estimate)
		}
		require.GreaterOrEqual(t, len(all)-capCalls, capCalls+capMicroUSD/int(minCost), "the free wave's calls")

		// The provider records the calls that reach it (the admitted
		// ones) and, while release is set, holds them until it is closed.
		var arrivals atomic.Int64
		var mu sync.Mutex // guards arrived and release
		arrived := map[int]bool{}
		var release chan struct{}
		srv := llmtest.NewServer(llmtest.Config{RPM: 1_000_000_000, TPM: 1_000_000_000_000, OutputTokens: capOutputTokens,
			Shape: func(body []byte) llmtest.Shape {
				digits, _, _ := strings.Cut(strings.TrimPrefix(string(body), `{"x_call":`), ",")
				id, err := strconv.Atoi(digits)
				if err != nil {
					return llmtest.Shape{Status: http.StatusBadRequest}
				}
				mu.Lock()
				arrived[id] = true
				ch := release
				mu.Unlock()
				arrivals.Add(1)
				if ch != nil {
					<-ch
				}
				return llmtest.Shape{}
			}})
		defer srv.Close()
		// Ceilings are not lowered: this test checks admission at the
		// worst case itself (TestCostCapClamped lowers them).
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.CostLimit = "usd"
			o.AcquireOptions = []limiter.AcquireOption{capLimits}
			o.OutputClamp = llmhttp.ClampOff
		})
		client := &http.Client{Transport: tr}

		balance := func() int64 {
			t.Helper()
			a, err := rl.Available(ctx, entity, resource, capLimits)
			require.NoError(t, err)
			return a["usd"]
		}

		spent := int64(0)
		for _, wave := range []string{"held", "free"} {
			calls := all[:capCalls]
			before := capMicroUSD - spent
			var held chan struct{}
			checkHeld := func() {}
			if wave == "held" {
				held = make(chan struct{})
				checkHeld = func() {
					mu.Lock()
					defer mu.Unlock()
					reserved, cheapestRefused := int64(0), int64(capMicroUSD+1)
					for _, c := range calls {
						if arrived[c.id] {
							reserved += c.estimate // admitted: it waits for its answer
						} else {
							cheapestRefused = min(cheapestRefused, c.estimate)
						}
					}
					left := balance()
					assert.LessOrEqual(t, reserved, before, "held: the estimates reserved")
					assert.Equal(t, before-reserved, left, "held: the balance is the budget less the estimates reserved")
					assert.Greater(t, cheapestRefused, left, "held: every refused call's estimate exceeds the balance")
					t.Logf("held wave, before any answer: %d micro-dollars reserved, %d left, cheapest refused estimate %d",
						reserved, left, cheapestRefused)
				}
			} else {
				calls = all[capCalls:]
				require.GreaterOrEqual(t, before, maxEstimate, "the free wave can admit a call")
			}
			mu.Lock()
			release = held
			mu.Unlock()
			arrivals.Store(0)
			enough := capWave(t, srv.URL, client, calls, wave == "free", &arrivals, held, checkHeld)
			assert.True(t, enough, "free: more calls admitted than the budget pays for at the cheapest cost")

			made, admitted, refused, retries := 0, 0, 0, 0
			var waveSpent int64
			mu.Lock()
			for _, c := range calls {
				if !c.made {
					continue
				}
				made++
				retries += c.retries
				assert.Equal(t, c.admitted, arrived[c.id], "call %d: reached the provider if and only if admitted", c.id)
				if c.admitted {
					admitted++
					require.NoError(t, c.err, "call %d: the answer", c.id)
					assert.Equal(t, c.cost, c.billed, "call %d: the usage returned, priced", c.id)
					waveSpent += c.billed
					continue
				}
				refused++
				assert.ErrorIs(t, c.err, limiter.ErrRateLimited, "call %d", c.id)
			}
			mu.Unlock()
			assert.Positive(t, admitted, "%s: admitted", wave)
			assert.Positive(t, refused, "%s: refused", wave)
			if wave == "free" {
				assert.Equal(t, capCalls, refused, "free: each goroutine stops at its first refusal")
			}
			spent += waveSpent

			consumed, _ := consumedMicroUSD(t, repoOf(rl))
			assert.Equal(t, spent, consumed, "%s: b_usd_tc is the cost of the usages returned", wave)
			assert.Equal(t, spent, tr.Stats().Cost, "%s: Stats.Cost", wave)
			assert.LessOrEqual(t, consumed, int64(capMicroUSD), "%s: spend within the budget", wave)
			left := balance()
			assert.Equal(t, capMicroUSD-spent, left, "%s: the balance", wave)
			assert.GreaterOrEqual(t, left, int64(0), "%s: the balance", wave)
			t.Logf("%s wave: %d calls, %d admitted, %d refused (ErrRateLimited), %d ErrUnavailable retries; spent %d of %d micro-dollars in all, %d left",
				wave, made, admitted, refused, retries, spent, capMicroUSD, left)
		}

		// The boundary: one micro-dollar more than the balance is refused,
		// the balance itself is admitted.
		left := balance()
		_, err := rl.Acquire(ctx, entity, resource, limiter.Consume{"usd": left + 1}, capLimits)
		assert.ErrorIs(t, err, limiter.ErrRateLimited, "one micro-dollar more than the balance")
		if left > 0 {
			lease, err := rl.Acquire(ctx, entity, resource, limiter.Consume{"usd": left}, capLimits)
			require.NoError(t, err, "the balance")
			require.NoError(t, lease.Rollback(ctx))
		}
		assert.Equal(t, left, balance(), "the probes leave the balance")
	})
}
