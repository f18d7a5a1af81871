package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Rate-limit response headers: the X-RateLimit-* fields most APIs send, and
// the structured fields of the IETF draft "RateLimit header fields for
// HTTP" (RateLimit-Policy: "rpm";q=100;w=60 and RateLimit: "rpm";r=99;t=1).

// ceilSeconds returns d in whole seconds, rounded up (0 for d ≤ 0).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// windowSeconds is the time a limit takes to fill from empty, in whole
// seconds rounded up: capacity × period / refill amount. It is the window
// of the limit's IETF policy.
func windowSeconds(l limiter.Limit) int64 {
	if l.RefillAmount <= 0 {
		return 0
	}
	num, ok := bucketmath.MulInt128(bucketmath.Int128From(l.Capacity), l.RefillPeriod.Milliseconds())
	if !ok {
		return 1<<63 - 1
	}
	q, r := bucketmath.DivModFloor(num, bucketmath.SatMul(l.RefillAmount, 1000))
	w := q.Int64Sat()
	if r != 0 && w < 1<<63-1 {
		w++
	}
	return w
}

// policyNames names each limit of an IETF list: its limit name, qualified
// with its entity when another limit of the list has the same name.
func policyNames(entities, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		for j, m := range names {
			if j != i && m == n {
				out[i] = entities[i] + ":" + n
				break
			}
		}
	}
	return out
}

// sfString quotes s as a structured-field string (names and ids hold no
// quotes or backslashes, but escape them anyway).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// setIETF sets RateLimit-Policy and RateLimit for limits with their
// remaining tokens and reset seconds.
func setIETF(h http.Header, entities []string, limits []limiter.Limit, remaining, reset []int64) {
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = l.Name
	}
	names = policyNames(entities, names)
	policy := make([]string, len(limits))
	state := make([]string, len(limits))
	for i, l := range limits {
		n := sfString(names[i])
		policy[i] = n + ";q=" + strconv.FormatInt(l.Capacity, 10) + ";w=" + strconv.FormatInt(windowSeconds(l), 10)
		state[i] = n + ";r=" + strconv.FormatInt(max(0, remaining[i]), 10) + ";t=" + strconv.FormatInt(reset[i], 10)
	}
	h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	h.Set("RateLimit", strings.Join(state, ", "))
}

// setLeaseHeaders sets the headers of a served request from its lease:
// X-RateLimit-* of the limit with the smallest share of its capacity left,
// and the IETF fields of every limit.
func setLeaseHeaders(h http.Header, lease *limiter.Lease) {
	st := lease.Statuses()
	if len(st) == 0 {
		return
	}
	entities := make([]string, len(st))
	limits := make([]limiter.Limit, len(st))
	remaining := make([]int64, len(st))
	reset := make([]int64, len(st))
	tight := 0
	for i, s := range st {
		entities[i], limits[i], remaining[i], reset[i] = s.EntityID, s.Limit, s.Remaining, ceilSeconds(s.Reset)
		// s.Remaining/s.Capacity < tight's, without division.
		if t := st[tight]; i > 0 && mulCmp(s.Remaining, t.Limit.Capacity, t.Remaining, s.Limit.Capacity) < 0 {
			tight = i
		}
	}
	t := st[tight]
	h.Set("X-RateLimit-Limit", strconv.FormatInt(t.Limit.Capacity, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(0, t.Remaining), 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(t.Reset), 10))
	setIETF(h, entities, limits, remaining, reset)
}

// mulCmp compares a×b with c×d exactly.
func mulCmp(a, b, c, d int64) int {
	x, _ := bucketmath.MulInt128(bucketmath.Int128From(a), b)
	y, _ := bucketmath.MulInt128(bucketmath.Int128From(c), d)
	return x.Cmp(y)
}

// setRefusalHeaders adds X-RateLimit-Reset and the IETF fields of a 429
// to the headers httpStatus sets.
func setRefusalHeaders(h http.Header, rle *limiter.RateLimitExceededError) {
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(rle.Primary.RetryAfter), 10))
	n := len(rle.Statuses)
	if n == 0 {
		return
	}
	entities := make([]string, n)
	limits := make([]limiter.Limit, n)
	remaining := make([]int64, n)
	reset := make([]int64, n)
	for i, s := range rle.Statuses {
		entities[i], limits[i], remaining[i] = s.EntityID, s.Limit, s.Available
		if s.Exceeded {
			reset[i] = ceilSeconds(s.RetryAfter)
		}
	}
	setIETF(h, entities, limits, remaining, reset)
}
