// Layer 1, math and models: calendar limits. A calendar limit resets at the
// start of each day, week or month in its zone: each period of calendar
// limit L of entity E on resource R is an ordinary bucket, (E, R/L.tag),
// whose limit refills one token a century
// (store.Limit.CalendarBucketLimit), kept until the period after it ends.

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store"
)

// calendarKind is the kind of a calendar limit.
type calendarKind struct{}

func (k calendarKind) items(l store.Limit, resource string, v int64, now time.Time, genMs int64, add itemAdder) error {
	bucket, bl, next, err := k.bucket(l, resource, now, genMs)
	if err != nil {
		return err
	}
	return add(bucket, []store.Limit{bl}, Consume{l.Name: v}, &l, next)
}

// bucket returns the bucket of the period containing now, and when the
// next period starts.
func (calendarKind) bucket(l store.Limit, resource string, now time.Time, _ int64) (string, store.Limit, int64, error) {
	bucket, next, err := l.CalendarBucket(resource, now)
	return bucket, l.CalendarBucketLimit(), next.UnixMilli(), err
}

// periodBucketMargin is how long the bucket of a calendar limit's period
// is kept after the period that follows it ends: see expireAt.
const periodBucketMargin = 24 * time.Hour

// expireAt returns when the bucket of the period of l that ends at nextMs
// may be deleted: at the end of the period after it, plus
// periodBucketMargin. Once its period is over, only the commits and
// refunds of leases acquired in it still write the bucket; otherwise it
// shows what the period spent, and the previous period's stays readable
// throughout the current one. The store's TTL deletes it (DynamoDB's
// within a few days of the expiry).
func (calendarKind) expireAt(l store.Limit, nextMs int64) int64 {
	_, after, _ := l.CalendarPeriodAt(time.UnixMilli(nextMs))
	return after.Add(periodBucketMargin).UnixMilli()
}

// retryAfter: a budget is full again when the next period starts.
func (calendarKind) retryAfter(_ store.Limit, nextMs, nowMs int64) time.Duration {
	return untilMs(nextMs, nowMs)
}

// unwritten: a period whose bucket does not exist yet has spent nothing.
func (calendarKind) unwritten(l store.Limit) int64 { return l.Capacity }

// refills: the next period starts full.
func (calendarKind) refills(store.Limit) bool { return true }

// reset: a budget not full is full again when the next period starts.
func (calendarKind) reset(l store.Limit, fill time.Duration, nowMs int64) time.Duration {
	if fill <= 0 {
		return 0
	}
	return untilNextPeriod(l, nowMs)
}

// phrase says which budget a refusal is about: "the November 2026
// budget", "the budget of 28 November 2026", "the budget of the week of
// 23 November 2026", with the zone when not UTC; "the monthly budget"
// when the period is not known.
func (calendarKind) phrase(l store.Limit, tag string) string {
	if tag == "" {
		switch l.Calendar {
		case store.CalendarDay:
			return "the daily budget"
		case store.CalendarWeek:
			return "the weekly budget"
		case store.CalendarMonth:
			return "the monthly budget"
		}
		return ""
	}
	var what string
	switch tag[0] {
	case 'm':
		t, err := time.Parse("2006-01", tag[1:])
		if err != nil {
			return ""
		}
		what = "the " + t.Format("January 2006") + " budget"
	case 'd':
		t, err := time.Parse("2006-01-02", tag[1:])
		if err != nil {
			return ""
		}
		what = "the budget of " + t.Format("2 January 2006")
	case 'w':
		t, err := time.Parse("2006-01-02", tag[1:])
		if err != nil {
			return ""
		}
		what = "the budget of the week of " + t.Format("2 January 2006")
	default:
		return ""
	}
	if zone := l.LocationName(); zone != "" {
		what += " (" + zone + ")"
	}
	return what
}

// untilNextPeriod returns how long until the period of calendar limit l
// containing nowMs ends.
func untilNextPeriod(l store.Limit, nowMs int64) time.Duration {
	_, next, _ := l.CalendarPeriodAt(time.UnixMilli(nowMs))
	return untilMs(next.UnixMilli(), nowMs)
}

// untilMs returns the wait from nowMs until a period starts at nextMs: at
// least minRetryAfter, so that a refusal's RetryAfter stays positive.
func untilMs(nextMs, nowMs int64) time.Duration {
	return max(time.Duration(nextMs-nowMs)*time.Millisecond, minRetryAfter)
}

// carriesSpend: what a period spent is its capacity less its balance.
func (calendarKind) carriesSpend() bool { return true }
