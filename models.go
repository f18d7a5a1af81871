// Layer 1, math and models: the models a caller handles (restated from
// package store), the limits' constructors and statuses.

package limiter

import (
	"fmt"
	"sort"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Reserved names and well-known limit names.
const (
	// DefaultResource is the resource name under which an entity's
	// resource-independent limits are stored ([Scope] with this resource).
	DefaultResource = store.DefaultResource
	// AllResources is the resource "*", of entity-wide limits: limits
	// stored for (entity, AllResources) with [Admin.SetLimits], for
	// every entity at Scope{Resource: AllResources}, or given
	// per call with [WithEntityWideLimits], form one bucket per entity
	// that every acquire of the entity charges, whatever its resource,
	// beside the (entity, resource) bucket; with cascade each ancestor's
	// entity-wide bucket is charged too, all or nothing. A limit name is
	// charged in every bucket of the acquire that has it ("rpm" per model
	// and "rpm" overall both count). Unlike DefaultResource, whose limits
	// each resource gets a copy of, the entity-wide bucket is one. Only the
	// entity's own AllResources config and the AllResources resource
	// defaults apply to it (not the entity's DefaultResource config nor
	// the system defaults). Every call that takes a resource takes
	// AllResources (TopUp, Reset, Available, LowerTokens, ...), except the
	// acquires (Acquire, Do, Wait, AcquireAll), which name the resource
	// they charge and refuse it.
	AllResources = store.AllResources

	// wcuLimitName is the hidden infrastructure limit injected into every bucket
	// item. It never appears in statuses, errors or any other output.
	wcuLimitName = "wcu"
)

// PerSecond returns a limit of rate tokens per second with capacity rate.
func PerSecond(name string, rate int64) Limit { return Limit(perPeriod(name, rate, time.Second)) }

// PerMinute returns a limit of rate tokens per minute with capacity rate.
func PerMinute(name string, rate int64) Limit { return Limit(perPeriod(name, rate, time.Minute)) }

// PerHour returns a limit of rate tokens per hour with capacity rate.
func PerHour(name string, rate int64) Limit { return Limit(perPeriod(name, rate, time.Hour)) }

// PerDay returns a limit of rate tokens per day with capacity rate.
func PerDay(name string, rate int64) Limit { return Limit(perPeriod(name, rate, 24*time.Hour)) }

func perPeriod(name string, rate int64, period time.Duration) store.Limit {
	return store.Limit{Name: name, Capacity: rate, RefillAmount: rate, RefillPeriod: period}
}

// PerCalendarDay returns a calendar limit of amount tokens per calendar day:
// the whole amount is available again at 00:00 each day, in UTC unless
// [Limit.InLocation] gives another zone, with no refill in between.
func PerCalendarDay(name string, amount int64) Limit {
	return Limit(perCalendar(name, amount, store.CalendarDay))
}

// PerCalendarWeek returns a calendar limit of amount tokens per calendar
// week: the whole amount is available again at 00:00 each Monday (UTC
// unless [Limit.InLocation] gives another zone).
func PerCalendarWeek(name string, amount int64) Limit {
	return Limit(perCalendar(name, amount, store.CalendarWeek))
}

// PerCalendarMonth returns a calendar limit of amount tokens per calendar
// month: the whole amount is available again at 00:00 on the 1st of each
// month (UTC unless [Limit.InLocation] gives another zone), e.g. a budget
// of $500 a month in micro-dollars:
// PerCalendarMonth("usd", 500*llmhttp.USD).
func PerCalendarMonth(name string, amount int64) Limit {
	return Limit(perCalendar(name, amount, store.CalendarMonth))
}

func perCalendar(name string, amount int64, p store.CalendarPeriod) store.Limit {
	return store.Limit{Name: name, Capacity: amount, Calendar: p}
}

// Prepaid returns a prepaid balance: a limit with no refill whose balance
// only top-ups ([RateLimiter.TopUp]) fill, e.g. Prepaid("usd") for credit
// bought in advance, in micro-dollars. The balance starts at zero, so the
// first acquire before any top-up is refused; an acquire takes its amount
// from the balance only when the balance covers it, and a commit settles
// the actual amount (a balance goes below zero only by what actuals
// exceed their estimates). Its capacity, the largest balance, is
// [store.DefaultPrepaidCapacity] ([Limit.WithBurst] sets another): a
// top-up that would exceed it is refused.
func Prepaid(name string) Limit {
	return Limit{Name: name, Capacity: store.DefaultPrepaidCapacity, Prepaid: true}
}

// InFlight returns a limit of calls in flight: at most n slots held at
// once per bucket, across every process, e.g. InFlight("calls", 8). A
// lease takes consume[name] slots at its acquire (1 for one call) and
// gives them back when it ends ([Lease.Commit], [Lease.Rollback], the end
// of [RateLimiter.Do]). The slots of a process that died come back within
// the slot TTL ([Options.SlotTTL]). With cascade, the parent's in-flight limit
// of the same name caps the slots of all its children together. An
// in-flight amount cannot be changed after the acquire (Consume, Adjust
// and Release refuse its name). A lease issued failed open
// ([Lease.FailedOpen]) holds no slot.
func InFlight(name string, n int64) Limit {
	return Limit{Name: name, Capacity: n, InFlight: true}
}

// validateLimits validates every limit and rejects duplicate names.
func validateLimits(limits []store.Limit) error {
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Name] {
			return store.NewValidationError(store.ErrValidation, "limits", l.Name, "duplicate limit name")
		}
		seen[l.Name] = true
	}
	return nil
}

