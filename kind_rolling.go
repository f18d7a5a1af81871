// Layer 1, math and models: rolling limits, the token buckets kept in the item
// of their entity and resource (Capacity tokens, RefillAmount more every
// RefillPeriod).

package limiter

import (
	"errors"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// rollingKind is the kind of a rolling limit.
type rollingKind struct{}

// errNotOwnBucket is the error of asking a rolling limit for a bucket of
// its own: it has none (a bug of the caller, never a user's).
var errNotOwnBucket = errors.New("limiter: a rolling limit has no bucket of its own")

func (rollingKind) items(store.Limit, string, int64, time.Time, int64, itemAdder) error {
	return errNotOwnBucket
}

func (rollingKind) bucket(store.Limit, string, time.Time, int64) (string, store.Limit, int64, error) {
	return "", store.Limit{}, 0, errNotOwnBucket
}

// expireAt: the item of (entity, resource) expires by the bucket TTL, not
// by a period.
func (rollingKind) expireAt(store.Limit, int64) int64 { return 0 }

// retryAfter: a rolling refusal's wait comes from the bucket's refill
// (see the refusal's statuses), not from a period.
func (rollingKind) retryAfter(store.Limit, int64, int64) time.Duration { return 0 }

func (rollingKind) unwritten(l store.Limit) int64 { return l.Capacity }

func (rollingKind) refills(l store.Limit) bool { return l.RefillAmount > 0 }

func (rollingKind) reset(_ store.Limit, fill time.Duration, _ int64) time.Duration { return fill }

func (rollingKind) phrase(store.Limit, string) string { return "" }

// carriesSpend: what it spent is its capacity less its balance.
func (rollingKind) carriesSpend() bool { return true }
