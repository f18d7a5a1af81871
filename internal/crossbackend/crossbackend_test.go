package crossbackend_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/crossbackend"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/redisstore"
)

// TestMain starts one DynamoDB Local and one redis-server for the package,
// on first use.
func TestMain(m *testing.M) {
	os.Exit(redisserver.Main(redisserver.RunnerFunc(func() int { return ddblocal.Main(m) })))
}

// openDynamoDB opens a repository on a new table of the package's DynamoDB
// Local, deleted after the test.
func openDynamoDB(t *testing.T) limiter.Repository {
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(context.Background(), client, func(o *limiter.DynamoDBOptions) {
		o.Table, o.CreateTable = table, true
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return repo
}

// openRedis opens a store on the package's redis-server, under a key
// prefix of the test's own.
func openRedis(t *testing.T) limiter.Repository {
	repo, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
	require.NoError(t, err)
	return repo
}

// TestPortableProgram runs ServeRequests unchanged on DynamoDB Local, on
// the memory store and on redis-server, with the same frozen clock, and
// compares what it printed: only the constructor differs.
func TestPortableProgram(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return start }
	got := map[string][]string{}
	for name, repo := range map[string]limiter.Repository{
		"dynamodb": openDynamoDB(t),
		"memory":   memorystore.New(),
		"redis":    openRedis(t),
	} {
		lines, err := crossbackend.ServeRequests(ctx, repo, limiter.WithClock(now))
		require.NoError(t, err, name)
		got[name] = lines
	}
	require.Len(t, got["memory"], 5)
	assert.Equal(t, got["memory"], got["dynamodb"], "dynamodb printed other lines than memory")
	assert.Equal(t, got["memory"], got["redis"], "redis printed other lines than memory")
	t.Logf("all three printed %q", got["memory"])
}

// TestCascadeContentionNoFalseDenials is the cascade contention case on
// redis-server (the root package's test of the same name runs it on
// DynamoDB Local and the memory store).
func TestCascadeContentionNoFalseDenials(t *testing.T) {
	crossbackend.CascadeContention(t, []crossbackend.Backend{{Name: "redis", Open: openRedis}}, nil)
}

func TestCPUBurnerProcess(t *testing.T) { crossbackend.CPUBurnerProcess(t) }
