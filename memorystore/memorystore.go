// Package memorystore is a [store.Repository] that keeps everything in
// the process's memory: for unit tests of code that uses a
// limiter.RateLimiter, and for single-process services where one process
// owns the limits.
//
// It is built on the backend contract, package store, only (it does not
// import the limiter), and passes the same conformance suite (package
// storetest) as the DynamoDB backend: integer millitokens, atomic
// multi-item (cascade) writes, the four-level config hierarchy, audit
// events. The differences:
//
//   - There is no per-item write ceiling, so no write sharding: buckets
//     always have one shard.
//   - Buckets expire as on DynamoDB: the limiter gives buckets of default
//     (resource or system) config a TTL, and an expired bucket is refused
//     by the speculative path and refreshed by the read-then-write path
//     until it is dropped. Each bucket creation samples a few buckets and
//     drops the expired ones, as Redis expires keys, so the number of
//     buckets stays within a small factor of the live ones; [Store.Sweep]
//     drops them all. Buckets of entity-level config never expire, as on
//     DynamoDB, except the period buckets of calendar limits, which the
//     limiter gives a TTL too. Audit events are kept until they expire and at most
//     [Options.MaxAuditEvents] per entity.
//   - There are no usage snapshots (no stream, no aggregator) and no
//     resource-capacity reports: limiter.RateLimiter.UsageSnapshots and
//     limiter.RateLimiter.ResourceCapacity return errors matching
//     [store.ErrUnsupported].
package memorystore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// DefaultMaxAuditEvents is the default of [Options.MaxAuditEvents].
const DefaultMaxAuditEvents = 1000

const sweepSamplesPerCreate = 4

// Options configures [New]. New fills every field with its default before
// calling the option functions.
type Options struct {
	// MaxAuditEvents bounds the audit events kept per entity (the oldest
	// are dropped first). Default 1000; zero or less keeps them all until
	// they expire.
	MaxAuditEvents int
}

// Store is the in-memory repository. It is safe for concurrent use; one
// mutex serialises all access, which makes every write atomic. The zero
// value is not usable; call [New].
type Store struct {
	opts Options

	mu       sync.Mutex // guards everything below
	entities map[string]store.Entity
	configs  map[store.ConfigKey]store.Config
	buckets  map[store.BucketKey]*store.Bucket
	audit    map[string][]auditRecord // per audit entity id, oldest first
	topUps   map[topUpKey]topUpRecord // the ids of applied top-ups
	// topUpsSwept is the size of topUps after its last sweep of expired
	// ids: the next sweep runs when it has doubled.
	topUpsSwept int
}

type auditRecord struct {
	ev      store.AuditEvent
	expires int64 // epoch ms
}

var (
	_ store.Repository       = (*Store)(nil)
	_ store.SpeculativeStore = (*Store)(nil)
	_ store.BatchStore       = (*Store)(nil)
	_ store.AuditLog         = (*Store)(nil)
	_ store.ConfigLister     = (*Store)(nil)
	_ store.EntityLister     = (*Store)(nil)
	_ store.TopUpStore       = (*Store)(nil)
)

// New returns an empty in-memory store.
func New(optFns ...func(*Options)) *Store {
	o := Options{MaxAuditEvents: DefaultMaxAuditEvents}
	for _, fn := range optFns {
		fn(&o)
	}
	return &Store{
		opts:     o,
		entities: make(map[string]store.Entity),
		configs:  make(map[store.ConfigKey]store.Config),
		buckets:  make(map[store.BucketKey]*store.Bucket),
		audit:    make(map[string][]auditRecord),
		topUps:   make(map[topUpKey]topUpRecord),
	}
}

// Name implements [store.Repository]: "memory".
func (m *Store) Name() string { return "memory" }

// BucketCount returns the number of bucket items held.
func (m *Store) BucketCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

// Sweep drops every bucket item that has expired at nowMs (epoch
// milliseconds) and returns how many are left. Writes do this for a few
// sampled items; Sweep does it for all.
func (m *Store) Sweep(nowMs int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, b := range m.buckets {
		if b.Expired(nowMs) {
			delete(m.buckets, k)
		}
	}
	return len(m.buckets)
}

