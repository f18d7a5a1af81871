package llmhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
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
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// seededCall is one call of TestPrepaidSeededCalls.
type seededCall struct {
	id         int
	path       string
	model      string
	body       string
	stream     bool
	closeEarly bool

	sent    string // the body that reached the provider ("": none)
	read    bool   // the answer was read to its end
	refused bool
}

// prepaidOutputTokens is the fake provider's answer length, per choice.
const prepaidOutputTokens = 300

// newSeededCall draws call id: a prompt of 1 to 60 pieces of the scripts,
// an output ceiling of 1 to 2,000 tokens or none, n of 1, 2 or 4 for chat
// completions, a stream three times in ten, an early close one in ten.
func newSeededCall(seed uint64, id int) seededCall {
	rnd := rand.New(rand.NewPCG(seed, uint64(id)))
	c := seededCall{id: id, stream: rnd.IntN(10) < 3, closeEarly: rnd.IntN(10) == 0}
	var p strings.Builder
	for range 1 + rnd.IntN(60) {
		p.WriteString(scripts[rnd.IntN(len(scripts))])
	}
	prompt, _ := json.Marshal(p.String())
	var b strings.Builder
	b.WriteString(`{"x_call":` + strconv.Itoa(id))
	ceiling := int64(0)
	if rnd.IntN(5) > 0 {
		ceiling = 1 + rnd.Int64N(2_000)
	}
	if rnd.IntN(2) == 0 {
		c.path, c.model = "/v1/messages", []string{"claude-haiku-4-5", "claude-sonnet-4-5"}[rnd.IntN(2)]
		b.WriteString(`,"model":"` + c.model + `","max_tokens":` + strconv.FormatInt(max(ceiling, 1), 10))
		if c.stream {
			b.WriteString(`,"stream":true`)
		}
	} else {
		c.path, c.model = "/v1/chat/completions", []string{"gpt-4o-mini", "gpt-4o"}[rnd.IntN(2)]
		b.WriteString(`,"model":"` + c.model + `"`)
		if ceiling > 0 {
			b.WriteString(`,"max_completion_tokens":` + strconv.FormatInt(ceiling, 10))
		}
		if n := []int{1, 1, 2, 4}[rnd.IntN(4)]; n > 1 {
			b.WriteString(`,"n":` + strconv.Itoa(n))
		}
		if c.stream {
			b.WriteString(`,"stream":true,"stream_options":{"include_usage":true}`)
		}
	}
	b.WriteString(`,"messages":[{"role":"user","content":` + string(prompt) + `}]}`)
	c.body = b.String()
	return c
}

// TestPrepaidSeededCalls: 1,000 seeded calls (prompts in several scripts,
// random ceilings, n, 30 % streams, early closes) from eight callers at
// once against a $1.00 prepaid balance, ceilings lowered to what is left,
// on the memory backend; on DynamoDB Local, which is slow, 150 calls
// against $0.50. (This package's tests import no Redis client, so that a
// program importing llmhttp downloads none: llmhttp on redis-server is
// tested in internal/costcap, TestCostCapClamped.)
// While they run, the balance read every two milliseconds (twenty on
// DynamoDB Local) is never below zero
// (no estimate is admitted that it cannot cover, and no answer costs more
// than its estimate); at the end the spend is at most the balance to the
// micro-dollar, and the usd limit's total consumed equals, to the
// micro-dollar, the sum of what each call must cost: the exact cost of the
// usage the provider reported for the body it received (ceiling as
// lowered, every choice) when it was read to its end; the worst case of
// that body when the caller closed it early; nothing when refused.
func TestPrepaidSeededCalls(t *testing.T) {
	for _, backend := range []string{"memory", "dynamodb"} {
		t.Run(backend, func(t *testing.T) {
			var repo limiter.Repository = memorystore.New()
			n, balance, poll := 1_000, int64(llmhttp.USD), 2*time.Millisecond
			switch backend {
			case "dynamodb":
				r, err := limiter.OpenDynamoDB(context.Background(), ddblocal.Client(t, ddblocal.WithoutStreams), func(o *limiter.DynamoDBOptions) {
					o.Table, o.CreateTable = ddblocal.TableName(t), true
				})
				require.NoError(t, err)
				// DynamoDB Local is slow: fewer calls, as in
				// TestCostLimitSeededCalls, on a balance they exhaust.
				repo, n, balance, poll = r, 150, llmhttp.USD/2, 20*time.Millisecond
			}
			prepaidSeeded(t, repo, n, balance, poll)
		})
	}
}

