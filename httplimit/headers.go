package httplimit

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Rate-limit response headers: the X-RateLimit-* fields most APIs send, and
// the structured fields of the IETF draft "RateLimit header fields for
// HTTP" (RateLimit-Policy: "key-1:rpm";q=100;w=60 and RateLimit:
// "key-1:rpm";r=99;t=1).

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
// of the limit's IETF policy. A calendar limit's window is the length of
// its period containing now (a month of 30 days: 2,592,000).
func windowSeconds(l limiter.Limit, now time.Time) int64 {
	if store.Limit(l).IsCalendar() {
		start, next, _ := store.Limit(l).CalendarPeriodAt(now)
		return ceilSeconds(next.Sub(start))
	}
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

// headerLimit is one limit of the IETF fields: the entity whose bucket
// holds it, whether that is its entity-wide bucket, the limit, its
// remaining whole tokens and its t in seconds (noReset: none, for a
// prepaid balance that no wait refills).
type headerLimit struct {
	entity    string
	wide      bool
	limit     limiter.Limit
	remaining int64
	reset     int64
}

// noReset is the t of a limit no wait helps: the field leaves t out.
const noReset = -1

// name is the limit's name in the IETF fields: "ENTITY:LIMIT", or
// "ENTITY:*:LIMIT" for a limit of the entity's entity-wide bucket.
func (l headerLimit) name() string {
	if l.wide {
		return l.entity + ":" + limiter.AllResources + ":" + l.limit.Name
	}
	return l.entity + ":" + l.limit.Name
}

// isWide reports whether resource, a status's, is an entity-wide bucket
// (AllResources, or the period or balance bucket of one of its limits).
func isWide(resource string) bool {
	return resource == limiter.AllResources || strings.HasPrefix(resource, limiter.AllResources+"/")
}

// sortLimits orders the limits of a response as every response of the same
// entity orders them: the entity's own first, then its parent's, each
// entity's resource limits before its entity-wide ones, each by limit
// name.
func sortLimits(entityID string, ls []headerLimit) {
	slices.SortStableFunc(ls, func(a, b headerLimit) int {
		if (a.entity == entityID) != (b.entity == entityID) {
			if a.entity == entityID {
				return -1
			}
			return 1
		}
		wide := 0
		if a.wide != b.wide {
			wide = map[bool]int{false: -1, true: 1}[a.wide]
		}
		return cmp.Or(strings.Compare(a.entity, b.entity), wide, strings.Compare(a.limit.Name, b.limit.Name))
	})
}

// sfString quotes s as a structured-field string (names and ids hold no
// quotes or backslashes, but escape them anyway).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// setIETF sets RateLimit-Policy and RateLimit for ls, each named
// "ENTITY:LIMIT" ("ENTITY:*:LIMIT" for an entity-wide one), at now (the
// limiter's clock). An in-flight limit's policy has the quota unit
// "concurrency" and no window, and its state no t: a slot comes
// back when a request holding it ends, at no time the limiter knows.
func setIETF(h http.Header, ls []headerLimit, now time.Time) {
	policy := make([]string, len(ls))
	state := make([]string, len(ls))
	for i, l := range ls {
		n := sfString(l.name())
		policy[i] = n + ";q=" + strconv.FormatInt(l.limit.Capacity, 10)
		if store.Limit(l.limit).IsInFlight() {
			// Slots held at once: the draft's quota unit for them, and
			// no window, since no time refills a slot.
			policy[i] += `;qu="concurrency"`
		} else {
			policy[i] += ";w=" + strconv.FormatInt(windowSeconds(l.limit, now), 10)
		}
		state[i] = n + ";r=" + strconv.FormatInt(max(0, l.remaining), 10)
		if l.reset != noReset {
			state[i] += ";t=" + strconv.FormatInt(l.reset, 10)
		}
	}
	h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	h.Set("RateLimit", strings.Join(state, ", "))
}

// setLeaseHeaders sets the headers of a served request from its lease:
// X-RateLimit-* of the limit with the smallest share of its capacity left,
// and the IETF fields of every limit in force, t the seconds until the
// bucket is full. The limits the request did not charge (a calendar or
// prepaid budget it has no amount for) are read, not charged: one read
// of their buckets.
func setLeaseHeaders(ctx context.Context, h http.Header, r request, lease *limiter.Lease) {
	st := lease.Statuses()
	if len(st) == 0 {
		return
	}
	ls := make([]headerLimit, 0, len(st)+2)
	seen := make(map[limitOf]bool, len(st))
	for _, s := range st {
		l := headerLimit{entity: s.EntityID, wide: isWide(s.Resource), limit: s.Limit, remaining: s.Remaining, reset: ceilSeconds(s.Reset)}
		if store.Limit(s.Limit).IsInFlight() {
			l.reset = noReset
		}
		ls = addLimit(ls, seen, l)
	}
	tight := 0
	for i, l := range ls {
		// l's remaining share of its capacity < tight's, without division.
		if t := ls[tight]; i > 0 && mulCmp(l.remaining, t.limit.Capacity, t.remaining, l.limit.Capacity) < 0 {
			tight = i
		}
	}
	t := ls[tight]
	h.Set("X-RateLimit-Limit", strconv.FormatInt(t.limit.Capacity, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(0, t.remaining), 10))
	if t.reset != noReset {
		h.Set("X-RateLimit-Reset", strconv.FormatInt(t.reset, 10))
	}
	now := r.rl.Now()
	ls = append(ls, r.inForceExcept(ctx, seen, func(l limiter.Limit, rem int64) int64 { return secondsToFull(l, rem, now) })...)
	sortLimits(r.entityID, ls)
	setIETF(h, ls, now)
}

// addLimit appends l to ls and marks it seen, unless ls holds the same
// limit of the same bucket already: the statuses of an in-flight limit
// come from the two generations of slots an acquire takes (the current one
// and the next), which hold the same slots; the entry keeps the fewer
// remaining.
func addLimit(ls []headerLimit, seen map[limitOf]bool, l headerLimit) []headerLimit {
	key := limitOf{l.entity, l.wide, l.limit.Name}
	if seen[key] {
		for i := range ls {
			if o := &ls[i]; o.entity == l.entity && o.wide == l.wide && o.limit.Name == l.limit.Name {
				o.remaining = min(o.remaining, l.remaining)
				if o.reset != noReset && l.reset != noReset {
					o.reset = max(o.reset, l.reset)
				}
			}
		}
		return ls
	}
	seen[key] = true
	return append(ls, l)
}

// secondsToFull is the t of a limit with rem tokens left on a served
// response: the whole seconds until it is full (0 when it is); for a
// calendar limit, until its next period starts; for a prepaid balance, 0
// (it never fills by itself).
func secondsToFull(l limiter.Limit, rem int64, now time.Time) int64 {
	if store.Limit(l).IsInFlight() {
		return noReset
	}
	if store.Limit(l).IsPrepaid() {
		return 0
	}
	return secondsToCover(l, l.Capacity-rem, now)
}

// mulCmp compares a×b with c×d exactly.
func mulCmp(a, b, c, d int64) int {
	x, _ := bucketmath.MulInt128(bucketmath.Int128From(a), b)
	y, _ := bucketmath.MulInt128(bucketmath.Int128From(c), d)
	return x.Cmp(y)
}

// request is what the headers of a response report: what the request
// asked for (to complete the statuses of its lease or refusal with the
// limits in force they lack) and, for a refusal, the refusal (nil on a
// served request).
type request struct {
	rl       *limiter.RateLimiter
	opts     []limiter.AcquireOption
	entityID string
	resource string
	consume  limiter.Consume
	err      *limiter.RateLimitExceededError
}

// setRefusalHeaders sets Retry-After and X-RateLimit-* from the refusal's
// primary violation, and the IETF fields of every limit in force, t the
// seconds until the limit covers the request (0 for a limit that covers
// it). A refusal by a prepaid balance (limiter.ErrBalanceExhausted) has
// no Retry-After and no X-RateLimit-Reset, and the balance no t: no wait
// refills it, only a top-up.
func setRefusalHeaders(ctx context.Context, h http.Header, r request) {
	rle := r.err
	balance := errors.Is(rle, limiter.ErrBalanceExhausted)
	if !balance {
		h.Set("Retry-After", rle.RetryAfterHeader())
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(rle.Primary.Limit.Capacity, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(0, rle.Primary.Available), 10))
	if !balance && !store.Limit(rle.Primary.Limit).IsInFlight() {
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(rle.Primary.RetryAfter), 10))
	}
	ls := make([]headerLimit, 0, len(rle.Statuses))
	seen := map[limitOf]bool{}
	for _, s := range rle.Statuses {
		l := headerLimit{entity: s.EntityID, wide: isWide(s.Resource), limit: s.Limit, remaining: s.Available}
		switch {
		case store.Limit(s.Limit).IsInFlight():
			l.reset = noReset
		case s.Exceeded && store.Limit(s.Limit).IsPrepaid():
			l.reset = noReset
		case s.Exceeded:
			l.reset = ceilSeconds(s.RetryAfter)
		}
		ls = addLimit(ls, seen, l)
	}
	now := r.rl.Now()
	ls = append(ls, r.inForceExcept(ctx, seen, func(l limiter.Limit, rem int64) int64 {
		deficit := r.consume[l.Name] - rem
		if store.Limit(l).IsInFlight() || store.Limit(l).IsPrepaid() && deficit > 0 {
			return noReset
		}
		return secondsToCover(l, deficit, now)
	})...)
	if len(ls) == 0 {
		return
	}
	sortLimits(r.entityID, ls)
	setIETF(h, ls, now)
}

