// Layer 4, mechanics: the administrative methods: entities, stored limits,
// audit, usage and capacity (Reset is in lower.go).

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
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
	if err := rl.enter(); err != nil {
		return Entity{}, err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return Entity{}, err
	}
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
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
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
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
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
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
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
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
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
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
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

// systemChange is what a write of the system config changes: its limits,
// and its on-unavailable mode unless setMode is false (the mode stored
// then stays).
type systemChange struct {
	limits  []store.Limit
	mode    OnUnavailable
	setMode bool
}

// keepOnUnavailable marks a change of the system defaults' limits that
// leaves their on-unavailable mode as stored (see setSystemDefaults).
const keepOnUnavailable OnUnavailable = "\x00keep"

// setSystemDefaults stores the namespace-wide default limits and
// on-unavailable mode; mode keepOnUnavailable changes the limits alone. It
// records a limits_set audit event with the config as written.
func (rl *RateLimiter) setSystemDefaults(ctx context.Context, limits []store.Limit, mode OnUnavailable) error {
	ch := systemChange{limits: limits, mode: mode, setMode: true}
	if mode == keepOnUnavailable {
		ch.mode, ch.setMode = "", false
	}
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
	if err := validateStoredLimits(ch.limits); err != nil {
		return err
	}
	if ch.mode != "" && !ch.mode.Valid() {
		return store.NewValidationError(ErrValidation, "on_unavailable", string(ch.mode), "must be 'allow' or 'block'")
	}
	c, err := rl.setSystemConfig(ctx, ch)
	if err != nil {
		return err
	}
	var ou any
	if c.OnUnavailable != "" {
		ou = string(c.OnUnavailable)
	}
	return rl.record(ctx, principal, store.AuditLimitsSet, store.AuditEntitySystem, "",
		map[string]any{"limits": auditLimitDetails(c.Limits), "on_unavailable": ou})
}

// setSystemConfig writes ch over the system config and returns the config
// written,
// with its switch records (those kept, and one per limit that switches
// buckets). A store that writes the config in place
// ([store.SystemConfigWriter]) keeps the attributes another tool keeps on
// its item (the Python library's), and writes on condition that the
// records are those read: one that lost to a concurrent change of them
// (addSystemSwitches) reads the config again and recomputes them, so that
// no record is lost. Another store gets the config written whole.
func (rl *RateLimiter) setSystemConfig(ctx context.Context, ch systemChange) (store.Config, error) {
	key := store.SystemConfig()
	w, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		old, _, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return store.Config{}, err
		}
		c := store.Config{Limits: slices.Clone(old.Limits), OnUnavailable: old.OnUnavailable}
		c.Limits = slices.Clone(ch.limits)
		if ch.setMode {
			c.OnUnavailable = ch.mode
		}
		c.Switches, _ = recordSwitches(old.Switches, old.Limits, c.Limits, false, "", rl.nowMs())
		if !inPlace {
			if err := rl.repo.PutConfig(ctx, key, c); err != nil {
				return store.Config{}, err
			}
			rl.configChanged(key)
			return c, nil
		}
		done, err := w.SetSystemConfig(ctx, old, c)
		if err != nil {
			return store.Config{}, err
		}
		if done {
			rl.configChanged(key)
			return c, nil
		}
	}
	return store.Config{}, fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// GetSystemDefaults returns the namespace-wide default limits and
// on-unavailable mode ("" when unset).
func (rl *RateLimiter) getSystemDefaults(ctx context.Context) ([]store.Limit, OnUnavailable, error) {
	if err := checkContext(ctx); err != nil {
		return nil, "", err
	}
	c, _, err := rl.repo.GetConfig(ctx, store.SystemConfig())
	return c.Limits, c.OnUnavailable, err
}

// DeleteSystemDefaults deletes the namespace-wide defaults (the records
// of switches of defaults that the system config keeps stay). It records
// a limits_deleted audit event naming the limits and mode deleted.
func (rl *RateLimiter) deleteSystemDefaults(ctx context.Context) error {
	if err := rl.enter(); err != nil {
		return err
	}
	defer rl.exit()
	principal, err := rl.principalFor(ctx)
	if err != nil {
		return err
	}
	old, err := rl.deleteSystemConfig(ctx)
	if err != nil {
		return err
	}
	names := make([]any, len(old.Limits))
	for i, l := range old.Limits {
		names[i] = l.Name
	}
	var ou any
	if old.OnUnavailable != "" {
		ou = string(old.OnUnavailable)
	}
	return rl.record(ctx, principal, store.AuditLimitsDeleted, store.AuditEntitySystem, "", map[string]any{"limits": names, "on_unavailable": ou})
}

