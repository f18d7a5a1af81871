// Layer 1, math and models: in-flight limits. Generation g of in-flight limit
// L of entity E on resource R is the ordinary bucket (E, R/L.slots.g),
// whose tokens are the free slots (store.Limit.InFlightBucketLimit); a
// generation lasts half the slot TTL, an acquire takes its slots in the
// current generation and the next, and a live lease renews them (see
// inflight.go), so the slots of a process that died come back within a
// TTL.

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// slotWaitPoll is the RetryAfter of a refusal by an in-flight limit: a
// slot comes back when a lease ends, which no one can predict, so Wait
// polls.
const slotWaitPoll = 20 * time.Millisecond

// inFlightKind is the kind of an in-flight limit.
type inFlightKind struct{}

func (inFlightKind) items(l Limit, resource string, v int64, now time.Time, genMs int64, add itemAdder) error {
	return inFlightItems(l, resource, v, now.UnixMilli(), genMs, add)
}

// bucket returns the bucket of the current generation, which counts every
// slot held, and when it may be deleted.
func (inFlightKind) bucket(l Limit, resource string, now time.Time, genMs int64) (string, Limit, int64, error) {
	gen := bucketmath.FloorDiv(now.UnixMilli(), genMs)
	bucket, err := l.InFlightBucket(resource, gen)
	return bucket, l.InFlightBucketLimit(), slotBucketExpiry(gen, genMs), err
}

// expireAt: a generation's bucket expires when its items say (nextMs is
// already its expiry, see slotBucketExpiry).
func (inFlightKind) expireAt(_ Limit, nextMs int64) int64 { return nextMs }

// retryAfter: a slot comes back when a lease ends: poll.
func (inFlightKind) retryAfter(Limit, int64, int64) time.Duration { return slotWaitPoll }

// unwritten: no slot of a generation not written yet is held.
func (inFlightKind) unwritten(l Limit) int64 { return l.Capacity }

// refills: a slot comes back when its lease ends.
func (inFlightKind) refills(Limit) bool { return true }

// reset: as the generation bucket's own refill reports it.
func (inFlightKind) reset(_ Limit, fill time.Duration, _ int64) time.Duration { return fill }

func (inFlightKind) phrase(Limit, string) string { return "" }

// slotBucketExpiry returns when the bucket of generation gen may be
// deleted: one TTL after its generation ends, and 2 s more, since stores
// keep TTLs in whole seconds.
func slotBucketExpiry(gen, genMs int64) int64 { return (gen+3)*genMs + 2000 }

// inFlightItems adds the buckets of in-flight limit l with amount v on
// resource at nowMs: the generations g and g+1.
func inFlightItems(l Limit, resource string, v, nowMs, genMs int64, add itemAdder) error {
	g := bucketmath.FloorDiv(nowMs, genMs)
	for _, gen := range []int64{g, g + 1} {
		bucket, err := l.InFlightBucket(resource, gen)
		if err != nil {
			return err
		}
		if err := add(bucket, []Limit{l.InFlightBucketLimit()}, Consume{l.Name: v}, &l, slotBucketExpiry(gen, genMs)); err != nil {
			return err
		}
	}
	return nil
}

// carriesSpend: slots are held, not spent.
func (inFlightKind) carriesSpend() bool { return false }
