// Layer 4, mechanics: the administrative methods: entities and stored
// limits (the system defaults are in admin_system.go, the read-only
// queries in admin_queries.go, Reset in lower.go).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The administrative half of RateLimiter: entities and stored limits. Each
// method validates every input before its first write, writes through the
// repository, keeps this limiter's caches in step, and records an audit
// event when the repository keeps an audit log.

// maxParentDepth bounds the ancestor walk of CreateEntity.
const maxParentDepth = 64

// CreateEntity stores a new entity and returns it as stored (Name defaults
// to ID, CreatedAt is now at second precision). ID, and ParentID when set,
// must be valid identifiers. The parent must exist, must not be the entity
// itself, and its chain of ancestors must not lead back to the entity
// (which an entity created by another client could do): such a parent is a
// *[ValidationError] on parent_id, which also matches [ErrEntityNotFound]
// when the parent does not exist. With Cascade set, the acquires on the
// entity must charge at most [MaxCascadeLevels] entities (the entity, its
// parent, and each further ancestor while the one below it cascades),
// and so must the acquires on each descendant that cascades into it: the
// children an earlier entity of the same ID left behind (DeleteEntity
// keeps them) join the new entity's chain. A deeper chain is a
// *[ValidationError] on parent_id (on entity_id when there is no parent)
// that matches [ErrCascadeTooDeep]; the
// descendants cost one Children query per cascading descendant within
// the depth that could exceed the bound. The checks are reads: an entity
// created meanwhile by another call (or, on DynamoDB, a child created a
// moment before, which its index may not show yet) can still make a
// deeper chain, and an acquire on it charges the first [MaxCascadeLevels]
// entities. An existing ID fails with
// *[EntityExistsError]. It records an entity_created audit event.
func (rl *RateLimiter) createEntity(ctx context.Context, e Entity) (Entity, error) {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return Entity{}, err
	}
	defer rl.exit()
	if err := store.ValidateIdentifier(e.ID, "entity_id"); err != nil {
		return Entity{}, err
	}
	levels := 1 // the entities an acquire on e charges
	if e.ParentID != "" {
		if err := store.ValidateIdentifier(e.ParentID, "parent_id"); err != nil {
			return Entity{}, err
		}
		if levels, err = rl.checkParent(ctx, e.ID, e.ParentID, e.Cascade); err != nil {
			return Entity{}, err
		}
	}
	if err := rl.checkDescendants(ctx, e.ID, e.ParentID, levels); err != nil {
		return Entity{}, err
	}
	if e.Name == "" {
		e.Name = e.ID
	}
	e.Metadata = cloneMetadata(e.Metadata)
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.CreatedAt = rl.now().UTC().Truncate(time.Second)
	if err := rl.repo.CreateEntity(ctx, e); err != nil {
		return Entity{}, err
	}
	rl.ents.setEntity(e.ID, true, e.Cascade, e.ParentID)
	metadata := make(map[string]any, len(e.Metadata))
	for k, v := range e.Metadata {
		metadata[k] = v
	}
	var parent any
	if e.ParentID != "" {
		parent = e.ParentID
	}
	details := map[string]any{"name": e.Name, "parent_id": parent, "cascade": e.Cascade, "metadata": metadata}
	if err := rl.record(ctx, principal, store.AuditEntityCreated, e.ID, "", details); err != nil {
		return e, err
	}
	return cloneEntity(e), nil
}

