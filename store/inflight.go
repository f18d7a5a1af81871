package store

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// An in-flight limit holds at most Capacity slots at once per bucket. The
// limiter keeps its slots in the item of the bucket itself, beside the
// rolling limits: generation g of in-flight limit L is the limit named
// L.slots.g of the (entity, resource) item ([SlotLimitName]), of L's
// capacity and refilling one token a century ([Limit.InFlightSlotLimit]):
// to every store it is a plain limit of the item, its tokens the free
// slots of that generation. Names of that form are reserved: no limit a
// user defines may have one ([ValidateLimitName]).

// StoredRefillPeriodInFlight is the refill period code (seconds) under
// which a DynamoDB config item stores an in-flight limit, with refill
// amount 0: like the calendar and prepaid codes, no rolling limit can have
// it.
const StoredRefillPeriodInFlight int64 = -5

// inFlightBucketInfix separates the limit's name from the generation in
// the name of a generation's limit (and in the bucket resources of
// generations, which earlier layouts kept as items of their own and which
// stay reserved).
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

// SlotLimitName returns the name of the limit that holds the slots of
// generation gen of in-flight limit name: name + ".slots." + gen.
func SlotLimitName(name string, gen int64) string {
	return name + inFlightBucketInfix + strconv.FormatInt(gen, 10)
}

// ParseSlotLimitName returns the in-flight limit name and the generation
// of a limit name made by [SlotLimitName]; ok is false for any other name.
func ParseSlotLimitName(n string) (name string, gen int64, ok bool) {
	k := strings.LastIndex(n, inFlightBucketInfix)
	if k <= 0 {
		return "", 0, false
	}
	digits := n[k+len(inFlightBucketInfix):]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	gen, err := strconv.ParseInt(digits, 10, 64)
	return n[:k], gen, err == nil
}

// InFlightSlotLimit returns the limit of generation gen of in-flight limit
// l: named [SlotLimitName], of l's capacity, one token refilled every
// [CalendarBucketRefillPeriod] (a negligible refill: slots come back only
// when the leases holding them give them back).
func (l Limit) InFlightSlotLimit(gen int64) Limit {
	return Limit{Name: SlotLimitName(l.Name, gen), Capacity: l.Capacity, RefillAmount: 1, RefillPeriod: CalendarBucketRefillPeriod}
}

// SlotLimitOf returns the in-flight limit whose generation's limit s is
// ([Limit.InFlightSlotLimit]), and the generation; ok is false when s is
// not such a limit.
func SlotLimitOf(s Limit) (l Limit, gen int64, ok bool) {
	name, gen, ok := ParseSlotLimitName(s.Name)
	if !ok || s.InFlight || s.Prepaid || s.Calendar != CalendarNone || s.RefillAmount != 1 || s.RefillPeriod != CalendarBucketRefillPeriod {
		return Limit{}, 0, false
	}
	return Limit{Name: name, Capacity: s.Capacity, InFlight: true}, gen, true
}
