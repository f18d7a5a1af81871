package store

import (
	"context"
	"errors"
	"time"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// Outcomes of a conditional write. A backend returns them (possibly wrapped)
// when nothing was written for that reason; the limiter then re-reads or
// retries.
var (
	// ErrConditionFailed reports that a write's condition did not hold
	// (the item exists or is missing, the refill lock moved, a balance
	// guard failed). Nothing was written.
	ErrConditionFailed = errors.New("limiter: condition check failed")
	// ErrTransactionConflict reports that a multi-item write collided with
	// another one. Nothing was written; the limiter retries after 25, 50
	// and 100 ms.
	ErrTransactionConflict = errors.New("limiter: transaction conflict")
)

// ConfigLevel is one level of the stored-limit hierarchy.
type ConfigLevel int

// Levels of [ConfigKey].
const (
	// LevelEntity: limits of one entity on one resource, or on
	// [DefaultResource] for all resources without their own.
	LevelEntity ConfigLevel = iota
	// LevelResource: the defaults of one resource.
	LevelResource
	// LevelSystem: the namespace-wide defaults and the on-unavailable mode.
	LevelSystem
)

// ConfigKey names one stored limit config.
type ConfigKey struct {
	Level ConfigLevel
	// EntityID is set for LevelEntity only.
	EntityID string
	// Resource is set for LevelEntity (a resource or [DefaultResource])
	// and LevelResource.
	Resource string
}

// EntityConfig returns the key of entityID's limits on resource.
func EntityConfig(entityID, resource string) ConfigKey {
	return ConfigKey{Level: LevelEntity, EntityID: entityID, Resource: resource}
}

// ResourceConfig returns the key of resource's default limits.
func ResourceConfig(resource string) ConfigKey {
	return ConfigKey{Level: LevelResource, Resource: resource}
}

// SystemConfig returns the key of the namespace-wide defaults.
func SystemConfig() ConfigKey { return ConfigKey{Level: LevelSystem} }

// Config is one stored limit config.
type Config struct {
	// Limits are the stored limits, in the order they were stored.
	Limits []Limit
	// OnUnavailable is the stored on-unavailable mode, at LevelSystem
	// only; "" when unset.
	OnUnavailable OnUnavailable
	// Switches record the limits of the defaults this config holds
	// (an entity's DefaultResource config, a resource's or the system's)
	// that changed kind, calendar period or zone, for the entities that
	// inherit them: see [LimitSwitch]. Stored with the config (the Python
	// original ignores them).
	Switches []LimitSwitch
}

// BucketKey identifies one bucket item: the (entity, resource) pair and the
// shard (0 unless the bucket is sharded).
type BucketKey struct {
	EntityID string
	Resource string
	Shard    int
}

// Bucket is one bucket item: every limit of one (entity, resource) shard,
// sharing one refill timestamp. A backend returns a fresh value on every
// read; the limiter does not modify it.
//
// A limit's balance at a time t is its stored balance refilled from the
// shared refill timestamp to t, capped at its capacity ([bucketmath.Refill]).
// The cap is applied when the refill is: a write that takes tokens from the
// stored balance and leaves the refill timestamp where it is is therefore
// exact only while the limit cannot have reached its capacity by the write's
// time (t < [bucketmath.FullAtMs]); once it may have, the tokens taken would
// be credited back by the capped refill, and the write must refill first
// (see [RefillDue] and [SpeculativeRequest]).
type Bucket struct {
	Key BucketKey
	// ShardCount is the (entity, resource)'s shard count, at least 1.
	ShardCount int
	// RefillMs is the refill timestamp shared by every limit of the item:
	// the optimistic lock of normal writes.
	RefillMs int64
	// Cascade and ParentID are copies of the entity's settings, kept on
	// the item so that the fast path needs no entity read.
	Cascade  bool
	ParentID string
	// TTL is when the item may be deleted, epoch seconds; 0 for never.
	TTL int64
	// Incarnation identifies this life of the item: the random non-zero
	// value its creating write ([WriteCreate]) gave it. An item deleted
	// (with its entity, or expired) and created again has another, so
	// that what a lease took from the earlier one never settles into it
	// (see [BucketWrite]). Zero for an item created without one (by the
	// Python original, or before items carried it).
	Incarnation int64
	// States holds one state per limit, sorted by limit name, each with
	// LastRefillMs = RefillMs and the item's EntityID, Resource and shard.
	States []BucketState

	// Private is state of the item that its backend keeps for itself (the
	// DynamoDB backend's write-capacity limit), nil on backends without
	// any. The limiter never reads it: it hands it back to the backend in
	// [BucketWrite.Base].
	Private any
}

// State returns the state of limit name.
func (b *Bucket) State(name string) (BucketState, bool) {
	if b == nil {
		return BucketState{}, false
	}
	for _, s := range b.States {
		if s.LimitName == name {
			return s, true
		}
	}
	return BucketState{}, false
}

// Expired reports whether the item's TTL has passed at nowMs.
func (b *Bucket) Expired(nowMs int64) bool {
	return b != nil && b.TTL != 0 && b.TTL <= bucketmath.FloorDiv(nowMs, 1000)
}

// WriteKind selects the shape of a [BucketWrite].
type WriteKind int

// Kinds of [BucketWrite].
const (
	// WriteCreate puts a whole new item, conditioned on its absence.
	WriteCreate WriteKind = iota
	// WriteNormal refills and consumes under the refill-timestamp lock.
	WriteNormal
	// WriteRetry consumes without refilling, guarded by the balances.
	WriteRetry
	// WriteAdjust adds deltas unconditionally (commits, rollbacks,
	// compensations).
	WriteAdjust
	// WriteSync updates the limit parameters of an existing item after a
	// limit change.
	WriteSync
	// WriteReset fills every limit of an existing item to its capacity
	// ([limiter.RateLimiter.Reset]).
	WriteReset
)

// TTLMode says what a write does to the item's TTL.
type TTLMode int

// TTL modes of [BucketWrite].
const (
	TTLUnchanged TTLMode = iota // leave the TTL as it is (create: none)
	TTLSet                      // set TTL = NowMs/1000 + TTLSeconds
	TTLRemove                   // remove the TTL (create: none)
)

// LimitWrite is one limit's part of a [BucketWrite].
type LimitWrite struct {
	Name string
	// ConsumedMilli is the amount taken: the balance goes down and the
	// total consumed goes up by it (a negative amount gives back).
	ConsumedMilli int64
	// RefillMilli is the refill credited by a WriteNormal.
	RefillMilli int64
	// Initial, when set, is the full state of a limit the item does not
	// hold yet: the write creates it from Initial (balance
	// Initial.TokensMilli − ConsumedMilli, total consumed ConsumedMilli)
	// instead of changing a missing balance.
	Initial *BucketState
	// Params, for WriteNormal, carries the limit's new capacity, refill
	// amount and refill period after a limit change; RefillMilli already
	// accounts for the new capacity (it may be negative: a balance above
	// a lowered capacity is cut down to it).
	Params *BucketState
	// CapacityMilli, for WriteAdjust, is the capacity the limiter expects
	// the limit to hold (0 when unknown): a hint for backends that cannot
	// cap a refund in place without knowing it. The stored capacity
	// decides.
	CapacityMilli int64
}

// BucketWrite is one write to one bucket item. Its meaning by Kind:
//
//   - WriteCreate: create the item from States, with RefillMs = NowMs,
//     ShardCount, Cascade, ParentID, Incarnation and the TTL. Fails with
//     [ErrConditionFailed] when the item exists.
//   - WriteNormal: requires the item, with RefillMs == ExpectedRefillMs.
//     Sets RefillMs = NowMs; per limit adds RefillMilli − ConsumedMilli to
//     the balance and ConsumedMilli to the total consumed, and requires the
//     balance to be at least ConsumedMilli − RefillMilli when that is
//     positive. A limit with Params set takes those parameters. A limit
//     with Initial set must be absent and is created from it. With
//     RefreshEntity, Cascade and ParentID replace the item's.
//   - WriteRetry: requires the item; per limit requires the balance to be
//     at least ConsumedMilli and takes it (a limit with Initial set that the
//     item lacks is created from it). It takes from the stored balances
//     without refilling, as a speculative write does, under the same rule:
//     when [RefillDue] holds for its amounts at NowMs, every limit of the
//     item is refilled to NowMs first (RefillMs = NowMs) and the balances
//     required are the refilled ones.
//   - WriteAdjust: requires the item; per limit takes ConsumedMilli with no
//     other condition: balances may go negative, but a refund (a negative
//     ConsumedMilli) never lifts a balance above the limit's capacity (the
//     balance becomes min(balance − ConsumedMilli, capacity), while the
//     total consumed still changes by ConsumedMilli). A limit the item
//     lacks is skipped.
//   - WriteSync: requires the item; adds each limit of Limits the item
//     lacks, from Initial (a limit it holds keeps its state and parameters:
//     the limiter applies a limit change on the next acquire, capping the
//     balance), and removes every limit named in Remove.
//   - WriteReset: requires the item; sets the balance of every limit to
//     its stored capacity and RefillMs = NowMs (so that a read-then-write
//     computed before the reset fails its lock and reads again). Limits
//     names the limits the limiter read from the item, for a backend that
//     must name them; a backend may reset every limit the item holds. The
//     totals consumed and the TTL are kept.
//
// WriteNormal, WriteRetry and WriteAdjust also require the item's
// [Bucket.Incarnation] to be Incarnation (zero: an item without one):
// they are computed from, or settle what a lease took from, one life of
// the item, and must not touch an item deleted and created again since.
//
// The TTL mode applies to WriteCreate, WriteNormal and WriteSync;
// TTLExtendSeconds to WriteAdjust. A failed
// condition writes nothing and returns an error matching
// [ErrConditionFailed].
type BucketWrite struct {
	Kind   WriteKind
	Key    BucketKey
	NowMs  int64
	Limits []LimitWrite

	// WriteCreate: the item's states after consumption, and its shard
	// count.
	States     []BucketState
	ShardCount int

	// WriteCreate and WriteNormal: the entity's settings. A normal write
	// replaces the item's only when RefreshEntity is set.
	Cascade       bool
	ParentID      string
	RefreshEntity bool

	// WriteNormal: the refill timestamp read before the write was computed.
	ExpectedRefillMs int64

	// Incarnation is, for WriteCreate, the new item's [Bucket.Incarnation]
	// (non-zero; the limiter draws it at random); for WriteNormal,
	// WriteRetry and WriteAdjust, the incarnation the item must have.
	Incarnation int64

	// WriteSync: limits to remove from the item.
	Remove []string

	TTL        TTLMode
	TTLSeconds int64
	// TTLExtendSeconds, for WriteAdjust, moves the item's TTL later by
	// this many seconds when it is positive: a charge delays the time the
	// balance is full again by its refill time, and the TTL must not fall
	// before that time (a deleted item is created full again, forgiving
	// the debt). An item without a TTL keeps none, except that a backend
	// that cannot test for one in place (DynamoDB) may give it a TTL at
	// least a century after NowMs. Adjustments summed into one write add
	// their extensions.
	TTLExtendSeconds int64

	// Base, for WriteNormal, is the item the write was computed from, as
	// the backend returned it: a backend refills its [Bucket.Private]
	// state from it.
	Base *Bucket
}

// RefusalReason says why a speculative write was refused.
type RefusalReason string

// Refusal reasons of [SpeculativeResult].
const (
	RefusedNone           RefusalReason = ""
	RefusedBucketMissing  RefusalReason = "bucket_missing"      // no such item
	RefusedLimitExhausted RefusalReason = "app_limit_exhausted" // a requested limit is short
	RefusedLimitMissing   RefusalReason = "limit_missing"       // a requested limit is not in the item
	RefusedExpired        RefusalReason = "bucket_expired"      // the item's TTL has passed
	RefusedLimitsChanged  RefusalReason = "limits_changed"      // a limit's stored parameters differ from the request's
	// RefusedWriteCapacity: the backend's own write capacity for the item
	// is spent (DynamoDB's per-partition write ceiling).
	RefusedWriteCapacity RefusalReason = "wcu_exhausted"
	// RefusedBothExhausted: a requested limit is short and the write
	// capacity is spent.
	RefusedBothExhausted RefusalReason = "both_exhausted"
	// RefusedRefillDue: a limit the request takes from may have refilled
	// to its capacity by NowMs (see [RefillDue]), so taking from the stored
	// balance would not be exact, and the backend could not refill in the
	// same step (it lacks what it needs to tell, or lost the item to
	// concurrent writes). The limiter takes the read-then-write path.
	RefusedRefillDue RefusalReason = "refill_due"
)

// SpeculativeResult is the outcome of one speculative write.
type SpeculativeResult struct {
	Key BucketKey
	// Applied reports that the write applied.
	Applied bool
	// Bucket is the item after the write when applied, before it when
	// refused; nil when the item does not exist.
	Bucket *Bucket
	// Reason says why the write was refused.
	Reason RefusalReason
	// CapacityRefills, for RefusedWriteCapacity and RefusedBothExhausted,
	// reports that the backend's write capacity refills by NowMs: the item
	// is not really over its write ceiling, and the read-then-write path
	// (which persists the refill) will do. When false the limiter spreads
	// the load over more shards (see [ShardStore]).
	CapacityRefills bool
}

// MilliTokens converts a number of tokens (a [Consume] amount, a limit's
// capacity or refill amount) to millitokens, the unit of [BucketState] and
// [LimitWrite], saturating at the int64 limits exactly as the limiter does:
// a backend that compares stored parameters with a [SpeculativeRequest]'s
// limits converts them with it.
func MilliTokens(tokens int64) int64 { return bucketmath.SatMul(tokens, 1000) }

// SpeculativeRequest is one speculative write: take Consume from the item
// Key without reading it first.
//
// The write must leave the item as a read, refill and write at NowMs
// would leave it (the balances refilled, capped and taken from), so that
// no token is admitted twice. Taking from the stored balances and leaving
// the refill timestamp alone is that, as long as no limit taken from can
// have reached its capacity by NowMs. When one may have ([RefillDue]),
// the backend either refills every limit of the item to NowMs (setting the
// refill timestamp to NowMs) and takes from the refilled balances in the
// same atomic step, or refuses with [RefusedRefillDue]. A backend whose
// step is atomic per item refills; the DynamoDB one, whose conditional
// write cannot compute a refill, keeps per limit the time from which it may
// be full and writes the refilled state in a second conditional write
// computed from the item the refused one returned.
type SpeculativeRequest struct {
	Key BucketKey
	// Consume is taken (tokens). Every named limit must be in the item,
	// and every positive amount must fit in its stored balance (the
	// refilled one when the write refills, see above); zero and negative
	// amounts do not gate.
	Consume Consume
	// Limits are the parameters the limiter resolved for the item. Each
	// must be stored with exactly this capacity, refill amount and refill
	// period, else the write is refused with [RefusedLimitsChanged] (or
	// [RefusedLimitMissing] for a limit the item lacks): the limiter then
	// takes the read-then-write path, which stores the new parameters.
	Limits []Limit
	// NowMs is the limiter's time: the item must not be expired at it.
	NowMs int64
}

// SpeculativeStore is an optional capability: a backend that can take
// tokens from a bucket item without a prior read. Without it the limiter
// always reads the item, refills and consumes locally, and writes under the
// refill-timestamp lock (two round trips).
type SpeculativeStore interface {
	// SpeculativeConsume takes req.Consume from req.Key in one atomic
	// conditional step, under the conditions of [SpeculativeRequest]:
	// without refilling while that is exact, else refilling first (or
	// refusing with [RefusedRefillDue]). A refusal is reported in the
	// result (Applied false, the item as it was, the reason), never as an
	// error.
	SpeculativeConsume(ctx context.Context, req SpeculativeRequest) (SpeculativeResult, error)
}

// AdjustFolder is an optional capability of a [SpeculativeStore]: writing
// a pending adjustment of a bucket item (a lease's commit queued by
// background commit) in the same atomic step as the next speculative
// consume of that item. Without it the limiter writes the adjustment, then
// the consume, each on its own.
type AdjustFolder interface {
	// SpeculativeConsumeAdjust applies adj (a single-item [WriteAdjust] of
	// req.Key), then req, as [Repository.WriteBuckets] of adj followed by
	// [SpeculativeStore.SpeculativeConsume] of req would, in one step: a
	// charge taken after any refill it needs, a refund capped at the
	// capacity, then req under its conditions. When req does not fit once
	// adj is applied, nothing is written and the outcome is
	// [FoldNotApplied] (the result says nothing); the caller then writes
	// adj and req on their own; likewise when the item's incarnation is
	// not adj.Incarnation. [FoldUnknown] reports a write that failed
	// without an answer: adj may have applied, and the error says why.
	SpeculativeConsumeAdjust(ctx context.Context, req SpeculativeRequest, adj BucketWrite) (SpeculativeResult, FoldOutcome, error)
}

// FoldOutcome says what became of an adjustment given to
// [AdjustFolder.SpeculativeConsumeAdjust].
type FoldOutcome int

const (
	// FoldApplied: the adjustment and the consume were written together
	// (the result says whether the consume applied).
	FoldApplied FoldOutcome = iota
	// FoldNotApplied: nothing of the adjustment was written.
	FoldNotApplied
	// FoldUnknown: the write failed without an answer; it may have applied.
	FoldUnknown
)

// SerialItemWriter is an optional capability that describes a backend
// rather than adding an operation: its writes to one bucket item are
// applied one after the other, each at a cost of its own (a write unit of
// the item's partition on DynamoDB). Group commit then keeps one write of
// an item in flight at a time, so that each carries the largest batch;
// without it, it lets two go at once.
type SerialItemWriter interface {
	// SerialItemWrites marks the capability; it does nothing.
	SerialItemWrites()
}

// BatchStore is an optional capability: speculative consumption from
// several bucket items in one atomic step. [limiter.RateLimiter.AcquireAll] tries
// it first; without it, or when it refuses a request that a refill would
// satisfy, AcquireAll reads every item and writes them all with one
// [Repository.WriteBuckets] call, which is atomic on every backend (one
// read and one write instead of one round trip).
type BatchStore interface {
	// SpeculativeConsumeAll applies every request of reqs (their keys are
	// distinct) or none, each under the conditions of
	// [SpeculativeStore.SpeculativeConsume], and returns one result per
	// request, in order. When all apply, each result is Applied and holds
	// its item after the write. When one is refused nothing is written:
	// every result holds its item as it was, the refused ones with their
	// reason and the others with [RefusedNone]. A refusal is never an
	// error.
	SpeculativeConsumeAll(ctx context.Context, reqs []SpeculativeRequest) ([]SpeculativeResult, error)
}

// ShardStore is an optional capability of a backend with a per-item write
// ceiling: it spreads one (entity, resource) over several bucket items.
// Without it the limiter never shards.
type ShardStore interface {
	// BumpShardCount doubles the shard count of (entityID, resource) from
	// current, unless it changed meanwhile, and returns the count in force.
	BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error)
}

