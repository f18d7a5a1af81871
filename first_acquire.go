// Layer 4, mechanics: the speculative acquire's rounds around
// speculativeFrom: the read of an entity the limiter does not know before
// its first write (sightFirst), a key's first acquire, whose missing item
// is created with one conditional put beside the parent's speculative
// write instead of a read of both and a transaction locked on the parent
// (firstAcquire), and the rounds after a mixed outcome (mixedAgain).

package limiter

import (
	"context"
	"errors"

	"github.com/zaelimiter/limiter/store"
)

// speculativeAcquire is the fast path of plan p (shapeSpeculative): one
// conditional write per bucket, no read, conditioned on the limits
// resolved for each side. It returns (nil, nil) when the slow path must
// decide.
func (rl *RateLimiter) speculativeAcquire(ctx context.Context, p *acquirePlan) (*Lease, error) {
	rl.stats.attempts.Add(1)
	a := &specAcquire{resource: p.resource, consume: p.consume, at: rl.now(), child: p.child, o: p.o}
	for {
		lease, err := rl.speculativeFrom(ctx, p.entityID, a)
		if a.sightDue {
			a.sightDue, a.sighted = false, true
			if err := rl.sightFirst(ctx, a, p.entityID); err != nil {
				return nil, err
			}
			continue
		}
		if a.first != nil {
			return rl.firstAcquire(ctx, a)
		}
		if !a.mixed || !isRefusal(err) {
			return lease, err
		}
		if again := rl.mixedAgain(ctx, a); !again {
			return nil, err
		}
	}
}

// mixedAgain decides whether acquire a, refused by a.refused after a mixed
// outcome, runs again: after a short random pause, the refusing item is
// read, and a covers the request now. Otherwise the item as read is kept
// by the over-limit cache (when it still refuses).
func (rl *RateLimiter) mixedAgain(ctx context.Context, a *specAcquire) bool {
	key := a.refused
	a.mixed = false
	if a.rounds >= mixedRetries {
		return false
	}
	a.rounds++
	b := rl.pauseThenRead(ctx, key)
	if b == nil {
		return false
	}
	a.at = rl.now()
	ok, statuses := wouldRefillSatisfy(b.States, a.consume, a.nowMs())
	if !ok {
		rl.overLimitRemember(b, a.nowMs(), newRateLimitExceededError(statuses))
	}
	return ok
}

// firstAcquire is the path of a key's first acquire (a.first): the
// child's item does not exist, and the parent's write, sent beside the
// child's refused one, applied; or a read found the item missing before
// any write, and the parent's write goes out now (a refusal of it leaves
// the decision to the read-then-write path); or the key cascades to
// nobody. The parent's take stays: the item is created with the request
// taken (createFirst). Otherwise the parent's take is given back and it
// returns (nil, nil): the read-then-write path decides.
func (rl *RateLimiter) firstAcquire(ctx context.Context, a *specAcquire) (*Lease, error) {
	f := a.first
	rl.specFallback(f.key, store.SpecFallbackBucketMissing)
	if f.parentDue {
		res, err := rl.specConsume(ctx, a.request(rl.pickShard(f.parentID, a.resource), a.parent.limits))
		if err != nil {
			return nil, err
		}
		if err := rl.learnParent(ctx, a, f.key.EntityID, f.parentID, store.SpeculativeResult{}, res); err != nil {
			return nil, err
		}
		if !res.Applied {
			return nil, nil // the read-then-write path decides
		}
		f.parent, f.parentDue = res, false
	}
	child, err := rl.createFirst(ctx, a, f)
	if err == nil && child.Applied {
		lease := newSpecLease(rl, child, a.consume, a.child.limits)
		if f.parent.Applied {
			lease.entries = appendSpecEntries(lease.entries, make([]leaseEntry, 0, len(a.parent.limits)), f.parent, a.consume, a.parent.limits)
		}
		return lease, nil
	}
	if !f.parent.Applied {
		return nil, err
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

// sightRead is the answer of sightFirst's read.
type sightRead struct {
	metas   map[string]Entity
	buckets map[store.BucketKey]*store.Bucket
}

// sightFirst reads, for an entity the entity cache does not know, its
// record and its item on the acquire's resource, in one read, before any
// write, into the entity cache (and a.sight). The child's and the
// parent's writes then go out together, and a key's first acquire creates
// its item (createOnFirst) without a speculative write refused first for
// want of the item; an item that exists is kept by the repository as a
// hint for its first write (see dynamoRepository.LoadBuckets). The read
// costs a read unit or less where that refused write cost a write unit,
// once per entity the cache learns.
func (rl *RateLimiter) sightFirst(ctx context.Context, a *specAcquire, entityID string) error {
	key := store.BucketKey{EntityID: entityID, Resource: a.resource}
	// Detached, as the write it replaces: the store timeout bounds it, and
	// the breaker counts its outcome whenever the caller stops waiting.
	read, err := detached(&rl.bg, ctx, false, func(ctx context.Context) (sightRead, error) {
		metas, buckets, err := rl.store.loadBuckets(ctx, []string{entityID}, []store.BucketKey{key})
		return sightRead{metas, buckets}, err
	}, nil)
	if err != nil {
		return err
	}
	metas, buckets := read.metas, read.buckets
	m, found := metas[entityID]
	rl.ents.setEntity(entityID, found, m.Cascade, m.ParentID)
	if b := buckets[key]; b != nil {
		rl.ents.setShards(entityID, a.resource, max(b.ShardCount, 1))
	} else {
		a.sight = &firstSight{key: key, meta: m, found: found}
	}
	return nil
}
