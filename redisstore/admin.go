package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter/store"
)

// This file holds the administrative half of the store: entities, stored
// limit configs, their listings and the audit log. All of it lives under
// the namespace's hash tag, one slot on a Cluster.

// decodeEntity converts an entity hash.
func decodeEntity(h map[string]string) store.Entity {
	e := store.Entity{ID: h["id"], Name: h["name"], ParentID: h["par"], Cascade: h["cas"] == "1"}
	if md := h["md"]; md != "" && md != "null" {
		_ = json.Unmarshal([]byte(md), &e.Metadata)
	}
	if t, err := time.Parse(time.RFC3339Nano, h["created"]); err == nil && h["created"] != "" {
		e.CreatedAt = t
	}
	return e
}

// CreateEntity implements [store.Repository]: one script creates the
// record and adds it to its parent's children.
func (s *Store) CreateEntity(ctx context.Context, e store.Entity) error {
	md, err := json.Marshal(e.Metadata)
	if err != nil {
		return fmt.Errorf("create entity %s: metadata: %w", e.ID, err)
	}
	created := ""
	if !e.CreatedAt.IsZero() {
		created = e.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	v, err := s.run(ctx, scriptCreateEntity, []string{s.keys.entity(e.ID), s.keys.children(e.ParentID)},
		e.ID, e.Name, e.ParentID, boolArg(e.Cascade), string(md), created)
	if err != nil {
		return err
	}
	if v == int64(0) {
		return &store.EntityExistsError{EntityID: e.ID}
	}
	return nil
}

// GetEntity implements [store.Repository].
func (s *Store) GetEntity(ctx context.Context, id string) (store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return store.Entity{}, err
	}
	h, err := s.client.HGetAll(ctx, s.keys.entity(id)).Result()
	if err != nil {
		return store.Entity{}, wrap("get entity", err)
	}
	if len(h) == 0 {
		return store.Entity{}, &store.EntityNotFoundError{EntityID: id}
	}
	return decodeEntity(h), nil
}

// Children implements [store.Repository]; the entities are sorted by id.
func (s *Store) Children(ctx context.Context, parentID string) ([]store.Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ids, err := s.client.SMembers(ctx, s.keys.children(parentID)).Result()
	if err != nil {
		return nil, wrap("children", err)
	}
	sort.Strings(ids)
	out := []store.Entity{}
	if len(ids) == 0 {
		return out, nil
	}
	pipe := s.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, s.keys.entity(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap("children", err)
	}
	for _, c := range cmds {
		if h := c.Val(); len(h) > 0 {
			out = append(out, decodeEntity(h))
		}
	}
	return out, nil
}

// DeleteEntity implements [store.Repository]: one script deletes the
// record and the stored configs, then one script per resource with
// buckets deletes the entity's bucket items. It is not atomic as a whole
// (neither is DynamoDB's).
func (s *Store) DeleteEntity(ctx context.Context, id string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	pipe := s.client.Pipeline()
	parent := pipe.HGet(ctx, s.keys.entity(id), "par")
	confRes := pipe.SMembers(ctx, s.keys.entityConfigs(id))
	bucketRes := pipe.SMembers(ctx, s.keys.bucketResources())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, wrap("delete entity", err)
	}
	keys := []string{s.keys.entity(id), s.keys.entityConfigs(id), s.keys.children(parent.Val()), s.keys.configResources()}
	args := []any{id}
	for _, r := range confRes.Val() {
		keys = append(keys, s.keys.config(store.EntityConfig(id, r)), s.keys.configEntities(r))
		args = append(args, r)
	}
	v, err := s.run(ctx, scriptDeleteAdmin, keys, args...)
	if err != nil {
		return 0, err
	}
	n, _ := v.(int64)
	for _, r := range bucketRes.Val() {
		k := s.keys.bucket(store.BucketKey{EntityID: id, Resource: r})
		v, err := s.run(ctx, scriptDeleteBucket, []string{k}, strings.TrimSuffix(k, "0"))
		if err != nil {
			return int(n), err
		}
		d, _ := v.(int64)
		n += d
	}
	return int(n), nil
}