// AuditLog is an optional capability: a durable log of entity and limit
// changes. Without it the limiter records nothing and
// [limiter.RateLimiter.AuditEvents] fails with an error matching [ErrUnsupported].
type AuditLog interface {
	// AppendAudit stores ev (its EventID, a ULID, already set) until
	// expires.
	AppendAudit(ctx context.Context, ev AuditEvent, expires time.Time) error
	// AuditEvents returns up to limit events of entityID (an entity ID, or
	// [AuditEntitySystem] or an [AuditEntityResource] id), newest first,
	// older than startEventID when it is not empty.
	AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error)
}

// ConfigSwitchWriter is an optional capability: writing the switch
// records of a stored config alone, leaving the rest of its item as it is
// (attributes another client keeps there included). Without it the
// limiter reads the config and writes it whole with PutConfig.
type ConfigSwitchWriter interface {
	// SetConfigSwitches replaces the switch records of the config stored
	// under key with next when its records are prev (none stored when
	// prev is empty), in one conditional write. It reports false, and
	// writes nothing, when the config is missing or its records are not
	// prev.
	SetConfigSwitches(ctx context.Context, key ConfigKey, prev, next []LimitSwitch) (bool, error)
}

// SystemConfigWriter is an optional capability: writing the system
// config's limits, on-unavailable mode and switch records in one write
// conditioned on the records read, leaving the rest of its item as it is
// (attributes another client keeps there included). Without it the
// limiter reads the config and writes it whole with PutConfig.
type SystemConfigWriter interface {
	// SetSystemConfig replaces the system config read as prev (the zero
	// Config when none was stored) with next when the stored switch
	// records are still prev's (none stored when prev has none): the
	// limits of prev that next lacks are removed, and so are the mode and
	// the records when next has none. It reports false, and writes
	// nothing, when the records are not prev's; a backend that writes the
	// config as one value also reports false when any of it is not prev.
	SetSystemConfig(ctx context.Context, prev, next Config) (bool, error)
}

