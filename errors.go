// Layer 1, math and models: the errors the limiter returns.

package limiter

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/zaelimiter/limiter/internal/invariant"
	"github.com/zaelimiter/limiter/store"
)

// Sentinel errors. Every error the package returns matches one of these with
// [errors.Is]; the typed errors below carry the details and are matched with
// [errors.As].
var (
	// ErrRateLimited is matched by *[RateLimitExceededError].
	ErrRateLimited = errors.New("limiter: rate limit exceeded")
	// ErrLeaseDone is returned by every Lease method after Commit or Rollback.
	ErrLeaseDone = errors.New("limiter: lease already committed or rolled back")
	// ErrClosed is returned by every call of a [RateLimiter] that reads or
	// writes the store (and by Lease.Commit and Lease.Rollback) once
	// [RateLimiter.Close] started.
	ErrClosed = errors.New("limiter: closed")
	// ErrUnavailable is matched by *[UnavailableError]: the store could not
	// be reached or answered with an error.
	ErrUnavailable = store.ErrUnavailable
	// ErrValidation is matched by every *[ValidationError].
	ErrValidation = store.ErrValidation
	// ErrInvalidIdentifier is matched by a *[ValidationError] about an entity
	// ID, parent ID or principal. It also matches [ErrValidation].
	ErrInvalidIdentifier = store.ErrInvalidIdentifier
	// ErrInvalidName is matched by a *[ValidationError] about a limit name or
	// resource. It also matches [ErrValidation].
	ErrInvalidName = store.ErrInvalidName
	// ErrEntityNotFound is matched by *[EntityNotFoundError].
	ErrEntityNotFound = store.ErrEntityNotFound
	// ErrEntityExists is matched by *[EntityExistsError].
	ErrEntityExists = store.ErrEntityExists
	// ErrNamespaceNotFound is matched by *[NamespaceNotFoundError].
	ErrNamespaceNotFound = errors.New("limiter: namespace not found")
	// ErrNamespaceState is matched by *[NamespaceStateError].
	ErrNamespaceState = errors.New("limiter: namespace in wrong state")
	// ErrVersion is matched by *[VersionMismatchError] and
	// *[IncompatibleSchemaError].
	ErrVersion = errors.New("limiter: version error")
	// ErrIncompatibleSchema is matched by *[IncompatibleSchemaError]. It also
	// matches [ErrVersion].
	ErrIncompatibleSchema = errors.New("limiter: incompatible schema")
	// ErrUnsupported is returned by [RateLimiter] methods whose repository
	// lacks the optional ability they need (see [store.AuditLog], [store.UsageStore],
	// [store.CapacityReader]).
	ErrUnsupported = store.ErrUnsupported
	// ErrAccessDenied is matched by *[AccessDeniedError]: the backend
	// refused the call for want of permission.
	ErrAccessDenied = errors.New("limiter: access denied")
	// ErrCircuitOpen is the cause of an *[UnavailableError] (and of a
	// store call's error) while the circuit breaker is open: the store
	// failed repeatedly and calls fail at once until a probe succeeds
	// ([Options.CircuitFailures]). It also matches [ErrUnavailable].
	ErrCircuitOpen error = circuitOpenError{}
	// ErrTableNotFound is matched by *[TableNotFoundError].
	ErrTableNotFound = errors.New("limiter: table not found")
	// ErrBalanceExhausted is matched by a *[RateLimitExceededError] one of
	// whose violations is a prepaid balance ([Prepaid]) that cannot cover
	// the amount: only a top-up ([RateLimiter.TopUp]) lets it through.
	ErrBalanceExhausted = errors.New("limiter: prepaid balance exhausted")
	// ErrTopUpConflict is matched by the error of [RateLimiter.TopUp]
	// given an id applied before with another amount: nothing was added.
	ErrTopUpConflict = errors.New("limiter: top-up id already applied with another amount")
	// ErrCascadeTooDeep is matched by the *[ValidationError] of
	// [Admin.CreateEntity] for an entity whose cascade would charge
	// more than [MaxCascadeLevels] entities. It also matches
	// [ErrValidation].
	ErrCascadeTooDeep = errors.New("limiter: cascade too deep")
)

