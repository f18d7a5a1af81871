package limiter

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// TestMain starts one DynamoDB Local for the package (see internal/ddblocal)
// on first use. The run fails when any test made the limiter build a
// refusal that no shortage explains. (The tests that run a program on
// every backend, Redis included, are in cmd/internal/crossbackend: this
// package's tests import no Redis client.)
func TestMain(m *testing.M) {
	os.Exit(checkRefusals(ddblocal.Main(m)))
}

// checkRefusals returns code, or 1 when a refusal was built without an
// exceeded limit with a positive Retry-After (brokenRefusals), whichever
// test caused it.
func checkRefusals(code int) int {
	if n := brokenRefusals.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d refusals built without a shortage (no exceeded limit, or a Retry-After ≤ 0)\n", n)
		return max(code, 1)
	}
	return code
}

// testEnv is a repository on a fresh table, with a call recorder and a
// controllable clock.
type testEnv struct {
	t      *testing.T
	ctx    context.Context
	client *dynamodb.Client
	rec    *ddblocal.Recorder
	clock  *fakeClock
	repo   *dynamoRepository
	// spec selects the speculative path for env.limiter().
	spec bool
}

// forEachPath runs fn on a fresh environment once with the read-then-write
// path and once with the speculative path: both must behave alike. The two
// run side by side, each on a table, recorder and fake clock of its own.
func forEachPath(t *testing.T, fn func(t *testing.T, env *testEnv)) {
	for _, spec := range []bool{false, true} {
		t.Run(map[bool]string{false: "slow", true: "speculative"}[spec], func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t)
			env.spec = spec
			fn(t, env)
		})
	}
}

// epoch is the fake clock's start: 2026-01-02T03:04:05.678Z.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)

// newTestEnv opens a repository on a new table (deleted after the test).
func newTestEnv(t *testing.T, optFns ...func(*DynamoDBOptions)) *testEnv {
	t.Helper()
	return newTestEnvStreams(t, false, optFns...)
}

// newTestEnvStreams is newTestEnv whose table has its stream when streams
// is set: the package's other tests create theirs without one (see
// ddblocal.WithoutStreams), which keeps DynamoDB Local's writes as fast
// for the last test as for the first.
func newTestEnvStreams(t *testing.T, streams bool, optFns ...func(*DynamoDBOptions)) *testEnv {
	t.Helper()
	env := &testEnv{t: t, ctx: context.Background(), rec: &ddblocal.Recorder{}, clock: &fakeClock{t: epoch}}
	clientFns := []func(*dynamodb.Options){env.rec.Option()}
	if !streams {
		clientFns = append(clientFns, ddblocal.WithoutStreams)
	}
	env.client = ddblocal.Client(t, clientFns...)
	table := ddblocal.TableName(t)
	repo, err := openDynamo(env.ctx, env.client, append([]func(*DynamoDBOptions){func(o *DynamoDBOptions) {
		o.Table = table
		o.Namespace = "default"
		o.CreateTable = true
		o.Now = env.clock.now
	}}, optFns...)...)
	require.NoError(t, err, "OpenDynamoDB: %v", err)
	t.Cleanup(func() {
		env.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	env.repo = repo
	env.rec.Reset()
	return env
}

// limiter returns a RateLimiter on the env's repository, on the path
// env.spec selects.
func (env *testEnv) limiter(opts ...func(*Options)) *RateLimiter {
	return New(env.repo, append([]func(*Options){func(o *Options) { o.SpeculativeWrites = env.spec }, func(o *Options) { o.Clock = env.clock.now }}, opts...)...)
}

// item reads a raw item (strongly consistent).
func (env *testEnv) item(pk, sk string) map[string]types.AttributeValue {
	env.t.Helper()
	out, err := env.client.GetItem(env.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(env.repo.Table()), Key: primaryKey(pk, sk), ConsistentRead: aws.Bool(true),
	})
	require.NoError(env.t, err, "GetItem %s %s", pk, sk)
	return out.Item
}

// bucket reads the shard-0 bucket item of (entity, resource).
func (env *testEnv) bucket(entity, resource string) map[string]types.AttributeValue {
	return env.item(pkBucket(env.repo.NamespaceID(), entity, resource, 0), skState)
}

// n reads a number attribute of item (failing the test when absent).
func (env *testEnv) n(item map[string]types.AttributeValue, attr string) int64 {
	env.t.Helper()
	v, ok, err := schemaGetN(item, attr)
	require.NoError(env.t, err, "attribute %s in %v", attr, item)
	require.True(env.t, ok, "attribute %s missing in %v", attr, item)
	return v
}

// tokens reads b_{limit}_tk of the shard-0 bucket.
func (env *testEnv) tokens(entity, resource, limit string) int64 {
	env.t.Helper()
	return env.n(env.bucket(entity, resource), bucketAttr(limit, fieldTokens))
}

// sortedCalls is calls in sorted order, for calls made in parallel.
func (env *testEnv) sortedCalls() string {
	parts := strings.Split(env.calls(), ", ")
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// callChecker returns check(name, want, fn): it runs fn and fails t unless
// fn made exactly the calls want (in the form of calls).
func (env *testEnv) callChecker(t *testing.T) func(name, want string, fn func()) {
	return func(name, want string, fn func()) {
		t.Helper()
		env.rec.Reset()
		fn()
		got := env.calls()
		assert.Equal(t, want, got, "%s: calls = %q, want %q", name, got, want)
	}
}

// sortedCallChecker is callChecker for calls made in parallel: their order
// is not fixed, so both lists are compared sorted (want sorted already).
func (env *testEnv) sortedCallChecker(t *testing.T) func(name, want string, fn func()) {
	return func(name, want string, fn func()) {
		t.Helper()
		env.rec.Reset()
		fn()
		require.Equal(t, want, env.sortedCalls(), name)
	}
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

// newDeadRepo returns a copy of env's repository whose client points at a
// closed port: every call fails fast.
func newDeadRepo(t *testing.T, env *testEnv) *dynamoRepository {
	t.Helper()
	dead := *env.repo
	dead.client = ddblocal.NewClient("http://127.0.0.1:1")
	return &dead
}

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

// withClient returns a copy of env's repository using client (sharing the
// caches), e.g. one with a hook.
func (env *testEnv) withClient(optFns ...func(*dynamodb.Options)) *dynamoRepository {
	r := *env.repo
	r.client = ddblocal.Client(env.t, append([]func(*dynamodb.Options){env.rec.Option()}, optFns...)...)
	return &r
}