// storedConfig is a config as stored (JSON). Refill periods are kept in
// nanoseconds, so that every limit reads back exactly as written.
type storedConfig struct {
	Limits        []storedLimit `json:"limits"`
	OnUnavailable string        `json:"on_unavailable,omitempty"`
	// Switches is store.EncodeLimitSwitches of the config's switches.
	Switches string `json:"switches,omitempty"`
}

type storedLimit struct {
	Name         string `json:"name"`
	Capacity     int64  `json:"capacity"`
	RefillAmount int64  `json:"refill_amount"`
	RefillPeriod int64  `json:"refill_period_ns"`
	// Calendar is a calendar limit's period (store.CalendarPeriod; 0 for a
	// rolling limit) and TimeZone its IANA zone ("" for UTC).
	Calendar int8   `json:"calendar,omitempty"`
	TimeZone string `json:"tz,omitempty"`
	// Prepaid marks a prepaid limit.
	Prepaid bool `json:"prepaid,omitempty"`
	// InFlight marks an in-flight limit.
	InFlight bool `json:"in_flight,omitempty"`
}

func encodeConfig(c store.Config) ([]byte, error) {
	sw, err := store.EncodeLimitSwitches(c.Switches)
	if err != nil {
		return nil, err
	}
	sc := storedConfig{Limits: make([]storedLimit, len(c.Limits)), OnUnavailable: string(c.OnUnavailable), Switches: sw}
	for i, l := range c.Limits {
		sc.Limits[i] = storedLimit{Name: l.Name, Capacity: l.Capacity, RefillAmount: l.RefillAmount, RefillPeriod: int64(l.RefillPeriod),
			Calendar: int8(l.Calendar), TimeZone: l.LocationName(), Prepaid: l.Prepaid, InFlight: l.InFlight}
	}
	return json.Marshal(sc)
}

func decodeConfig(raw string) (store.Config, error) {
	var sc storedConfig
	if err := json.Unmarshal([]byte(raw), &sc); err != nil {
		return store.Config{}, fmt.Errorf("%w: redis: malformed config: %w", store.ErrUnavailable, err)
	}
	c := store.Config{OnUnavailable: store.OnUnavailable(sc.OnUnavailable)}
	sw, err := store.DecodeLimitSwitches(sc.Switches)
	if err != nil {
		return store.Config{}, fmt.Errorf("%w: redis: config: %w", store.ErrUnavailable, err)
	}
	c.Switches = sw
	for _, l := range sc.Limits {
		loc, err := store.LoadCalendarLocation(l.TimeZone)
		if err != nil {
			return store.Config{}, fmt.Errorf("%w: redis: config limit %s: %w", store.ErrUnavailable, l.Name, err)
		}
		c.Limits = append(c.Limits, store.Limit{Name: l.Name, Capacity: l.Capacity, RefillAmount: l.RefillAmount, RefillPeriod: time.Duration(l.RefillPeriod),
			Calendar: store.CalendarPeriod(l.Calendar), Location: loc, Prepaid: l.Prepaid, InFlight: l.InFlight})
	}
	return c, nil
}

// LoadConfigs implements [store.Repository]: one MGET.
func (s *Store) LoadConfigs(ctx context.Context, keys []store.ConfigKey) (map[store.ConfigKey]store.Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[store.ConfigKey]store.Config, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	rk := make([]string, len(keys))
	for i, k := range keys {
		rk[i] = s.keys.config(k)
	}
	vals, err := s.client.MGet(ctx, rk...).Result()
	if err != nil {
		return nil, wrap("load configs", err)
	}
	for i, v := range vals {
		raw, ok := v.(string)
		if !ok {
			continue
		}
		c, err := decodeConfig(raw)
		if err != nil {
			return nil, err
		}
		out[keys[i]] = c
	}
	return out, nil
}

// GetConfig implements [store.Repository].
func (s *Store) GetConfig(ctx context.Context, key store.ConfigKey) (store.Config, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Config{}, false, err
	}
	raw, err := s.client.Get(ctx, s.keys.config(key)).Result()
	if errors.Is(err, redis.Nil) {
		return store.Config{}, false, nil
	}
	if err != nil {
		return store.Config{}, false, wrap("get config", err)
	}
	c, err := decodeConfig(raw)
	return c, err == nil, err
}

