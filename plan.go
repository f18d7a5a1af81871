// Layer 4, mechanics: the plan of an acquire: the entities it charges
// (the entity, then the ancestors it cascades to) and, for each, the
// limits of its (entity, resource) bucket and of its entity-wide bucket
// (AllResources).

package limiter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/zaelimiter/limiter/store"
)

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

// parentLimits resolves the limits of parentID on resource for the fast
// and read-then-write paths, which charge the child and its parent: it
// returns errWidePath when the parent has entity-wide limits and
// errOwnBucketPath when its limits hold a calendar or prepaid limit (the
// batch path takes the acquire then), and a *ValidationError when the
// parent has no limits.
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
		if _, ok := consume[l.Name]; ok && !slices.ContainsFunc(child.limits[:i], func(m Limit) bool { return m.Name == l.Name }) {
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