// checkParent refuses a parent that is id itself, that does not exist, or
// whose ancestors lead back to id; and, when id cascades, a chain of
// cascades that would charge more than MaxCascadeLevels entities. It
// returns the number of entities an acquire on id charges.
func (rl *RateLimiter) checkParent(ctx context.Context, id, parentID string, cascade bool) (int, error) {
	if parentID == id {
		return 0, store.NewValidationError(ErrValidation, "parent_id", parentID, "an entity cannot be its own parent")
	}
	seen := map[string]bool{id: true}
	// levels counts the entities an acquire on id charges, while charging
	// goes on to the next ancestor.
	levels, charging := 1, cascade
	for next, depth := parentID, 0; next != "" && depth < maxParentDepth; depth++ {
		p, err := rl.repo.GetEntity(ctx, next)
		if errors.Is(err, ErrEntityNotFound) {
			if next == parentID {
				return 0, store.NewValidationError(ErrEntityNotFound, "parent_id", parentID,
					fmt.Sprintf("parent entity '%s' not found; create it first", parentID))
			}
			return levels, nil // an ancestor is gone: the chain ends there
		}
		if err != nil {
			return 0, err
		}
		if next == parentID {
			rl.ents.setEntity(p.ID, true, p.Cascade, p.ParentID)
		}
		seen[next] = true
		if seen[p.ParentID] {
			return 0, store.NewValidationError(ErrValidation, "parent_id", parentID,
				fmt.Sprintf("parent chain of '%s' leads back to '%s' (a cycle)", parentID, p.ParentID))
		}
		if charging {
			if levels++; levels > MaxCascadeLevels {
				return 0, store.NewValidationError(ErrCascadeTooDeep, "parent_id", parentID,
					fmt.Sprintf("the cascade would charge more than %d entities (ends at '%s')", MaxCascadeLevels, next))
			}
			charging = p.Cascade && p.ParentID != ""
		}
		next = p.ParentID
	}
	return levels, nil
}

// checkDescendants refuses id when an acquire on a descendant that
// cascades into it would charge more than MaxCascadeLevels entities, given
// that an acquire on id charges levels. It walks the cascading descendants
// breadth first, one Children query per entity, down to the depth that
// would exceed; a new ID has no children, and costs one query. Kept
// children can form a chain of MaxCascadeLevels below a deleted entity
// (each was checked while an ancestor was missing, and a missing ancestor
// ends a chain), so the walk is needed even when id has no parent.
func (rl *RateLimiter) checkDescendants(ctx context.Context, id, parentID string, levels int) error {
	field, value := "parent_id", parentID
	if parentID == "" {
		field, value = "entity_id", id
	}
	seen := map[string]bool{id: true}
	frontier := []string{id}
	for below := 1; len(frontier) > 0; below++ {
		var next []string
		for _, pid := range frontier {
			kids, err := rl.repo.Children(ctx, pid)
			if err != nil {
				return err
			}
			for _, k := range kids {
				if !k.Cascade || k.ParentID != pid || seen[k.ID] {
					continue
				}
				if below+levels > MaxCascadeLevels {
					return store.NewValidationError(ErrCascadeTooDeep, field, value,
						fmt.Sprintf("the cascade of descendant '%s' would charge more than %d entities", k.ID, MaxCascadeLevels))
				}
				seen[k.ID] = true
				next = append(next, k.ID)
			}
		}
		frontier = next
	}
	return nil
}

// GetEntity returns an entity or *[EntityNotFoundError].
func (rl *RateLimiter) getEntity(ctx context.Context, id string) (Entity, error) {
	if err := checkContext(ctx); err != nil {
		return Entity{}, err
	}
	if err := store.ValidateIdentifier(id, "entity_id"); err != nil {
		return Entity{}, err
	}
	e, err := rl.repo.GetEntity(ctx, id)
	switch {
	case errors.Is(err, ErrEntityNotFound):
		rl.ents.setEntity(id, false, false, "")
	case err == nil:
		rl.ents.setEntity(id, true, e.Cascade, e.ParentID)
	}
	return e, err
}

// DeleteEntity deletes an entity with its stored limits and buckets (every
// resource and shard); audit events and children are kept. It records an
// entity_deleted audit event with the number of records deleted. Deleting
// a missing entity does nothing.
//
// An entity created again with the id is a new entity: a lease acquired
// before the delete settles nothing into its buckets (its Commit, Rollback
// and background commit write nothing there and return no error, as for
// a bucket that expired). The ids of applied top-ups ([RateLimiter.TopUp])
// are kept until they expire, so that one payment is never credited
// twice.
func (rl *RateLimiter) deleteEntity(ctx context.Context, id string) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateIdentifier(id, "entity_id"); err != nil {
		return err
	}
	n, err := rl.repo.DeleteEntity(ctx, id)
	if n > 0 {
		rl.configs.evictEntity(id)
		rl.ents.forget(id)
		rl.overLimitReset()
	}
	if err != nil || n == 0 {
		return err
	}
	return rl.record(ctx, principal, store.AuditEntityDeleted, id, "", map[string]any{"records_deleted": int64(n)})
}

// Children returns the entities whose parent is parentID.
func (rl *RateLimiter) children(ctx context.Context, parentID string) ([]Entity, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateIdentifier(parentID, "parent_id"); err != nil {
		return nil, err
	}
	return rl.repo.Children(ctx, parentID)
}