// prepaidSeeded runs n calls of TestPrepaidSeededCalls on repo against a
// prepaid balance of amount micro-dollars, reading the balance every poll.
func prepaidSeeded(t *testing.T, repo limiter.Repository, n int, amount int64, poll time.Duration) {
	const seed = 45
	calls := make([]seededCall, n)
	for i := range calls {
		calls[i] = newSeededCall(seed, i)
	}
	var mu sync.Mutex // guards sent
	srv := llmtest.NewServer(llmtest.Config{RPM: 1_000_000_000, TPM: 1_000_000_000_000, OutputTokens: prepaidOutputTokens,
		Shape: func(body []byte) llmtest.Shape {
			digits, _, _ := strings.Cut(strings.TrimPrefix(string(body), `{"x_call":`), ",")
			id, err := strconv.Atoi(digits)
			if err != nil || id < 0 || id >= len(calls) {
				return llmtest.Shape{Status: http.StatusBadRequest}
			}
			mu.Lock()
			calls[id].sent = string(body)
			mu.Unlock()
			return llmtest.Shape{}
		}})
	defer srv.Close()
	b := newBudgetOn(t, "prepaid", amount, repo)
	tr := llmhttp.NewTransport(b.rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{b.opts}
	})
	client := &http.Client{Transport: tr}

	done := make(chan struct{})
	var lowest atomic.Int64
	lowest.Store(amount)
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(poll):
			}
			a, err := b.rl.Available(context.Background(), entity, resource, b.opts)
			if err == nil && a["usd"] < lowest.Load() {
				lowest.Store(a["usd"])
			}
		}
	})
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(calls) {
					return
				}
				c := &calls[i]
				resp, err := postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+c.path, c.body)
				for retries := 0; errors.Is(err, limiter.ErrUnavailable) && retries < 20; retries++ {
					// DynamoDB: the conditional write lost every retry
					// to the others; nothing was acquired or sent.
					resp, err = postKey(t, client, llmhttp.ContextWithCall(context.Background(), entity, resource, nil), srv.URL+c.path, c.body)
				}
				if err != nil {
					assert.ErrorIs(t, err, limiter.ErrRateLimited, "call %d", i)
					c.refused = true
					continue
				}
				assert.Equal(t, http.StatusOK, resp.StatusCode, "call %d", i)
				if c.closeEarly {
					_, _ = resp.Body.Read(make([]byte, 10))
				} else {
					_, err = io.Copy(io.Discard, resp.Body)
					assert.NoError(t, err, "call %d", i)
					c.read = true
				}
				assert.NoError(t, resp.Body.Close())
			}
		})
	}
	wg.Wait()
	close(done)
	monitor.Wait()

	var want, exact int64
	refused, answered, closed := 0, 0, 0
	prices := llmhttp.DefaultPrices()
	for _, c := range calls {
		if c.refused {
			require.Empty(t, c.sent, "call %d: refused, not sent", c.id)
			refused++
			continue
		}
		require.NotEmpty(t, c.sent, "call %d", c.id)
		m, err := prices.Lookup(c.model)
		require.NoError(t, err)
		r := llmhttp.RequestFromBody([]byte(c.sent))
		if !c.read {
			closed++
			want += m.Estimate(r)
			continue
		}
		answered++
		in := llmtestInput(t, c.sent)
		out := min(int64(prepaidOutputTokens), r.OutputCeiling)
		if r.OutputCeiling == 0 {
			out = prepaidOutputTokens
		}
		u := llmhttp.Usage{InputTokens: in, OutputTokens: out * r.Choices, CacheInInput: c.path != "/v1/messages"}
		cost := refCost(m, u)
		require.LessOrEqual(t, cost, m.Estimate(r), "call %d: the answer within its worst case", c.id)
		want += cost
		exact += cost
	}
	left := b.left(t)
	st := tr.Stats()
	spent := amount - left
	assert.GreaterOrEqual(t, lowest.Load(), int64(0), "the balance never below zero")
	assert.GreaterOrEqual(t, left, int64(0))
	assert.LessOrEqual(t, spent, amount, "spend within the balance")
	assert.Equal(t, want, spent, "the counter is the sum of what each call must cost")
	assert.Equal(t, exact, st.Cost, "Stats.Cost")
	assert.Zero(t, st.OverReserved)
	assert.Positive(t, refused)
	t.Logf("%d answered, %d closed early, %d refused (%d clamped): spent %d of %d micro-dollars, %d left, lowest balance seen %d",
		answered, closed, refused, st.Clamped, spent, amount, left, lowest.Load())
}
