// Layer 4, mechanics: the limits an acquire of an entity and resource is
// checked against, each with its entity and the level it comes from.

package limiter

import (
	"context"
)

// LimitInForce is one limit that an acquire of an (entity, resource) is
// checked against, with the bucket that holds it and the level it was
// resolved from.
type LimitInForce struct {
	// EntityID is the entity whose bucket holds the limit: the entity
	// asked about, or an ancestor it cascades to.
	EntityID string
	// Resource is the resource asked about, or [AllResources] for a limit
	// of the entity's entity-wide bucket.
	Resource string
	// Limit is the limit as the acquire applies it (lowered by
	// [WithLimitCaps] when the call has caps).
	Limit Limit
	// Source is where the limit comes from: [SourceEntity] (stored for
	// EntityID on Resource), [SourceEntityDefault] (stored for EntityID on
	// [DefaultResource]), [SourceResource] (the resource's defaults),
	// [SourceSystem] (the namespace's defaults) or [SourceOverride]
	// ([WithLimits]). Every limit of one entity comes from one level: the
	// first of these, in this order, that has any limits.
	Source ConfigSource
}

// LimitsInForce returns the limits an Acquire of (entityID, resource) with
// opts would be checked against, and where each comes from: the entity's
// own limits, resolved as [Admin.ResolveLimits] does (or the call's
// [WithLimits], lowered by its [WithLimitCaps]), then, when the entity
// cascades, each ancestor's it charges (nearest first, see
// [MaxCascadeLevels]), resolved for that ancestor. Each entity's limits on
// resource come first, then those of its entity-wide bucket
// ([AllResources], with Resource set to it). It reads what an
// acquire reads before its write (the stored configs and the entity
// records, through the config and entity caches) and no bucket.
//
// With no limits stored at any level for the entity (or, with cascade, for
// an ancestor it charges) it fails with a *[ValidationError], as Acquire does; an empty
// [WithLimits] returns no limits, as Acquire then checks none. After
// [RateLimiter.Close] it returns [ErrClosed].
func (rl *RateLimiter) LimitsInForce(ctx context.Context, entityID, resource string, opts ...AcquireOption) ([]LimitInForce, error) {
	o, err := checkKeyCall(ctx, entityID, resource, opts)
	if err != nil {
		return nil, err
	}
	if err := rl.enter(); err != nil {
		return nil, err
	}
	defer rl.exit()
	levels, err := rl.planChain(ctx, entityID, resource, o)
	if err != nil || len(levels) == 0 {
		return nil, err
	}
	var out []LimitInForce
	for _, lv := range levels {
		for _, l := range lv.res.limits {
			out = append(out, LimitInForce{EntityID: lv.entityID, Resource: resource, Limit: Limit(l), Source: lv.res.source})
		}
		for _, l := range lv.wide.limits {
			out = append(out, LimitInForce{EntityID: lv.entityID, Resource: AllResources, Limit: Limit(l), Source: lv.wide.source})
		}
	}
	return out, nil
}