// validateStoredLimits is validateLimits for limits to be stored: a
// calendar limit's location must also load by its name (time.LoadLocation),
// the name under which it is stored.
func validateStoredLimits(limits []store.Limit) error {
	if err := validateLimits(limits); err != nil {
		return err
	}
	for _, l := range limits {
		if !l.IsCalendar() {
			continue
		}
		if _, err := store.LoadCalendarLocation(l.LocationName()); err != nil {
			return store.NewValidationError(store.ErrValidation, "location", l.LocationName(),
				fmt.Sprintf("calendar limit %q cannot be stored: its zone does not load by its name", l.Name))
		}
	}
	return nil
}

// limitFromBucketState derives the configured limit of a stored bucket
// (capacity, refill amount and period floored to tokens and seconds). It does
// not validate: callers skip the hidden wcu limit.
func limitFromBucketState(s store.BucketState) store.Limit {
	return store.Limit{
		Name:         s.LimitName,
		Capacity:     bucketmath.FloorDiv(s.CapacityMilli, 1000),
		RefillAmount: bucketmath.FloorDiv(s.RefillAmountMilli, 1000),
		RefillPeriod: time.Duration(bucketmath.FloorDiv(s.RefillPeriodMs, 1000)) * time.Second,
	}
}

// ConfigSource tells which level of the config hierarchy supplied the limits
// of an acquire.
type ConfigSource string

// Config sources, in precedence order, plus the caller's override.
const (
	SourceEntity        ConfigSource = "entity"
	SourceEntityDefault ConfigSource = "entity_default"
	SourceResource      ConfigSource = "resource"
	SourceSystem        ConfigSource = "system"
	SourceOverride      ConfigSource = "override"
)

// LimitStatus is the outcome of checking one limit of one bucket.
type LimitStatus struct {
	// EntityID is the entity whose bucket was checked.
	EntityID string
	// Resource is the resource of the bucket checked: for a calendar
	// limit, the bucket of its period ("gpt-4o/usd.m2026-11", see
	// [Limit.CalendarBucket]), for a prepaid limit that of its balance
	// ("gpt-4o/usd.balance"); the error's message names them in the
	// caller's terms ("usd, the November 2026 budget").
	Resource string
	// LimitName is the name of the limit checked.
	LimitName string
	// Limit is the limit that was checked.
	Limit Limit
	// Available is the number of whole tokens available (floored; negative
	// when the bucket is in debt).
	Available int64
	// Requested is the number of tokens asked for.
	Requested int64
	// Exceeded reports whether the request could not be satisfied.
	Exceeded bool
	// RetryAfter is how long until the request could succeed; zero when not
	// exceeded.
	RetryAfter time.Duration
}