// ListEntities returns a page of the namespace's entities in ID order and
// the next page's cursor ("" at the end): pass it back to read on. pageSize
// ≤ 0 lets the repository choose; a page may hold fewer than pageSize
// entities, even none, while a cursor follows (on DynamoDB pageSize bounds
// the index entries read, and an entity's stored limits and usage
// snapshots have entries too). It needs a [store.EntityLister] repository
// (DynamoDB and memorystore are).
func (rl *RateLimiter) listEntities(ctx context.Context, pageSize int, cursor string) ([]Entity, string, error) {
	if err := checkContext(ctx); err != nil {
		return nil, "", err
	}
	l, ok := rl.repo.(store.EntityLister)
	if !ok {
		return nil, "", fmt.Errorf("list entities: %w", ErrUnsupported)
	}
	return l.ListEntities(ctx, pageSize, cursor)
}

// checkConfigResource validates an entity-config resource: a resource name
// or [DefaultResource].
func checkConfigResource(resource string) error {
	if resource == DefaultResource {
		return nil
	}
	return store.ValidateResource(resource)
}

// SetLimits stores limits for entityID on resource ([DefaultResource] for
// all resources without their own), replacing any stored before. The
// bucket of (entityID, resource) takes the new parameters at once and no
// longer expires (entity-level config). A limit whose kind (rolling,
// calendar, prepaid), calendar period or zone changes keeps what the old
// definition spent at this instant: the new one's bucket for now holds at
// most its capacity less that (nothing carries into or out of a prepaid
// balance). It records a limits_set audit event.
func (rl *RateLimiter) setLimits(ctx context.Context, entityID, resource string, limits []store.Limit) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := checkConfigResource(resource); err != nil {
		return err
	}
	if store.IsOwnBucketResource(resource) {
		return store.ValidateChargedResource(resource)
	}
	if err := validateStoredLimits(limits); err != nil {
		return err
	}
	inForce, err := rl.limitsInForce(ctx, entityID, resource)
	if err != nil {
		return err
	}
	key := store.EntityConfig(entityID, resource)
	c := store.Config{Limits: slices.Clone(limits)}
	if resource == DefaultResource {
		// Its resources' buckets switch at their next acquire: see
		// carrySwitches.
		old, _, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return err
		}
		c.Switches, _ = recordSwitches(old.Switches, old.Limits, limits, len(old.Limits) == 0, "", rl.nowMs())
	}
	if err := rl.repo.PutConfig(ctx, key, c); err != nil {
		return err
	}
	rl.configChanged(key)
	// The old definitions' buckets no longer change: what they spent is
	// read now, before the new ones are touched.
	carry, err := rl.spentBySwitches(ctx, entityID, resource, inForce, limits)
	if err != nil {
		return err
	}
	if err := rl.syncBucket(ctx, entityID, resource, limits, store.TTLRemove, 0, nil); err != nil {
		return err
	}
	if err := rl.keepSpent(ctx, entityID, resource, carry); err != nil {
		return err
	}
	return rl.record(ctx, principal, store.AuditLimitsSet, entityID, resource, map[string]any{"limits": auditLimitDetails(limits)})
}

// GetLimits returns the limits stored for entityID on resource (nil when
// none).
func (rl *RateLimiter) getLimits(ctx context.Context, entityID, resource string) ([]store.Limit, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return nil, err
	}
	if err := checkConfigResource(resource); err != nil {
		return nil, err
	}
	c, _, err := rl.repo.GetConfig(ctx, store.EntityConfig(entityID, resource))
	return c.Limits, err
}

