// Layer 4, mechanics: limits kept in bucket items of their own. A
// calendar limit resets at the start of each day, week or month: each
// period of calendar limit L of entity E on resource R is an ordinary
// bucket, (E, R/L.tag), whose limit refills one token a century
// (store.Limit.CalendarBucketLimit). A prepaid limit's balance is the
// ordinary bucket (E, R/L.balance), created empty, with the same
// negligible refill (store.Limit.PrepaidBucketLimit). An acquire that
// resolves either becomes one atomic AcquireAll of the rolling bucket and
// these buckets.

package limiter

import (
	"errors"
	"time"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// errOwnBucketPath tells acquire that the parent's limits hold a calendar
// or prepaid limit: the acquire must be made on the batch path
// (batchAcquire). Nothing it returns with stays taken.
var errOwnBucketPath = errors.New("limiter: the parent's limits hold a calendar or prepaid limit")

// BalanceRetryAfter is the RetryAfter of a refusal by a prepaid balance
// that cannot cover the amount: the balance does not refill, so no wait
// is known to help (the refusal's NeverFits is true and [RateLimiter.Wait]
// fails at once, and its message says to top up and gives no retry time);
// a client that retries anyway waits this long. It is a back-off, not a
// promise: [RateLimitExceededError.RetryAfterHeader] says 3601 for it, but
// an HTTP answer should not send it: the httplimit middleware answers a
// refusal matching [ErrBalanceExhausted] with 402 Payment Required and no
// Retry-After, as a service that wants its caller to pay should.
const BalanceRetryAfter = time.Hour

// hasOwnBucket reports whether limits hold a calendar or prepaid limit:
// the one check the plain path makes.
func hasOwnBucket(limits []Limit) bool {
	for i := range limits {
		if limits[i].OwnBucket() {
			return true
		}
	}
	return false
}

// rollingOnly returns limits without the calendar and prepaid limits (the
// limits of the entity's own bucket): limits itself when there are none.
func rollingOnly(limits []Limit) []Limit {
	if !hasOwnBucket(limits) {
		return limits
	}
	out := make([]Limit, 0, len(limits))
	for _, l := range limits {
		if !l.OwnBucket() {
			out = append(out, l)
		}
	}
	return out
}

// ownBucket returns the bucket resource and the bucket limit of calendar
// or prepaid limit l on resource at now, and for a calendar limit the start
// of the next period (0 for a prepaid limit).
func ownBucket(l Limit, resource string, now time.Time, genMs int64) (bucket string, bl Limit, nextMs int64, err error) {
	if l.IsInFlight() {
		// The bucket of the current generation counts every slot held.
		gen := bucketmath.FloorDiv(now.UnixMilli(), genMs)
		bucket, err = l.InFlightBucket(resource, gen)
		return bucket, l.InFlightBucketLimit(), slotBucketExpiry(gen, genMs), err
	}
	if l.IsPrepaid() {
		bucket, err = l.PrepaidBucket(resource)
		return bucket, l.PrepaidBucketLimit(), 0, err
	}
	bucket, next, err := l.CalendarBucket(resource, now)
	return bucket, l.CalendarBucketLimit(), next.UnixMilli(), err
}

// ownBucketItems splits the limits of (entityID, resource) for planBatch:
// add is called for the rolling limits (with the amounts of their names),
// then for each calendar or prepaid limit with an amount in consume, on its
// own bucket at now (cal is that limit). A limit without an amount is not
// charged.
func ownBucketItems(entityID, resource string, limits []Limit, consume Consume, now time.Time, genMs int64,
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
		if !l.OwnBucket() {
			continue
		}
		v, ok := consume[l.Name]
		if !ok {
			continue
		}
		if l.IsInFlight() {
			if err := inFlightItems(l, resource, v, now.UnixMilli(), genMs, add); err != nil {
				return err
			}
			continue
		}
		bucket, bl, next, err := ownBucket(l, resource, now, genMs)
		if err != nil {
			return err
		}
		if err := add(bucket, []Limit{bl}, Consume{l.Name: v}, &l, next); err != nil {
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

// calendarStatuses shows the statuses of a calendar period bucket or a
// prepaid balance bucket as its limit's: Limit is the calendar or prepaid
// limit, and a refusal for want of budget waits until the next period
// starts (nextMs), not for the bucket's negligible refill; for want of
// balance, [BalanceRetryAfter].
func calendarStatuses(statuses []LimitStatus, cal *Limit, nextMs, nowMs int64) {
	for i := range statuses {
		st := &statuses[i]
		if st.LimitName != cal.Name {
			continue
		}
		st.Limit = *cal
		if st.Exceeded && st.Requested > st.Available {
			if cal.IsInFlight() {
				st.RetryAfter = slotWaitPoll
			} else if cal.IsPrepaid() {
				st.RetryAfter = BalanceRetryAfter
			} else {
				st.RetryAfter = untilMs(nextMs, nowMs)
			}
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