// sweepLocked samples a few buckets and drops the expired ones, except the
// ones just written. m.mu must be held.
func (m *Store) sweepLocked(nowMs int64, written []store.BucketWrite) {
	n := 0
	for k, b := range m.buckets {
		if b.Expired(nowMs) && !slices.ContainsFunc(written, func(w store.BucketWrite) bool { return w.Key == k }) {
			delete(m.buckets, k)
		}
		if n++; n >= sweepSamplesPerCreate {
			return
		}
	}
}

// bucketBox holds a bucket and, inline, the usual few states, so that a
// copy costs one allocation.
type bucketBox struct {
	b   store.Bucket
	arr [4]store.BucketState
}

// clone returns a deep copy of b for a caller or for staging a write.
func clone(b *store.Bucket) *store.Bucket {
	box := &bucketBox{b: *b}
	box.b.States = append(box.arr[:0], b.States...)
	return &box.b
}

func index(b *store.Bucket, name string) int {
	for i := range b.States {
		if b.States[i].LimitName == name {
			return i
		}
	}
	return -1
}

// setRefill moves the refill timestamp, keeping every state's LastRefillMs
// equal to it.
func setRefill(b *store.Bucket, rf int64) {
	b.RefillMs = rf
	for i := range b.States {
		b.States[i].LastRefillMs = rf
	}
}

// addState inserts s keeping the states sorted by name.
func addState(b *store.Bucket, s store.BucketState) {
	s.EntityID, s.Resource, s.ShardID, s.LastRefillMs = b.Key.EntityID, b.Key.Resource, b.Key.Shard, b.RefillMs
	i := sort.Search(len(b.States), func(i int) bool { return b.States[i].LimitName >= s.LimitName })
	b.States = slices.Insert(b.States, i, s)
}

// LoadBuckets implements [store.Repository].
func (m *Store) LoadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]store.Entity, map[store.BucketKey]*store.Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	metas := make(map[string]store.Entity, len(entityIDs))
	buckets := make(map[store.BucketKey]*store.Bucket, len(keys))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range entityIDs {
		if e, ok := m.entities[id]; ok {
			metas[id] = cloneEntity(e)
		}
	}
	for _, k := range keys {
		if b := m.buckets[k]; b != nil {
			buckets[k] = clone(b)
		}
	}
	return metas, buckets, nil
}

// GetBucket implements [store.Repository].
func (m *Store) GetBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buckets[key]; b != nil {
		return clone(b), nil
	}
	return nil, nil
}

// SpeculativeConsume implements [store.SpeculativeStore].
func (m *Store) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	res := store.SpeculativeResult{Key: req.Key}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if res.Reason = m.refusalLocked(req); res.Reason != store.RefusedNone {
		if b := m.buckets[req.Key]; b != nil {
			res.Bucket = clone(b)
		}
		return res, nil
	}
	res.Applied, res.Bucket = true, m.consumeLocked(req)
	return res, nil
}