// errNilContext is returned for a nil context.Context: a caller error
// reported as invalid input rather than a panic.
var errNilContext = store.NewValidationError(ErrValidation, "ctx", "nil", "context must not be nil")

// isNil reports whether v is nil or holds a nil pointer, map, slice, func
// or channel: a nil argument of an interface type (a repository, a
// client), which a plain v == nil misses for a typed nil.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// RateLimitExceededError is returned by Acquire and Lease.Consume when at
// least one limit cannot satisfy the request. It matches [ErrRateLimited].
type RateLimitExceededError struct {
	// Statuses holds every limit checked, passed or not, in check order
	// (child limits before parent limits).
	Statuses []LimitStatus
	// Violations is the exceeded subset of Statuses, in the same order.
	Violations []LimitStatus
	// Primary is the violation with the longest RetryAfter (the first one on
	// ties).
	Primary LimitStatus
	// RetryAfter is Primary.RetryAfter: how long to wait before retrying,
	// always positive.
	RetryAfter time.Duration
}

// brokenRefusals counts the refusals built without an exceeded status with
// a positive RetryAfter: a refusal that no shortage explains (a lost race
// reported as a denial). It must stay zero; the tests of every package
// check it.
var brokenRefusals = &invariant.BrokenRefusals

// newRateLimitExceededError builds the error from statuses; the hidden wcu
// limit is dropped. Every refusal says how long to wait: at least one
// status must be exceeded, each with a positive RetryAfter. A violation of
// that invariant (a bug) is counted in brokenRefusals and given
// minRetryAfter, so that a caller still waits before retrying.
func newRateLimitExceededError(statuses []LimitStatus) *RateLimitExceededError {
	e := &RateLimitExceededError{}
	broken := false
	for _, s := range statuses {
		if s.LimitName == wcuLimitName {
			continue
		}
		if s.Exceeded && s.RetryAfter <= 0 {
			broken = true
			s.RetryAfter = minRetryAfter
		}
		e.Statuses = append(e.Statuses, s)
		if !s.Exceeded {
			continue
		}
		if len(e.Violations) == 0 || s.RetryAfter > e.Primary.RetryAfter {
			e.Primary = s
		}
		e.Violations = append(e.Violations, s)
	}
	if len(e.Violations) == 0 {
		broken = true
		e.Primary.RetryAfter = minRetryAfter
	}
	if broken {
		brokenRefusals.Add(1)
	}
	e.RetryAfter = e.Primary.RetryAfter
	return e
}

// Passed returns the statuses that were not exceeded.
func (e *RateLimitExceededError) Passed() []LimitStatus {
	var out []LimitStatus
	for _, s := range e.Statuses {
		if !s.Exceeded {
			out = append(out, s)
		}
	}
	return out
}

// Error says who was refused, by which limits and when to retry, in the
// terms the limits were set in: "limiter: rate limit exceeded for key-1 on
// gpt-4o: tpm; retry in 2.4s", or for a calendar limit "limiter: rate limit
// exceeded for proj-1 on gpt-4o: usd, the November 2026 budget; retry in
// 47h50m" (never the name of the bucket that holds a period). A prepaid
// balance that cannot cover the amount says what was asked, what is left
// and that only a top-up helps; a request that can never fit says so
// instead of giving a retry time. See [RateLimitExceededError.describe].
func (e *RateLimitExceededError) Error() string {
	return e.describe()
}

// NeverFits reports whether waiting cannot help: a violated limit's
// capacity is smaller than the amount requested, or it does not refill (a
// calendar limit refills: its next period starts full; a prepaid balance
// does not: only a top-up helps).
// RetryAfter is then meaningless, and [RateLimiter.Wait] fails at once.
func (e *RateLimitExceededError) NeverFits() bool {
	if e.RetryAfter == math.MaxInt64 {
		return true
	}
	for _, v := range e.Violations {
		if v.Requested > v.Limit.Capacity || !kindOf(store.Limit(v.Limit)).refills(store.Limit(v.Limit)) {
			return true
		}
	}
	return false
}

