package ddblocal

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/zaelimiter/limiter/internal/skiplog"
)

// Client settings. DynamoDB Local accepts any credentials; it runs with
// -sharedDb, so every client sees the same tables whatever its keys.
const (
	Region          = "us-east-1"
	AccessKeyID     = "ddblocal"
	SecretAccessKey = "ddblocal"
)

// Retry settings of the clients this package builds: the SDK's standard
// retryer, kept small so that a dead endpoint fails in well under a second
// instead of after the default 3 attempts with up to 20 s of backoff, and
// without the client-side retry quota, so that a test that injects many
// throttling errors sees the errors rather than "retry quota exceeded".
const (
	RetryMaxAttempts = 2
	RetryMaxBackoff  = 100 * time.Millisecond
)

// MaxTableNameLen is the longest name [TableName] returns. The names are
// also used as stack names.
const MaxTableNameLen = 55

// SkipMessage starts the message of every test that [Client] skips (or, when
// DynamoDB is required, fails) for want of DynamoDB Local. .ci/run greps the
// test log for it.
const SkipMessage = "ddblocal: DynamoDB Local unavailable"

// pkgServer is the one DynamoDB Local of a test binary, started by the first
// [Client] call and stopped by [Main].
var pkgServer struct {
	inMain atomic.Bool
	once   sync.Once
	srv    *Server
	err    error
}

// Main runs a package's tests with one shared DynamoDB Local and returns the
// exit code. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }
//
// The server is started lazily by the first [Client] or [StreamsClient] call
// (so a run that selects only pure tests starts nothing) and stopped after
// the tests. With -v it reports where the endpoint came from.
func Main(m *testing.M) int {
	pkgServer.inMain.Store(true)
	widenStoreTimeout()
	code := m.Run()
	// Orders this goroutine after the start (if any) and forbids a later one.
	pkgServer.once.Do(func() {})
	if srv := pkgServer.srv; srv != nil {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "ddblocal: stop %s: %v\n", srv.Endpoint(), err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Endpoint returns the package's DynamoDB Local endpoint, starting it on
// first use. When none can be had it skips t, or fails it when DynamoDB is
// required (CI=true or ZAEL_REQUIRE_DYNAMODB=1). It fails t when the test
// binary has no TestMain calling [Main].
func Endpoint(t testing.TB) string {
	t.Helper()
	if !pkgServer.inMain.Load() {
		t.Fatal("ddblocal: the package needs func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }")
	}
	pkgServer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		pkgServer.srv, pkgServer.err = Start(ctx)
		if pkgServer.err == nil && testing.Verbose() {
			srv := pkgServer.srv
			if why := srv.Fallback(); why != "" {
				fmt.Fprintf(os.Stderr, "ddblocal: %s; using the jar\n", why)
			}
			fmt.Fprintf(os.Stderr, "ddblocal: DynamoDB Local (%s) at %s, started in %v\n",
				srv.Source(), srv.Endpoint(), srv.StartDuration().Round(time.Millisecond))
		}
	})
	if pkgServer.err != nil {
		unavailable(t, pkgServer.err, os.Getenv)
		return ""
	}
	return pkgServer.srv.Endpoint()
}

// Client returns a DynamoDB client for the package's DynamoDB Local (see
// [Endpoint] for the skip and fail rules), configured like [NewClient].
func Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return NewClient(Endpoint(t), optFns...)
}

// StreamsClient returns a DynamoDB Streams client for the package's DynamoDB
// Local, configured like [NewStreamsClient].
func StreamsClient(t testing.TB, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	t.Helper()
	return NewStreamsClient(Endpoint(t), optFns...)
}

// NewClient returns a DynamoDB client for endpoint: region us-east-1, static
// dummy credentials, a small standard retryer ([RetryMaxAttempts],
// [RetryMaxBackoff], no retry quota) and a discarding logger. optFns run
// last and may change any of it, e.g. attach a [Recorder].
//
// The client does not validate the CRC32 checksum of responses: on DynamoDB
// Local's error responses (a ConditionalCheckFailedException, say) the
// validation fails and the SDK, given a logger, warns "failed to close HTTP
// response body ... response did not match expected checksum" although the
// call itself behaves. Turning the validation off removes the cause, so a
// test that attaches a logger stays quiet too.
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          Region,
		BaseEndpoint:                    aws.String(endpoint),
		Credentials:                     credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:                         newRetryer(),
		Logger:                          logging.Nop{},
		DisableValidateResponseChecksum: true,
		AccountIDEndpointMode:           aws.AccountIDEndpointModeDisabled,
	}, optFns...)
}