// Deficit returns how many tokens are missing: max(0, Requested-Available).
func (s LimitStatus) Deficit() int64 {
	if d := s.Requested - s.Available; d > 0 {
		return d
	}
	return 0
}

// The models a caller handles, defined by the backend contract (package
// store) and restated here under the names callers use.
type (
	// Consume maps limit names to token amounts, e.g.
	// Consume{"rpm": 1, "tpm": 500}.
	Consume = store.Consume
	// OnUnavailable says what Acquire does when the store cannot be
	// reached: [OnUnavailableBlock] or [OnUnavailableAllow].
	OnUnavailable = store.OnUnavailable
	// Entity is a rate-limited identity (a user, an API key, a project):
	// its ID, optional parent and whether it charges its parent.
	Entity = store.Entity
	// AuditEvent is one recorded change of an entity or of stored limits
	// ([Admin.AuditEvents]).
	AuditEvent = store.AuditEvent
	// UsageQuery selects usage snapshots ([Admin.UsageSnapshots]).
	UsageQuery = store.UsageQuery
	// UsageSnapshot is the consumption of one entity on one resource in
	// one hourly, daily or monthly window.
	UsageSnapshot = store.UsageSnapshot
	// UsageSummary sums the snapshots a [UsageQuery] selects.
	UsageSummary = store.UsageSummary
	// ResourceCapacity is how much of one limit of a resource is in use
	// across entities ([Admin.ResourceCapacity]).
	ResourceCapacity = store.ResourceCapacity
	// ValidationError reports an invalid input. It matches [ErrValidation]
	// and, depending on what was checked, [ErrInvalidIdentifier] or
	// [ErrInvalidName].
	ValidationError = store.ValidationError
	// EntityNotFoundError reports a missing entity. It matches
	// [ErrEntityNotFound].
	EntityNotFoundError = store.EntityNotFoundError
	// EntityExistsError reports that CreateEntity found the entity already
	// stored. It matches [ErrEntityExists].
	EntityExistsError = store.EntityExistsError
	// Repository is the storage behind a [RateLimiter]: [OpenDynamoDB],
	// package memorystore, package redisstore, or a backend of your own,
	// which implements the contract of package store.
	Repository = store.Repository
)

// What Acquire does when the store cannot be reached.
const (
	// OnUnavailableBlock makes Acquire fail with an *[UnavailableError] (the default).
	OnUnavailableBlock = store.OnUnavailableBlock
	// OnUnavailableAllow makes Acquire return a no-op lease (fail open).
	OnUnavailableAllow = store.OnUnavailableAllow
)

// consumeNames returns the limit names of c in sorted order: the order in
// which expressions and status lists take them.
func consumeNames(c Consume) []string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// negate returns c with every amount negated.
func negate(c Consume) Consume {
	out := make(Consume, len(c))
	for k, v := range c {
		out[k] = -v
	}
	return out
}

// capacities returns the capacity of each limit, in millitokens.
func capacities(limits []store.Limit) map[string]int64 {
	if len(limits) == 0 {
		return nil
	}
	caps := make(map[string]int64, len(limits))
	for _, l := range limits {
		caps[l.Name] = bucketmath.SatMul(l.Capacity, 1000)
	}
	return caps
}

// adjustDeltaWrite is the store.WriteAdjust of delta (tokens) on key, of
// incarnation inc, limits in sorted order, zero deltas left out, with the
// capacity hints caps.
func adjustDeltaWrite(key store.BucketKey, nowMs int64, delta Consume, caps map[string]int64, inc int64) store.BucketWrite {
	w := store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: nowMs, Incarnation: inc}
	for _, name := range consumeNames(delta) {
		if d := delta[name]; d != 0 {
			w.Limits = append(w.Limits, store.LimitWrite{Name: name, ConsumedMilli: bucketmath.SatMul(d, 1000), CapacityMilli: caps[name]})
		}
	}
	return w
}

