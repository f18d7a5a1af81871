package limiter

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

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

	if !errors.Is(err, ErrRateLimited) {
		t.Fatal("errors.Is(err, ErrRateLimited) = false")
	}
	if errors.Is(err, ErrUnavailable) {
		t.Fatal("rate limit error matches ErrUnavailable")
	}
	var rle *RateLimitExceededError
	if !errors.As(fmt.Errorf("acquire: %w", err), &rle) {
		t.Fatal("errors.As through wrapping failed")
	}
	if got, want := rle.Error(), "limiter: rate limit exceeded for C/api (rpm, tpm); retry after 66.0s"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := rle.RetryAfterHeader(); got != "67" {
		t.Errorf("RetryAfterHeader() = %q, want 67", got)
	}
	if len(rle.Statuses) != 3 {
		t.Errorf("Statuses has %d entries, want 3 (wcu dropped)", len(rle.Statuses))
	}
	for _, s := range append(rle.Statuses, rle.Violations...) {
		if s.LimitName == "wcu" {
			t.Errorf("wcu leaked into %+v", s)
		}
	}
	if len(rle.Violations) != 2 || rle.Primary.LimitName != "rpm" || rle.RetryAfter != 66001*time.Millisecond {
		t.Errorf("Violations %v Primary %v RetryAfter %v", rle.Violations, rle.Primary, rle.RetryAfter)
	}
	if p := rle.Passed(); len(p) != 1 || p[0].LimitName != "tpm" || p[0].EntityID != "C" {
		t.Errorf("Passed() = %v", p)
	}
}

func TestRateLimitExceededPrimaryTie(t *testing.T) {
	e := newRateLimitExceededError([]LimitStatus{
		{EntityID: "a", LimitName: "x", Exceeded: true, RetryAfter: time.Second},
		{EntityID: "b", LimitName: "y", Exceeded: true, RetryAfter: time.Second},
	})
	if e.Primary.EntityID != "a" {
		t.Errorf("Primary = %+v, want the first on ties", e.Primary)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1"}, {66001 * time.Millisecond, "67"}, {2 * time.Second, "3"}, {999 * time.Millisecond, "1"},
		{time.Duration(math.MaxInt64), "9223372037"},
	} {
		if got := retryAfterHeader(tc.d); got != tc.want {
			t.Errorf("retryAfterHeader(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestUnavailableError(t *testing.T) {
	cause := errors.New("connection refused")
	err := error(&UnavailableError{Cause: cause, Table: "zae-limiter", EntityID: "k1", Resource: "gpt-4"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatal("errors.Is failed for category or cause")
	}
	if errors.Is(err, ErrRateLimited) {
		t.Fatal("unavailable matches ErrRateLimited")
	}
	if got, want := err.Error(), "connection refused [stack=zae-limiter, entity=k1, resource=gpt-4]"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&UnavailableError{Cause: cause, EntityID: "k1"}).Error(), "connection refused [entity=k1]"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&UnavailableError{Cause: cause}).Error(), "connection refused"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
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
	} {
		wrapped := fmt.Errorf("op: %w", tc.err)
		if !errors.Is(wrapped, tc.sentinel) {
			t.Errorf("errors.Is(%T, %v) = false", tc.err, tc.sentinel)
		}
		if tc.err.Error() != tc.msg {
			t.Errorf("%T.Error() = %q, want %q", tc.err, tc.err.Error(), tc.msg)
		}
		if errors.Is(wrapped, ErrRateLimited) || errors.Is(wrapped, ErrUnavailable) {
			t.Errorf("%T matches an unrelated category", tc.err)
		}
	}
	if !errors.Is(&IncompatibleSchemaError{}, ErrVersion) {
		t.Error("IncompatibleSchemaError does not match ErrVersion")
	}
	if errors.Is(store.NewValidationError(ErrInvalidName, "f", "v", "r"), ErrInvalidIdentifier) {
		t.Error("name error matches ErrInvalidIdentifier")
	}
}

// TestNeverFitsMessage: a request that can never fit says so instead of
// giving a retry time that waiting cannot honour.
func TestNeverFitsMessage(t *testing.T) {
	l := PerMinute("tpm", 1000)
	too := newRateLimitExceededError([]LimitStatus{{EntityID: "k", Resource: "gpt", LimitName: "tpm", Limit: l,
		Available: 1000, Requested: 5000, Exceeded: true, RetryAfter: 4 * time.Minute}})
	if !too.NeverFits() {
		t.Error("5000 of a 1000 bucket: NeverFits() = false")
	}
	if got, want := too.Error(), "limiter: rate limit exceeded for k/gpt (tpm); the request can never fit: 5000 tpm requested, capacity 1000"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	fits := newRateLimitExceededError([]LimitStatus{{EntityID: "k", Resource: "gpt", LimitName: "tpm", Limit: l,
		Available: 100, Requested: 500, Exceeded: true, RetryAfter: 24 * time.Second}})
	if fits.NeverFits() || !strings.Contains(fits.Error(), "retry after 24.0s") {
		t.Errorf("a request that fits later: NeverFits %v, %q", fits.NeverFits(), fits.Error())
	}
}