// deleteSystemConfig deletes the system defaults (limits and mode) and
// returns them. The switch records the system config holds (those of
// deleted resource defaults and of entities' deleted DefaultResource
// configs, which apply whatever defaults their entities inherit now) are
// kept: deleting them would start those entities' new buckets full. A
// store that writes the config in place ([store.SystemConfigWriter])
// removes the limits and the mode alone, on condition that the records
// are those read (one that lost to a concurrent change of them reads
// again), and keeps what another tool keeps on the item; another store
// gets the records written whole, or the config deleted when none are
// left.
func (rl *RateLimiter) deleteSystemConfig(ctx context.Context) (store.Config, error) {
	key := store.SystemConfig()
	w, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		old, ok, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return old, err
		}
		kept, _ := recordSwitches(old.Switches, nil, nil, false, "", rl.nowMs())
		done := true
		switch {
		case inPlace && ok:
			done, err = w.SetSystemConfig(ctx, old, store.Config{Switches: kept})
		case len(kept) > 0:
			err = rl.repo.PutConfig(ctx, key, store.Config{Switches: kept})
		default:
			_, err = rl.repo.DeleteConfig(ctx, key)
		}
		if err != nil {
			return old, err
		}
		if done {
			rl.configChanged(key)
			return old, nil
		}
	}
	return store.Config{}, fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// recordDeletedDefaults records, in the system config, the switches of the
// deleted defaults old of resource to the system defaults its entities
// inherit now, and the records old kept, for resource alone (see
// carrySwitches and movedSwitches).
func (rl *RateLimiter) recordDeletedDefaults(ctx context.Context, resource string, old store.Config) error {
	if len(old.Limits) == 0 {
		return nil
	}
	return rl.addSystemSwitches(ctx, func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool) {
		if len(sys.Limits) == 0 {
			return nil, false
		}
		moved := movedSwitches(old.Switches, resource, "")
		sw, added := recordSwitches(append(slices.Clone(sys.Switches), moved...), old.Limits, sys.Limits, false, resource, nowMs)
		return sw, added > 0 || len(moved) > 0
	})
}

// recordDeletedEntityDefaults records, in the system config, the
// definitions of the deleted DefaultResource config old of entityID, and
// the records old kept, for that entity alone (see carrySwitches and
// movedSwitches).
func (rl *RateLimiter) recordDeletedEntityDefaults(ctx context.Context, entityID string, old store.Config) error {
	return rl.addSystemSwitches(ctx, func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool) {
		moved := movedSwitches(old.Switches, "", entityID)
		sw, _ := recordSwitches(append(slices.Clone(sys.Switches), moved...), nil, nil, false, "", nowMs)
		added := len(moved)
		for _, l := range old.Limits {
			if l.IsPrepaid() || l.IsInFlight() {
				continue
			}
			sw = append(sw, store.LimitSwitch{Name: l.Name, Entity: entityID, From: l, AtMs: nowMs})
			added++
		}
		return sw[max(0, len(sw)-maxSwitches):], added > 0
	})
}

// maxSwitchWrites bounds the attempts of addSystemSwitches: each one lost
// to a concurrent change of the system config's switch records.
const maxSwitchWrites = 8

// addSystemSwitches sets the switch records of the system config to what
// next returns for the config as read (with now), when it says there are
// new ones. A store that writes the records alone
// ([store.ConfigSwitchWriter]: DynamoDB, memory and Redis) writes nothing
// else of the config's item: the attributes another tool keeps there (the
// Python library's) stay. The write is conditioned on the records read:
// one that lost to a concurrent change reads the config again and
// recomputes them. A system config not stored yet is written with the
// records alone through [store.SystemConfigWriter], conditioned the same
// way (and, where the config is one value, on its still being missing),
// so that defaults stored meanwhile stay. Another store gets the config
// written whole.
func (rl *RateLimiter) addSystemSwitches(ctx context.Context, next func(sys store.Config, nowMs int64) ([]store.LimitSwitch, bool)) error {
	key := store.SystemConfig()
	w, alone := rl.repo.(store.ConfigSwitchWriter)
	sw, inPlace := rl.repo.(store.SystemConfigWriter)
	for range maxSwitchWrites {
		sys, ok, err := rl.repo.GetConfig(ctx, key)
		if err != nil {
			return err
		}
		records, changed := next(sys, rl.nowMs())
		if !changed {
			return nil
		}
		var done bool
		switch {
		case ok && alone:
			done, err = w.SetConfigSwitches(ctx, key, sys.Switches, records)
		case inPlace:
			c := sys
			c.Switches = records
			done, err = sw.SetSystemConfig(ctx, sys, c)
		default:
			sys.Switches = records
			done, err = true, rl.repo.PutConfig(ctx, key, sys)
		}
		if err != nil {
			return err
		}
		if done {
			rl.configChanged(key)
			return nil
		}
	}
	return fmt.Errorf("limiter: the system defaults' switch records changed under %d writes in a row: %w", maxSwitchWrites, store.ErrTransactionConflict)
}

