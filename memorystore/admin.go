package memorystore

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// This file holds the administrative half of the store: entities, stored
// limit configs, their listings and the audit log.

// CreateEntity implements [store.Repository].
func (m *Store) CreateEntity(ctx context.Context, e store.Entity) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entities[e.ID]; ok {
		return &store.EntityExistsError{EntityID: e.ID}
	}
	m.entities[e.ID] = cloneEntity(e)
	return nil
}

// GetEntity implements [store.Repository].
func (m *Store) GetEntity(ctx context.Context, id string) (store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return store.Entity{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entities[id]
	if !ok {
		return store.Entity{}, &store.EntityNotFoundError{EntityID: id}
	}
	return cloneEntity(e), nil
}

// Children implements [store.Repository]; the entities are sorted by id.
func (m *Store) Children(ctx context.Context, parentID string) ([]store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []store.Entity{}
	for _, e := range m.entities {
		if e.ParentID == parentID {
			out = append(out, cloneEntity(e))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteEntity implements [store.Repository].
func (m *Store) DeleteEntity(ctx context.Context, id string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	if _, ok := m.entities[id]; ok {
		delete(m.entities, id)
		n++
	}
	for k := range m.configs {
		if k.Level == store.LevelEntity && k.EntityID == id {
			delete(m.configs, k)
			n++
		}
	}
	for k := range m.buckets {
		if k.EntityID == id {
			delete(m.buckets, k)
			n++
		}
	}
	return n, nil
}

// LoadConfigs implements [store.Repository].
func (m *Store) LoadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[store.ConfigKey]store.Config, len(keys))
	for _, k := range keys {
		if c, ok := m.configs[k]; ok {
			out[k] = cloneConfig(c)
		}
	}
	return out, nil
}

// GetConfig implements [store.Repository].
func (m *Store) GetConfig(ctx context.Context, key store.ConfigKey) (store.Config, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Config{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.configs[key]
	return cloneConfig(c), ok, nil
}

// PutConfig implements [store.Repository].
func (m *Store) PutConfig(ctx context.Context, key store.ConfigKey, c store.Config) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.configs[key] = cloneConfig(c)
	return nil
}

// SetConfigSwitches implements [store.ConfigSwitchWriter].
func (m *Store) SetConfigSwitches(ctx context.Context, key store.ConfigKey, prev, next []store.LimitSwitch) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.configs[key]
	if !ok {
		return false, nil
	}
	have, err := store.EncodeLimitSwitches(c.Switches)
	if err != nil {
		return false, err
	}
	want, err := store.EncodeLimitSwitches(prev)
	if err != nil || have != want {
		return false, err
	}
	c.Switches = slices.Clone(next)
	m.configs[key] = c
	return true, nil
}

// SetSystemConfig implements [store.SystemConfigWriter]. The config is
// one value here: it is replaced only when all of it (limits, mode and
// records) is still prev.
func (m *Store) SetSystemConfig(ctx context.Context, prev, next store.Config) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := store.SystemConfig()
	cur := m.configs[key] // the zero config when none is stored
	have, err := store.EncodeLimitSwitches(cur.Switches)
	if err != nil {
		return false, err
	}
	want, err := store.EncodeLimitSwitches(prev.Switches)
	if err != nil || have != want || cur.OnUnavailable != prev.OnUnavailable || !sameLimits(cur.Limits, prev.Limits) {
		return false, err
	}
	m.configs[key] = cloneConfig(next)
	return true, nil
}

// sameLimits reports whether a and b define the same limits, in order
// (zones compared by name).
func sameLimits(a, b []store.Limit) bool {
	return slices.EqualFunc(a, b, func(x, y store.Limit) bool {
		zx, zy := x.LocationName(), y.LocationName()
		x.Location, y.Location = nil, nil
		return x == y && zx == zy
	})
}

// DeleteConfig implements [store.Repository].
func (m *Store) DeleteConfig(ctx context.Context, key store.ConfigKey) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.configs[key]
	delete(m.configs, key)
	return ok, nil
}