// Is reports whether target is [ErrRateLimited], or [ErrBalanceExhausted]
// when a violation is a prepaid balance's.
func (e *RateLimitExceededError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return true
	case ErrBalanceExhausted:
		for _, v := range e.Violations {
			if store.Limit(v.Limit).IsPrepaid() {
				return true
			}
		}
	}
	return false
}

// RetryAfterHeader returns the value for an HTTP Retry-After header: whole
// seconds plus one, so never less than "1".
func (e *RateLimitExceededError) RetryAfterHeader() string {
	return retryAfterHeader(e.RetryAfter)
}

func retryAfterHeader(d time.Duration) string {
	secs := int64(d / time.Second)
	if secs < math.MaxInt64 {
		secs++
	}
	return strconv.FormatInt(secs, 10)
}

// UnavailableError reports that the rate limiter could not reach its store
// (or the store failed, or did not answer within [Options.StoreTimeout], or the
// circuit breaker was open: Cause is then [ErrCircuitOpen]) while the
// on-unavailable mode was "block", or that [OpenDynamoDB] could not reach
// DynamoDB. It matches [ErrUnavailable] and unwraps to the cause.
type UnavailableError struct {
	// Cause is the underlying error.
	Cause error
	// Table, EntityID and Resource give context; any may be empty.
	Table    string
	EntityID string
	Resource string
}

// Error returns the cause as a user reads it followed by the context, e.g.
// "limiter: DynamoDB UpdateItem: InternalServerError: ... [stack=zae-limiter,
// entity=key-1, resource=gpt-4]" for an AWS SDK error (see describeCause).
func (e *UnavailableError) Error() string {
	msg := "limiter: backend unavailable"
	if e.Cause != nil {
		msg = describeCause(e.Cause)
	}
	var parts []string
	if e.Table != "" {
		parts = append(parts, "stack="+e.Table)
	}
	if e.EntityID != "" {
		parts = append(parts, "entity="+e.EntityID)
	}
	if e.Resource != "" {
		parts = append(parts, "resource="+e.Resource)
	}
	if len(parts) > 0 {
		msg += " [" + strings.Join(parts, ", ") + "]"
	}
	return msg
}

// Is reports whether target is [ErrUnavailable].
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// describeCause returns a store's error as its user reads it: the
// limiter's own account of it when it has one (no answer within the store
// timeout, before the caller's deadline, the circuit breaker, an endpoint
// that cannot be reached); an AWS SDK error as sdkMessage puts it; a
// message that starts "limiter: " as it is; anything else after "limiter:
// backend unavailable: ".
func describeCause(err error) string {
	var own ownMessage
	if errors.As(err, &own) {
		return own.Error()
	}
	if m, ok := sdkMessage(err); ok {
		return m
	}
	if msg := err.Error(); strings.HasPrefix(msg, "limiter: ") {
		return msg
	}
	return "limiter: backend unavailable: " + err.Error()
}

// ownMessage is implemented by the limiter's errors whose message says
// what happened to a store call better than the errors they wrap.
type ownMessage interface {
	error
	ownMessage()
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// describe builds the text of Error. The subject is the primary
// violation's entity and resource; every violation is named by its limit
// (a calendar limit with its period, a prepaid limit as a balance) and, when
// it belongs to another entity or resource of the cascade, by where it
// lives. The tail is the first reason waiting cannot help (a prepaid
// balance short, a request above a capacity, a limit that never refills)
// or else the retry time as a human duration.
func (e *RateLimitExceededError) describe() string {
	pResource, _ := splitBucketResource(e.Primary.Resource)
	var b strings.Builder
	b.WriteString("limiter: rate limit exceeded for ")
	b.WriteString(e.Primary.EntityID)
	b.WriteString(resourcePhrase(pResource))
	b.WriteString(": ")
	descs := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		descs[i] = describeViolation(v, len(e.Violations) == 1, e.Primary.EntityID, pResource)
	}
	b.WriteString(joinAnd(descs))
	for _, v := range e.Violations {
		if store.Limit(v.Limit).IsPrepaid() {
			fmt.Fprintf(&b, "; %d %s requested, %d left in the balance: top up to continue", v.Requested, v.LimitName, v.Available)
			return b.String()
		}
		if v.Requested > v.Limit.Capacity {
			fmt.Fprintf(&b, "; the request can never fit: %d %s requested, capacity %d", v.Requested, v.LimitName, v.Limit.Capacity)
			return b.String()
		}
		if !kindOf(store.Limit(v.Limit)).refills(store.Limit(v.Limit)) {
			fmt.Fprintf(&b, "; the request can never fit: %s does not refill", v.LimitName)
			return b.String()
		}
	}
	if e.RetryAfter == math.MaxInt64 {
		b.WriteString("; the request can never fit")
		return b.String()
	}
	b.WriteString("; retry in ")
	b.WriteString(humanDuration(e.RetryAfter))
	return b.String()
}

