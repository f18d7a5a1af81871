// Layer 4, mechanics: limits kept in bucket items of their own (calendar
// budgets, prepaid balances: see each kind's file for the items it keeps)
// and calls in flight, whose slots are limits of the rolling bucket's own
// item (kind_inflight.go). To every store those items and limits are
// ordinary buckets and limits. An acquire that resolves such a limit
// becomes an AcquireAll of the rolling bucket and these buckets, all or
// nothing (planChainItems).

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store"
)

// hasOwnBucket reports whether limits hold a calendar or prepaid limit:
// the one check the plain path makes.
func hasOwnBucket(limits []store.Limit) bool {
	for i := range limits {
		if limits[i].OwnBucket() {
			return true
		}
	}
	return false
}

// rollingOnly returns limits without the calendar and prepaid limits (the
// limits of the entity's own bucket): limits itself when there are none.
func rollingOnly(limits []store.Limit) []store.Limit {
	if !hasOwnBucket(limits) {
		return limits
	}
	out := make([]store.Limit, 0, len(limits))
	for _, l := range limits {
		if !l.OwnBucket() {
			out = append(out, l)
		}
	}
	return out
}

// ownBucket returns the bucket resource and the bucket limit of own-bucket
// limit l on resource at now, and when that bucket stops being the current
// one (epoch ms; 0: never).
func ownBucket(l store.Limit, resource string, now time.Time, genMs int64) (bucket string, bl store.Limit, nextMs int64, err error) {
	return kindOf(l).bucket(l, resource, now, genMs)
}

// ownBucketItems splits the limits of (entityID, resource) for planBatch:
// add is called for the rolling limits and the slot limits of the
// in-flight limits (slotLimits), with the amounts of their names, then for
// each calendar or prepaid limit with an amount in consume, on its own
// bucket at now (cal is that limit). A limit without an amount is not
// charged.
func ownBucketItems(entityID, resource string, limits []store.Limit, consume Consume, now time.Time, genMs int64, add itemAdder) error {
	rolling := rollingOnly(limits)
	c := make(Consume, len(rolling))
	for _, l := range rolling {
		if v, ok := consume[l.Name]; ok {
			c[l.Name] = v
		}
	}
	// The slots of in-flight limits are limits of the same item.
	rolling, c = slotLimits(rolling, c, limits, consume, now.UnixMilli(), genMs)
	if len(rolling) > 0 {
		if err := add(resource, rolling, c, nil, 0); err != nil {
			return err
		}
	}
	for i := range limits {
		l := limits[i]
		if !l.OwnBucket() {
			continue
		}
		v, ok := consume[l.Name]
		if !ok {
			continue
		}
		if err := kindOf(l).items(l, resource, v, now, genMs, add); err != nil {
			return err
		}
	}
	return nil
}

// calendarStatuses shows the statuses of an own bucket as its limit's:
// Limit is the calendar, prepaid or in-flight limit, and a refusal for
// want of tokens waits as the limit's kind says (until the next period
// starts, [BalanceRetryAfter], a slot poll), not for the bucket's
// negligible refill.
func calendarStatuses(statuses []LimitStatus, cal *store.Limit, nextMs, nowMs int64) {
	for i := range statuses {
		st := &statuses[i]
		if st.LimitName != cal.Name {
			continue
		}
		st.Limit = Limit(*cal)
		if st.Exceeded && st.Requested > st.Available {
			st.RetryAfter = kindOf(*cal).retryAfter(*cal, nextMs, nowMs)
		}
	}
}
