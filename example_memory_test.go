package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/redisstore"
)

// serveRequests is a program written against the documented API: stored limits, an
// entity that cascades to its project, Acquire → Adjust → Commit, Do, and a
// refusal. It takes any Repository, so it runs unchanged on DynamoDB and on
// the memory store (TestPortableProgram runs it on both).
func serveRequests(ctx context.Context, repo limiter.Repository, opts ...limiter.Option) ([]string, error) {
	rl := limiter.New(repo, opts...)
	var out []string
	if _, err := rl.CreateEntity(ctx, limiter.Entity{ID: "proj-1", Name: "Acme"}); err != nil {
		return nil, err
	}
	if _, err := rl.CreateEntity(ctx, limiter.Entity{ID: "key-1", ParentID: "proj-1", Cascade: true}); err != nil {
		return nil, err
	}
	if err := rl.SetResourceDefaults(ctx, "gpt-4", []limiter.Limit{
		limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 2_000),
	}); err != nil {
		return nil, err
	}
	for i, used := range []int64{700, 900, 100} {
		lease, err := rl.Acquire(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1, "tpm": 500})
		if errors.Is(err, limiter.ErrRateLimited) {
			var rle *limiter.RateLimitExceededError
			errors.As(err, &rle)
			out = append(out, fmt.Sprintf("call %d refused by %s/%s, retry in %s", i, rle.Primary.EntityID, rle.Primary.LimitName, rle.RetryAfter))
			continue
		}
		if err != nil {
			return nil, err
		}
		lease.Adjust(limiter.Consume{"tpm": used - 500}) // the real token count
		if err := lease.Commit(ctx); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("call %d used %d tokens", i, used))
	}
	err := rl.Do(ctx, "key-1", "gpt-4", limiter.Consume{"rpm": 1, "tpm": 10}, func(ctx context.Context, l *limiter.Lease) error {
		return errors.New("LLM timeout") // rolled back
	})
	out = append(out, fmt.Sprintf("do: %v", err))
	avail, err := rl.Available(ctx, "proj-1", "gpt-4")
	if err != nil {
		return nil, err
	}
	return append(out, fmt.Sprintf("project has rpm=%d tpm=%d left", avail["rpm"], avail["tpm"])), nil
}

// Example_memoryStore runs a program written for DynamoDB on the in-memory
// backend: for unit tests of code that uses the limiter, or single-process
// services.
func Example_memoryStore() {
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	lines, err := serveRequests(context.Background(), memorystore.New(),
		limiter.WithPrincipal("unit-test"),                   // recorded in audit events
		limiter.WithClock(func() time.Time { return start })) // a frozen clock, for a stable output
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// call 0 used 700 tokens
	// call 1 used 900 tokens
	// call 2 refused by key-1/tpm, retry in 3.001s
	// do: LLM timeout
	// project has rpm=98 tpm=400 left
}

// TestPortableProgram runs serveRequests unchanged on DynamoDB Local, on
// the memory store and on redis-server, with the same frozen clock, and
// compares what it printed: only the constructor differs.
func TestPortableProgram(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return start }
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	ddb, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table, o.CreateTable = table, true
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	rds, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
	require.NoError(t, err)
	got := map[string][]string{}
	for name, repo := range map[string]limiter.Repository{
		"dynamodb": ddb,
		"memory":   memorystore.New(),
		"redis":    rds,
	} {
		lines, err := serveRequests(ctx, repo, limiter.WithClock(now))
		require.NoError(t, err, "%s: %v", name, err)
		got[name] = lines
	}
	require.False(t, !slices.Equal(got["dynamodb"], got["memory"]) || !slices.Equal(got["redis"], got["memory"]) || len(got["memory"]) != 5, "outputs differ:\n dynamodb %q\n memory   %q\n redis    %q", got["dynamodb"], got["memory"], got["redis"])
	t.Logf("all three printed %q", got["memory"])
}
