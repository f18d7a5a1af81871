package limiter

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/oklog/ulid/v2"
)

// This file holds the administrative half of [MemoryStore]: entities,
// stored limits and audit events, with the validation, errors and audit
// records of the DynamoDB repository.

// CreateEntity stores a new entity, as [DynamoDBRepository.CreateEntity].
func (m *MemoryStore) CreateEntity(ctx context.Context, e Entity) (Entity, error) {
	if err := ValidateIdentifier(e.ID, "entity_id"); err != nil {
		return Entity{}, err
	}
	if e.ParentID != "" {
		if err := ValidateIdentifier(e.ParentID, "parent_id"); err != nil {
			return Entity{}, err
		}
	}
	principal, err := m.principal(ctx)
	if err != nil {
		return Entity{}, err
	}
	if e.Name == "" {
		e.Name = e.ID
	}
	e = cloneEntity(e)
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.CreatedAt = m.opts.Now().UTC().Truncate(1e9)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entities[e.ID]; ok {
		return Entity{}, &EntityExistsError{EntityID: e.ID}
	}
	m.entities[e.ID] = e
	m.ents.SetEntity(e.ID, true, e.Cascade, e.ParentID)
	metadata := make(map[string]any, len(e.Metadata))
	for k, v := range e.Metadata {
		metadata[k] = v
	}
	var parent any
	if e.ParentID != "" {
		parent = e.ParentID
	}
	m.logAuditLocked(principal, AuditEntityCreated, e.ID, "",
		map[string]any{"name": e.Name, "parent_id": parent, "cascade": e.Cascade, "metadata": metadata})
	return cloneEntity(e), nil
}

// GetEntity returns the entity, or *[EntityNotFoundError].
func (m *MemoryStore) GetEntity(ctx context.Context, id string) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entities[id]
	if !ok {
		return Entity{}, &EntityNotFoundError{EntityID: id}
	}
	return cloneEntity(e), nil
}

// Children returns the entities whose parent is parentID, sorted by id.
func (m *MemoryStore) Children(ctx context.Context, parentID string) ([]Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Entity{}
	for _, e := range m.entities {
		if e.ParentID == parentID {
			out = append(out, cloneEntity(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteEntity deletes the entity, its stored limits and every bucket, and
// records an entity_deleted audit event, as
// [DynamoDBRepository.DeleteEntity]. Deleting a missing entity does nothing.
func (m *MemoryStore) DeleteEntity(ctx context.Context, id string) error {
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(0)
	if _, ok := m.entities[id]; ok {
		delete(m.entities, id)
		n++
	}
	for k := range m.entityConfigs {
		if k.entityID == id {
			delete(m.entityConfigs, k)
			n++
		}
	}
	for k := range m.buckets {
		if k.EntityID == id {
			delete(m.buckets, k)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	m.ents.Forget(id)
	m.logAuditLocked(principal, AuditEntityDeleted, id, "", map[string]any{"records_deleted": n})
	return nil
}

// SetLimits stores limits for entityID on resource, as
// [DynamoDBRepository.SetLimits]: the shard-0 bucket's parameters follow and
// it no longer expires.
func (m *MemoryStore) SetLimits(ctx context.Context, entityID, resource string, limits []Limit) error {
	if err := ValidateIdentifier(entityID, "entity_id"); err != nil {
		return err
	}
	if err := checkConfigResource(resource); err != nil {
		return err
	}
	if err := validateLimits(limits); err != nil {
		return err
	}
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	now := m.nowMs()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entityConfigs[entityConfigKey{entityID, resource}] = slices.Clone(limits)
	if len(limits) > 0 {
		m.syncBucketLocked(BucketKey{EntityID: entityID, Resource: resource}, limits, TTLRemove, 0, nil, now)
	}
	m.logAuditLocked(principal, AuditLimitsSet, entityID, resource, map[string]any{"limits": auditLimitDetails(limits)})
	return nil
}

// GetLimits returns the limits stored for entityID on resource (nil when
// none).
func (m *MemoryStore) GetLimits(ctx context.Context, entityID, resource string) ([]Limit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entityConfigs[entityConfigKey{entityID, resource}]), nil
}

// DeleteLimits deletes the limits stored for entityID on resource and
// records a limits_deleted audit event; a missing config does nothing.
func (m *MemoryStore) DeleteLimits(ctx context.Context, entityID, resource string) error {
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := entityConfigKey{entityID, resource}
	if _, ok := m.entityConfigs[k]; !ok {
		return nil
	}
	delete(m.entityConfigs, k)
	m.logAuditLocked(principal, AuditLimitsDeleted, entityID, resource, nil)
	return nil
}

// SetResourceDefaults stores the default limits of resource.
func (m *MemoryStore) SetResourceDefaults(ctx context.Context, resource string, limits []Limit) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	if err := validateLimits(limits); err != nil {
		return err
	}
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resourceConfigs[resource] = slices.Clone(limits)
	m.logAuditLocked(principal, AuditLimitsSet, auditEntityResource(resource), resource, map[string]any{"limits": auditLimitDetails(limits)})
	return nil
}

// GetResourceDefaults returns the default limits of resource (nil when
// none).
func (m *MemoryStore) GetResourceDefaults(ctx context.Context, resource string) ([]Limit, error) {
	if err := ValidateResource(resource); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.resourceConfigs[resource]), nil
}

// DeleteResourceDefaults deletes the default limits of resource and records
// a limits_deleted audit event.
func (m *MemoryStore) DeleteResourceDefaults(ctx context.Context, resource string) error {
	if err := ValidateResource(resource); err != nil {
		return err
	}
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.resourceConfigs, resource)
	m.logAuditLocked(principal, AuditLimitsDeleted, auditEntityResource(resource), resource, nil)
	return nil
}

// ListResourcesWithDefaults returns, sorted, the resources with default
// limits.
func (m *MemoryStore) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return sortedKeys(m.resourceConfigs), nil
}

// SetSystemDefaults stores the namespace-wide default limits and
// on-unavailable mode ("" leaves it unset).
func (m *MemoryStore) SetSystemDefaults(ctx context.Context, limits []Limit, onUnavailable OnUnavailable) error {
	if err := validateLimits(limits); err != nil {
		return err
	}
	if onUnavailable != "" && !onUnavailable.Valid() {
		return newValidationError(ErrValidation, "on_unavailable", string(onUnavailable), "must be 'allow' or 'block'")
	}
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.systemLimits, m.systemOU = slices.Clone(limits), onUnavailable
	var ou any
	if onUnavailable != "" {
		ou = string(onUnavailable)
	}
	m.logAuditLocked(principal, AuditLimitsSet, auditEntitySystem, "", map[string]any{"limits": auditLimitDetails(limits), "on_unavailable": ou})
	return nil
}

// GetSystemDefaults returns the namespace-wide default limits and
// on-unavailable mode ("" when unset).
func (m *MemoryStore) GetSystemDefaults(ctx context.Context) ([]Limit, OnUnavailable, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.systemLimits), m.systemOU, nil
}

// DeleteSystemDefaults deletes the namespace-wide defaults and records a
// limits_deleted audit event.
func (m *MemoryStore) DeleteSystemDefaults(ctx context.Context) error {
	principal, err := m.principal(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]any, len(m.systemLimits))
	for i, l := range m.systemLimits {
		names[i] = l.Name
	}
	var ouv any
	if m.systemOU != "" {
		ouv = string(m.systemOU)
	}
	m.systemLimits, m.systemOU = nil, ""
	m.logAuditLocked(principal, AuditLimitsDeleted, auditEntitySystem, "", map[string]any{"limits": names, "on_unavailable": ouv})
	return nil
}