// describeViolation names violation v: its limit name, the period of a
// calendar limit or "the prepaid balance" (after a comma when alone, in
// parentheses in a list), and its entity and resource when they are not
// the subject's (entity, resource).
func describeViolation(v LimitStatus, alone bool, entity, resource string) string {
	res, tag := splitBucketResource(v.Resource)
	d := v.LimitName
	if what := ownBucketPhrase(store.Limit(v.Limit), tag); what != "" {
		if alone {
			d += ", " + what
		} else {
			d += " (" + what + ")"
		}
	}
	switch {
	case v.EntityID != entity && res != resource:
		d += " of " + v.EntityID + resourcePhrase(res)
	case v.EntityID != entity:
		d += " of " + v.EntityID
	case res != resource:
		d += resourcePhrase(res)
	}
	return d
}

// resourcePhrase returns " on {resource}", or " across every resource"
// for the entity-wide resource [AllResources].
func resourcePhrase(resource string) string {
	switch resource {
	case "":
		return ""
	case store.AllResources:
		return " across every resource"
	}
	return " on " + resource
}

// splitBucketResource undoes the naming of a calendar period's or prepaid
// balance's bucket ([Limit.CalendarBucket], [Limit.PrepaidBucket]):
// "gpt-4o/usd.m2026-11" is resource "gpt-4o" and tag "m2026-11";
// "gpt-4o/usd.balance" is "gpt-4o" and "balance". Any other resource is
// returned whole with no tag.
func splitBucketResource(bucket string) (resource, tag string) {
	if !store.IsOwnBucketResource(bucket) {
		return bucket, ""
	}
	i := strings.LastIndexByte(bucket, '/')
	return bucket[:i], bucket[strings.LastIndexByte(bucket, '.')+1:]
}

// ownBucketPhrase says which budget a refusal of l is about, as l's kind
// names it ("the November 2026 budget", "the prepaid balance"); "" for a
// rolling or in-flight limit. tag is the period tag of the bucket that
// refused ("" when the status named no period bucket).
func ownBucketPhrase(l store.Limit, tag string) string { return kindOf(l).phrase(l, tag) }

// joinAnd joins items as a list is written: "a", "a and b", "a, b and c".
func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// humanDuration formats a wait as a person reads it, never shorter than d
// (a client that waits the time shown is not refused again for want of
// time): tenths of a second under a minute ("2.4s"), whole seconds under
// an hour ("12m5s"), whole minutes under two days ("47h50m"), whole hours
// beyond ("29d4h"). The exact wait is the refusal's RetryAfter.
func humanDuration(d time.Duration) string {
	ceil := func(unit time.Duration) time.Duration {
		if r := d % unit; r != 0 && d <= math.MaxInt64-unit {
			return d - r + unit
		}
		return d
	}
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", ceil(100*time.Millisecond).Seconds())
	case d < time.Hour:
		return ceil(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(ceil(time.Minute).String(), "0s")
	}
	h := int64(ceil(time.Hour) / time.Hour)
	if h%24 == 0 {
		return fmt.Sprintf("%dd", h/24)
	}
	return fmt.Sprintf("%dd%dh", h/24, h%24)
}

// circuitOpenError is ErrCircuitOpen: a value of a comparable type, so
// that returning it allocates nothing.
type circuitOpenError struct{}

func (circuitOpenError) Error() string {
	return "limiter: circuit breaker open: the store failed repeatedly; calls fail at once until a probe succeeds (Options.CircuitFailures)"
}

func (circuitOpenError) Is(target error) bool { return target == ErrUnavailable }

func (circuitOpenError) ownMessage() {}
