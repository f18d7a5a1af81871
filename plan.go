// Layer 4, mechanics: the plan of an acquire: the entities it charges
// (the entity, then the ancestors it cascades to), for each the limits of
// its (entity, resource) bucket and of its entity-wide bucket
// (AllResources), the bucket items these make with what each is charged,
// and the shape of the write (acquirePlan), chosen once: every path of an
// acquire takes the plan and derives none of it again.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// AcquireRequest is one request of [RateLimiter.AcquireAll]: take Consume
// from the (EntityID, Resource) bucket, and from each ancestor's the
// entity cascades to (see [MaxCascadeLevels]), and from the entity-wide
// bucket ([AllResources]) of each of them with entity-wide limits.
// Resource may not be AllResources.
type AcquireRequest struct {
	EntityID string
	Resource string
	Consume  Consume
	// Limits, when not nil, are used for this request instead of the
	// stored config, as [WithLimits] does for one Acquire (an empty,
	// non-nil list checks nothing). Nil means the stored limits, or the
	// [WithLimits] option of the call.
	Limits []Limit
}

// maxAcquireAllItems bounds the bucket items one AcquireAll may charge
// (each request's bucket, and its ancestors' with cascade): DynamoDB
// writes at most 100 items in one transaction.
const maxAcquireAllItems = 100

// planLevel is one entity an acquire charges, with the limits of its
// (entity, resource) bucket and of its entity-wide bucket.
type planLevel struct {
	entityID string
	res      resolved
	wide     resolved
}

// empty reports whether neither bucket of the level has a limit.
func (lv planLevel) empty() bool { return len(lv.res.limits) == 0 && len(lv.wide.limits) == 0 }

// has reports whether either bucket of the level has a limit named name.
func (lv planLevel) has(name string) bool { return lv.res.has(name) || lv.wide.has(name) }

// levelLimits resolves one entity of an acquire on resource: the limits of
// its (entity, resource) bucket, from [WithLimits] or the stored configs,
// and of its entity-wide bucket, from [WithEntityWideLimits] or the stored
// configs (none under WithLimits alone, which reads no config). On a
// config cache miss both are read in one load. An acquire on AllResources
// itself has no second bucket.
func (rl *rules) levelLimits(ctx context.Context, entityID, resource string, o acquireOptions) (planLevel, error) {
	lv := planLevel{entityID: entityID}
	if o.override {
		lv.res = resolved{limits: o.limits, source: SourceOverride}
	} else {
		lc, err := rl.configs.resolveLevel(ctx, entityID, resource)
		if err != nil {
			return lv, err
		}
		lv.res = resolved{limits: lc.limits, source: lc.source, switches: lc.switches}
		lv.wide = resolved{limits: lc.wide, source: lc.wideSource, switches: lc.wideSw}
	}
	if o.wideOverride && resource != AllResources {
		lv.wide = resolved{limits: o.wide, source: SourceOverride}
	}
	return lv, nil
}

// planChain resolves every entity an acquire of (entityID, resource)
// charges: the entity (its resource limits lowered by the call's caps),
// then each ancestor of its cascade chain, nearest first
// ([MaxCascadeLevels]). An entity with no limit in either bucket fails
// with a *ValidationError, unless the call overrides the limits (an empty
// override checks nothing: no levels).
func (rl *rules) planChain(ctx context.Context, entityID, resource string, o acquireOptions) ([]planLevel, error) {
	lv, err := rl.levelLimits(ctx, entityID, resource, o)
	if err != nil {
		return nil, err
	}
	lv.res.limits = o.capped(lv.res.limits)
	overridden := o.override || o.wideOverride
	if lv.empty() {
		if overridden {
			return nil, nil
		}
		return nil, noLimitsError(entityID, resource)
	}
	levels := []planLevel{lv}
	chain, err := rl.cascadeChain(ctx, entityID)
	if err != nil {
		return nil, err
	}
	for _, a := range chain {
		alv, err := rl.levelLimits(ctx, a, resource, o)
		if err != nil {
			return nil, err
		}
		if alv.empty() && !overridden {
			return nil, noLimitsError(a, resource)
		}
		levels = append(levels, alv)
	}
	return levels, nil
}