// DeleteLimits deletes the limits stored for entityID on resource and
// reconciles the bucket with the limits that apply now: their parameters
// are written, limits that no longer apply are removed, and the bucket
// expires again like any bucket of default config. When no limits apply
// any more the bucket is left as it is. A limit that applies now with
// another kind, calendar period or zone keeps what the deleted one had
// spent, as with [Admin.SetLimits]. It records a limits_deleted
// audit event when a config was deleted.
func (rl *RateLimiter) deleteLimits(ctx context.Context, entityID, resource string) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := checkConfigResource(resource); err != nil {
		return err
	}
	key := store.EntityConfig(entityID, resource)
	old, _, err := rl.repo.GetConfig(ctx, key)
	if err != nil {
		return err
	}
	existed, err := rl.repo.DeleteConfig(ctx, key)
	if err != nil {
		return err
	}
	rl.configChanged(key)
	if existed {
		if err := rl.record(ctx, principal, store.AuditLimitsDeleted, entityID, resource, nil); err != nil {
			return err
		}
	}
	if resource == DefaultResource {
		if err := rl.recordDeletedEntityDefaults(ctx, entityID, old); err != nil {
			return err
		}
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
	for _, l := range old.Limits {
		if !keep[l.Name] && !l.OwnBucket() {
			stale = append(stale, l.Name)
		}
	}
	carry, err := rl.spentBySwitches(ctx, entityID, resource, old.Limits, effective)
	if err != nil {
		return err
	}
	rolling := rollingOnly(effective)
	ttl, secs := rl.ttlFor(entityGroup{limits: rolling, source: source}, nil, rl.nowMs())
	if err := rl.syncBucket(ctx, entityID, resource, rolling, ttl, secs, stale); err != nil {
		return err
	}
	return rl.keepSpent(ctx, entityID, resource, carry)
}

// SetResourceDefaults stores the default limits of resource, used by every
// entity without limits of its own for it. It records a limits_set audit
// event.
func (rl *RateLimiter) setResourceDefaults(ctx context.Context, resource string, limits []store.Limit) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateResource(resource); err != nil {
		return err
	}
	if err := validateStoredLimits(limits); err != nil {
		return err
	}
	key := store.ResourceConfig(resource)
	old, _, err := rl.repo.GetConfig(ctx, key)
	if err != nil {
		return err
	}
	inherited := old.Limits
	if len(inherited) == 0 {
		sys, _, err := rl.repo.GetConfig(ctx, store.SystemConfig())
		if err != nil {
			return err
		}
		inherited = sys.Limits
	}
	c := store.Config{Limits: slices.Clone(limits)}
	c.Switches, _ = recordSwitches(old.Switches, inherited, limits, false, "", rl.nowMs())
	if err := rl.repo.PutConfig(ctx, key, c); err != nil {
		return err
	}
	rl.configChanged(key)
	return rl.record(ctx, principal, store.AuditLimitsSet, store.AuditEntityResource(resource), resource, map[string]any{"limits": auditLimitDetails(limits)})
}

// GetResourceDefaults returns the default limits of resource (nil when
// none).
func (rl *RateLimiter) getResourceDefaults(ctx context.Context, resource string) ([]store.Limit, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := store.ValidateResource(resource); err != nil {
		return nil, err
	}
	c, _, err := rl.repo.GetConfig(ctx, store.ResourceConfig(resource))
	return c.Limits, err
}

// DeleteResourceDefaults deletes the default limits of resource. It records
// a limits_deleted audit event.
func (rl *RateLimiter) deleteResourceDefaults(ctx context.Context, resource string) error {
	principal, err := rl.enterAs(ctx)
	if err != nil {
		return err
	}
	defer rl.exit()
	if err := store.ValidateResource(resource); err != nil {
		return err
	}
	key := store.ResourceConfig(resource)
	old, _, err := rl.repo.GetConfig(ctx, key)
	if err != nil {
		return err
	}
	if _, err := rl.repo.DeleteConfig(ctx, key); err != nil {
		return err
	}
	rl.configChanged(key)
	if err := rl.recordDeletedDefaults(ctx, resource, old); err != nil {
		return err
	}
	return rl.record(ctx, principal, store.AuditLimitsDeleted, store.AuditEntityResource(resource), resource, nil)
}