// bucketOf names a bucket of a request: an entity's on the resource, or
// its entity-wide one.
type bucketOf struct {
	entity string
	wide   bool
}

// limitOf names a limit of a bucket of a request.
type limitOf struct {
	entity string
	wide   bool
	name   string
}

// inForceExcept returns the limits in force for the request that seen
// does not hold (those of the parent's buckets when the entity's own
// bucket refused first; the calendar and prepaid budgets a request does
// not charge), from one read of each of their buckets (Available, which
// only reads), t from reset; none when they cannot be read.
func (r request) inForceExcept(ctx context.Context, seen map[limitOf]bool, reset func(l limiter.Limit, rem int64) int64) []headerLimit {
	inForce, err := r.rl.LimitsInForce(ctx, r.entityID, r.resource, r.opts...)
	if err != nil {
		return nil
	}
	var out []headerLimit
	available := map[bucketOf]map[string]int64{}
	for _, l := range inForce {
		b := bucketOf{l.EntityID, l.Resource == limiter.AllResources}
		if seen[limitOf{b.entity, b.wide, l.Limit.Name}] {
			continue
		}
		avail, ok := available[b]
		if !ok {
			if avail, err = r.rl.Available(ctx, l.EntityID, l.Resource, r.opts...); err != nil {
				return nil
			}
			available[b] = avail
		}
		rem, ok := avail[l.Limit.Name]
		if !ok {
			rem = l.Limit.Capacity
		}
		out = append(out, headerLimit{entity: l.EntityID, wide: b.wide, limit: l.Limit, remaining: rem, reset: reset(l.Limit, rem)})
	}
	return out
}

// secondsToCover is the whole seconds, rounded up, until l refills deficit
// tokens (0 for deficit ≤ 0); for a calendar limit, until its next period
// starts after now.
func secondsToCover(l limiter.Limit, deficit int64, now time.Time) int64 {
	if deficit <= 0 {
		return 0
	}
	if store.Limit(l).IsCalendar() {
		_, next, _ := store.Limit(l).CalendarPeriodAt(now)
		return ceilSeconds(next.Sub(now))
	}
	if l.RefillAmount <= 0 {
		return 1<<63 - 1
	}
	num, ok := bucketmath.MulInt128(bucketmath.Int128From(deficit), l.RefillPeriod.Milliseconds())
	if !ok {
		return 1<<63 - 1
	}
	q, rem := bucketmath.DivModFloor(num, bucketmath.SatMul(l.RefillAmount, 1000))
	s := q.Int64Sat()
	if rem != 0 && s < 1<<63-1 {
		s++
	}
	return s
}
