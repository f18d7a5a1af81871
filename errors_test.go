package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

func TestRateLimitExceededError(t *testing.T) {
	rpm := PerMinute("rpm", 10)
	tpm := PerMinute("tpm", 1000)
	statuses := []LimitStatus{
		{EntityID: "C", Resource: "api", LimitName: "rpm", Limit: rpm, Available: -11, Exceeded: true,
			RetryAfter: 66001 * time.Millisecond},
		{EntityID: "C", Resource: "api", LimitName: "tpm", Limit: tpm, Available: 5, Requested: 1},
		{EntityID: "C", Resource: "api", LimitName: "wcu", Available: 0, Requested: 1, Exceeded: true,
			RetryAfter: time.Hour},
		{EntityID: "P", Resource: "api", LimitName: "tpm", Limit: tpm, Available: 0, Requested: 1, Exceeded: true,
			RetryAfter: 61 * time.Millisecond},
	}
	err := error(newRateLimitExceededError(statuses))

	require.ErrorIs(t, err, ErrRateLimited, "errors.Is(err, ErrRateLimited) = false")
	require.NotErrorIs(t, err, ErrUnavailable, "rate limit error matches ErrUnavailable")
	var rle *RateLimitExceededError
	require.ErrorAs(t, fmt.Errorf("acquire: %w", err), &rle, "errors.As through wrapping failed")
	got, want := rle.Error(), "limiter: rate limit exceeded for C on api: rpm and tpm of P; retry in 1m7s"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
	got = rle.RetryAfterHeader()
	assert.EqualValues(t, "67", got, "RetryAfterHeader() = %q, want 67", got)
	assert.Len(t, rle.Statuses, 3, "Statuses, want wcu dropped")
	for _, s := range append(rle.Statuses, rle.Violations...) {
		assert.NotEqual(t, "wcu", s.LimitName, "wcu leaked into %+v", s)
	}
	assert.Len(t, rle.Violations, 2, "Violations %v", rle.Violations)
	assert.Equal(t, "rpm", rle.Primary.LimitName, "Primary %v", rle.Primary)
	assert.Equal(t, 66001*time.Millisecond, rle.RetryAfter, "RetryAfter")
	p := rle.Passed()
	if assert.Len(t, p, 1, "Passed() = %v", p) {
		assert.Equal(t, "tpm", p[0].LimitName, "Passed() = %v", p)
		assert.Equal(t, "C", p[0].EntityID, "Passed() = %v", p)
	}
}

func TestRateLimitExceededPrimaryTie(t *testing.T) {
	e := newRateLimitExceededError([]LimitStatus{
		{EntityID: "a", LimitName: "x", Exceeded: true, RetryAfter: time.Second},
		{EntityID: "b", LimitName: "y", Exceeded: true, RetryAfter: time.Second},
	})
	assert.Equal(t, "a", e.Primary.EntityID, "Primary = %+v, want the first on ties", e.Primary)
}

func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1"}, {66001 * time.Millisecond, "67"}, {2 * time.Second, "3"}, {999 * time.Millisecond, "1"},
		{time.Duration(math.MaxInt64), "9223372037"},
	} {
		got := retryAfterHeader(tc.d)
		assert.Equal(t, tc.want, got, "retryAfterHeader(%v) = %q, want %q", tc.d, got, tc.want)
	}
}

func TestUnavailableError(t *testing.T) {
	cause := errors.New("connection refused")
	err := error(&UnavailableError{Cause: cause, Table: "zae-limiter", EntityID: "k1", Resource: "gpt-4"})
	require.ErrorIs(t, err, ErrUnavailable, "errors.Is failed for category or cause")
	require.ErrorIs(t, err, cause, "errors.Is failed for category or cause")
	require.NotErrorIs(t, err, ErrRateLimited, "unavailable matches ErrRateLimited")
	got, want := err.Error(), "limiter: backend unavailable: connection refused [stack=zae-limiter, entity=k1, resource=gpt-4]"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
	got, want = (&UnavailableError{Cause: cause, EntityID: "k1"}).Error(), "limiter: backend unavailable: connection refused [entity=k1]"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
	got, want = (&UnavailableError{Cause: cause}).Error(), "limiter: backend unavailable: connection refused"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
}

