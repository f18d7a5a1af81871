package aggregator

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// fakeClock is a settable clock shared by a limiter and a processor.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a limiter repository on a fresh table with a stream, a processor
// and a runner reading that stream, the limiter and the processor on one
// fake clock (which starts at the wall clock: stream records carry real
// times), and recorders of the limiter's and the processor's DynamoDB
// calls.
type env struct {
	t       *testing.T
	ctx     context.Context
	client  *dynamodb.Client
	rec     *ddblocal.Recorder // the limiter's calls
	procRec *ddblocal.Recorder // the processor's calls
	clock   *fakeClock
	repo    *limiter.DynamoDBRepository
	proc    *Processor
	runner  *Runner
}

func newEnv(t *testing.T, optFns ...func(*Options)) *env {
	t.Helper()
	e := &env{
		t: t, ctx: context.Background(),
		rec: &ddblocal.Recorder{}, procRec: &ddblocal.Recorder{},
		clock: &fakeClock{t: time.Now().UTC().Truncate(time.Millisecond)},
	}
	e.client = ddblocal.Client(t, e.rec.Option())
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(e.ctx, e.client, func(o *limiter.DynamoDBOptions) {
		o.Table = table
		o.Namespace = "default"
		o.CreateTable = true
		o.Now = e.clock.now
	})
	require.NoError(t, err, "OpenDynamoDB")
	t.Cleanup(func() {
		_, _ = e.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	e.repo = repo
	opts := append([]func(*Options){func(o *Options) { o.Now = e.clock.now }}, optFns...)
	e.proc, err = NewProcessor(ddblocal.Client(t, e.procRec.Option()), table, opts...)
	require.NoError(t, err, "NewProcessor")
	e.runner = NewRunner(ddblocal.StreamsClient(t), table, e.proc)
	e.rec.Reset()
	return e
}

// limiter returns a rate limiter on the env's repository and clock.
func (e *env) limiter(speculative bool) *limiter.RateLimiter {
	return limiter.New(e.repo, func(o *limiter.Options) { o.SpeculativeWrites = speculative }, func(o *limiter.Options) { o.Clock = e.clock.now })
}

// drain polls the stream until a poll reads nothing (the processor's own
// writes come back as records) and returns the summed results. It fails
// the test on a poll error, a dropped record or a best-effort error.
func (e *env) drain() Result {
	e.t.Helper()
	var total Result
	for range 10 {
		res, err := e.runner.Poll(e.ctx)
		require.NoError(e.t, err, "Poll")
		assert.Empty(e.t, res.Failures, "records dropped")
		assert.Empty(e.t, res.Errors, "best-effort steps failed")
		total.Processed += res.Processed
		total.SnapshotsUpdated += res.SnapshotsUpdated
		total.RefillsWritten += res.RefillsWritten
		total.ShardsDoubled += res.ShardsDoubled
		total.ShardItemsCreated += res.ShardItemsCreated
		if res.Processed == 0 {
			return total
		}
	}
	require.FailNow(e.t, "stream not drained after 10 polls")
	return total
}

// item reads a raw item (strongly consistent); nil when missing.
func (e *env) item(pk, sk string) map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.GetItem(e.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(e.repo.Table()), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: pk}, "SK": &types.AttributeValueMemberS{Value: sk}},
	})
	require.NoError(e.t, err, "GetItem %s %s", pk, sk)
	return out.Item
}

// bucket reads a bucket item (nil when missing).
func (e *env) bucket(entity, resource string, shard int) *ddbschema.Bucket {
	e.t.Helper()
	item := e.item(e.repo.NamespaceID()+"/BUCKET#"+entity+"#"+resource+"#"+strconv.Itoa(shard), "#STATE")
	if item == nil {
		return nil
	}
	b, err := parseBucket(item)
	require.NoError(e.t, err, "parseBucket")
	return &b
}

// tokens returns a limit's balance in millitokens on a bucket item.
func (e *env) tokens(entity, resource string, shard int, limit string) int64 {
	e.t.Helper()
	b := e.bucket(entity, resource, shard)
	require.NotNil(e.t, b, "bucket %s/%s shard %d missing", entity, resource, shard)
	s, ok := b.Limit(limit)
	require.True(e.t, ok, "bucket %s/%s shard %d has no limit %s", entity, resource, shard, limit)
	return s.TokensMilli
}

// calls summarises recorded calls as "Op" or "Op!" (failed), in order.
func calls(r *ddblocal.Recorder) string {
	var parts []string
	for _, c := range r.Calls() {
		s := c.Op
		if c.Failed() {
			s += "!"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