// writeShape is how an acquire's plan is written, chosen once with the
// plan (planAcquire, planAll).
type writeShape uint8

const (
	// shapeNone charges nothing (an empty override): an empty lease.
	shapeNone writeShape = iota
	// shapeSpeculative is one conditional write of the entity's (entity,
	// resource) bucket of rolling limits, with no read (two in parallel
	// when it cascades to a parent, found on the way): the speculative
	// path, which falls back to shapeExact when it cannot decide.
	shapeSpeculative
	// shapePair is one conditional write per item of a plan of one or two
	// items, both at once (the pair path), falling back to shapeExact.
	shapePair
	// shapeBatch is one atomic conditional write of every item (the
	// store's speculative batch), falling back to shapeExact.
	shapeBatch
	// shapeExact reads the items and writes them under the
	// refill-timestamp locks: the entity's bucket (and its parent's) of a
	// plan without items (the read-then-write path), or every item in one
	// atomic write.
	shapeExact
)

// acquirePlan is the plan of an acquire: what it charges and how it is
// written. A plan without items (shapeSpeculative, shapeExact) charges the
// entity's (entity, resource) bucket of rolling limits and, when it
// cascades, the parent's (whose limits the path resolves when it finds the
// parent: parentLimits); a path that finds more to charge (a chain beyond
// the parent, an ancestor with entity-wide or own-bucket limits) returns
// an error of onBatchPath, and the caller plans the whole chain as items
// (planChainItems). Every other plan lists its bucket items.
type acquirePlan struct {
	shape writeShape
	// The plan without items: the entity, its resource, what the acquire
	// takes, the limits of its bucket (resolved and capped) and the call's
	// options (for the parent's limits).
	entityID string
	resource string
	consume  Consume
	child    resolved
	o        acquireOptions
	// items are the bucket items of the plan, each with its limits and
	// amounts; charged lists per request the items it charges.
	items   []*batchItem
	charged [][]int
}

// pairItems is the most bucket items an acquire's plan may charge on the
// pair path; a plan of more is one atomic batch.
const pairItems = 2

// The errors with which a path of a plan without items tells its caller
// that the acquire charges more than the entity's bucket and its parent's:
// the caller then plans every bucket of the chain as items
// (planChainItems). Nothing a path returns with stays taken.
var (
	// errCascadePath: the cascade charges more than the parent.
	errCascadePath = errors.New("limiter: the cascade charges more than the parent")
	// errWidePath: an ancestor of the chain has entity-wide limits.
	errWidePath = errors.New("limiter: an entity of the cascade has entity-wide limits")
	// errOwnBucketPath: the parent's limits hold a calendar or prepaid
	// limit.
	errOwnBucketPath = errors.New("limiter: the parent's limits hold a calendar or prepaid limit")
)

// onBatchPath reports whether err asks for the chain as items: a calendar
// or prepaid limit of the parent, a cascade beyond the parent, or
// entity-wide limits.
func onBatchPath(err error) bool {
	return errors.Is(err, errOwnBucketPath) || errors.Is(err, errCascadePath) || errors.Is(err, errWidePath)
}