// TestUnavailableErrorNamesNoInternalStep: an SDK error, whatever the
// repository wrapped it in, reads "limiter: DynamoDB {operation}: " and
// the service's error or the transport's, and the limiter's own causes
// (the store timeout, the caller's deadline, the circuit breaker) speak
// for themselves while matching what they wrap.
func TestUnavailableErrorNamesNoInternalStep(t *testing.T) {
	refused := &url.Error{Op: "Post", URL: "http://127.0.0.1:1/", Err: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
	api := &smithy.GenericAPIError{Code: "InternalServerError", Message: "Internal server error"}
	sdk := func(err error) error {
		return wrapErr("speculative write", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "UpdateItem", Err: err})
	}
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{sdk(fmt.Errorf("exceeded maximum number of attempts, 3, https response error StatusCode: 0, request send failed, %w", refused)),
			"limiter: DynamoDB UpdateItem: dial tcp 127.0.0.1:1: connect: connection refused [stack=t]"},
		{sdk(fmt.Errorf("https response error StatusCode: 500, %w", api)),
			"limiter: DynamoDB UpdateItem: InternalServerError: Internal server error [stack=t]"},
		{&storeTimeoutError{timeout: 500 * time.Millisecond, cause: sdk(context.DeadlineExceeded)},
			"limiter: the store did not answer within 500ms (Options.StoreTimeout) [stack=t]"},
		{&deadlineError{cause: context.DeadlineExceeded}, "limiter: the store did not answer before the caller's deadline [stack=t]"},
		{ErrCircuitOpen, ErrCircuitOpen.Error() + " [stack=t]"},
	} {
		err := &UnavailableError{Cause: tc.cause, Table: "t"}
		assert.Equal(t, tc.want, err.Error())
		assert.NotContains(t, err.Error(), "speculative write")
		assert.ErrorIs(t, err, tc.cause)
	}
	for _, own := range []error{&storeTimeoutError{}, &deadlineError{}, ErrCircuitOpen} {
		assert.ErrorIs(t, own, ErrUnavailable, "%T", own)
	}
	assert.ErrorIs(t, &storeTimeoutError{cause: sdk(context.DeadlineExceeded)}, context.DeadlineExceeded)
	assert.ErrorIs(t, &deadlineError{}, context.DeadlineExceeded)
	assert.ErrorIs(t, fmt.Errorf("op: %w", ErrCircuitOpen), ErrCircuitOpen)
}

func TestTypedErrorsMatchCategories(t *testing.T) {
	for _, tc := range []struct {
		err      error
		sentinel error
		msg      string
	}{
		{&EntityNotFoundError{EntityID: "x"}, ErrEntityNotFound, "limiter: entity not found: x"},
		{&EntityExistsError{EntityID: "x"}, ErrEntityExists, "limiter: entity already exists: x"},
		{&NamespaceNotFoundError{Namespace: "t1"}, ErrNamespaceNotFound,
			`limiter: namespace "t1" not found (register it first)`},
		{&NamespaceStateError{Namespace: "t1", State: "active", Message: `namespace "t1" is already active (not deleted)`},
			ErrNamespaceState, `limiter: namespace "t1" is already active (not deleted)`},
		{&VersionMismatchError{ClientVersion: "1.0.0", SchemaVersion: "0.10.0", Message: "Update."}, ErrVersion,
			"limiter: version mismatch: client 1.0.0, schema 0.10.0, lambda unknown: Update."},
		{&IncompatibleSchemaError{ClientVersion: "1.0.0", SchemaVersion: "0.10.0", Message: "Migrate.", MigrationGuideURL: "u"},
			ErrIncompatibleSchema, "limiter: incompatible schema: client 1.0.0 does not support schema 0.10.0: Migrate. (see u)"},
		{store.NewValidationError(ErrInvalidName, "resource", "x", "bad"), ErrInvalidName, "limiter: invalid resource: bad"},
		{&TableNotFoundError{Table: "rl", Endpoint: "http://localhost:8000"}, ErrTableNotFound,
			"limiter: table \"rl\" not found at http://localhost:8000: create it with `zae-limiter deploy --name rl` (AWS), " +
				"`zae-limiter local up --name rl` (DynamoDB Local), or open it with DynamoDBOptions.CreateTable set"},
	} {
		wrapped := fmt.Errorf("op: %w", tc.err)
		assert.ErrorIs(t, wrapped, tc.sentinel, "errors.Is(%T, %v) = false", tc.err, tc.sentinel)
		assert.EqualError(t, tc.err, tc.msg, "%T.Error()", tc.err)
		assert.NotErrorIs(t, wrapped, ErrRateLimited, "%T matches an unrelated category", tc.err)
		assert.NotErrorIs(t, wrapped, ErrUnavailable, "%T matches an unrelated category", tc.err)
	}
	assert.ErrorIs(t, &IncompatibleSchemaError{}, ErrVersion, "IncompatibleSchemaError does not match ErrVersion")
	assert.NotErrorIs(t, store.NewValidationError(ErrInvalidName, "f", "v", "r"), ErrInvalidIdentifier, "name error matches ErrInvalidIdentifier")
}

// TestNeverFitsMessage: a request that can never fit says so instead of
// giving a retry time that waiting cannot honour.
func TestNeverFitsMessage(t *testing.T) {
	l := PerMinute("tpm", 1000)
	too := newRateLimitExceededError([]LimitStatus{{EntityID: "k", Resource: "gpt", LimitName: "tpm", Limit: l,
		Available: 1000, Requested: 5000, Exceeded: true, RetryAfter: 4 * time.Minute}})
	assert.True(t, too.NeverFits(), "5000 of a 1000 bucket: NeverFits() = false")
	got, want := too.Error(), "limiter: rate limit exceeded for k on gpt: tpm; the request can never fit: 5000 tpm requested, capacity 1000"
	assert.Equal(t, want, got, "Error() = %q, want %q", got, want)
	fits := newRateLimitExceededError([]LimitStatus{{EntityID: "k", Resource: "gpt", LimitName: "tpm", Limit: l,
		Available: 100, Requested: 500, Exceeded: true, RetryAfter: 24 * time.Second}})
	assert.False(t, fits.NeverFits(), "a request that fits later: NeverFits")
	assert.ErrorContains(t, fits, "retry in 24.0s", "a request that fits later")
}