// SpeculativeConsumeAll implements [store.BatchStore]: under the store's
// lock, every request is checked before any is applied.
func (m *Store) SpeculativeConsumeAll(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, r := range reqs {
		for j := range i {
			if reqs[j].Key == r.Key {
				return nil, &store.ValidationError{Field: "requests", Value: fmt.Sprint(r.Key), Reason: "two requests on one bucket item"}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.SpeculativeResult, len(reqs))
	refused := false
	for i, r := range reqs {
		out[i] = store.SpeculativeResult{Key: r.Key, Reason: m.refusalLocked(r)}
		refused = refused || out[i].Reason != store.RefusedNone
	}
	for i, r := range reqs {
		if refused {
			if b := m.buckets[r.Key]; b != nil {
				out[i].Bucket = clone(b)
			}
			continue
		}
		out[i].Applied, out[i].Bucket = true, m.consumeLocked(r)
	}
	return out, nil
}

// refusalLocked returns why req cannot be applied, or RefusedNone. m.mu
// must be held.
func (m *Store) refusalLocked(req store.SpeculativeRequest) store.RefusalReason {
	b := m.buckets[req.Key]
	if b == nil {
		return store.RefusedBucketMissing
	}
	if b.Expired(req.NowMs) {
		return store.RefusedExpired
	}
	for _, l := range req.Limits {
		i := index(b, l.Name)
		if i < 0 {
			return store.RefusedLimitMissing
		}
		if s := b.States[i]; s.CapacityMilli != store.MilliTokens(l.Capacity) || s.RefillAmountMilli != store.MilliTokens(l.RefillAmount) ||
			s.RefillPeriodMs != l.RefillPeriod.Milliseconds() {
			return store.RefusedLimitsChanged
		}
	}
	refill := store.RefillDue(b, req.Consume, req.NowMs)
	short := false
	for name, amount := range req.Consume {
		i := index(b, name)
		if i < 0 {
			return store.RefusedLimitMissing
		}
		if amount <= 0 {
			continue
		}
		s := b.States[i]
		tk := s.TokensMilli
		if refill && req.NowMs > b.RefillMs {
			tk, _ = bucketmath.Refill(tk, b.RefillMs, req.NowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		}
		if tk < store.MilliTokens(amount) {
			short = true
		}
	}
	if short {
		return store.RefusedLimitExhausted
	}
	return store.RefusedNone
}

// consumeLocked takes req.Consume from its item (refusalLocked found
// nothing against it) and returns a copy of the item. It takes from the
// stored balances while that is exact, else it refills the item to
// req.NowMs first (see store.RefillDue). m.mu must be held.
func (m *Store) consumeLocked(req store.SpeculativeRequest) *store.Bucket {
	b := m.buckets[req.Key]
	if store.RefillDue(b, req.Consume, req.NowMs) {
		b.RefillTo(req.NowMs)
	}
	for name, amount := range req.Consume {
		if amount == 0 {
			continue
		}
		s := &b.States[index(b, name)]
		s.TokensMilli = bucketmath.AddSat(s.TokensMilli, -store.MilliTokens(amount))
		s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, store.MilliTokens(amount))
	}
	return clone(b)
}

// WriteBuckets implements [store.Repository]: every write is checked and
// applied on copies, and the copies replace the items only when all
// conditions held.
func (m *Store) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	staged := make([]*store.Bucket, len(writes))
	created := false
	for i, w := range writes {
		for j := range i {
			if writes[j].Key == w.Key {
				return &store.ValidationError{Field: "writes", Value: fmt.Sprint(w.Key), Reason: "two writes to one bucket item"}
			}
		}
		b, err := m.applyLocked(w)
		if err != nil {
			return err
		}
		staged[i] = b
		created = created || w.Kind == store.WriteCreate
	}
	for i, w := range writes {
		m.buckets[w.Key] = staged[i]
	}
	if created {
		m.sweepLocked(writes[0].NowMs, writes)
	}
	return nil
}

// applyLocked returns the item w would leave, or an error matching
// ErrConditionFailed. It does not change the store. m.mu must be held.
func (m *Store) applyLocked(w store.BucketWrite) (*store.Bucket, error) {
	fail := fmt.Errorf("write bucket %s/%s/%d: %w", w.Key.EntityID, w.Key.Resource, w.Key.Shard, store.ErrConditionFailed)
	cur := m.buckets[w.Key]
	if w.Kind == store.WriteCreate {
		if cur != nil {
			return nil, fail
		}
		b := &store.Bucket{Key: w.Key, ShardCount: max(w.ShardCount, 1), RefillMs: w.NowMs, Cascade: w.Cascade, ParentID: w.ParentID, Incarnation: w.Incarnation}
		if w.TTL == store.TTLSet {
			b.TTL = ttlSeconds(w.NowMs, w.TTLSeconds)
		}
		for _, s := range w.States {
			if index(b, s.LimitName) < 0 {
				addState(b, s)
			}
		}
		return b, nil
	}
	if cur == nil {
		return nil, fail
	}
	switch w.Kind {
	case store.WriteNormal, store.WriteRetry, store.WriteAdjust:
		// Computed from, or settling a lease of, one life of the item.
		if cur.Incarnation != w.Incarnation {
			return nil, fail
		}
	}
	b := clone(cur)
	switch w.Kind {
	case store.WriteNormal:
		if b.RefillMs != w.ExpectedRefillMs {
			return nil, fail
		}
		for _, l := range w.Limits {
			i := index(b, l.Name)
			if l.Initial != nil {
				if i >= 0 {
					return nil, fail
				}
				addState(b, initial(l))
				continue
			}
			if i < 0 {
				return nil, fail
			}
			s := &b.States[i]
			if floor := l.ConsumedMilli - l.RefillMilli; floor > 0 && s.TokensMilli < floor {
				return nil, fail
			}
			s.TokensMilli = bucketmath.AddSat(s.TokensMilli, bucketmath.AddSat(l.RefillMilli, -l.ConsumedMilli))
			s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, l.ConsumedMilli)
			if p := l.Params; p != nil {
				s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs = p.CapacityMilli, p.RefillAmountMilli, p.RefillPeriodMs
			}
		}
		setRefill(b, w.NowMs)
		applyTTL(b, w)
		if w.RefreshEntity {
			b.Cascade, b.ParentID = w.Cascade, w.ParentID
		}
	case store.WriteRetry:
		// Taking from the stored balances is exact unless a limit taken
		// from may be full by now: then the item is refilled first.
		if store.ChargeRefillDue(b, w.Limits, w.NowMs) {
			b.RefillTo(w.NowMs)
		}
		for _, l := range w.Limits {
			i := index(b, l.Name)
			if i < 0 {
				if l.Initial == nil {
					return nil, fail
				}
				addState(b, initial(l))
				continue
			}
			s := &b.States[i]
			if s.TokensMilli < l.ConsumedMilli {
				return nil, fail
			}
			s.TokensMilli = bucketmath.AddSat(s.TokensMilli, -l.ConsumedMilli)
			s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, l.ConsumedMilli)
		}
	case store.WriteSync:
		for _, l := range w.Limits {
			if index(b, l.Name) >= 0 {
				continue // kept: the limiter applies new parameters on the next acquire
			}
			s := *l.Initial
			s.LimitName, s.TotalConsumedMilli = l.Name, 0
			addState(b, s)
		}
		applyTTL(b, w)
		for _, name := range w.Remove {
			if i := index(b, name); i >= 0 {
				b.States = slices.Delete(b.States, i, i+1)
			}
		}
	case store.WriteReset:
		for i := range b.States {
			b.States[i].TokensMilli = b.States[i].CapacityMilli
		}
		setRefill(b, w.NowMs)
	default: // WriteAdjust
		if store.ChargeRefillDue(b, w.Limits, w.NowMs) {
			b.RefillTo(w.NowMs)
		}
		for _, l := range w.Limits {
			// A limit removed from the item meanwhile has nothing to adjust.
			i := index(b, l.Name)
			if i < 0 {
				continue
			}
			s := &b.States[i]
			switch {
			case l.ConsumedMilli >= 0:
				s.TokensMilli = bucketmath.AddSat(s.TokensMilli, -l.ConsumedMilli)
			case s.TokensMilli < s.CapacityMilli:
				// A refund never lifts the balance above the capacity.
				s.TokensMilli = min(bucketmath.AddSat(s.TokensMilli, -l.ConsumedMilli), s.CapacityMilli)
			}
			s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, l.ConsumedMilli)
		}
		if b.TTL != 0 && w.TTLExtendSeconds > 0 {
			// A charge delays the time the item is full again: so does
			// its expiry.
			b.TTL = bucketmath.AddSat(b.TTL, w.TTLExtendSeconds)
		}
	}
	return b, nil
}

// initial is the state a write creates for a limit the item lacks.
func initial(l store.LimitWrite) store.BucketState {
	s := *l.Initial
	s.LimitName = l.Name
	s.TokensMilli = l.Initial.TokensMilli - l.ConsumedMilli
	s.TotalConsumedMilli = l.ConsumedMilli
	return s
}

func applyTTL(b *store.Bucket, w store.BucketWrite) {
	switch w.TTL {
	case store.TTLSet:
		b.TTL = ttlSeconds(w.NowMs, w.TTLSeconds)
	case store.TTLRemove:
		b.TTL = 0
	}
}

// ttlSeconds is nowMs in whole seconds (floored) plus seconds.
func ttlSeconds(nowMs, seconds int64) int64 {
	s := nowMs / 1000
	if nowMs%1000 < 0 {
		s--
	}
	return s + seconds
}

// cloneEntity returns e with its own Metadata map.
func cloneEntity(e store.Entity) store.Entity {
	if e.Metadata != nil {
		md := make(map[string]string, len(e.Metadata))
		for k, v := range e.Metadata {
			md[k] = v
		}
		e.Metadata = md
	}
	return e
}
