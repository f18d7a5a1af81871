// Layer 3, rules: the cascade chain, an entity and the ancestors it
// charges. A chain of two (an entity and its parent) is served by the
// fast path's two writes; a longer one is one atomic AcquireAll of every
// bucket of the chain.

package limiter

import (
	"context"
	"errors"
	"slices"

	"github.com/zaelimiter/limiter/store"
)

// MaxCascadeLevels bounds a cascade: an acquire charges at most this many
// entities, the entity and three ancestors (an API key, its project, the
// project's organisation and one level above). [RateLimiter.CreateEntity]
// refuses an entity whose cascade would charge more, with a
// *[ValidationError] matching [ErrCascadeTooDeep]; an acquire on a deeper
// chain (written by a client without that check) charges the first
// MaxCascadeLevels entities and no more.
const MaxCascadeLevels = 4

// errCascadePath tells acquire that the entity's cascade charges more than
// its parent: the acquire must be made on the batch path
// (batchAcquire). Nothing it returns with stays taken.
var errCascadePath = errors.New("limiter: the cascade charges more than the parent")

// onBatchPath reports whether err sends an acquire to the batch path: a
// calendar or prepaid limit, or a cascade beyond the parent.
func onBatchPath(err error) bool {
	return errors.Is(err, errOwnBucketPath) || errors.Is(err, errCascadePath)
}

// cascadeChain returns the ancestors an acquire on entityID charges,
// nearest first: the parent when the entity cascades, then the parent's
// parent when the parent cascades too, and so on, at most
// MaxCascadeLevels−1 of them. An ancestor met again (a cycle, which
// CreateEntity refuses but deletes and re-creates can still leave) ends
// the chain before it: each entity is charged once. Each entity's cascade
// settings come from the entity cache or, when it does not know them,
// from the entity's record.
func (rl *rules) cascadeChain(ctx context.Context, entityID string) ([]string, error) {
	var chain []string
	for id := entityID; len(chain) < MaxCascadeLevels-1; {
		p, err := rl.cascadeParent(ctx, id)
		if err != nil {
			return nil, err
		}
		if p == "" || p == entityID || slices.Contains(chain, p) {
			break
		}
		chain = append(chain, p)
		id = p
	}
	return chain, nil
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