// configScript returns the keys and arguments (after the config) of the
// put and delete scripts for key.
func (s *Store) configScript(key store.ConfigKey) ([]string, []any) {
	keys := []string{s.keys.config(key)}
	level := "s"
	switch key.Level {
	case store.LevelEntity:
		level = "e"
		keys = append(keys, s.keys.configEntities(key.Resource), s.keys.configResources(), s.keys.entityConfigs(key.EntityID))
	case store.LevelResource:
		level = "r"
		keys = append(keys, s.keys.defaults())
	}
	return keys, []any{level, key.Resource, key.EntityID}
}

// PutConfig implements [store.Repository]: one script stores the config
// and its listing entries.
func (s *Store) PutConfig(ctx context.Context, key store.ConfigKey, c store.Config) error {
	raw, err := encodeConfig(c)
	if err != nil {
		return err
	}
	keys, args := s.configScript(key)
	_, err = s.run(ctx, scriptPutConfig, keys, append([]any{string(raw)}, args...)...)
	return err
}

// SetSystemConfig implements [store.SystemConfigWriter]: the config is
// read, and replaced by one script only if it still holds what was read,
// which must be prev (the whole config: a concurrent change of its limits
// or mode refuses the write too).
func (s *Store) SetSystemConfig(ctx context.Context, prev, next store.Config) (bool, error) {
	return s.swapConfig(ctx, store.SystemConfig(), func(cur store.Config, _ bool) (store.Config, bool, error) {
		same, err := sameConfig(cur, prev) // none stored reads as the zero config
		return next, same, err
	})
}

// SetConfigSwitches implements [store.ConfigSwitchWriter]: the config is
// read, and its records replaced by one script only if it still holds
// what was read, whose records must be prev.
func (s *Store) SetConfigSwitches(ctx context.Context, key store.ConfigKey, prev, next []store.LimitSwitch) (bool, error) {
	return s.swapConfig(ctx, key, func(cur store.Config, ok bool) (store.Config, bool, error) {
		if !ok {
			return cur, false, nil
		}
		same, err := sameConfig(store.Config{Switches: cur.Switches}, store.Config{Switches: prev})
		cur.Switches = next
		return cur, same, err
	})
}

// swapConfig reads the config under key (a system config, which has no
// index entries), asks next for its new value (ok false when none is
// stored; do false to write nothing), and stores that with one script
// conditioned on the stored value being the one read. It reports whether
// it wrote.
func (s *Store) swapConfig(ctx context.Context, key store.ConfigKey, next func(cur store.Config, ok bool) (store.Config, bool, error)) (bool, error) {
	if key.Level != store.LevelSystem {
		return false, fmt.Errorf("redis: swap config: not the system config: %+v", key)
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	k := s.keys.config(key)
	raw, err := s.client.Get(ctx, k).Result()
	ok := true
	if errors.Is(err, redis.Nil) {
		raw, ok = "", false
	} else if err != nil {
		return false, wrap("get config", err)
	}
	var cur store.Config
	if ok {
		if cur, err = decodeConfig(raw); err != nil {
			return false, err
		}
	}
	c, do, err := next(cur, ok)
	if err != nil || !do {
		return false, err
	}
	enc, err := encodeConfig(c)
	if err != nil {
		return false, err
	}
	v, err := s.run(ctx, scriptSwapConfig, []string{k}, string(enc), raw)
	return v == int64(1), err
}

// sameConfig reports whether a and b are stored alike.
func sameConfig(a, b store.Config) (bool, error) {
	ea, err := encodeConfig(a)
	if err != nil {
		return false, err
	}
	eb, err := encodeConfig(b)
	return err == nil && string(ea) == string(eb), err
}

// DeleteConfig implements [store.Repository].
func (s *Store) DeleteConfig(ctx context.Context, key store.ConfigKey) (bool, error) {
	keys, args := s.configScript(key)
	v, err := s.run(ctx, scriptDelConfig, keys, append([]any{""}, args...)...)
	return v == int64(1), err
}

// ListResourcesWithDefaults implements [store.ConfigLister].
func (s *Store) ListResourcesWithDefaults(ctx context.Context) ([]string, error) {
	return s.sortedMembers(ctx, s.keys.defaults())
}

// ListResourcesWithEntityConfigs implements [store.ConfigLister].
func (s *Store) ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error) {
	return s.sortedMembers(ctx, s.keys.configResources())
}

