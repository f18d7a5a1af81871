// Command openai rate-limits an openai-go client with llmhttp: the client's
// HTTP transport acquires each call's estimate from a limiter, reads the
// real usage from the response (a JSON body, then a stream with
// include_usage) and commits it, and refuses a call the budget cannot pay
// for without sending it. It runs against llmtest's fake provider, so it
// needs no API key and no network.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer) error {
	provider := llmtest.NewServer(llmtest.Config{RPM: 500, TPM: 30_000, OutputTokens: 120})
	defer provider.Close()

	// A frozen clock keeps the printed balances exact; leave it out in a service.
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	defer rl.Close()
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "team-a", Resource: "gpt-5-mini"}, []limiter.Limit{
		limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 600),
	}); err != nil {
		return err
	}

	transport := llmhttp.NewTransport(rl, nil)
	client := openai.NewClient(
		option.WithBaseURL(provider.URL+"/v1"),
		option.WithAPIKey("sk-example"),
		option.WithHTTPClient(&http.Client{Transport: transport}),
		option.WithMaxRetries(0), // a denied call fails at once instead of being retried as a connection error
	)
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-5-mini", // a string: the SDK's model constants get deprecated
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name three token-bucket rate limiters.")},
	}
	// Who pays, and the estimate taken before sending (nil: the transport's
	// default, request bytes / 4 plus max_tokens).
	call := llmhttp.ContextWithCall(ctx, "team-a", "gpt-5-mini", limiter.Consume{"rpm": 1, "tpm": 300})

	for i := 1; i <= 2; i++ {
		resp, err := client.Chat.Completions.New(call, params)
		if err != nil {
			return err
		}
		left, err := rl.Available(ctx, "team-a", "gpt-5-mini")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "call %d: %d tokens (estimate 300); tpm left %d\n", i, resp.Usage.TotalTokens, left["tpm"])
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(call, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return err
	}
	if err := stream.Close(); err != nil {
		return err
	}
	left, err := rl.Available(ctx, "team-a", "gpt-5-mini")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stream: %d tokens; tpm left %d\n", acc.Usage.TotalTokens, left["tpm"])

	_, err = client.Chat.Completions.New(call, params)
	var denied *limiter.RateLimitExceededError
	if !errors.As(err, &denied) {
		return fmt.Errorf("expected a denial, got %v", err)
	}
	fmt.Fprintf(out, "call 4: denied by %s, retry in %v; the provider saw %d requests\n",
		denied.Primary.LimitName, denied.RetryAfter.Round(time.Second), provider.Stats("sk-example").Requests)
	return nil
}
