package store

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// An in-flight limit holds at most Capacity slots at once per bucket. The
// limiter keeps its slots in generation buckets: generation g of in-flight
// limit L of entity E on resource R is the ordinary bucket item (E,
// R/L.slots.g) (see [Limit.InFlightBucket]), whose limit has L's capacity
// and refills one token a century ([Limit.InFlightBucketLimit]): to every
// store it is a plain token bucket, its tokens the free slots.

// StoredRefillPeriodInFlight is the refill period code (seconds) under
// which a DynamoDB config item stores an in-flight limit, with refill
// amount 0: like the calendar and prepaid codes, no rolling limit can have
// it.
const StoredRefillPeriodInFlight int64 = -5

// inFlightBucketInfix separates the limit's name from the generation in
// the bucket resource of an in-flight limit.
const inFlightBucketInfix = ".slots."

// IsInFlight reports whether l is an in-flight limit.
func (l Limit) IsInFlight() bool { return l.InFlight }

// validateInFlight is Validate of an in-flight limit, its name checked.
func (l Limit) validateInFlight() error {
	switch {
	case l.Prepaid || l.Calendar != CalendarNone:
		return NewValidationError(ErrValidation, "in_flight", l.Name, "an in-flight limit is neither prepaid nor a calendar limit")
	case l.Location != nil:
		return NewValidationError(ErrValidation, "location", l.Location.String(), "an in-flight limit has no location")
	case l.Capacity <= 0:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity (slots) must be positive")
	case l.Capacity > math.MaxInt64/1000:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must fit in int64 millitokens")
	case l.RefillAmount != 0 || l.RefillPeriod != 0:
		return NewValidationError(ErrValidation, "refill_amount", fmt.Sprintf("%d per %v", l.RefillAmount, l.RefillPeriod),
			fmt.Sprintf("in-flight limit %q has no refill: refill amount and period must be zero", l.Name))
	}
	return nil
}

// InFlightBucket returns the bucket resource of generation gen of
// in-flight limit l on resource: resource + "/" + l.Name + ".slots." +
// gen. A derived name longer than a resource name may be is a
// *[ValidationError] naming the limit and the resource.
func (l Limit) InFlightBucket(resource string, gen int64) (string, error) {
	bucketResource := resource + "/" + l.Name + inFlightBucketInfix + strconv.FormatInt(gen, 10)
	if utf8.RuneCountInString(bucketResource) > maxNameLength {
		return "", NewValidationError(ErrInvalidName, "resource", resource,
			fmt.Sprintf("in-flight limit %q on resource %q: its slot bucket %q exceeds the maximum resource length of %d",
				l.Name, resource, bucketResource, maxNameLength))
	}
	return bucketResource, nil
}

// InFlightBucketLimit returns the ordinary limit of a generation bucket of
// in-flight limit l: l's name and capacity, one token refilled every
// [CalendarBucketRefillPeriod] (a negligible refill: slots come back only
// when the leases holding them give them back).
func (l Limit) InFlightBucketLimit() Limit {
	return Limit{Name: l.Name, Capacity: l.Capacity, RefillAmount: 1, RefillPeriod: CalendarBucketRefillPeriod}
}
