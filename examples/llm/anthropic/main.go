// Command anthropic rate-limits an anthropic-sdk-go client with llmhttp:
// the client's HTTP transport acquires each call's estimate from a limiter,
// reads the real usage from the response (a JSON body, then a stream's
// message_start and message_delta events) and commits it, and refuses a
// call the budget cannot pay for without sending it. It runs against
// llmtest's fake provider, so it needs no API key and no network.
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

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

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
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "team-a", Resource: "claude-haiku-4-5"}, []limiter.Limit{
		limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 600),
	}); err != nil {
		return err
	}

	transport := llmhttp.NewTransport(rl, nil)
	client := anthropic.NewClient(
		option.WithBaseURL(provider.URL),
		option.WithAPIKey("sk-ant-example"),
		option.WithHTTPClient(&http.Client{Transport: transport}),
		option.WithMaxRetries(0), // a denied call fails at once instead of being retried as a connection error
	)
	params := anthropic.MessageNewParams{
		Model:     "claude-haiku-4-5", // a string: the SDK's model constants get deprecated
		MaxTokens: 200,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Name three token-bucket rate limiters."))},
	}
	// Who pays, and the estimate taken before sending (nil: the transport's
	// default, request bytes / 4 plus max_tokens).
	call := llmhttp.ContextWithCall(ctx, "team-a", "claude-haiku-4-5", limiter.Consume{"rpm": 1, "tpm": 300})

	for i := 1; i <= 2; i++ {
		msg, err := client.Messages.New(call, params)
		if err != nil {
			return err
		}
		left, err := rl.Available(ctx, "team-a", "claude-haiku-4-5")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "call %d: %d input + %d output tokens (estimate 300); tpm left %d\n",
			i, msg.Usage.InputTokens, msg.Usage.OutputTokens, left["tpm"])
	}

	stream := client.Messages.NewStreaming(call, params)
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil {
		return err
	}
	if err := stream.Close(); err != nil {
		return err
	}
	left, err := rl.Available(ctx, "team-a", "claude-haiku-4-5")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "stream: %d input + %d output tokens; tpm left %d\n", msg.Usage.InputTokens, msg.Usage.OutputTokens, left["tpm"])

	_, err = client.Messages.New(call, params)
	var denied *limiter.RateLimitExceededError
	if !errors.As(err, &denied) {
		return fmt.Errorf("expected a denial, got %v", err)
	}
	fmt.Fprintf(out, "call 4: denied by %s, retry in %v; the provider saw %d requests\n",
		denied.Primary.LimitName, denied.RetryAfter.Round(time.Second), provider.Stats("sk-ant-example").Requests)
	return nil
}