// planAcquire plans an Acquire of consume on (entityID, resource): nothing
// (an empty override), the entity's bucket alone when its limits are
// rolling and it has no entity-wide limits (the cascade's parent found on
// the way), else every bucket of its chain as items (planChainItems). It
// checks the request's names against the plan.
func (rl *RateLimiter) planAcquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (acquirePlan, error) {
	lv, err := rl.levelLimits(ctx, entityID, resource, o)
	if err != nil {
		return acquirePlan{}, err
	}
	limits := o.capped(lv.res.limits)
	if len(lv.wide.limits) > 0 {
		// Entity-wide limits: every bucket of the plan, all or nothing.
		return rl.planChainItems(ctx, entityID, resource, consume, o)
	}
	if len(limits) == 0 {
		if o.override || o.wideOverride {
			return acquirePlan{shape: shapeNone}, nil // an empty override checks nothing
		}
		return acquirePlan{}, noLimitsError(entityID, resource)
	}
	child := resolved{limits: limits, source: lv.res.source, switches: lv.res.switches}
	if err := rl.checkNames(ctx, entityID, resource, consume, child, o); err != nil {
		return acquirePlan{}, err
	}
	// After a switch back the buckets are read first (switchedBackIn).
	o.readFirst = rl.speculative && child.switches.recorded() && switchedBackIn(child.switches, limits, rl.nowMs())
	if hasOwnBucket(limits) {
		return rl.planChainItems(ctx, entityID, resource, consume, o)
	}
	shape := shapeExact
	if rl.speculative && !o.readFirst {
		shape = shapeSpeculative
	}
	return acquirePlan{shape: shape, entityID: entityID, resource: resource, consume: consume, child: child, o: o}, nil
}

