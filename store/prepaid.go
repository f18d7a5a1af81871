package store

import (
	"context"
	"fmt"
	"math"
	"unicode/utf8"
)

// A prepaid balance is a limit with no refill: it holds what was put in
// with top-ups ([TopUpStore]) less what acquires took from it. The limiter
// keeps the balance of prepaid limit L of entity E on resource R in the
// ordinary bucket item (E, R/L.balance) (see [Limit.PrepaidBucket]), whose
// limit has the prepaid limit's capacity and refills one token a century
// ([Limit.PrepaidBucketLimit]), and which is created empty.

// DefaultPrepaidCapacity is the capacity of a prepaid limit made by
// limiter.Prepaid: the largest balance it may hold, in tokens (10^15: a
// billion dollars in micro-dollars). A top-up that would lift the balance
// above its capacity is refused, never capped.
const DefaultPrepaidCapacity int64 = 1_000_000_000_000_000

// StoredRefillPeriodPrepaid is the refill period code (seconds) under which
// a config item stores a prepaid limit, with refill amount 0: like the
// calendar codes, no rolling limit can have it.
const StoredRefillPeriodPrepaid int64 = -4

// prepaidBucketSuffix ends the bucket resource of a prepaid balance.
const prepaidBucketSuffix = ".balance"

// IsPrepaid reports whether l is a prepaid limit.
func (l Limit) IsPrepaid() bool { return l.Prepaid }

// OwnBucket reports whether l is kept in a bucket item of its own (a
// calendar limit's period buckets, a prepaid limit's balance, an in-flight
// limit's generation buckets) rather than in the item of its entity and
// resource.
func (l Limit) OwnBucket() bool { return l.Calendar != CalendarNone || l.Prepaid || l.InFlight }

// validatePrepaid is Validate of a prepaid limit, its name checked.
func (l Limit) validatePrepaid() error {
	switch {
	case l.Calendar != CalendarNone:
		return NewValidationError(ErrValidation, "calendar", l.Calendar.String(), "a prepaid limit has no calendar period")
	case l.Location != nil:
		return NewValidationError(ErrValidation, "location", l.Location.String(), "a prepaid limit has no location")
	case l.Capacity <= 0:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must be positive")
	case l.Capacity > math.MaxInt64/1000:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must fit in int64 millitokens")
	case l.RefillAmount != 0 || l.RefillPeriod != 0:
		return NewValidationError(ErrValidation, "refill_amount", fmt.Sprintf("%d per %v", l.RefillAmount, l.RefillPeriod),
			fmt.Sprintf("prepaid limit %q has no refill: refill amount and period must be zero", l.Name))
	}
	return nil
}

// PrepaidBucket returns the bucket resource that holds the balance of
// prepaid limit l on resource: resource + "/" + l.Name + ".balance". A
// derived name longer than a resource name may be is a *[ValidationError]
// naming the limit and the resource.
func (l Limit) PrepaidBucket(resource string) (string, error) {
	bucketResource := resource + "/" + l.Name + prepaidBucketSuffix
	if utf8.RuneCountInString(bucketResource) > maxNameLength {
		return "", NewValidationError(ErrInvalidName, "resource", resource,
			fmt.Sprintf("prepaid limit %q on resource %q: its balance bucket %q exceeds the maximum resource length of %d",
				l.Name, resource, bucketResource, maxNameLength))
	}
	return bucketResource, nil
}

// PrepaidBucketCapacity is the capacity of every prepaid balance's bucket
// ([Limit.PrepaidBucketLimit]), in tokens: the largest a limit may have
// (math.MaxInt64 millitokens, rounded down to whole tokens).
const PrepaidBucketCapacity int64 = math.MaxInt64 / 1000

// PrepaidBucketLimit returns the limit of the bucket that holds the
// balance of prepaid limit l: l's name, a capacity of
// [PrepaidBucketCapacity], one token refilled every
// [CalendarBucketRefillPeriod] (a negligible refill, so that the bucket is
// a valid token bucket to every reader of the table), and Prepaid set, so
// that the limiter creates the bucket empty rather than full. It is not a
// valid Limit to store or acquire with.
//
// The bucket's capacity is not l's: l's capacity is the ceiling of
// top-ups ([TopUpRequest.CeilingMilli]), checked by the top-up alone. It
// caps what is paid in, never what leases give back: a bucket capped at
// it would cut money already paid in (a refund, a rollback, to a balance
// topped up to the ceiling in the meantime; the bucket's refill once it
// amounts to a millitoken, after about 36 days). So the bucket's capacity
// is the largest representable, whatever l's: a balance may exceed its
// ceiling by what leases held while it was topped up to it.
func (l Limit) PrepaidBucketLimit() Limit {
	return Limit{Name: l.Name, Capacity: PrepaidBucketCapacity, RefillAmount: 1, RefillPeriod: CalendarBucketRefillPeriod, Prepaid: true}
}

// TopUpRequest is one top-up of a prepaid balance ([TopUpStore]).
type TopUpRequest struct {
	// Key is the balance's bucket item (shard 0), which must exist.
	Key BucketKey
	// Limit names the balance's limit in the item, which must hold it.
	Limit string
	// Resource is the prepaid limit's resource (Key.Resource is its
	// balance bucket), kept with the record of ID.
	Resource string
	// AmountMilli (positive) is added to the balance; the total consumed
	// is left as it is.
	AmountMilli int64
	// ID identifies the top-up, for (Key.EntityID, Resource, Limit): a
	// top-up whose ID is recorded is not applied again.
	ID string
	// CapacityMilli, RefillAmountMilli and RefillPeriodMs are the
	// parameters the limiter expects the item to hold for the limit (those
	// of [Limit.PrepaidBucketLimit]): a backend that must condition its
	// write on them falls back to the stored ones when they differ.
	CapacityMilli     int64
	RefillAmountMilli int64
	RefillPeriodMs    int64
	// CeilingMilli is the prepaid limit's capacity: the balance after the
	// top-up must not exceed it (else nothing is written, and the backend
	// answers an error matching [ErrConditionFailed]).
	CeilingMilli int64
	// NowMs is the limiter's time, and ExpiresMs when the record of ID may
	// be forgotten (epoch ms).
	NowMs     int64
	ExpiresMs int64
}

// TopUpOutcome says what became of a [TopUpRequest].
type TopUpOutcome int

const (
	// TopUpApplied: the amount was added and the ID recorded, by this call
	// (also when a retry of the call's own request found its record).
	TopUpApplied TopUpOutcome = iota
	// TopUpDuplicate: the ID was recorded by an earlier call, with the
	// same amount; nothing was written.
	TopUpDuplicate
	// TopUpConflict: the ID was recorded by an earlier call with another
	// amount; nothing was written.
	TopUpConflict
)

// TopUpStore is an optional capability: adding to a prepaid balance
// exactly once per caller-given id. Without it
// limiter.RateLimiter.TopUp fails with an error matching [ErrUnsupported].
type TopUpStore interface {
	// TopUp adds req.AmountMilli to the balance of limit req.Limit of item
	// req.Key and records req.ID (with the amount, until req.ExpiresMs),
	// in one atomic step, unless req.ID is recorded already
	// ([TopUpDuplicate] with the same amount, [TopUpConflict] with
	// another: nothing written). A retry of the call's own
	// request that applied (an SDK or client resend) is recognised and
	// reported [TopUpApplied]. When the item or the limit is missing, or
	// the balance would exceed the limit's capacity, nothing is written
	// and the error matches [ErrConditionFailed].
	TopUp(ctx context.Context, req TopUpRequest) (TopUpOutcome, error)
}
