package httplimit

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// TestMain starts one DynamoDB Local for the package (see internal/ddblocal).
func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// testEnv is a DynamoDB repository on a fresh table, with a call recorder
// and a controllable clock.
type testEnv struct {
	t      *testing.T
	ctx    context.Context
	client *dynamodb.Client
	rec    *ddblocal.Recorder
	clock  *fakeClock
	table  string
	repo   *limiter.DynamoDBRepository
	// spec selects the speculative path for env.limiter().
	spec bool
}

// forEachPath runs fn on a fresh environment once with the read-then-write
// path and once with the speculative path: both must behave alike.
func forEachPath(t *testing.T, fn func(t *testing.T, env *testEnv)) {
	for _, spec := range []bool{false, true} {
		t.Run(map[bool]string{false: "slow", true: "speculative"}[spec], func(t *testing.T) {
			env := newTestEnv(t)
			env.spec = spec
			fn(t, env)
		})
	}
}

// epoch is the fake clock's start: 2026-01-02T03:04:05.678Z.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)

// newTestEnv opens a repository on a new table (deleted after the test).
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	env := &testEnv{t: t, ctx: context.Background(), rec: &ddblocal.Recorder{}, clock: &fakeClock{t: epoch}}
	env.client = ddblocal.Client(t, env.rec.Option(), ddblocal.WithoutStreams)
	env.table = ddblocal.TableName(t)
	env.repo = env.open(env.client, true)
	t.Cleanup(func() {
		env.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(env.table)})
	})
	env.rec.Reset()
	return env
}

// open opens the env's table and namespace through client.
func (env *testEnv) open(client limiter.DynamoDBClient, create bool) *limiter.DynamoDBRepository {
	env.t.Helper()
	repo, err := limiter.OpenDynamoDB(env.ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = env.table
		o.Namespace = "default"
		o.CreateTable = create
		o.Now = env.clock.now
	})
	require.NoError(env.t, err, "OpenDynamoDB")
	return repo
}

// limiter returns a RateLimiter on the env's repository, on the path
// env.spec selects.
func (env *testEnv) limiter(opts ...func(*limiter.Options)) *limiter.RateLimiter {
	return limiter.New(env.repo, append([]func(*limiter.Options){func(o *limiter.Options) { o.SpeculativeWrites = env.spec }, func(o *limiter.Options) { o.Clock = env.clock.now }}, opts...)...)
}

// tokens reads the balance of limit in the shard-0 bucket of (entity,
// resource), in millitokens.
func (env *testEnv) tokens(entity, resource, limit string) int64 {
	env.t.Helper()
	b, err := env.repo.GetBucket(env.ctx, store.BucketKey{EntityID: entity, Resource: resource})
	require.NoError(env.t, err, "GetBucket %s %s", entity, resource)
	require.NotNil(env.t, b, "GetBucket %s %s", entity, resource)
	s, ok := b.State(limit)
	require.True(env.t, ok, "bucket %s %s has no limit %s", entity, resource, limit)
	return s.TokensMilli
}

// calls summarises the recorded calls as "Op" or "Op[items]" joined by
// ", ", failed calls suffixed with "!".
func (env *testEnv) calls() string {
	var parts []string
	for _, c := range env.rec.Calls() {
		s := c.Op
		if c.Items > 0 {
			s += "[" + strconv.Itoa(c.Items) + "]"
		}
		if c.Failed() {
			s += "!"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// withClient returns a second repository on the env's table whose client
// has the recorder and optFns, e.g. a hook.
func (env *testEnv) withClient(optFns ...func(*dynamodb.Options)) *limiter.DynamoDBRepository {
	return env.open(ddblocal.Client(env.t, append([]func(*dynamodb.Options){env.rec.Option()}, optFns...)...), false)
}

// newDeadRepo returns a repository on env's table whose every call, once
// it is open, fails fast as an unreachable DynamoDB does.
func newDeadRepo(t *testing.T, env *testEnv) *limiter.DynamoDBRepository {
	t.Helper()
	var dead atomic.Bool
	repo := env.withClient(hook(func(string, any) error {
		if dead.Load() {
			return errUnreachable
		}
		return nil
	}))
	dead.Store(true)
	return repo
}

var errUnreachable = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

// hook returns a client option that calls before(op, params) ahead of every
// call; a non-nil error fails the call without sending it (fault injection).
func hook(before func(op string, params any) error) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			op := stack.ID()
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("test-hook",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if err := before(op, in.Parameters); err != nil {
						return middleware.InitializeOutput{}, middleware.Metadata{}, err
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
