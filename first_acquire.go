// Layer 4, mechanics: a key's first acquire on the speculative path, whose
// missing item is created with one conditional put beside the parent's
// speculative write, instead of a read of both and a transaction locked on
// the parent.

package limiter

import (
	"context"
	"errors"

	"github.com/zaelimiter/limiter/store"
)

// firstWrites are the two speculative writes of a key's first acquire:
// the child's, refused, on key, and the parent's (parentID's), applied.
type firstWrites struct {
	key           store.BucketKey
	parentID      string
	child, parent store.SpeculativeResult
}

// firstAcquire is the path of a key's first acquire (a.first): the
// child's speculative write was refused because its item does not exist,
// while the parent's, sent beside it, applied. The parent's take stays:
// the item is created with the request taken (createFirst). Otherwise the
// parent's take is given back and it returns (nil, nil): the
// read-then-write path decides.
func (rl *RateLimiter) firstAcquire(ctx context.Context, a *specAcquire) (*Lease, error) {
	f := a.first
	rl.specFallback(f.key, store.SpecFallbackBucketMissing)
	child, err := rl.createFirst(ctx, a, f)
	if err == nil && child.Applied {
		lease := newSpecLease(rl, child, a.consume, a.child.limits)
		lease.entries = appendSpecEntries(lease.entries, make([]leaseEntry, 0, len(a.parent.limits)), f.parent, a.consume, a.parent.limits)
		return lease, nil
	}
	return nil, errors.Join(err, rl.undo(ctx, f.parent, a.consume, a.parent.limits))
}

// createFirst creates the missing item of f.key (createOnFirst), or, when
// another acquire of this limiter is creating it already, sends the
// child's write again once that one ended. It returns the child's result:
// applied, or refused.
func (rl *RateLimiter) createFirst(ctx context.Context, a *specAcquire, f *firstWrites) (store.SpeculativeResult, error) {
	lead, err := rl.coalesce(ctx, f.key)
	if err != nil {
		return f.child, err
	}
	if !lead {
		res, err := rl.specConsume(ctx, a.request(f.key, a.child.limits))
		if err != nil {
			return f.child, err
		}
		rl.learn(res, a.at)
		return res, nil
	}
	defer rl.slowFlights.leave(f.key)
	created, ok, err := rl.createOnFirst(ctx, a, f.key, f.parentID)
	if err != nil || !ok {
		return f.child, err
	}
	return created, nil
}

// createOnFirst reads the entity record of key's entity with its item (one
// read, unless sightFirst read both in this acquire), decides the new item
// as the read-then-write path would (every limit full, less what a switch
// carried, less the request) and creates it with one write conditioned on
// its absence. The put carries a write identifier, so a resent put that
// had applied is recognised, not taken twice.
//
// It reports ok false, nothing written, when that shape does not hold:
// the item exists by now, the record names another parent than parentID
// (the one the caller took from; "" for a key that cascades to nobody),
// or the request exceeds a capacity; and when the put is refused (another
// writer created the item first). On ok it returns the created item as an
// applied speculative result.
func (rl *RateLimiter) createOnFirst(ctx context.Context, a *specAcquire, key store.BucketKey, parentID string) (res store.SpeculativeResult, ok bool, err error) {
	entityID := key.EntityID
	var m Entity
	var found bool
	if s := a.sight; s.missingItem(key) {
		// This acquire read both a moment ago (sightFirst).
		m, found = s.meta, s.found
		a.sight = nil
	} else {
		metas, buckets, err := rl.store.loadBuckets(ctx, []string{entityID}, []store.BucketKey{key})
		if err != nil || buckets[key] != nil {
			return res, false, err
		}
		m, found = metas[entityID]
	}
	g := entityGroup{entityID: entityID, resource: a.resource, limits: a.child.limits, source: a.child.source, switches: a.child.switches}
	want := ""
	if found {
		want = entityInfo{cascade: m.Cascade, parentID: m.ParentID}.cascadeParent(entityID)
	}
	if want != parentID {
		rl.ents.setEntity(entityID, found, m.Cascade, m.ParentID)
		return res, false, nil
	}
	if found {
		g.meta = &m
	}
	now := a.nowMs()
	if err := rl.carrySwitches(ctx, &g, a.resource, nil, now); err != nil {
		return res, false, err
	}
	entries, _, exceeded := consumeGroup(g, a.resource, a.consume, now)
	if exceeded {
		return res, false, nil
	}
	w := store.BucketWrite{Kind: store.WriteCreate, Key: key, NowMs: now, ShardCount: 1, Incarnation: newIncarnation()}
	if found {
		w.Cascade, w.ParentID, w.RefreshEntity = m.Cascade, m.ParentID, true
	}
	w.TTL, w.TTLSeconds = rl.ttlFor(g, entries, now)
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

// firstSight is what sightFirst read: the entity's record (found: it
// exists) and whether its item on the acquire's resource (shard 0) does
// not exist.
type firstSight struct {
	key     store.BucketKey
	meta    Entity
	found   bool
	missing bool
}

// sighted is the answer of sightFirst's read.
type sighted struct {
	metas   map[string]Entity
	buckets map[store.BucketKey]*store.Bucket
}

// missingItem reports whether s (nil: no read) found key's item missing.
func (s *firstSight) missingItem(key store.BucketKey) bool {
	return s != nil && s.missing && s.key == key
}

// sightFirst reads, for an entity the entity cache does not know, its
// record and its item on the acquire's resource, in one read, before any
// write, and returns what the cache knows of it then. The child's and the
// parent's writes then go out together, and a key's first acquire creates
// its item (createOnFirst) without a speculative write refused first for
// want of the item; an item that exists is kept by the repository as a
// hint for its first write (see dynamoRepository.LoadBuckets). The read
// costs what that refused write did, once per entity the cache learns.
func (rl *RateLimiter) sightFirst(ctx context.Context, a *specAcquire, entityID string) (entityInfo, int, error) {
	key := store.BucketKey{EntityID: entityID, Resource: a.resource}
	// Detached, as the write it replaces: the store timeout bounds it, and
	// the breaker counts its outcome whenever the caller stops waiting.
	read, err := detached(&rl.bg, ctx, false, func(ctx context.Context) (sighted, error) {
		metas, buckets, err := rl.store.loadBuckets(ctx, []string{entityID}, []store.BucketKey{key})
		return sighted{metas, buckets}, err
	}, nil)
	if err != nil {
		return entityInfo{}, 1, err
	}
	metas, buckets := read.metas, read.buckets
	m, found := metas[entityID]
	rl.ents.setEntity(entityID, found, m.Cascade, m.ParentID)
	shards := 1
	if b := buckets[key]; b != nil {
		shards = max(b.ShardCount, 1)
		rl.ents.setShards(entityID, a.resource, shards)
	} else {
		a.sight = &firstSight{key: key, meta: m, found: found, missing: true}
	}
	info := entityInfo{known: true, meta: true, exists: found, cascade: m.Cascade, parentID: m.ParentID}
	return info, shards, nil
}