// addConsume adds c to sum, per limit.
func addConsume(sum, c Consume) {
	for name, v := range c {
		sum[name] += v
	}
}

// giveBackWrite is the store.WriteAdjust that gives consume back to key,
// of incarnation inc, at nowMs, limits in sorted order, zero amounts left
// out, with the capacities of limits as hints: adjustDeltaWrite of the
// negated amounts.
func giveBackWrite(key store.BucketKey, inc, nowMs int64, consume Consume, limits []store.Limit) store.BucketWrite {
	w := store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: nowMs, Incarnation: inc}
	for _, name := range consumeNames(consume) {
		v := consume[name]
		if v == 0 {
			continue
		}
		capacity := int64(0)
		for _, l := range limits {
			if l.Name == name {
				capacity = l.Capacity
			}
		}
		w.Limits = append(w.Limits, store.LimitWrite{Name: name, ConsumedMilli: bucketmath.SatMul(-v, 1000), CapacityMilli: bucketmath.SatMul(capacity, 1000)})
	}
	return w
}

// itemAdder adds one bucket item to an acquire's batch: the bucket
// resource, the limits it holds, what the acquire takes of them, the own
// limit it holds (nil for the rolling limits of (entity, resource)) and
// when its period or generation ends (epoch ms; 0: never).
type itemAdder func(resource string, limits []store.Limit, consume Consume, own *store.Limit, nextMs int64) error

// minRetryAfter is the least RetryAfter of a refusal: the bucket math
// gives at least a millisecond for any shortage.
const minRetryAfter = time.Millisecond

// Limit is one rule of a bucket: a token bucket of Capacity tokens that
// regains RefillAmount tokens every RefillPeriod; or, by its kind, a
// calendar budget, a prepaid balance or a number of calls in flight.
// Construct one with [PerMinute] and its friends, [PerCalendarMonth] and
// its friends, [Prepaid], [InFlight], or as a literal checked by
// [Limit.Validate] (a limit given to the limiter is checked anyway). Its
// fields are those of
// [store.Limit], the type the backends share, and converting between the
// two costs nothing.
type Limit store.Limit

// WithBurst returns a copy of l whose capacity is burst. Burst may be
// smaller than the refill amount.
func (l Limit) WithBurst(burst int64) Limit { return Limit(store.Limit(l).WithBurst(burst)) }

// InLocation returns a copy of the calendar limit l whose periods start at
// 00:00 in loc instead of UTC; nil means UTC. A period then lasts what the
// calendar says there: a day of a change to or from summer time is 23 or
// 25 hours. It has no effect on other kinds of limits.
func (l Limit) InLocation(loc *time.Location) Limit {
	return Limit(store.Limit(l).InLocation(loc))
}

// Validate returns why l is invalid, a *[ValidationError], or nil.
func (l Limit) Validate() error { return store.Limit(l).Validate() }

// String returns l as "{rpm 100 100 1m0s}", "{usd 500 month}" and the
// like.
func (l Limit) String() string { return store.Limit(l).String() }

// storeLimits returns ls as the backends' type.
func storeLimits(ls []Limit) []store.Limit {
	if ls == nil {
		return nil
	}
	out := make([]store.Limit, len(ls))
	for i, l := range ls {
		out[i] = store.Limit(l)
	}
	return out
}

// callerLimits returns ls as the callers' type.
func callerLimits(ls []store.Limit) []Limit {
	if ls == nil {
		return nil
	}
	out := make([]Limit, len(ls))
	for i, l := range ls {
		out[i] = Limit(l)
	}
	return out
}

// maxAmount keeps amounts × 1000 within int64.
const maxAmount = (1<<63 - 1) / 1000
