package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// embedAll is a batch job written against the documented API: it sends every
// document through the LLM, waiting for the rate limiter instead of
// failing. It runs unchanged on any Repository (TestPortableWait runs it on
// DynamoDB Local and on the memory store).
func embedAll(ctx context.Context, rl *limiter.RateLimiter, docs []string) (int, error) {
	for i, doc := range docs {
		lease, err := rl.Wait(ctx, "batch-job", "embeddings", limiter.Consume{"rps": 1})
		if err != nil {
			return i, err // ctx done, or a request that can never fit
		}
		if _, err := callLLM(ctx, doc); err != nil {
			lease.Rollback(ctx)
			return i, err
		}
		if err := lease.Commit(ctx); err != nil {
			return i, err
		}
	}
	return len(docs), nil
}

// Wait blocks until the request fits: 8 documents at 5 per second take
// 0.6 s after the first 5 (the bucket's burst) went through at once.
func ExampleRateLimiter_Wait() {
	ctx := context.Background()
	rl := limiter.New(memorystore.New()) // or a DynamoDB repository
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "embeddings"}, []limiter.Limit{limiter.PerSecond("rps", 5)}); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	n, err := embedAll(ctx, rl, make([]string, 8))
	fmt.Println("embedded", n, "documents, error:", err, "- waited at least 0.6s:", time.Since(start) >= 590*time.Millisecond)

	// A deadline that comes before the tokens do fails at once.
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = rl.Wait(ctx, "batch-job", "embeddings", limiter.Consume{"rps": 5})
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.Is(err, limiter.ErrRateLimited))
	// Output:
	// embedded 8 documents, error: <nil> - waited at least 0.6s: true
	// true true
}

// TestPortableWait runs embedAll unchanged on DynamoDB Local and on the
// memory store, on the real clock.
func TestPortableWait(t *testing.T) {
	ctx := context.Background()
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddb, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) { o.Table, o.CreateTable = table, true })
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	for name, repo := range map[string]limiter.Repository{"dynamodb": ddb, "memory": memorystore.New()} {
		var admitted atomic.Int64
		rl := limiter.New(repo, func(o *limiter.Options) { o.Metrics = countAdmitted{&admitted} })
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "embeddings"}, []limiter.Limit{limiter.PerSecond("rps", 5)}))
		start := time.Now()
		n, err := embedAll(ctx, rl, make([]string, 8))
		elapsed := time.Since(start)
		require.NoError(t, err, name)
		require.Equal(t, 8, n, "%s: documents embedded", name)
		require.EqualValues(t, 8, admitted.Load(), "%s: documents admitted", name)
		// 3 tokens beyond the burst of 5, at 5 per second.
		assert.GreaterOrEqual(t, elapsed, 590*time.Millisecond, "%s: 8 documents at 5/s, want about 600ms", name)
		t.Logf("%s: 8 documents in %v", name, elapsed.Round(time.Millisecond))
	}
}

// countAdmitted is a limiter.Metrics that counts admitted acquires.
type countAdmitted struct{ n *atomic.Int64 }

func (c countAdmitted) AcquireDone(_ context.Context, o limiter.AcquireOutcome, _ time.Duration) {
	if o == limiter.AcquireAdmitted {
		c.n.Add(1)
	}
}
func (countAdmitted) SpeculativeOutcome(store.SpeculativeOutcome)                    {}
func (countAdmitted) StoreCall(context.Context, store.StoreOp, time.Duration, error) {}

// Log the limiter's decisions — speculative fallbacks, shard doubling,
// transaction-conflict retries, fail-open and fail-closed decisions, Wait's
// sleeps — with log/slog. Nothing is logged without Options.Logger.
func ExampleOptions_logger() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug, // fallbacks and waits are Debug; conflicts Info; unavailability Warn
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output for this example
			}
			return a
		},
	}))
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Logger = logger })
	lease, err := rl.Acquire(context.Background(), "key-1", "gpt-4", limiter.Consume{"rpm": 1},
		limiter.WithLimits(limiter.PerMinute("rpm", 100)))
	if err != nil {
		log.Fatal(err)
	}
	lease.Commit(context.Background())
	// Output:
	// level=DEBUG msg="limiter: speculative fallback" entity_id=key-1 resource=gpt-4 shard=0 outcome=bucket_missing
}

// Count acquires by outcome with a Metrics implementation of your own (the
// otelmetrics package provides one for OpenTelemetry).
func ExampleOptions_metrics() {
	var admitted atomic.Int64
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Metrics = countAdmitted{&admitted} })
	for range 3 {
		if lease, err := rl.Acquire(context.Background(), "key-1", "gpt-4", limiter.Consume{"rpm": 1},
			limiter.WithLimits(limiter.PerMinute("rpm", 2))); err == nil {
			lease.Commit(context.Background())
		}
	}
	fmt.Println("admitted:", admitted.Load())
	// Output:
	// admitted: 2
}
