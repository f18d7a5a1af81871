// Layer 1, math and models: in-flight limits. The slots of in-flight limit
// L of entity E on resource R live in the item of the bucket (E, R) itself,
// beside its rolling limits: generation g of L is the limit L.slots.g of
// that item (store.Limit.InFlightSlotLimit), whose tokens are the slots
// free in g. A generation lasts half the slot TTL; an acquire takes its
// slots in the current generation and the next, in the same conditional
// write as its rolling limits, and a live lease renews them (see
// inflight.go), so the slots of a process that died come back within a
// TTL.

package limiter

import (
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// slotWaitPoll is the RetryAfter of a refusal by an in-flight limit: a
// slot comes back when a lease ends, which no one can predict, so Wait
// polls.
const slotWaitPoll = 20 * time.Millisecond

// inFlightKind is the kind of an in-flight limit.
type inFlightKind struct{}

// items adds no item: the slots of an in-flight limit are limits of the
// item of its resource, which ownBucketItems adds with the rolling limits
// (slotLimits).
func (inFlightKind) items(store.Limit, string, int64, time.Time, int64, itemAdder) error { return nil }

// bucket returns the item that holds l's slots (resource's own), the limit
// of the current generation there, which counts every slot held, and when
// that generation ends.
func (inFlightKind) bucket(l store.Limit, resource string, now time.Time, genMs int64) (string, store.Limit, int64, error) {
	gen := bucketmath.FloorDiv(now.UnixMilli(), genMs)
	return resource, l.InFlightSlotLimit(gen), (gen + 1) * genMs, nil
}

// expireAt: the slots live in the resource's own item, which expires as
// its limits say.
func (inFlightKind) expireAt(store.Limit, int64) int64 { return 0 }

// retryAfter: a slot comes back when a lease ends: poll.
func (inFlightKind) retryAfter(store.Limit, int64, int64) time.Duration { return slotWaitPoll }

// unwritten: no slot of a generation not written yet is held.
func (inFlightKind) unwritten(l store.Limit) int64 { return l.Capacity }

// refills: a slot comes back when its lease ends.
func (inFlightKind) refills(store.Limit) bool { return true }

// reset: as the generation limit's own refill reports it.
func (inFlightKind) reset(_ store.Limit, fill time.Duration, _ int64) time.Duration { return fill }

func (inFlightKind) phrase(store.Limit, string) string { return "" }

// carriesSpend: slots are held, not spent.
func (inFlightKind) carriesSpend() bool { return false }

// slotLimits returns rolling with the limits of generations g and g+1 (g
// the generation of nowMs) of each in-flight limit of limits that consume
// names, and c with their amounts: what an acquire charges in the item of
// its resource. rolling is not modified.
func slotLimits(rolling []store.Limit, c Consume, limits []store.Limit, consume Consume, nowMs, genMs int64) ([]store.Limit, Consume) {
	g := bucketmath.FloorDiv(nowMs, genMs)
	out := rolling
	for _, l := range limits {
		if !l.IsInFlight() {
			continue
		}
		v, ok := consume[l.Name]
		if !ok {
			continue
		}
		if len(out) == len(rolling) {
			out = append(make([]store.Limit, 0, len(rolling)+2), rolling...)
		}
		for _, gen := range []int64{g, g + 1} {
			s := l.InFlightSlotLimit(gen)
			out = append(out, s)
			c[s.Name] = v
		}
	}
	return out, c
}

// slotOf returns the in-flight limit whose generation's limit l is, and
// the generation; ok is false for any other limit.
func slotOf(l store.Limit) (store.Limit, int64, bool) { return store.SlotLimitOf(l) }
