// Layer 3, rules: incarnations of bucket items.
//
// An entity deleted and created again with the same id is a new entity:
// nothing acquired before the delete settles into it. Each bucket item
// carries the random incarnation its creating write gave it
// (store.Bucket.Incarnation); every lease entry remembers the incarnation
// of the item it took from (the speculative write and the read return
// it, the create chooses it), and every write that settles a lease
// (commit, rollback, a give-back, background and group commit) or was
// computed from a read (the read-then-write path and its retry) is
// conditioned on it. A delete removes the items; the item the next
// acquire creates has another incarnation, so the old lease's writes fail
// their condition and write nothing, as they do when the item is gone.
// An item without one (written by the Python original, or before items
// carried one) keeps none, and the writes of its leases require it to
// have none.

package limiter

import (
	"math/rand/v2"

	"github.com/zaelimiter/limiter/store"
)

// newIncarnation returns a random non-zero incarnation for an item a write
// creates.
func newIncarnation() int64 {
	return int64(rand.Uint64()>>1) | 1
}

// incarnationOf returns the incarnation of the item res answered with (0
// when it holds none).
func incarnationOf(res store.SpeculativeResult) int64 { return bucketIncarnation(res.Bucket) }

// bucketIncarnation returns b's incarnation, 0 for a nil b.
func bucketIncarnation(b *store.Bucket) int64 {
	if b == nil {
		return 0
	}
	return b.Incarnation
}
