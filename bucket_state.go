package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/internal/bucketmath"
)

// RefilledAt returns s refilled to now: the balance it holds at now if
// nothing is consumed in between, computed as the limiter does before each
// consumption. Refill is linear, RefillAmountMilli every RefillPeriodMs from
// LastRefillMs, counted in whole millitokens and capped at CapacityMilli;
// the result's LastRefillMs is the refill timestamp the limiter stores with
// that balance. A now not after LastRefillMs, or a zero RefillPeriodMs,
// returns s unchanged. Only TokensMilli and LastRefillMs change; s itself
// is not modified.
//
// A [BucketState] read from the table is the state as of its last write;
// RefilledAt(time.Now()) gives the balance available now.
func (s BucketState) RefilledAt(now time.Time) BucketState {
	s.TokensMilli, s.LastRefillMs = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now.UnixMilli(),
		s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return s
}
