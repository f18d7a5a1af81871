// Layer 4, mechanics: calendar limits, which reset at the start of each
// day, week or month. Each period of a calendar limit L of entity E on
// resource R is an ordinary bucket, (E, R/L.tag), whose limit refills one
// token a century (store.Limit.CalendarBucketLimit); an acquire that
// resolves a calendar limit becomes one atomic AcquireAll of the rolling
// bucket and the period buckets.

package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// errCalendarPath tells acquire that the parent's limits hold a calendar
// limit: the acquire must be made on the batch path (calendarAcquire).
// Nothing it returns with stays taken.
var errCalendarPath = errors.New("limiter: the parent's limits hold a calendar limit")

// hasCalendar reports whether limits hold a calendar limit: the one check
// the plain path makes.
func hasCalendar(limits []Limit) bool {
	for i := range limits {
		if limits[i].IsCalendar() {
			return true
		}
	}
	return false
}

// rollingOnly returns limits without the calendar limits: limits itself
// when there are none.
func rollingOnly(limits []Limit) []Limit {
	if !hasCalendar(limits) {
		return limits
	}
	out := make([]Limit, 0, len(limits))
	for _, l := range limits {
		if !l.IsCalendar() {
			out = append(out, l)
		}
	}
	return out
}

// calendarItems splits the limits of (entityID, resource) for planBatch:
// add is called for the rolling limits (with the amounts of their names),
// then for each calendar limit with an amount in consume, on its period
// bucket at now. A limit without an amount is not charged.
func calendarItems(entityID, resource string, limits []Limit, consume Consume, now time.Time,
	add func(resource string, limits []Limit, consume Consume, cal *Limit, nextMs int64) error) error {
	rolling := rollingOnly(limits)
	if len(rolling) > 0 {
		c := make(Consume, len(rolling))
		for _, l := range rolling {
			if v, ok := consume[l.Name]; ok {
				c[l.Name] = v
			}
		}
		if err := add(resource, rolling, c, nil, 0); err != nil {
			return err
		}
	}
	for i := range limits {
		l := limits[i]
		if !l.IsCalendar() {
			continue
		}
		v, ok := consume[l.Name]
		if !ok {
			continue
		}
		bucket, next, err := l.CalendarBucket(resource, now)
		if err != nil {
			return err
		}
		if err := add(bucket, []Limit{l.CalendarBucketLimit()}, Consume{l.Name: v}, &l, next.UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// periodBucketMargin is how long the bucket of a calendar limit's period
// is kept after the period that follows it ends: see periodBucketExpiry.
const periodBucketMargin = 24 * time.Hour

// periodBucketExpiry returns when the bucket of the period of calendar
// limit cal that ends at nextMs may be deleted (epoch ms): at the end of
// the period after it, plus periodBucketMargin. Once its period is over,
// only the commits and refunds of leases acquired in it still write the
// bucket; otherwise it shows what the period spent, and the previous
// period's stays readable throughout the current one. The store's TTL
// deletes it (DynamoDB's within a few days of the expiry).
func periodBucketExpiry(cal Limit, nextMs int64) int64 {
	_, after, _ := cal.CalendarPeriodAt(time.UnixMilli(nextMs))
	return after.Add(periodBucketMargin).UnixMilli()
}

// calendarStatuses shows the statuses of a period bucket as the calendar
// limit's: Limit is the calendar limit, and a refusal for want of budget
// waits until the next period starts (nextMs), not for the bucket's
// negligible refill.
func calendarStatuses(statuses []LimitStatus, cal *Limit, nextMs, nowMs int64) {
	for i := range statuses {
		st := &statuses[i]
		if st.LimitName != cal.Name {
			continue
		}
		st.Limit = *cal
		if st.Exceeded && st.Requested > st.Available {
			st.RetryAfter = untilMs(nextMs, nowMs)
		}
	}
}

// untilNextPeriod returns how long until the period of calendar limit l
// containing nowMs ends.
func untilNextPeriod(l Limit, nowMs int64) time.Duration {
	_, next, _ := l.CalendarPeriodAt(time.UnixMilli(nowMs))
	return untilMs(next.UnixMilli(), nowMs)
}

// untilMs returns the wait from nowMs until a period starts at nextMs: at
// least minRetryAfter, so that a refusal's RetryAfter stays positive.
func untilMs(nextMs, nowMs int64) time.Duration {
	return max(time.Duration(nextMs-nowMs)*time.Millisecond, minRetryAfter)
}

// currentPeriodKeys returns the bucket keys of the periods containing nowMs
// of the calendar limits that (entityID, resource) resolves to; none when
// it has no limits.
func (rl *RateLimiter) currentPeriodKeys(ctx context.Context, entityID, resource string, nowMs int64) ([]store.BucketKey, error) {
	limits, _, _, err := rl.configs.resolve(ctx, entityID, resource)
	if err != nil || !hasCalendar(limits) {
		return nil, err
	}
	var keys []store.BucketKey
	for _, l := range limits {
		if !l.IsCalendar() {
			continue
		}
		bucket, _, err := l.CalendarBucket(resource, time.UnixMilli(nowMs))
		if err != nil {
			return nil, err
		}
		keys = append(keys, store.BucketKey{EntityID: entityID, Resource: bucket})
	}
	return keys, nil
}
