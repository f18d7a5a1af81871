// Layer 4, mechanics: a key's first acquire on the fast path: its missing
// bucket is created with one conditional put beside the parent's
// speculative write, instead of a read of both and a transaction locked
// on the parent.

package limiter

import (
	"context"
	"errors"

	"github.com/zaelimiter/limiter/store"
)

// firstAcquire handles a child write refused because the item does not
// exist (the key's first acquire) while the parent's speculative write,
// sent beside it, applied. The parent's take stays: the item is created
// (createOnFirst), or, when another acquire of this limiter is creating it
// already, the child's write is sent again once that one ended. It returns
// the child's result: applied, or refused (then the caller gives the
// parent's take back and decides as after any refused child write).
func (rl *RateLimiter) firstAcquire(ctx context.Context, a *specAcquire, key store.BucketKey, parentID string, child store.SpeculativeResult) (store.SpeculativeResult, error) {
	lead, err := rl.coalesce(ctx, key)
	if err != nil {
		return child, err
	}
	if !lead {
		res, err := rl.specConsume(ctx, a.request(key, a.child.limits))
		if err != nil {
			return child, err
		}
		rl.learn(res, a.at)
		return res, nil
	}
	defer rl.slowFlights.leave(key)
	created, ok, err := rl.createOnFirst(ctx, a, key, parentID)
	if err != nil || !ok {
		return child, err
	}
	return created, nil
}

// createOnFirst reads the entity record of key's entity with its item (one
// read), decides the new item as the read-then-write path would (every
// limit full, less what a switch carried, less the request) and creates it
// with one write conditioned on its absence. The put carries a write
// identifier, so a resent put that had applied is recognised, not taken
// twice.
//
// It reports ok false, nothing written, when that shape does not hold:
// the item exists by now, the record names another parent than parentID
// (the one the caller took from), or the request exceeds a capacity; and
// when the put is refused (another writer created the item first). On ok
// it returns the created item as an applied speculative result.
func (rl *RateLimiter) createOnFirst(ctx context.Context, a *specAcquire, key store.BucketKey, parentID string) (res store.SpeculativeResult, ok bool, err error) {
	entityID := key.EntityID
	metas, buckets, err := rl.store.loadBuckets(ctx, []string{entityID}, []store.BucketKey{key})
	if err != nil || buckets[key] != nil {
		return res, false, err
	}
	g := entityGroup{entityID: entityID, resource: a.resource, limits: a.child.limits, source: a.child.source, switches: a.child.switches}
	m, found := metas[entityID]
	if !found || !m.Cascade || m.ParentID != parentID {
		if found {
			rl.ents.setEntity(entityID, true, m.Cascade, m.ParentID)
		} else {
			rl.ents.setEntity(entityID, false, false, "")
		}
		return res, false, nil
	}
	g.meta = &m
	now := a.nowMs()
	if err := rl.carrySwitches(ctx, &g, a.resource, nil, now); err != nil {
		return res, false, err
	}
	entries, _, exceeded := consumeGroup(g, a.resource, a.consume, now)
	if exceeded {
		return res, false, nil
	}
	w := store.BucketWrite{Kind: store.WriteCreate, Key: key, NowMs: now, ShardCount: 1, Incarnation: newIncarnation(),
		Cascade: m.Cascade, ParentID: m.ParentID, RefreshEntity: true}
	w.TTL, w.TTLSeconds = rl.ttlFor(g, now, groupFullAtMs(g, entries))
	for _, e := range entries {
		e.inc = w.Incarnation
		w.States = append(w.States, e.state)
	}
	err = rl.writeWithConflictRetry(ctx, []store.BucketWrite{w}, &Lease{rl: rl, entries: entries})
	if errors.Is(err, store.ErrConditionFailed) {
		return res, false, nil // another writer created the item first
	}
	if err != nil {
		return res, false, err
	}
	return store.SpeculativeResult{Key: key, Applied: true, Bucket: &store.Bucket{
		Key: key, ShardCount: 1, RefillMs: now, Cascade: w.Cascade, ParentID: w.ParentID,
		Incarnation: w.Incarnation, States: w.States,
	}}, true, nil
}