// planChainItems plans an Acquire as the items of every bucket it charges
// (its chain's, entity-wide and own buckets included), written as a pair
// when there are one or two (see itemsShape), else in one atomic step.
func (rl *RateLimiter) planChainItems(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (acquirePlan, error) {
	reqs := []AcquireRequest{{EntityID: entityID, Resource: resource, Consume: consume}}
	items, charged, err := rl.planBatch(ctx, reqs, o)
	if err != nil {
		return acquirePlan{}, err
	}
	return acquirePlan{shape: rl.readFirstShape(items, rl.itemsShape(items, true), o), items: items, charged: charged}, nil
}

// readFirstShape returns shape, or shapeExact when the buckets must be
// read before they are written: o says so, or a limit of an item (an
// ancestor's or an entity-wide one too) was switched back within the time
// its spend counts (switchedBackIn), whose bucket may predate the switch
// back and hold more than the switches leave it.
func (rl *RateLimiter) readFirstShape(items []*batchItem, shape writeShape, o acquireOptions) writeShape {
	if shape == shapeNone || shape == shapeExact || !rl.speculative {
		return shape
	}
	if o.readFirst {
		return shapeExact
	}
	now := rl.nowMs()
	for _, it := range items {
		defs := it.group.limits
		if it.cal != nil {
			defs = []store.Limit{*it.cal}
		}
		if switchedBackIn(it.group.switches, defs, now) {
			return shapeExact
		}
	}
	return shape
}

// planAll plans an AcquireAll of reqs: the items of every request's
// chain, merged, written in one atomic step (never as a pair: the
// requests are all or nothing).
func (rl *RateLimiter) planAll(ctx context.Context, reqs []AcquireRequest, o acquireOptions) (acquirePlan, error) {
	items, charged, err := rl.planBatch(ctx, reqs, o)
	if err != nil {
		return acquirePlan{}, err
	}
	return acquirePlan{shape: rl.readFirstShape(items, rl.itemsShape(items, false), o), items: items, charged: charged}, nil
}

// itemsShape chooses how items are written: nothing when there are none;
// as a pair (pair allowed: an acquire of one request) when speculative
// writes are on, the repository's single-item writes are cheaper than its
// atomic batch (pairWrites: on memory and Redis a batch is one lock or
// one script already) and the plan has at most pairItems items; else in
// the store's atomic speculative batch when speculative writes are on, or
// read then written.
func (rl *RateLimiter) itemsShape(items []*batchItem, pair bool) writeShape {
	switch {
	case len(items) == 0:
		return shapeNone
	case pair && rl.pairWrites && rl.speculative && len(items) <= pairItems:
		return shapePair
	case rl.store.batch != nil && rl.speculative:
		return shapeBatch
	}
	return shapeExact
}

// perRequest turns the statuses of p's items into the statuses of its
// requests: each request's, the statuses of the items it charges, in
// order (nil stays nil).
func (p *acquirePlan) perRequest(statuses [][]LimitStatus) [][]LimitStatus {
	if statuses == nil {
		return nil
	}
	out := make([][]LimitStatus, len(p.charged))
	for i, idx := range p.charged {
		for _, it := range idx {
			out[i] = append(out[i], statuses[it]...)
		}
	}
	return out
}

// planBatch resolves each request's chain (planChain) and merges the
// requests into bucket items: for each entity of a chain its (entity,
// resource) bucket, then its entity-wide bucket, each with the own
// buckets of its calendar, prepaid and in-flight limits. charged lists,
// per request, the items it charges.
func (rl *RateLimiter) planBatch(ctx context.Context, reqs []AcquireRequest, o acquireOptions) ([]*batchItem, [][]int, error) {
	var items []*batchItem
	index := map[store.BucketKey]int{}
	charged := make([][]int, len(reqs))
	add := func(i int, entityID, resource string, limits []store.Limit, rs resolved, base string, consume Consume, cal *store.Limit, nextMs int64) error {
		key := store.BucketKey{EntityID: entityID, Resource: resource}
		if n, ok := index[key]; ok {
			it := items[n]
			if !slices.Equal(it.group.limits, limits) {
				merged, ok := mergeSlotLimits(it.group.limits, limits)
				if !ok {
					return store.NewValidationError(ErrValidation, "requests", entityID+"/"+resource,
						"two requests charge this bucket with different limits")
				}
				it.group.limits = merged
			}
			for name, v := range consume {
				it.consume[name] = addTokensSat(it.consume[name], v)
			}
			if !slices.Contains(charged[i], n) {
				charged[i] = append(charged[i], n)
			}
			return nil
		}
		if len(items) >= maxAcquireAllItems {
			return store.NewValidationError(ErrValidation, "requests", fmt.Sprint(len(reqs)),
				fmt.Sprintf("more than %d bucket items in one batch", maxAcquireAllItems))
		}
		index[key] = len(items)
		charged[i] = append(charged[i], len(items))
		g := entityGroup{entityID: entityID, resource: resource, limits: limits, source: rs.source, switches: rs.switches}
		if cal != nil {
			// A period's or a generation's bucket expires; a balance never.
			g.expireAtMs = kindOf(*cal).expireAt(*cal, nextMs)
		}
		items = append(items, &batchItem{
			group:   g,
			consume: namedIn(consume, limits),
			cal:     cal,
			nextMs:  nextMs,
			base:    base,
		})
		return nil
	}
	// addAll adds the items of one entity's limits: one bucket, or with
	// calendar or prepaid limits the rolling bucket and their own buckets.
	now := rl.now()
	addAll := func(i int, entityID, resource string, rs resolved, consume Consume) error {
		if !hasOwnBucket(rs.limits) {
			return add(i, entityID, resource, rs.limits, rs, resource, consume, nil, 0)
		}
		return ownBucketItems(entityID, resource, rs.limits, consume, now, rl.slotGenMs(),
			func(res string, ls []store.Limit, c Consume, cal *store.Limit, nextMs int64) error {
				return add(i, entityID, res, ls, rs, resource, c, cal, nextMs)
			})
	}
	for i, r := range reqs {
		ro := o
		if r.Limits != nil {
			ro.limits, ro.override = o.reqLimits[i], true
		}
		levels, err := rl.planChain(ctx, r.EntityID, r.Resource, ro)
		if err != nil {
			return nil, nil, err
		}
		if err := checkPlanNames(levels, r.EntityID, r.Resource, r.Consume); err != nil {
			return nil, nil, err
		}
		// Each entity of the chain: its (entity, resource) bucket, then
		// its entity-wide bucket.
		for _, lv := range levels {
			if len(lv.res.limits) > 0 {
				if err := addAll(i, lv.entityID, r.Resource, lv.res, r.Consume); err != nil {
					return nil, nil, err
				}
			}
			if len(lv.wide.limits) > 0 {
				if err := addAll(i, lv.entityID, AllResources, lv.wide, r.Consume); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return items, charged, nil
}

// checkPlanNames refuses a request that names a limit no bucket of the
// plan has (a typo such as "rmp" must not turn limiting off): a name is
// charged in every bucket of the acquire that has a limit of that name,
// and must be in one at least.
func checkPlanNames(levels []planLevel, entityID, resource string, consume Consume) error {
	for name := range consume {
		if !slices.ContainsFunc(levels, func(lv planLevel) bool { return lv.has(name) }) {
			return unknownNameError(levels, entityID, resource, name)
		}
	}
	return nil
}

// unknownNameError is the *ValidationError of a request naming name, a
// limit no bucket of levels has.
func unknownNameError(levels []planLevel, entityID, resource, name string) error {
	var names []string
	for _, lv := range levels {
		for _, r := range []resolved{lv.res, lv.wide} {
			for _, l := range r.limits {
				if !slices.Contains(names, l.Name) {
					names = append(names, l.Name)
				}
			}
		}
	}
	return store.NewValidationError(ErrValidation, "consume", name,
		fmt.Sprintf("no limit named %q applies to %s/%s (limits: %s)", name, entityID, resource, strings.Join(names, ", ")))
}

// parentLimits resolves the limits of parentID on resource for the
// speculative and read-then-write paths of a plan without items, which
// charge the child and its parent: it returns errWidePath when the parent
// has entity-wide limits and errOwnBucketPath when its limits hold a
// calendar or prepaid limit (the caller then plans the chain as items),
// and a *ValidationError when the parent has no limits.
func (rl *rules) parentLimits(ctx context.Context, parentID, resource string, o acquireOptions) (resolved, error) {
	lv, err := rl.levelLimits(ctx, parentID, resource, o)
	switch {
	case err != nil:
		return resolved{}, err
	case len(lv.wide.limits) > 0:
		return resolved{}, errWidePath
	case len(lv.res.limits) == 0 && !o.override:
		return resolved{}, noLimitsError(parentID, resource)
	case hasOwnBucket(lv.res.limits):
		return lv.res, errOwnBucketPath
	}
	return lv.res, nil
}

// checkNames refuses a request that names a limit no applicable limit has
// (a typo such as "rmp" must not turn limiting off): every name must be a
// limit of the entity or, with cascade, of an ancestor it charges. The
// ancestors' limits are resolved only when the entity's lack a name.
func (rl *rules) checkNames(ctx context.Context, entityID, resource string, consume Consume, child resolved, o acquireOptions) error {
	// The common request names only the entity's limits: counted by lookups,
	// which cost less than ranging over the map (a name twice among the
	// limits, which validation refuses, is counted once all the same).
	found := 0
	for i, l := range child.limits {
		if _, ok := consume[l.Name]; ok && !slices.ContainsFunc(child.limits[:i], func(m store.Limit) bool { return m.Name == l.Name }) {
			found++
		}
	}
	if found == len(consume) {
		return nil
	}
	var ancestors []planLevel
	resolvedAncestors := false
	has := func(name string) bool {
		return slices.ContainsFunc(ancestors, func(lv planLevel) bool { return lv.has(name) })
	}
	for name := range consume {
		if child.has(name) {
			continue
		}
		if !resolvedAncestors && !o.override {
			resolvedAncestors = true
			chain, err := rl.cascadeChain(ctx, entityID)
			if err != nil {
				return err
			}
			for _, id := range chain {
				lv, err := rl.levelLimits(ctx, id, resource, o)
				if err != nil {
					return err
				}
				ancestors = append(ancestors, lv)
			}
		}
		if has(name) {
			continue
		}
		levels := append([]planLevel{{entityID: entityID, res: child}}, ancestors...)
		return unknownNameError(levels, entityID, resource, name)
	}
	return nil
}

// entityGroup is one bucket item of an acquire: an (entity, resource)
// bucket (the child's, or the parent's it cascades to), an entity-wide
// bucket, or the own bucket of a calendar, prepaid or in-flight limit;
// with its limits and, once read, the item and the entity's record.
type entityGroup struct {
	entityID string
	resource string
	limits   []store.Limit
	source   ConfigSource
	bucket   *store.Bucket // nil when the item does not exist
	meta     *Entity       // nil when the entity has no META record
	// expireAtMs is, for the period bucket of a calendar limit, when it
	// may be deleted (periodBucketExpiry); 0 for other buckets.
	expireAtMs int64
	// switches are the changes of the defaults the limits come from
	// (resolved.switches), and startMilli, set by carrySwitches, the
	// balance a limit missing from the bucket starts with when it is
	// lower than its capacity (what a switch carried).
	switches   switchSet
	startMilli map[string]int64
	// capMilli, set by carrySwitches after a switch back, is the most a
	// limit in the bucket may hold now (millitokens).
	capMilli map[string]int64
}

// key returns the group's shard-0 bucket item.
func (g entityGroup) key() store.BucketKey {
	return store.BucketKey{EntityID: g.entityID, Resource: g.resource}
}

// batchItem is one bucket item of an acquire's plan (acquirePlan): its group (limits,
// and the bucket and entity record once read) and what the requests
// charging it take from it together.
type batchItem struct {
	group   entityGroup
	consume Consume
	// cal is the calendar limit whose period bucket the item is, or the
	// prepaid limit whose balance it is (nil for an ordinary bucket), and
	// nextMs the start of the next period (0 for a balance).
	cal    *store.Limit
	nextMs int64
	// base is the resource the item's limit is defined on (the resource
	// of the request, or AllResources): its own bucket's resource for a
	// rolling limit, not for a calendar one.
	base string
}

// write returns the speculative write of item it at now: its amounts,
// conditioned on its limits.
func (it *batchItem) write(now int64) store.SpeculativeRequest {
	return store.SpeculativeRequest{Key: it.group.key(), Consume: it.consume, Limits: it.group.limits, NowMs: now}
}

// namedIn returns the amounts of c whose names limits have: what a
// bucket of the plan is charged (a name is charged in every bucket that
// has a limit of that name, and only there).
func namedIn(c Consume, limits []store.Limit) Consume {
	out := make(Consume, len(limits))
	for _, l := range limits {
		if v, ok := c[l.Name]; ok {
			out[l.Name] = v
		}
	}
	return out
}

// addTokensSat returns a+b saturated at the range of amounts.
func addTokensSat(a, b int64) int64 { return min(max(bucketmath.AddSat(a, b), -maxAmount), maxAmount) }

// mergeSlotLimits returns the limits of one bucket item charged by two
// requests that differ only in the in-flight slots they take (one names
// an in-flight limit, the other does not, so only the first carries its
// generations' limits): a's limits, then those of b that a lacks. ok is
// false when they differ in anything else: a limit of either that the
// other lacks is not a generation's, or one name has two definitions.
func mergeSlotLimits(a, b []store.Limit) ([]store.Limit, bool) {
	merged := slices.Clone(a)
	for _, l := range b {
		i := slices.IndexFunc(a, func(x store.Limit) bool { return x.Name == l.Name })
		switch {
		case i >= 0 && a[i] != l:
			return nil, false
		case i >= 0:
		case !isSlotLimit(l):
			return nil, false
		default:
			merged = append(merged, l)
		}
	}
	for _, l := range a {
		if !slices.ContainsFunc(b, func(x store.Limit) bool { return x.Name == l.Name }) && !isSlotLimit(l) {
			return nil, false
		}
	}
	return merged, true
}

// isSlotLimit reports whether l is the limit of an in-flight generation.
func isSlotLimit(l store.Limit) bool {
	_, _, ok := slotOf(l)
	return ok
}

// hasOwnBucket reports whether limits hold a calendar or prepaid limit:
// the one check the plain path makes.
func hasOwnBucket(limits []store.Limit) bool {
	for i := range limits {
		if limits[i].OwnBucket() {
			return true
		}
	}
	return false
}

// rollingOnly returns limits without the calendar and prepaid limits (the
// limits of the entity's own bucket): limits itself when there are none.
func rollingOnly(limits []store.Limit) []store.Limit {
	if !hasOwnBucket(limits) {
		return limits
	}
	out := make([]store.Limit, 0, len(limits))
	for _, l := range limits {
		if !l.OwnBucket() {
			out = append(out, l)
		}
	}
	return out
}

// ownBucket returns the bucket resource and the bucket limit of own-bucket
// limit l on resource at now, and when that bucket stops being the current
// one (epoch ms; 0: never).
func ownBucket(l store.Limit, resource string, now time.Time, genMs int64) (bucket string, bl store.Limit, nextMs int64, err error) {
	return kindOf(l).bucket(l, resource, now, genMs)
}

// ownBucketItems splits the limits of (entityID, resource) for planBatch:
// add is called for the rolling limits and the slot limits of the
// in-flight limits (slotLimits), with the amounts of their names, then for
// each calendar or prepaid limit with an amount in consume, on its own
// bucket at now (cal is that limit). A limit without an amount is not
// charged.
func ownBucketItems(entityID, resource string, limits []store.Limit, consume Consume, now time.Time, genMs int64, add itemAdder) error {
	rolling := rollingOnly(limits)
	c := make(Consume, len(rolling))
	for _, l := range rolling {
		if v, ok := consume[l.Name]; ok {
			c[l.Name] = v
		}
	}
	// The slots of in-flight limits are limits of the same item.
	rolling, c = slotLimits(rolling, c, limits, consume, now.UnixMilli(), genMs)
	if len(rolling) > 0 {
		if err := add(resource, rolling, c, nil, 0); err != nil {
			return err
		}
	}
	for i := range limits {
		l := limits[i]
		if !l.OwnBucket() {
			continue
		}
		v, ok := consume[l.Name]
		if !ok {
			continue
		}
		if err := kindOf(l).items(l, resource, v, now, genMs, add); err != nil {
			return err
		}
	}
	return nil
}

// calendarStatuses shows the statuses of an own bucket as its limit's:
// Limit is the calendar, prepaid or in-flight limit, and a refusal for
// want of tokens waits as the limit's kind says (until the next period
// starts, [BalanceRetryAfter], a slot poll), not for the bucket's
// negligible refill.
func calendarStatuses(statuses []LimitStatus, cal *store.Limit, nextMs, nowMs int64) {
	for i := range statuses {
		st := &statuses[i]
		if st.LimitName != cal.Name {
			continue
		}
		st.Limit = Limit(*cal)
		if st.Exceeded && st.Requested > st.Available {
			st.RetryAfter = kindOf(*cal).retryAfter(*cal, nextMs, nowMs)
		}
	}
}

// switchedBackIn reports whether any limit of limits (as resolved, with
// the switches s of its configs) was switched back within the time its
// spend counts (switchedBack): the acquire must then read its buckets
// (the speculative write would charge a bucket that predates the switch
// back as it stands). Without switch records it costs nothing (a caller
// that reads the clock for it asks switchSet.recorded first).
func switchedBackIn(s switchSet, limits []store.Limit, nowMs int64) bool {
	sw := s.list()
	if len(sw) == 0 {
		return false
	}
	for _, l := range limits {
		if spendCarries(l) && switchedBack(sw, l, nowMs) {
			return true
		}
	}
	return false
}

// slotGenMs returns the length of a slot generation in ms: half the slot
// TTL, at least 1.
func (rl *RateLimiter) slotGenMs() int64 {
	ttl := rl.slotTTL
	if ttl <= 0 {
		ttl = defaultSlotTTL
	}
	return max(ttl.Milliseconds()/2, 1)
}

// slotGen returns the current generation of in-flight slots.
func (rl *RateLimiter) slotGen() int64 { return bucketmath.FloorDiv(rl.nowMs(), rl.slotGenMs()) }
