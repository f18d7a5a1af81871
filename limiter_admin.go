package limiter

import (
	"context"
	"errors"
)

// CreateEntity stores a new entity; see [Repository].
func (rl *RateLimiter) CreateEntity(ctx context.Context, e Entity) (Entity, error) {
	return rl.repo.CreateEntity(ctx, e)
}

// GetEntity returns an entity or *[EntityNotFoundError].
func (rl *RateLimiter) GetEntity(ctx context.Context, id string) (Entity, error) {
	return rl.repo.GetEntity(ctx, id)
}

// DeleteEntity deletes an entity with its stored limits and buckets.
func (rl *RateLimiter) DeleteEntity(ctx context.Context, id string) error {
	defer rl.overLimitReset()
	return rl.repo.DeleteEntity(ctx, id)
}

// Children returns the entities whose parent is parentID.
func (rl *RateLimiter) Children(ctx context.Context, parentID string) ([]Entity, error) {
	return rl.repo.Children(ctx, parentID)
}

// SetLimits stores limits for entityID on resource ([DefaultResource] for all
// resources without their own).
func (rl *RateLimiter) SetLimits(ctx context.Context, entityID, resource string, limits []Limit) error {
	defer rl.overLimitReset()
	return rl.repo.SetLimits(ctx, entityID, resource, limits)
}

// GetLimits returns the limits stored for entityID on resource (nil when none).
func (rl *RateLimiter) GetLimits(ctx context.Context, entityID, resource string) ([]Limit, error) {
	return rl.repo.GetLimits(ctx, entityID, resource)
}

// DeleteLimits deletes the limits stored for entityID on resource and
// reconciles the bucket with the limits that apply now: their parameters are
// written, limits that no longer apply are removed, and the bucket expires
// again like any bucket of default config. When no limits apply any more the
// bucket is left as it is.
func (rl *RateLimiter) DeleteLimits(ctx context.Context, entityID, resource string) error {
	old, err := rl.repo.GetLimits(ctx, entityID, resource)
	if err != nil {
		return err
	}
	defer rl.overLimitReset()
	if err := rl.repo.DeleteLimits(ctx, entityID, resource); err != nil {
		return err
	}
	effective, source, err := rl.limitsFor(ctx, entityID, resource, acquireOptions{})
	if errors.Is(err, ErrValidation) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(effective))
	for _, l := range effective {
		keep[l.Name] = true
	}
	var stale []string
	for _, l := range old {
		if !keep[l.Name] {
			stale = append(stale, l.Name)
		}
	}
	ttl, secs := rl.ttlFor(entityGroup{limits: effective, source: source})
	return rl.repo.SyncBucket(ctx, entityID, resource, effective, ttl, secs, stale)
}

// SetResourceDefaults stores the default limits of resource.
func (rl *RateLimiter) SetResourceDefaults(ctx context.Context, resource string, limits []Limit) error {
	defer rl.overLimitReset()
	return rl.repo.SetResourceDefaults(ctx, resource, limits)
}

// GetResourceDefaults returns the default limits of resource.
func (rl *RateLimiter) GetResourceDefaults(ctx context.Context, resource string) ([]Limit, error) {
	return rl.repo.GetResourceDefaults(ctx, resource)
}

// DeleteResourceDefaults deletes the default limits of resource.
func (rl *RateLimiter) DeleteResourceDefaults(ctx context.Context, resource string) error {
	defer rl.overLimitReset()
	return rl.repo.DeleteResourceDefaults(ctx, resource)
}

// ListResourcesWithDefaults returns the resources with default limits.
func (rl *RateLimiter) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	return rl.repo.ListResourcesWithDefaults(ctx)
}

// SetSystemDefaults stores the namespace-wide defaults and on-unavailable
// mode ("" leaves it unset).
func (rl *RateLimiter) SetSystemDefaults(ctx context.Context, limits []Limit, onUnavailable OnUnavailable) error {
	defer rl.overLimitReset()
	return rl.repo.SetSystemDefaults(ctx, limits, onUnavailable)
}

// GetSystemDefaults returns the namespace-wide defaults.
func (rl *RateLimiter) GetSystemDefaults(ctx context.Context) ([]Limit, OnUnavailable, error) {
	return rl.repo.GetSystemDefaults(ctx)
}

// DeleteSystemDefaults deletes the namespace-wide defaults.
func (rl *RateLimiter) DeleteSystemDefaults(ctx context.Context) error {
	defer rl.overLimitReset()
	return rl.repo.DeleteSystemDefaults(ctx)
}

// ListEntitiesWithCustomLimits returns a page of entities with stored limits
// for resource and the next page's cursor ("" at the end).
func (rl *RateLimiter) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	return rl.repo.ListEntitiesWithCustomLimits(ctx, resource, pageSize, cursor)
}

// ListResourcesWithEntityConfigs returns the resources some entity has
// stored limits for.
func (rl *RateLimiter) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	return rl.repo.ListResourcesWithEntityConfigs(ctx)
}