func cloneConfig(c store.Config) store.Config {
	c.Limits = slices.Clone(c.Limits)
	c.Switches = slices.Clone(c.Switches)
	return c
}

// ListResourcesWithDefaults implements [store.ConfigLister].
func (m *Store) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	return m.listResources(ctx, store.LevelResource)
}

// ListResourcesWithEntityConfigs implements [store.ConfigLister].
func (m *Store) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	return m.listResources(ctx, store.LevelEntity)
}

// listResources returns, sorted, the resources of the configs of level.
func (m *Store) listResources(ctx context.Context, level store.ConfigLevel) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set := make(map[string]bool)
	for k := range m.configs {
		if k.Level == level {
			set[k.Resource] = true
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out, nil
}

// cursorPrefix marks the cursors of ListEntitiesWithCustomLimits.
const cursorPrefix = "mem:"

// ListEntitiesWithCustomLimits implements [store.ConfigLister]: the
// entities in id order; pageSize ≤ 0 returns them all.
func (m *Store) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	after := ""
	if cursor != "" {
		id, ok := strings.CutPrefix(cursor, cursorPrefix)
		if !ok {
			return nil, "", &store.ValidationError{Field: "cursor", Value: cursor, Reason: "not a cursor returned by ListEntitiesWithCustomLimits"}
		}
		after = id
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	ids := []string{}
	for k := range m.configs {
		if k.Level == store.LevelEntity && k.Resource == resource && k.EntityID > after {
			ids = append(ids, k.EntityID)
		}
	}
	m.mu.Unlock()
	sort.Strings(ids)
	if pageSize > 0 && len(ids) > pageSize {
		return ids[:pageSize], cursorPrefix + ids[pageSize-1], nil
	}
	return ids, "", nil
}

// entitiesCursorPrefix marks the cursors of ListEntities.
const entitiesCursorPrefix = "mem-entities:"

// ListEntities implements [store.EntityLister]: the entities in id order;
// pageSize ≤ 0 returns them all.
func (m *Store) ListEntities(ctx context.Context, pageSize int, cursor string) ([]store.Entity, string, error) {
	after := ""
	if cursor != "" {
		id, ok := strings.CutPrefix(cursor, entitiesCursorPrefix)
		if !ok || id == "" {
			return nil, "", &store.ValidationError{Field: "cursor", Value: cursor, Reason: "not a cursor returned by ListEntities"}
		}
		after = id
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	ids := make([]string, 0, len(m.entities))
	for id := range m.entities {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	next := ""
	if pageSize > 0 && len(ids) > pageSize {
		ids, next = ids[:pageSize], entitiesCursorPrefix+ids[pageSize-1]
	}
	out := make([]store.Entity, len(ids))
	for i, id := range ids {
		out[i] = cloneEntity(m.entities[id])
	}
	m.mu.Unlock()
	return out, next, nil
}

// AppendAudit implements [store.AuditLog]. Events of the entity that
// expired by ev's time, and the oldest beyond [Options.MaxAuditEvents],
// are dropped.
func (m *Store) AppendAudit(ctx context.Context, ev store.AuditEvent, expires time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := ev.Timestamp.UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	events := append(m.audit[ev.EntityID], auditRecord{ev: ev, expires: expires.UnixMilli()})
	drop := 0
	for drop < len(events) && (events[drop].expires <= now ||
		(m.opts.MaxAuditEvents > 0 && len(events)-drop > m.opts.MaxAuditEvents)) {
		drop++
	}
	m.audit[ev.EntityID] = slices.Delete(events, 0, drop)
	return nil
}

// AuditEvents implements [store.AuditLog].
func (m *Store) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]store.AuditEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	events := m.audit[entityID]
	out := make([]store.AuditEvent, 0, min(limit, len(events)))
	for i := len(events) - 1; i >= 0 && len(out) < limit; i-- {
		if startEventID != "" && strings.Compare(events[i].ev.EventID, startEventID) >= 0 {
			continue
		}
		out = append(out, events[i].ev)
	}
	return out, nil
}