// ConfigLister is an optional capability: listings of the stored configs.
// Without it the listing methods of [limiter.RateLimiter] fail with an error
// matching [ErrUnsupported].
type ConfigLister interface {
	// ListResourcesWithDefaults returns, sorted, the resources with
	// default limits.
	ListResourcesWithDefaults(ctx context.Context) ([]string, error)
	// ListResourcesWithEntityConfigs returns, sorted, the resources some
	// entity has limits for.
	ListResourcesWithEntityConfigs(ctx context.Context) ([]string, error)
	// ListEntitiesWithCustomLimits returns a page of the entities with
	// limits for resource, and the cursor of the next page ("" after the
	// last). pageSize ≤ 0 lets the backend choose. A cursor the backend
	// did not issue fails with a *[ValidationError].
	ListEntitiesWithCustomLimits(ctx context.Context, resource string, pageSize int, cursor string) ([]string, string, error)
}

// EntityLister is an optional capability: listing every entity of the
// namespace, a page at a time. Without it
// [limiter.RateLimiter.ListEntities] fails with an error matching
// [ErrUnsupported].
type EntityLister interface {
	// ListEntities returns a page of the namespace's entities in ID order
	// and the cursor of the next page ("" after the last). pageSize ≤ 0
	// lets the backend choose. A page may hold fewer than pageSize
	// entities, even none, while a cursor follows (a backend that reads
	// pageSize index entries and keeps the entities among them). A cursor
	// the backend did not issue fails with a *[ValidationError].
	ListEntities(ctx context.Context, pageSize int, cursor string) ([]Entity, string, error)
}

