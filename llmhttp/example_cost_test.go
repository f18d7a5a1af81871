package llmhttp_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// A budget in money: the transport reserves each call's worst-case cost in
// micro-dollars under the limit "usd", and settles it to the exact cost of
// the response's usage. The fake provider stands in for OpenAI.
func ExampleNewTransport_costLimit() {
	ctx := context.Background()
	provider := llmtest.NewServer(llmtest.Config{OutputTokens: 50})
	defer provider.Close()

	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) // frozen, so that the output is exact
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	defer rl.Close()
	// Requests and tokens per minute, and one dollar a day in micro-dollars.
	budget := limiter.WithLimits(limiter.PerMinute("rpm", 60), limiter.PerMinute("tpm", 100_000),
		limiter.PerDay("usd", 1*llmhttp.USD))
	client := &http.Client{Transport: llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
		o.CostLimit = "usd"
		o.AcquireOptions = []limiter.AcquireOption{budget}
	})}

	body := `{"model":"gpt-4o-mini","max_completion_tokens":200,` +
		`"messages":[{"role":"user","content":"Why do token buckets refill?"}]}`
	worst, err := llmhttp.DefaultPrices().Estimate(llmhttp.RequestFromBody([]byte(body)))
	if err != nil {
		log.Fatal(err)
	}
	req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, "api-key-1", "chat", nil),
		http.MethodPost, provider.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the lease is settled to the usage's cost

	left, err := rl.Available(ctx, "api-key-1", "chat", budget)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reserved up to %d micro-dollars, charged %d; $%.6f left\n",
		worst, llmhttp.USD-left["usd"], float64(left["usd"])/llmhttp.USD)
	// Output:
	// reserved up to 125 micro-dollars, charged 32; $0.999968 left
}

// The cost of a usage at the shipped prices: OpenAI's prompt tokens
// include the cached ones, which cost half on gpt-4o; the total is rounded
// up to the micro-dollar.
func ExamplePrices_Cost() {
	u := llmhttp.Usage{InputTokens: 1117, CacheReadTokens: 1024, OutputTokens: 46, CacheInInput: true}
	cost, err := llmhttp.DefaultPrices().Cost("gpt-4o-2024-08-06", u)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cost, "micro-dollars")
	// Output:
	// 1973 micro-dollars
}
