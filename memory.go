package limiter

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults of [MemoryOptions].
const (
	DefaultMemoryMaxAuditEvents  = 1000
	DefaultMemoryMaxEntityHints  = 10_000
	memorySweepSamplesPerCreate  = 4
	memoryBucketInlineStateCount = 4
)

// MemoryOptions configures [NewMemory]. NewMemory fills every field with its
// default before calling the option functions.
type MemoryOptions struct {
	// BucketTTLMultiplier sets how long idle buckets of non-entity config
	// live: time-to-fill × multiplier, as on DynamoDB. Default 7; zero or
	// less disables bucket TTL.
	BucketTTLMultiplier int64
	// Principal is recorded in audit events when the context carries none.
	Principal string
	// AuditRetention is how long audit events are kept. Default 90 days.
	AuditRetention time.Duration
	// MaxAuditEvents bounds the audit events kept per entity (the oldest
	// are dropped first). Default 1000.
	MaxAuditEvents int
	// MaxEntityHints bounds the entity cache (cascade and shard hints).
	// Default 10,000.
	MaxEntityHints int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// MemoryStore is a [Repository] that keeps everything in the process's
// memory: for unit tests of code that uses a [RateLimiter], and for
// single-process services where one process owns the limits. It has the
// semantics of the DynamoDB backend — integer millitokens, atomic
// multi-item (cascade) writes, the four-level config hierarchy, audit
// events — with these differences:
//
//   - There is no hidden wcu limit and so no write sharding: memory has no
//     per-partition write ceiling. Buckets always have one shard.
//   - Memory stays bounded: a bucket whose every limit has refilled to its
//     capacity is indistinguishable from a missing one (a missing bucket
//     starts full) and is dropped, together with its total-consumed
//     counters; expired buckets (TTL) are dropped too — until then they are
//     refused by the speculative path and refreshed by the slow path, as on
//     DynamoDB before its TTL deletion runs. Each bucket creation
//     samples a few buckets and drops the ones that qualify, as Redis
//     expires keys, so the number of buckets stays within a small factor
//     of the live ones. Audit events are kept for AuditRetention and at
//     most MaxAuditEvents per entity.
//   - There are no usage snapshots (no stream, no aggregator) and no
//     resource-capacity reports: [RateLimiter.UsageSnapshots] and
//     [RateLimiter.ResourceCapacity] return errors matching
//     [ErrUnsupported].
//
// It is safe for concurrent use; one mutex serialises all access, which
// makes every write atomic. The zero value is not usable; call
// [NewMemory].
type MemoryStore struct {
	opts MemoryOptions
	ents *EntityCache

	mu              sync.Mutex // guards everything below
	entities        map[string]Entity
	entityConfigs   map[entityConfigKey][]Limit
	resourceConfigs map[string][]Limit
	systemLimits    []Limit
	systemOU        OnUnavailable
	buckets         map[BucketKey]*memBucket
	audit           map[string][]AuditEvent // per audit entity id, oldest first
}

type entityConfigKey struct{ entityID, resource string }

// memBucket is one bucket item. states are sorted by limit name and carry
// the bucket's key fields and LastRefillMs = rf.
type memBucket struct {
	shardCount int
	rf         int64
	cascade    bool
	parentID   string
	ttl        int64 // epoch seconds; 0: none
	states     []BucketState
}

var (
	_ Repository = (*MemoryStore)(nil)
	_ AuditLog   = (*MemoryStore)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...func(*MemoryOptions)) *MemoryStore {
	o := MemoryOptions{
		BucketTTLMultiplier: DefaultBucketTTLMultiplier,
		AuditRetention:      DefaultAuditRetention,
		MaxAuditEvents:      DefaultMemoryMaxAuditEvents,
		MaxEntityHints:      DefaultMemoryMaxEntityHints,
	}
	for _, fn := range opts {
		fn(&o)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &MemoryStore{
		opts:            o,
		ents:            NewEntityCache(o.MaxEntityHints),
		entities:        make(map[string]Entity),
		entityConfigs:   make(map[entityConfigKey][]Limit),
		resourceConfigs: make(map[string][]Limit),
		buckets:         make(map[BucketKey]*memBucket),
		audit:           make(map[string][]AuditEvent),
	}
}

// BucketCount returns the number of bucket items held (after dropping the
// ones that have expired or refilled to capacity, when sweep is set).
func (m *MemoryStore) BucketCount(sweep bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sweep {
		now := m.opts.Now().UnixMilli()
		for k, b := range m.buckets {
			if b.idle(now) {
				delete(m.buckets, k)
			}
		}
	}
	return len(m.buckets)
}

// idle reports whether b has expired or is full on every limit at nowMs.
func (b *memBucket) idle(nowMs int64) bool {
	if b.expired(nowMs) {
		return true
	}
	for _, s := range b.states {
		if s.RefillPeriodMs <= 0 || s.RefillAmountMilli <= 0 {
			return false
		}
		tk, _ := refillBucket(s.TokensMilli, b.rf, nowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		if tk < s.CapacityMilli {
			return false
		}
	}
	return true
}

func (b *memBucket) expired(nowMs int64) bool { return b.ttl != 0 && b.ttl <= floorDiv(nowMs, 1000) }

func (b *memBucket) index(name string) int {
	for i := range b.states {
		if b.states[i].LimitName == name {
			return i
		}
	}
	return -1
}

// clone returns a deep copy of b.
func (b *memBucket) clone() *memBucket {
	c := *b
	c.states = slices.Clone(b.states)
	return &c
}

// setRefill moves rf, keeping every state's LastRefillMs equal to it.
func (b *memBucket) setRefill(rf int64) {
	b.rf = rf
	for i := range b.states {
		b.states[i].LastRefillMs = rf
	}
}

// addState inserts s keeping states sorted by name.
func (b *memBucket) addState(key BucketKey, s BucketState) {
	s.EntityID, s.Resource, s.ShardID, s.LastRefillMs = key.EntityID, key.Resource, key.Shard, b.rf
	i := sort.Search(len(b.states), func(i int) bool { return b.states[i].LimitName >= s.LimitName })
	b.states = slices.Insert(b.states, i, s)
}

// storedBucketBox holds a snapshot and, inline, the usual few states, so that
// a snapshot costs one allocation.
type storedBucketBox struct {
	b   StoredBucket
	arr [memoryBucketInlineStateCount]BucketState
}

// snapshot returns a fresh copy of b for the caller.
func (b *memBucket) snapshot(key BucketKey) *StoredBucket {
	box := &storedBucketBox{}
	box.b = StoredBucket{
		Key: key, ShardCount: b.shardCount, RefillMs: b.rf, Cascade: b.cascade, ParentID: b.parentID, TTL: b.ttl,
		States: append(box.arr[:0], b.states...),
	}
	return &box.b
}

func (m *MemoryStore) nowMs() int64 { return m.opts.Now().UnixMilli() }

// bucketLocked returns the bucket of key. An expired bucket is still
// returned until a sweep drops it, as DynamoDB keeps an item past its TTL
// until its background deletion: the speculative write refuses it, the
// read-then-write path refreshes it. m.mu must be held.
func (m *MemoryStore) bucketLocked(key BucketKey, _ int64) *memBucket {
	return m.buckets[key]
}

// sweepLocked samples a few buckets and drops the idle ones, except the
// ones just written. m.mu must be held.
func (m *MemoryStore) sweepLocked(nowMs int64, written []BucketWrite) {
	n := 0
	for k, b := range m.buckets {
		if b.idle(nowMs) && !slices.ContainsFunc(written, func(w BucketWrite) bool { return w.Key == k }) {
			delete(m.buckets, k)
		}
		if n++; n >= memorySweepSamplesPerCreate {
			return
		}
	}
}

// LoadBuckets implements [BucketStore].
func (m *MemoryStore) LoadBuckets(ctx context.Context, entityIDs []string, keys []BucketKey) (map[string]Entity, map[BucketKey]*StoredBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	now := m.nowMs()
	metas := make(map[string]Entity, len(entityIDs))
	buckets := make(map[BucketKey]*StoredBucket, len(keys))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range entityIDs {
		if e, ok := m.entities[id]; ok {
			metas[id] = cloneEntity(e)
		}
	}
	for _, k := range keys {
		if b := m.bucketLocked(k, now); b != nil {
			buckets[k] = b.snapshot(k)
		}
	}
	return metas, buckets, nil
}

// GetBucket implements [BucketStore].
func (m *MemoryStore) GetBucket(ctx context.Context, key BucketKey) (*StoredBucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := m.nowMs()
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.bucketLocked(key, now); b != nil {
		return b.snapshot(key), nil
	}
	return nil, nil
}

// SpeculativeConsume implements [BucketStore]. There is no wcu limit to
// take from.
func (m *MemoryStore) SpeculativeConsume(ctx context.Context, key BucketKey, consume Consume, nowMs int64) (SpeculativeResult, error) {
	res := SpeculativeResult{Key: key}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[key]
	if b == nil {
		res.Reason = RefusedBucketMissing
		return res, nil
	}
	if b.expired(nowMs) {
		res.Bucket, res.Reason = b.snapshot(key), RefusedExpired
		return res, nil
	}
	short := false
	for name, amount := range consume {
		i := b.index(name)
		if i < 0 {
			res.Bucket, res.Reason = b.snapshot(key), RefusedLimitMissing
			return res, nil
		}
		if amount > 0 && b.states[i].TokensMilli < satMul(amount, 1000) {
			short = true
		}
	}
	if short {
		res.Bucket, res.Reason = b.snapshot(key), RefusedLimitExhausted
		return res, nil
	}
	for name, amount := range consume {
		if amount == 0 {
			continue
		}
		s := &b.states[b.index(name)]
		milli := satMul(amount, 1000)
		s.TokensMilli -= milli
		s.TotalConsumedMilli += milli
	}
	res.Applied, res.Bucket = true, b.snapshot(key)
	return res, nil
}

// WriteBuckets implements [BucketStore]: every write is checked and applied
// on copies, and the copies replace the items only when all conditions
// held.
func (m *MemoryStore) WriteBuckets(ctx context.Context, writes []BucketWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	staged := make([]*memBucket, len(writes))
	created := false
	for i, w := range writes {
		for j := range i {
			if writes[j].Key == w.Key {
				return newValidationError(ErrValidation, "writes", fmt.Sprint(w.Key), "two writes to one bucket item")
			}
		}
		b, err := m.applyLocked(w)
		if err != nil {
			return err
		}
		staged[i] = b
		created = created || w.Kind == WriteCreate
	}
	for i, w := range writes {
		m.buckets[w.Key] = staged[i]
	}
	if created {
		m.sweepLocked(writes[0].NowMs, writes)
	}
	return nil
}

// applyLocked returns the item w would leave, or ErrConditionFailed. It
// does not change the store. m.mu must be held.
func (m *MemoryStore) applyLocked(w BucketWrite) (*memBucket, error) {
	fail := fmt.Errorf("write bucket %s/%s/%d: %w", w.Key.EntityID, w.Key.Resource, w.Key.Shard, ErrConditionFailed)
	now := w.NowMs
	if w.Kind == WriteAdjust || w.Kind == WriteRetry {
		now = m.nowMs()
	}
	cur := m.bucketLocked(w.Key, now)
	if w.Kind == WriteCreate {
		if cur != nil {
			return nil, fail
		}
		b := &memBucket{shardCount: max(w.ShardCount, 1), rf: w.NowMs, cascade: w.Cascade, parentID: w.ParentID}
		if w.TTL == TTLSet {
			b.ttl = ttlEpochSeconds(w.NowMs, w.TTLSeconds)
		}
		for _, s := range w.States {
			if s.LimitName != wcuLimitName && b.index(s.LimitName) < 0 {
				b.addState(w.Key, s)
			}
		}
		return b, nil
	}
	if cur == nil {
		return nil, fail
	}
	b := cur.clone()
	switch w.Kind {
	case WriteNormal:
		if b.rf != w.ExpectedRefillMs {
			return nil, fail
		}
		for _, l := range w.Limits {
			i := b.index(l.Name)
			if l.Initial != nil {
				if i >= 0 {
					return nil, fail
				}
				s := *l.Initial
				s.LimitName = l.Name
				s.TokensMilli = l.Initial.TokensMilli - l.ConsumedMilli
				s.TotalConsumedMilli = l.ConsumedMilli
				b.addState(w.Key, s)
				continue
			}
			if i < 0 {
				if l.Name == wcuLimitName {
					continue
				}
				return nil, fail
			}
			s := &b.states[i]
			if floor := l.ConsumedMilli - l.RefillMilli; floor > 0 && s.TokensMilli < floor {
				return nil, fail
			}
			s.TokensMilli += l.RefillMilli - l.ConsumedMilli
			s.TotalConsumedMilli += l.ConsumedMilli
		}
		b.setRefill(w.NowMs)
		switch w.TTL {
		case TTLSet:
			b.ttl = ttlEpochSeconds(w.NowMs, w.TTLSeconds)
		case TTLRemove:
			b.ttl = 0
		}
		if w.RefreshEntity {
			b.cascade, b.parentID = w.Cascade, w.ParentID
		}
	case WriteRetry:
		for _, l := range w.Limits {
			i := b.index(l.Name)
			if i < 0 {
				if l.Initial == nil {
					return nil, fail
				}
				s := *l.Initial
				s.LimitName = l.Name
				s.TokensMilli = l.Initial.TokensMilli - l.ConsumedMilli
				s.TotalConsumedMilli = l.ConsumedMilli
				b.addState(w.Key, s)
				continue
			}
			s := &b.states[i]
			if s.TokensMilli < l.ConsumedMilli {
				return nil, fail
			}
			s.TokensMilli -= l.ConsumedMilli
			s.TotalConsumedMilli += l.ConsumedMilli
		}
	default: // WriteAdjust
		for _, l := range w.Limits {
			// A limit removed from the item meanwhile has nothing to adjust.
			if i := b.index(l.Name); i >= 0 {
				b.states[i].TokensMilli -= l.ConsumedMilli
				b.states[i].TotalConsumedMilli += l.ConsumedMilli
			}
		}
	}
	return b, nil
}

// BumpShardCount implements [BucketStore]. The limiter never calls it on a
// memory store (there is no wcu limit to exhaust); it is implemented for
// the contract's sake.
func (m *MemoryStore) BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	if err := ctx.Err(); err != nil {
		return current, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[BucketKey{EntityID: entityID, Resource: resource}]
	if b == nil || b.shardCount != current {
		return current, nil
	}
	b.shardCount = current * 2
	m.ents.SetShards(entityID, resource, b.shardCount)
	return b.shardCount, nil
}

// SyncBucket implements [BucketStore].
func (m *MemoryStore) SyncBucket(ctx context.Context, entityID, resource string, limits []Limit, ttl TTLMode, ttlSeconds int64, stale []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(limits) == 0 {
		return nil
	}
	now := m.nowMs()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncBucketLocked(BucketKey{EntityID: entityID, Resource: resource}, limits, ttl, ttlSeconds, stale, now)
	return nil
}

func (m *MemoryStore) syncBucketLocked(key BucketKey, limits []Limit, ttl TTLMode, ttlSeconds int64, stale []string, now int64) {
	b := m.bucketLocked(key, now)
	if b == nil {
		return
	}
	for _, l := range limits {
		if i := b.index(l.Name); i >= 0 {
			s := &b.states[i]
			s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs = l.Capacity*1000, l.RefillAmount*1000, l.RefillPeriod.Milliseconds()
			continue
		}
		s := bucketStateFromLimit(key.EntityID, key.Resource, l, b.rf)
		s.TotalConsumedMilli = 0
		b.addState(key, s)
	}
	switch ttl {
	case TTLSet:
		b.ttl = ttlEpochSeconds(now, ttlSeconds)
	case TTLRemove:
		b.ttl = 0
	}
	for _, name := range stale {
		if i := b.index(name); i >= 0 {
			b.states = slices.Delete(b.states, i, i+1)
		}
	}
}

// ResolveLimits implements [BucketStore]: entity > entity _default_ >
// resource > system, the first level with any limits. The returned slice
// is shared: callers must not modify it.
func (m *MemoryStore) ResolveLimits(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.entityConfigs[entityConfigKey{entityID, resource}]; len(l) > 0 {
		return l, SourceEntity, nil
	}
	if resource != DefaultResource {
		if l := m.entityConfigs[entityConfigKey{entityID, DefaultResource}]; len(l) > 0 {
			return l, SourceEntityDefault, nil
		}
	}
	if l := m.resourceConfigs[resource]; len(l) > 0 {
		return l, SourceResource, nil
	}
	if len(m.systemLimits) > 0 {
		return m.systemLimits, SourceSystem, nil
	}
	return nil, "", nil
}

// ResolveOnUnavailable implements [BucketStore]. A memory store is never
// unavailable; the stored mode is returned for the contract's sake.
func (m *MemoryStore) ResolveOnUnavailable(context.Context) OnUnavailable {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.systemOU.Valid() {
		return m.systemOU
	}
	return OnUnavailableBlock
}

// BucketTTLMultiplier implements [BucketStore].
func (m *MemoryStore) BucketTTLMultiplier() int64 { return m.opts.BucketTTLMultiplier }

// EntityCache implements [BucketStore].
func (m *MemoryStore) EntityCache() *EntityCache { return m.ents }

// StoreName implements [BucketStore]: "memory".
func (m *MemoryStore) StoreName() string { return "memory" }

// Clock implements [BucketStore].
func (m *MemoryStore) Clock() func() time.Time { return m.opts.Now }

// cloneEntity returns e with its own Metadata map.
func cloneEntity(e Entity) Entity {
	if e.Metadata != nil {
		md := make(map[string]string, len(e.Metadata))
		for k, v := range e.Metadata {
			md[k] = v
		}
		e.Metadata = md
	}
	return e
}

// sortedKeys returns the keys of a string-keyed map, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// memoryCursor encodes a ListEntitiesWithCustomLimits position.
func memoryCursor(lastID string) string { return "mem:" + lastID }

func parseMemoryCursor(cursor string) (string, error) {
	id, ok := strings.CutPrefix(cursor, "mem:")
	if !ok {
		return "", newValidationError(ErrValidation, "cursor", cursor, "not a cursor returned by ListEntitiesWithCustomLimits")
	}
	return id, nil
}
