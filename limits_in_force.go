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
	// Resource is the resource asked about.
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
// own limits, resolved as [RateLimiter.ResolveLimits] does (or the call's
// [WithLimits], lowered by its [WithLimitCaps]), then, when the entity
// cascades, each ancestor's it charges (nearest first, see
// [MaxCascadeLevels]), resolved for that ancestor. It reads what an
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
	limits, source, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return nil, err
	}
	limits = o.capped(limits)
	if len(limits) == 0 {
		return nil, nil
	}
	out := make([]LimitInForce, 0, 2*len(limits))
	for _, l := range limits {
		out = append(out, LimitInForce{EntityID: entityID, Resource: resource, Limit: l, Source: source})
	}
	ancestors, err := rl.cascadeChain(ctx, entityID)
	if err != nil {
		return nil, err
	}
	for _, a := range ancestors {
		plimits, psource, err := rl.limitsFor(ctx, a, resource, o)
		if err != nil {
			return nil, err
		}
		for _, l := range plimits {
			out = append(out, LimitInForce{EntityID: a, Resource: resource, Limit: l, Source: psource})
		}
	}
	return out, nil
}