// UsageStore is an optional capability: reading the usage snapshots the
// aggregator writes from the table's stream. Without it
// [limiter.RateLimiter.UsageSnapshots] and [limiter.RateLimiter.UsageSummary] fail with an
// error matching [ErrUnsupported].
type UsageStore interface {
	// UsageSnapshots returns one page of the snapshots q selects, newest
	// first, and the cursor of the next page ("" after the last). q is
	// validated.
	UsageSnapshots(ctx context.Context, q UsageQuery) ([]UsageSnapshot, string, error)
	// UsageSummary aggregates the snapshots q selects. q is validated.
	UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error)
}

// CapacityReader is an optional capability: how much of one limit of a
// resource is in use across entities. Without it
// [limiter.RateLimiter.ResourceCapacity] fails with an error matching
// [ErrUnsupported].
type CapacityReader interface {
	// ResourceCapacity aggregates limit limitName of resource over every
	// entity with a bucket for it (only root entities when parentsOnly),
	// with balances refilled to now.
	ResourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool, now time.Time) (ResourceCapacity, error)
}

// NamespaceRegistry is an optional capability: managing the namespaces of a
// table (register, list, soft-delete, recover, purge). The limiter itself
// does not use it; [*limiter.DynamoDBRepository] implements it for operators and
// the CLI.
//
// Deleting a namespace does not affect repositories already bound to it
// (they keep reading and writing its data); it only stops the name from
// resolving, so new repositories cannot open it.
type NamespaceRegistry interface {
	// RegisterNamespace registers name and returns its id; an already
	// registered name returns its existing id.
	RegisterNamespace(ctx context.Context, name string) (string, error)
	// RegisterNamespaces registers every name, concurrently, and returns
	// the id of each.
	RegisterNamespaces(ctx context.Context, names ...string) (map[string]string, error)
	// GetNamespace returns an active namespace by name.
	GetNamespace(ctx context.Context, name string) (NamespaceInfo, error)
	// ListNamespaces returns every active namespace, sorted by name.
	ListNamespaces(ctx context.Context) ([]NamespaceInfo, error)
	// DeleteNamespace soft-deletes a namespace, keeping its data.
	DeleteNamespace(ctx context.Context, name string) error
	// RecoverNamespace makes a deleted namespace active again and returns
	// its name.
	RecoverNamespace(ctx context.Context, id string) (string, error)
	// ListOrphanNamespaces returns the deleted and purging namespaces.
	ListOrphanNamespaces(ctx context.Context) ([]NamespaceInfo, error)
	// PurgeNamespace deletes every item of a deleted namespace and its
	// registry record.
	PurgeNamespace(ctx context.Context, id string) error
}

