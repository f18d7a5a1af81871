package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// captureLogger collects what the SDK logs.
type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLogger) Logf(c logging.Classification, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(c)+": "+fmt.Sprintf(format, v...))
}

func (l *captureLogger) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// localWorkload opens a table through client and runs what makes DynamoDB
// Local send error responses: speculative writes on missing buckets
// (refused conditional writes), denials and a rollback.
func localWorkload(t *testing.T, client *dynamodb.Client) {
	t.Helper()
	ctx := context.Background()
	table := ddblocal.TableName(t)
	repo, err := openDynamo(ctx, client, func(o *DynamoDBOptions) {
		o.Table = table
		o.Namespace = "default"
		o.CreateTable = true
	})
	require.NoError(t, err, "OpenDynamoDB: %v", err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	rl := New(repo)
	lim := WithLimits(PerMinute("rpm", 2), PerMinute("tpm", 1000))
	denied := 0
	for i := range 6 {
		lease, err := rl.Acquire(ctx, fmt.Sprintf("key-%d", i%2), "gpt-4", Consume{"rpm": 1, "tpm": 100}, lim)
		if errors.Is(err, ErrRateLimited) {
			denied++
			continue
		}
		require.NoError(t, err, "Acquire %d: %v", i, err)
		if i == 2 {
			err := lease.Rollback(ctx)
			require.NoError(t, err)
			continue
		}
		lease.Adjust(Consume{"tpm": 50})
		require.NoError(t, lease.Commit(ctx))
	}
	require.NotZero(t, denied, "the workload was never denied: it does not exercise error responses")
}

// TestDynamoDBLocalClientQuiet: a program using NewDynamoDBLocalClient
// against DynamoDB Local gets no SDK warnings, while the same client with
// response checksum validation on (what dynamodb.NewFromConfig gives a
// program) logs the checksum warnings the helper exists to avoid.
func TestDynamoDBLocalClientQuiet(t *testing.T) {
	endpoint := ddblocal.Endpoint(t)
	t.Run("helper", func(t *testing.T) {
		var log captureLogger
		localWorkload(t, NewDynamoDBLocalClient(endpoint, func(o *dynamodb.Options) { o.Logger = &log }))
		got := log.text()
		assert.EqualValues(t, "", got, "NewDynamoDBLocalClient logged:\n%s", got)
	})
	t.Run("checksum validation on", func(t *testing.T) {
		var log captureLogger
		localWorkload(t, NewDynamoDBLocalClient(endpoint, func(o *dynamodb.Options) {
			o.Logger = &log
			o.DisableValidateResponseChecksum = false
		}))
		got := log.text()
		assert.Contains(t, got, "checksum", "with checksum validation the SDK logged no checksum warnings (the quiet test above proves nothing otherwise)")
	})
}

func TestLocalConfig(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	ctx := context.Background()
	check := func(name, endpoint, wantEndpoint, wantRegion, wantKey string) {
		t.Helper()
		cfg := ddbschema.LocalConfig(endpoint)
		creds, err := cfg.Credentials.Retrieve(ctx)
		require.NoError(t, err)
		got := aws.ToString(cfg.BaseEndpoint)
		assert.Equal(t, wantEndpoint, got, "%s: endpoint", name)
		assert.Equal(t, wantRegion, cfg.Region, "%s: region", name)
		assert.Equal(t, wantKey, creds.AccessKeyID, "%s: access key", name)
	}
	check("defaults", "", ddbschema.LocalEndpoint, ddbschema.LocalRegion, ddbschema.LocalAccessKey)
	check("explicit endpoint", "http://127.0.0.1:9000/", "http://127.0.0.1:9000", ddbschema.LocalRegion, ddbschema.LocalAccessKey)
	t.Setenv("AWS_ENDPOINT_URL", "http://a:1")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "only-key") // no secret: ignored
	check("global endpoint", "", "http://a:1", "eu-west-1", ddbschema.LocalAccessKey)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://b:2")
	t.Setenv("AWS_REGION", "ap-south-1")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	check("service endpoint", "", "http://b:2", "ap-south-1", "only-key")
}
