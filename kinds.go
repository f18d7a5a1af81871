// Layer 1, math and models: the kinds of limits. A limit is rolling (a token
// bucket in the item of its entity and resource), a calendar budget, a
// prepaid balance or a cap on calls in flight; budgets and balances live
// in bucket items of their own, the slots of calls in flight in limits of
// the item of their entity and resource. What tells the kinds apart is limitKind, and
// kindOf is the one place that decides a limit's kind: each kind's
// behaviour is in its own file (kind_rolling.go, kind_calendar.go,
// kind_prepaid.go, kind_inflight.go). How a kind is stored is in the
// store package's file of the same kind (store/calendar.go,
// store/prepaid.go, store/inflight.go).

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store"
)

// limitKind is what differs between the kinds of limits.
type limitKind interface {
	// items adds the bucket items that hold own-bucket limit l, charged
	// v on resource at now (genMs: the in-flight generation length).
	items(l store.Limit, resource string, v int64, now time.Time, genMs int64, add itemAdder) error
	// bucket returns the bucket resource that holds own-bucket limit l
	// on resource at now, that bucket's limit, and when it stops being
	// the current one (epoch ms; 0: never).
	bucket(l store.Limit, resource string, now time.Time, genMs int64) (string, store.Limit, int64, error)
	// expireAt returns when an item of l's that stops being current at
	// nextMs may be deleted (epoch ms; 0: never).
	expireAt(l store.Limit, nextMs int64) int64
	// retryAfter returns how long a refusal for want of l waits, its
	// bucket's period ending at nextMs, at nowMs.
	retryAfter(l store.Limit, nextMs, nowMs int64) time.Duration
	// unwritten returns what l has left while its bucket does not exist.
	unwritten(l store.Limit) int64
	// refills reports whether waiting brings l's tokens back.
	refills(l store.Limit) bool
	// reset returns the Reset a status of l reports, fill being how long
	// its bucket takes to fill at its refill rate.
	reset(l store.Limit, fill time.Duration, nowMs int64) time.Duration
	// carriesSpend reports whether a switch of a limit's definition to
	// or from this kind carries what the old definition spent (its
	// capacity less its balance) into the new one.
	carriesSpend() bool
	// phrase names the budget a refusal of l is about ("the November
	// 2026 budget", "the prepaid balance"), tag being the period tag of
	// the bucket that refused ("" when unknown); "" when there is none to
	// name.
	phrase(l store.Limit, tag string) string
}

// kindOf returns the kind of l.
func kindOf(l store.Limit) limitKind {
	switch {
	case l.InFlight:
		return inFlightKind{}
	case l.Prepaid:
		return prepaidKind{}
	case l.Calendar != store.CalendarNone:
		return calendarKind{}
	}
	return rollingKind{}
}