// ListEntitiesWithCustomLimits returns a page of the entities (sorted by id)
// with stored limits for resource, and the cursor of the next page ("" at
// the end). pageSize ≤ 0 returns them all.
func (m *MemoryStore) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	after := ""
	if cursor != "" {
		var err error
		if after, err = parseMemoryCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	var ids []string
	for k := range m.entityConfigs {
		if k.resource == resource && k.entityID > after {
			ids = append(ids, k.entityID)
		}
	}
	m.mu.Unlock()
	sort.Strings(ids)
	if ids == nil {
		ids = []string{}
	}
	if pageSize > 0 && len(ids) > pageSize {
		return ids[:pageSize], memoryCursor(ids[pageSize-1]), nil
	}
	return ids, "", nil
}

// ListResourcesWithEntityConfigs returns, sorted, the resources for which at
// least one entity has stored limits.
func (m *MemoryStore) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set := make(map[string]bool)
	for k := range m.entityConfigs {
		set[k.resource] = true
	}
	return sortedKeys(set), nil
}

// logAuditLocked records one audit event, dropping events past the
// retention or the per-entity bound. m.mu must be held.
func (m *MemoryStore) logAuditLocked(principal, action, entityID, resource string, details map[string]any) {
	now := m.opts.Now()
	if details == nil {
		details = map[string]any{}
	}
	id := ulid.MustNew(ulid.Timestamp(now), ulid.DefaultEntropy())
	events := append(m.audit[entityID], AuditEvent{
		EventID: id.String(), Timestamp: now.UTC().Truncate(1e9), Action: action, EntityID: entityID,
		Principal: principal, Resource: resource, Details: details,
	})
	drop := 0
	for drop < len(events) && (now.Sub(events[drop].Timestamp) > m.opts.AuditRetention ||
		(m.opts.MaxAuditEvents > 0 && len(events)-drop > m.opts.MaxAuditEvents)) {
		drop++
	}
	m.audit[entityID] = slices.Delete(events, 0, drop)
}

// AuditEvents returns up to limit audit events of entityID, newest first,
// older than startEventID when it is not empty, as
// [DynamoDBRepository.AuditEvents].
func (m *MemoryStore) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	if err := validateAuditEntityID(entityID); err != nil {
		return nil, err
	}
	if startEventID != "" {
		if _, err := ulid.ParseStrict(startEventID); err != nil {
			return nil, newValidationError(ErrValidation, "start_event_id", startEventID,
				"must be an audit event id (a 26-character ULID)")
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultAuditEventsLimit
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	events := m.audit[entityID]
	out := make([]AuditEvent, 0, min(limit, len(events)))
	for i := len(events) - 1; i >= 0 && len(out) < limit; i-- {
		if startEventID != "" && strings.Compare(events[i].EventID, startEventID) >= 0 {
			continue
		}
		out = append(out, events[i])
	}
	return out, nil
}

// principal returns the audit principal of an audited change (see
// principalFrom), or ctx's error when ctx is done: the check that every
// change makes before it takes the lock.
func (m *MemoryStore) principal(ctx context.Context) (string, error) {
	p, err := principalFrom(ctx, m.opts.Principal)
	if err != nil {
		return "", err
	}
	return p, ctx.Err()
}
