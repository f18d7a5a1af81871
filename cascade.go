// Layer 4, mechanics: the routing of a cascade. A chain of two (an entity
// and its parent) is served by the fast path's two writes; a longer one
// (see cascadeChain) is one atomic AcquireAll of every bucket of the
// chain.

package limiter

import "errors"

// errCascadePath tells acquire that the entity's cascade charges more than
// its parent: the acquire must be made on the batch path
// (batchAcquire). Nothing it returns with stays taken.
var errCascadePath = errors.New("limiter: the cascade charges more than the parent")

// errWidePath tells acquire that an ancestor of its chain has entity-wide
// limits: the acquire must be made on the batch path (batchAcquire),
// which charges every bucket of the plan, all or nothing. Nothing it
// returns with stays taken.
var errWidePath = errors.New("limiter: an entity of the cascade has entity-wide limits")

// onBatchPath reports whether err sends an acquire to the batch path: a
// calendar or prepaid limit, a cascade beyond the parent, or entity-wide
// limits.
func onBatchPath(err error) bool {
	return errors.Is(err, errOwnBucketPath) || errors.Is(err, errCascadePath) || errors.Is(err, errWidePath)
}