func (s *Store) sortedMembers(ctx context.Context, key string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m, err := s.client.SMembers(ctx, key).Result()
	if err != nil {
		return nil, wrap("list", err)
	}
	sort.Strings(m)
	return m, nil
}

// cursorPrefix marks the cursors of ListEntitiesWithCustomLimits.
const cursorPrefix = "redis:"

// ListEntitiesWithCustomLimits implements [store.ConfigLister]: the
// entities in id order, from a sorted set; pageSize ≤ 0 returns them all.
func (s *Store) ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error) {
	min := "-"
	if cursor != "" {
		after, ok := strings.CutPrefix(cursor, cursorPrefix)
		if !ok {
			return nil, "", &store.ValidationError{Field: "cursor", Value: cursor, Reason: "not a cursor returned by ListEntitiesWithCustomLimits"}
		}
		min = "(" + after
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	by := &redis.ZRangeBy{Min: min, Max: "+"}
	if pageSize > 0 {
		by.Count = int64(pageSize) + 1
	}
	ids, err := s.client.ZRangeByLex(ctx, s.keys.configEntities(resource), by).Result()
	if err != nil {
		return nil, "", wrap("list entities", err)
	}
	if pageSize > 0 && len(ids) > pageSize {
		return ids[:pageSize], cursorPrefix + ids[pageSize-1], nil
	}
	return ids, "", nil
}

// auditRecord is an audit event as stored (JSON).
type auditRecord struct {
	EventID   string         `json:"id"`
	Timestamp time.Time      `json:"ts"`
	Action    string         `json:"action"`
	EntityID  string         `json:"entity"`
	Principal string         `json:"principal,omitempty"`
	Resource  string         `json:"resource,omitempty"`
	Details   map[string]any `json:"details"`
}

// AppendAudit implements [store.AuditLog]: one script adds the event to
// the entity's log, drops the events expired at the event's time and sets
// the log's lifetime to the retention.
func (s *Store) AppendAudit(ctx context.Context, ev store.AuditEvent, expires time.Time) error {
	raw, err := json.Marshal(auditRecord{ev.EventID, ev.Timestamp, ev.Action, ev.EntityID, ev.Principal, ev.Resource, ev.Details})
	if err != nil {
		return fmt.Errorf("append audit event %s: %w", ev.EventID, err)
	}
	member := ev.EventID + "|" + itoa(expires.UnixMilli()) + "|" + string(raw)
	life := max(expires.Sub(ev.Timestamp).Milliseconds(), 1)
	_, err = s.run(ctx, scriptAudit, []string{s.keys.audit(ev.EntityID)}, member, itoa(ev.Timestamp.UnixMilli()), itoa(life))
	return err
}

// AuditEvents implements [store.AuditLog].
func (s *Store) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]store.AuditEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	by := &redis.ZRangeBy{Min: "-", Max: "+", Count: int64(limit)}
	if startEventID != "" {
		by.Max = "(" + startEventID
	}
	members, err := s.client.ZRevRangeByLex(ctx, s.keys.audit(entityID), by).Result()
	if err != nil {
		return nil, wrap("audit events", err)
	}
	out := make([]store.AuditEvent, 0, len(members))
	for _, m := range members {
		parts := strings.SplitN(m, "|", 3)
		if len(parts) != 3 {
			continue
		}
		var rec auditRecord
		dec := json.NewDecoder(bytes.NewReader([]byte(parts[2])))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%w: redis: malformed audit event: %w", store.ErrUnavailable, err)
		}
		ev := store.AuditEvent{EventID: rec.EventID, Timestamp: rec.Timestamp, Action: rec.Action, EntityID: rec.EntityID,
			Principal: rec.Principal, Resource: rec.Resource, Details: map[string]any{}}
		for k, v := range rec.Details {
			ev.Details[k] = numbers(v)
		}
		out = append(out, ev)
	}
	return out, nil
}

// numbers turns the JSON numbers of a details value into int64 (or float64
// when they have a fraction or exponent, or do not fit), as the DynamoDB
// backend reads them.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
