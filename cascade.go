// Layer 4, mechanics: the routing of a cascade. A chain of two (an entity
// and its parent) is served by the fast path's two writes; a longer one
// (see cascadeChain) is one atomic AcquireAll of every bucket of the
// chain.

package limiter

import (
	"errors"

	"github.com/zaelimiter/limiter/store"
)

// errCascadePath tells acquire that the entity's cascade charges more than
// its parent: the acquire must be made on the batch path
// (batchAcquire). Nothing it returns with stays taken.
var errCascadePath = errors.New("limiter: the cascade charges more than the parent")

// onBatchPath reports whether err sends an acquire to the batch path: a
// calendar or prepaid limit, or a cascade beyond the parent.
func onBatchPath(err error) bool {
	return errors.Is(err, errOwnBucketPath) || errors.Is(err, errCascadePath)
}

// cascadesFurther reports whether parentID, which entityID cascades to,
// cascades in turn to another entity: the acquire then charges more than
// two. The entity cache decides when it knows the parent; otherwise res,
// when not nil, the parent's speculative write, does from the copy of the
// parent's settings on its bucket. Peeking does not count as a cache
// lookup (the acquire's lookup of entityID did).
func (rl *RateLimiter) cascadesFurther(entityID, parentID string, res *store.SpeculativeResult) bool {
	next := ""
	if info, ok := rl.ents.peek(parentID); ok && info.known {
		next = info.cascadeParent(parentID)
	} else if res != nil && res.Bucket != nil && res.Bucket.Cascade {
		next = res.Bucket.ParentID
	}
	return next != "" && next != parentID && next != entityID
}
