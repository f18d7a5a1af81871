package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// TestRun: the calls are admitted and their real token counts committed.
// (TestWalkthrough in cmd/zae-limiter runs the program itself after
// `zae-limiter local up`.)
func TestRun(t *testing.T) {
	ctx := context.Background()
	client := limiter.NewDynamoDBLocalClient(ddblocal.Endpoint(t))
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = table
		o.CreateTable = true
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	frozen := time.Now() // no refill while the test runs, however slow
	rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = func() time.Time { return frozen } })
	var out strings.Builder
	require.NoError(t, run(ctx, &out, rl, "k", 3))
	assert.Contains(t, out.String(), "3 of 3 calls admitted", "output:\n%s", out.String())
	avail, err := rl.Available(ctx, "k", "gpt-4o", limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 20_000)))
	require.NoError(t, err)
	assert.EqualValues(t, 20_000-300-400-500, avail["tpm"], "available %v, want rpm 97, tpm 18800", avail)
	assert.EqualValues(t, 100-3, avail["rpm"], "available %v, want rpm 97, tpm 18800", avail)
}
