// Layer 3, rules: limit caps, upper bounds that an acquire applies to the
// limits it resolves (the override or the stored config), never raising
// them.

package limiter

import (
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// capped returns limits with o's caps applied: limits itself when no cap
// lowers any of them, else a new slice. A prepaid limit is never capped:
// lowering its capacity would cut the balance paid for.
func (o *acquireOptions) capped(limits []store.Limit) []store.Limit {
	if len(o.caps) == 0 {
		return limits
	}
	var out []store.Limit
	for i, l := range limits {
		for _, c := range o.caps {
			if c.Name != l.Name || l.IsPrepaid() {
				continue
			}
			if nl, lower := capLimit(l, c); lower {
				if out == nil {
					out = slices.Clone(limits)
				}
				out[i] = nl
			}
		}
	}
	if out == nil {
		return limits
	}
	return out
}

// capLimit returns l bounded by c (same name): the lower capacity, and the
// lower refill rate with l's period, and whether that lowers l.
func capLimit(l, c store.Limit) (store.Limit, bool) {
	out := l
	lower := false
	if c.Capacity < l.Capacity {
		out.Capacity, lower = c.Capacity, true
	}
	// Refill rates compared as amount per period, in floating point:
	// amounts below 2^53 are exact, and the comparison need not be exact
	// beyond that.
	lRate := float64(l.RefillAmount) / float64(l.RefillPeriod)
	cRate := float64(c.RefillAmount) / float64(c.RefillPeriod)
	if cRate < lRate {
		amount := max(int64(cRate*float64(l.RefillPeriod)), 1)
		if amount < l.RefillAmount {
			out.RefillAmount, lower = amount, true
		}
	}
	return out, lower
}