// NewStreamsClient returns a DynamoDB Streams client for endpoint,
// configured like [NewClient].
func NewStreamsClient(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:      newRetryer(),
		Logger:       logging.Nop{},
	}, optFns...)
}

func newRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = RetryMaxAttempts
		o.MaxBackoff = RetryMaxBackoff
		o.RateLimiter = ratelimit.None
	})
}

// required reports whether a missing DynamoDB Local fails tests instead of
// skipping them: when ZAEL_REQUIRE_DYNAMODB or CI is true (1, t, true, ...).
func required(getenv func(string) string) bool {
	for _, k := range []string{EnvRequire, "CI"} {
		if b, err := strconv.ParseBool(strings.TrimSpace(getenv(k))); err == nil && b {
			return true
		}
	}
	return false
}

// unavailable skips t, or fails it when DynamoDB is required, with a message
// that starts with [SkipMessage] and names the command to run.
func unavailable(t testing.TB, err error, getenv func(string) string) {
	t.Helper()
	cause := strings.TrimPrefix(err.Error(), ErrUnavailable.Error()+": ")
	msg := fmt.Sprintf("%s; run `%s` (or set %s):\n%s", SkipMessage, FetchCommand, EnvEndpoint, cause)
	if required(getenv) {
		t.Fatalf("%s\n(a failure, not a skip: CI=true or %s=1)", msg, EnvRequire)
		return
	}
	skiplog.Skip(t, "dynamodb-local", msg)
}

// tableSeq and runID make [TableName] unique within a process and, with
// high probability, across the test binaries sharing one endpoint.
var (
	tableSeq atomic.Uint64
	runID    = newRunID()
)

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 36)
}

// TableName returns a table name unique to this call: "t-", the test's name
// in lower case with every run of other characters turned into one hyphen,
// then a per-process id and a sequence number. It contains only letters,
// digits and hyphens, starts with a letter, and is at most
// [MaxTableNameLen] characters long, so it is a valid stack name too.
//
// When the endpoint comes from $ZAEL_DYNAMODB_ENDPOINT (a server that
// outlives the test binary), the table is deleted when the test ends.
func TableName(t testing.TB) string {
	t.Helper()
	suffix := "-" + runID + "-" + strconv.FormatUint(tableSeq.Add(1), 10)
	name := "t"
	if base := sanitize(t.Name()); base != "" {
		room := MaxTableNameLen - len(name) - 1 - len(suffix)
		name += "-" + strings.TrimRight(base[:min(len(base), room)], "-")
	}
	name += suffix
	if ep := strings.TrimSpace(os.Getenv(EnvEndpoint)); ep != "" {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The table may never have been created: ignore the error.
			_, _ = NewClient(normalizeEndpoint(ep)).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		})
	}
	return name
}

// sanitize lower-cases s and turns every run of characters other than
// letters and digits into one hyphen, trimming hyphens at both ends.
func sanitize(s string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if hyphen && b.Len() > 0 {
				b.WriteByte('-')
			}
			hyphen = false
			b.WriteRune(r)
			continue
		}
		hyphen = true
	}
	return b.String()
}

// WideStoreTimeout is the store timeout of the limiters of a test binary
// whose TestMain calls Main, unless $ZAEL_STORE_TIMEOUT is set: long
// enough that a store on a loaded machine never times out. The tests of
// the bound itself set theirs with limiter.Options.StoreTimeout.
const WideStoreTimeout = "30s"

// widenStoreTimeout sets $ZAEL_STORE_TIMEOUT (the default of limiter.Options.StoreTimeout) to
// WideStoreTimeout when it is unset.
func widenStoreTimeout() {
	if os.Getenv("ZAEL_STORE_TIMEOUT") == "" {
		os.Setenv("ZAEL_STORE_TIMEOUT", WideStoreTimeout)
	}
}

// WithoutStreams is a client option that creates tables without a stream:
// it drops the StreamSpecification of every CreateTable the client sends.
// Use it where a test reads no stream. DynamoDB Local keeps the stream
// records of every table of a server (deleted tables too) and, on each
// write to a table with a stream, walks past the records written before
// that table's first; so a package whose tests each create a streamed
// table makes every later test's writes slower than the one before.
func WithoutStreams(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		const id = "ddblocal.WithoutStreams"
		if _, ok := stack.Initialize.Get(id); ok {
			return nil
		}
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if ct, ok := in.Parameters.(*dynamodb.CreateTableInput); ok && ct.StreamSpecification != nil {
					cp := *ct
					cp.StreamSpecification = nil
					in.Parameters = &cp
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}