// syncBucket applies a limit change to the shard-0 bucket of (entityID,
// resource) at once: each limit of limits is refilled to now under its
// stored parameters and takes the new ones (a balance above a lowered
// capacity is cut down to it), a limit the bucket lacks starts full, and
// the TTL mode is applied — one read and one write under the refill lock,
// read again when the lock is lost. Stale limits are then removed. A
// missing bucket is left missing: the next acquire creates it.
func (rl *RateLimiter) syncBucket(ctx context.Context, entityID, resource string, limits []store.Limit, ttl store.TTLMode, ttlSeconds int64, stale []string) error {
	limits = rollingOnly(limits) // calendar periods and prepaid balances have buckets of their own
	if len(limits) == 0 {
		return nil
	}
	key := store.BucketKey{EntityID: entityID, Resource: resource}
	for attempt := 0; ; attempt++ {
		b, err := rl.store.getBucket(ctx, key)
		if err != nil || b == nil {
			return err
		}
		now := rl.nowMs()
		w := store.BucketWrite{Kind: store.WriteNormal, Key: key, NowMs: now, ExpectedRefillMs: b.RefillMs, TTL: ttl, TTLSeconds: ttlSeconds, Base: b, Incarnation: b.Incarnation}
		if ttl == store.TTLSet {
			// As ttlFor's: a bucket in debt is kept until it has refilled.
			w.TTLSeconds = debtTTLSeconds(ttlSeconds, limits, now, groupFullAtMs(entityGroup{bucket: b}, nil))
		}
		for _, l := range limits {
			s, ok := b.State(l.Name)
			if !ok {
				full := bucketStateFromLimit(entityID, resource, l, now)
				w.Limits = append(w.Limits, store.LimitWrite{Name: l.Name, Initial: &full})
				continue
			}
			next, changed := applyLimit(s, l, now)
			if !changed {
				next.TokensMilli, _ = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
			}
			lw := store.LimitWrite{Name: l.Name, RefillMilli: next.TokensMilli - s.TokensMilli}
			if changed {
				lw.Params = &next
			}
			w.Limits = append(w.Limits, lw)
		}
		err = rl.store.writeBuckets(ctx, []store.BucketWrite{w})
		if errors.Is(err, store.ErrConditionFailed) && attempt+1 < maxRereads {
			continue // the bucket changed (or went) meanwhile: read it again
		}
		if errors.Is(err, store.ErrConditionFailed) {
			return fmt.Errorf("sync bucket %s/%s: %w", entityID, resource, err)
		}
		if err != nil || len(stale) == 0 {
			return err
		}
		break
	}
	err := rl.store.writeBuckets(ctx, []store.BucketWrite{{Kind: store.WriteSync, Key: key, NowMs: rl.nowMs(), Remove: stale}})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	return err
}

// ListResourcesWithDefaults returns, sorted, the resources with default
// limits. It needs a [store.ConfigLister] repository.
func (rl *RateLimiter) listResourcesWithDefaults(ctx context.Context) ([]string, error) {
	l, err := rl.lister(ctx, "list resources with defaults")
	if err != nil {
		return nil, err
	}
	return l.ListResourcesWithDefaults(ctx)
}

// ListResourcesWithEntityConfigs returns, sorted, the resources some entity
// has stored limits for. It needs a [store.ConfigLister] repository.
func (rl *RateLimiter) listResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	l, err := rl.lister(ctx, "list resources with entity configs")
	if err != nil {
		return nil, err
	}
	return l.ListResourcesWithEntityConfigs(ctx)
}

// ListEntitiesWithCustomLimits returns a page of the entities with stored
// limits for resource ([DefaultResource] included) and the next page's
// cursor ("" at the end). It needs a [store.ConfigLister] repository.
func (rl *RateLimiter) listEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	l, err := rl.lister(ctx, "list entities with custom limits")
	if err != nil {
		return nil, "", err
	}
	if err := checkConfigResource(resource); err != nil {
		return nil, "", err
	}
	return l.ListEntitiesWithCustomLimits(ctx, resource, pageSize, cursor)
}

func (rl *RateLimiter) lister(ctx context.Context, op string) (store.ConfigLister, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	l, ok := rl.repo.(store.ConfigLister)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrUnsupported)
	}
	return l, nil
}

// ResolveLimits returns the stored limits that apply to (entityID,
// resource) and the level they come from: entity > entity
// [DefaultResource] > resource > system, the first level with any limits.
// Limits is nil when no level has any. Results are cached for the config
// cache TTL ([Options.ConfigCacheTTL]). [RateLimiter.LimitsInForce] adds the
// parent's limits of a cascading entity.
func (rl *RateLimiter) resolveLimits(ctx context.Context, entityID, resource string) ([]store.Limit, ConfigSource, error) {
	if ctx == nil {
		return nil, "", errNilContext
	}
	limits, source, _, err := rl.configs.resolve(ctx, entityID, resource)
	return limits, source, err
}

// cloneEntity returns e with its own Metadata map.
func cloneEntity(e Entity) Entity {
	e.Metadata = cloneMetadata(e.Metadata)
	return e
}

func cloneMetadata(md map[string]string) map[string]string {
	if md == nil {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}
