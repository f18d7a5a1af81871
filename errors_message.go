// Layer 1, math and models: the text of a refusal, in the terms a caller
// set its limits in.

package limiter

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/zaelimiter/limiter/store"
)

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