// configChanged makes a config change through this limiter effective for
// its next acquire: the cached slot goes, and so does every over-limit
// entry (its limits may be stale).
func (rl *RateLimiter) configChanged(key store.ConfigKey) {
	rl.configs.evict(key)
	rl.overLimitReset()
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

// checkContext refuses a nil context (a typed error, not a panic) and
// returns a done context's error.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return ctx.Err()
}

// The read-only queries below need optional capabilities of the repository.
// Each validates its input, finds its interface with a type assertion and
// returns an error matching [ErrUnsupported] when the repository does not
// implement it. [*DynamoDBRepository] implements them all.

// AuditEvents returns up to limit audit events of entityID, newest first
// ([store.DefaultAuditEventsLimit] when limit ≤ 0). With startEventID (the EventID
// of the last event of a previous call) it returns the events older than
// that one, so a caller pages back through history by passing the last id
// it got; fewer than limit events means there are no more. Use
// [store.AuditEntitySystem] or [store.AuditEntityResource] as entityID for the events of
// system and resource defaults. Invalid ids are *[ValidationError]s; nothing
// is read then. It needs an [store.AuditLog] repository.
func (rl *RateLimiter) auditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := validateAuditEntityID(entityID); err != nil {
		return nil, err
	}
	if startEventID != "" {
		if _, err := ulid.ParseStrict(startEventID); err != nil {
			return nil, store.NewValidationError(ErrValidation, "start_event_id", startEventID,
				"must be an audit event id (a 26-character ULID)")
		}
	}
	if rl.audit == nil {
		return nil, fmt.Errorf("audit events: %w", ErrUnsupported)
	}
	if limit <= 0 {
		limit = store.DefaultAuditEventsLimit
	}
	return rl.audit.AuditEvents(ctx, entityID, limit, startEventID)
}

// UsageSnapshots returns one page of the usage snapshots q selects, newest
// first, and the cursor of the next page ("" after the last). An invalid
// query is a *[ValidationError]. It needs a [store.UsageStore] repository.
func (rl *RateLimiter) usageSnapshots(ctx context.Context, q UsageQuery) ([]UsageSnapshot, string, error) {
	if err := checkContext(ctx); err != nil {
		return nil, "", err
	}
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	u, ok := rl.repo.(store.UsageStore)
	if !ok {
		return nil, "", fmt.Errorf("usage snapshots: %w", ErrUnsupported)
	}
	return u.UsageSnapshots(ctx, q)
}

// UsageSummary aggregates the usage snapshots q selects (at most
// [store.MaxUsageSummarySnapshots]). An invalid query is a *[ValidationError]. It
// needs a [store.UsageStore] repository.
func (rl *RateLimiter) usageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	if err := checkContext(ctx); err != nil {
		return UsageSummary{}, err
	}
	if err := q.Validate(); err != nil {
		return UsageSummary{}, err
	}
	u, ok := rl.repo.(store.UsageStore)
	if !ok {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", ErrUnsupported)
	}
	return u.UsageSummary(ctx, q)
}

// ResourceCapacity aggregates limit limitName of resource over every entity
// with a bucket for it (only root entities when parentsOnly), with balances
// refilled to the limiter's clock. resource and limitName must be valid
// (the DynamoDB backend's hidden limit cannot be asked for); else a
// *[ValidationError] is returned before anything is read. It needs a
// [store.CapacityReader] repository.
func (rl *RateLimiter) resourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool) (ResourceCapacity, error) {
	if err := checkContext(ctx); err != nil {
		return ResourceCapacity{}, err
	}
	if err := store.ValidateResource(resource); err != nil {
		return ResourceCapacity{}, err
	}
	if err := store.ValidateLimitName(limitName, "limit_name"); err != nil {
		return ResourceCapacity{}, err
	}
	c, ok := rl.repo.(store.CapacityReader)
	if !ok {
		return ResourceCapacity{}, fmt.Errorf("resource capacity: %w", ErrUnsupported)
	}
	return c.ResourceCapacity(ctx, resource, limitName, parentsOnly, rl.now())
}