// Repository is the storage behind a [limiter.RateLimiter]: entities, stored
// limit configs and bucket items, in one namespace.
// [*limiter.DynamoDBRepository] implements it, package memorystore keeps
// everything in memory and package redisstore keeps it in Redis; a backend
// of your own implements these methods (and any of the optional interfaces
// of this package) and checks itself with package storetest.
//
// Every method must be safe for concurrent use and honour ctx. Every write
// must be atomic: it applies whole or not at all. Inputs arrive validated;
// a backend need not check them again. Errors other than the documented
// ones are infrastructure failures: the limiter applies its on-unavailable
// mode to them (an error whose chain holds [ErrUnavailable] is reported as
// such; any other is wrapped).
type Repository interface {
	// Name names the backing store (the table, "memory", ...) for error
	// messages.
	Name() string

	// CreateEntity stores e (its Name, Metadata and CreatedAt already
	// set) unless an entity with its ID exists, in which case it fails
	// with an error matching [ErrEntityExists].
	CreateEntity(ctx context.Context, e Entity) error
	// GetEntity returns the entity, or an error matching
	// [ErrEntityNotFound].
	GetEntity(ctx context.Context, id string) (Entity, error)
	// DeleteEntity deletes the entity, its stored limit configs and every
	// bucket item of it (all resources and shards), and returns how many
	// records it deleted; deleting a missing entity deletes nothing and
	// returns 0. Audit events, children and the records of applied
	// top-ups ([TopUpStore]) are kept.
	DeleteEntity(ctx context.Context, id string) (int, error)
	// Children returns the entities whose parent is parentID.
	Children(ctx context.Context, parentID string) ([]Entity, error)

	// LoadConfigs reads the configs keys name, in one round trip where the
	// backend can; keys without a stored config are absent from the map.
	// It is the config cache's loader.
	LoadConfigs(ctx context.Context, keys []ConfigKey) (map[ConfigKey]Config, error)
	// GetConfig reads one config; ok is false when none is stored.
	GetConfig(ctx context.Context, key ConfigKey) (c Config, ok bool, err error)
	// PutConfig stores c under key, replacing what was stored.
	PutConfig(ctx context.Context, key ConfigKey, c Config) error
	// DeleteConfig deletes the config under key. It reports false when it
	// knows that none was stored (a backend that cannot tell reports
	// true).
	DeleteConfig(ctx context.Context, key ConfigKey) (bool, error)

	// LoadBuckets reads the entities entityIDs and the bucket items keys,
	// as one snapshot where the backend can. Missing ones are absent from
	// the maps. Expired items are returned until the backend deletes them.
	LoadBuckets(ctx context.Context, entityIDs []string, keys []BucketKey) (map[string]Entity, map[BucketKey]*Bucket, error)
	// GetBucket reads one bucket item; nil, and no error, when it is
	// missing.
	GetBucket(ctx context.Context, key BucketKey) (*Bucket, error)
	// WriteBuckets applies writes atomically, all or none (see
	// [BucketWrite] for each kind). At most one write names each item. A
	// failed condition fails with an error matching [ErrConditionFailed];
	// a multi-item write that collides with another may fail with
	// [ErrTransactionConflict].
	WriteBuckets(ctx context.Context, writes []BucketWrite) error
}

// Wrapper is a handle on a store that is not the store's implementation
// (the limiter's DynamoDBRepository is one): Unwrap returns the store,
// where type assertions look for the optional capabilities
// ([SpeculativeStore], [AuditLog] and the others).
type Wrapper interface {
	Repository
	Unwrap() Repository
}

// Unwrap returns the store behind r's wrappers, or r itself.
func Unwrap(r Repository) Repository {
	for {
		w, ok := r.(Wrapper)
		if !ok {
			return r
		}
		r = w.Unwrap()
	}
}
