package store

import (
	"fmt"
	"math"
	"time"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// DefaultResource is the resource name under which an entity's
// resource-independent limits are stored.
const DefaultResource = "_default_"

// AllResources is the resource "*", whose bucket is entity-wide: limits
// stored for (entity, AllResources), or as the resource defaults of
// AllResources, form one bucket per entity that every acquire of the
// entity charges, whatever its resource, beside the bucket of (entity,
// resource). It is a valid resource name wherever one is taken, except as
// the resource an acquire charges: an acquire names its resource (a
// model), and the entity-wide bucket is charged with it.
const AllResources = "*"

// reservedLimitName is the name of the DynamoDB backend's hidden
// write-capacity limit, which no configured limit may take.
const reservedLimitName = "wcu"

// Limit is one token-bucket rule: a bucket of Capacity tokens that regains
// RefillAmount tokens every RefillPeriod. Limit is a small immutable value.
//
// A calendar limit (Calendar set) instead makes its whole Capacity
// available again at the start of each calendar day, week or month in
// Location, with no refill in between; its RefillAmount and RefillPeriod
// are zero. The limiter keeps each period in its own bucket (see
// [Limit.CalendarBucket]).
//
// Construct limits with [limiter.PerSecond], [limiter.PerMinute], [limiter.PerHour], [limiter.PerDay] (and
// [Limit.WithBurst]) or a literal; calendar limits with
// [limiter.PerCalendarDay], [limiter.PerCalendarWeek] and
// [limiter.PerCalendarMonth] (and [Limit.InLocation]); prepaid balances
// with [limiter.Prepaid]. A Limit is validated wherever it is used
// (Acquire, SetLimits, ...) and [Limit.Validate] reports why one is invalid.
type Limit struct {
	// Name identifies the limit within a bucket, e.g. "rpm" or "tpm".
	Name string
	// Capacity is the bucket ceiling in whole tokens (the burst size).
	Capacity int64
	// RefillAmount is the number of tokens regained every RefillPeriod.
	RefillAmount int64
	// RefillPeriod is the refill interval. It must be a positive whole
	// number of seconds.
	RefillPeriod time.Duration
	// Calendar, when not [CalendarNone], makes this a calendar limit:
	// RefillAmount and RefillPeriod must be zero.
	Calendar CalendarPeriod
	// Location is the time zone of a calendar limit's periods; nil is UTC.
	// A rolling limit has none.
	Location *time.Location
	// Prepaid makes this a prepaid balance: Capacity is the largest
	// balance, RefillAmount and RefillPeriod are zero, and the balance
	// grows only by top-ups (see [TopUpStore]).
	Prepaid bool
	// InFlight makes this a limit of calls in flight: Capacity is the
	// number of slots held at once, RefillAmount and RefillPeriod are zero
	// (see [Limit.InFlightSlotLimit]).
	InFlight bool
}

// WithBurst returns a copy of l whose capacity is burst. Burst may be smaller
// than the refill amount.
func (l Limit) WithBurst(burst int64) Limit {
	l.Capacity = burst
	return l
}

// RefillPeriodSeconds returns the refill period in whole seconds, the unit in
// which stored limit configs keep it.
func (l Limit) RefillPeriodSeconds() int64 { return int64(l.RefillPeriod / time.Second) }

// RefillRate returns the refill rate in tokens per second (for display);
// zero for a calendar or prepaid limit.
func (l Limit) RefillRate() float64 {
	if l.OwnBucket() {
		return 0
	}
	return float64(l.RefillAmount) / l.RefillPeriod.Seconds()
}

// Validate reports whether l is usable: a valid name, positive capacity and
// refill amount, and a positive whole-second refill period. A calendar
// limit needs a valid name, a positive capacity, a defined period, zero
// refill amount and period, and a location other than time.Local (nil is
// UTC); a rolling limit has no location. The error is a
// *[ValidationError] matching [ErrInvalidName] or [ErrValidation].
func (l Limit) Validate() error {
	if err := ValidateLimitName(l.Name, "name"); err != nil {
		return err
	}
	if l.InFlight {
		return l.validateInFlight()
	}
	if l.Prepaid {
		return l.validatePrepaid()
	}
	if l.Calendar != CalendarNone {
		return l.validateCalendar()
	}
	switch {
	case l.Location != nil:
		return NewValidationError(ErrValidation, "location", l.Location.String(), "only a calendar limit has a location")
	case l.Capacity <= 0:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must be positive")
	case l.RefillAmount <= 0:
		return NewValidationError(ErrValidation, "refill_amount", fmt.Sprint(l.RefillAmount), "refill_amount must be positive")
	case l.RefillPeriod <= 0:
		return NewValidationError(ErrValidation, "refill_period", l.RefillPeriod.String(), "refill_period_seconds must be positive")
	case l.RefillPeriod%time.Second != 0:
		return NewValidationError(ErrValidation, "refill_period", l.RefillPeriod.String(), "refill period must be a whole number of seconds")
	case l.Capacity > math.MaxInt64/1000 || l.RefillAmount > math.MaxInt64/1000:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity and refill_amount must fit in int64 millitokens")
	}
	return nil
}

// validateCalendar is Validate of a calendar limit, its name checked.
func (l Limit) validateCalendar() error {
	switch {
	case !l.Calendar.valid():
		return NewValidationError(ErrValidation, "calendar", l.Calendar.String(), "must be day, week or month")
	case l.Capacity <= 0:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must be positive")
	case l.Capacity > math.MaxInt64/1000:
		return NewValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must fit in int64 millitokens")
	case l.RefillAmount != 0 || l.RefillPeriod != 0:
		return NewValidationError(ErrValidation, "refill_amount", fmt.Sprintf("%d per %v", l.RefillAmount, l.RefillPeriod),
			fmt.Sprintf("calendar limit %q resets each %s and has no refill: refill amount and period must be zero", l.Name, l.Calendar))
	case l.Location == time.Local:
		return NewValidationError(ErrValidation, "location", "Local", "a calendar limit needs a named zone (time.LoadLocation), not time.Local")
	}
	return nil
}

// Consume maps limit names to token amounts, e.g. Consume{"rpm": 1, "tpm": 500}.
// Wherever order matters (expressions, status lists) names are taken in
// sorted order.
type Consume map[string]int64

// OnUnavailable says what Acquire does when DynamoDB cannot be reached.
type OnUnavailable string

const (
	// OnUnavailableBlock makes Acquire fail with an *[limiter.UnavailableError] (the default).
	OnUnavailableBlock OnUnavailable = "block"
	// OnUnavailableAllow makes Acquire return a no-op lease (fail open).
	OnUnavailableAllow OnUnavailable = "allow"
)

// Valid reports whether o is one of the defined values.
func (o OnUnavailable) Valid() bool { return o == OnUnavailableAllow || o == OnUnavailableBlock }

// Entity is a rate-limited principal (an API key, a project, a tenant). An
// entity may have a parent; with Cascade set, every acquire on the entity also
// consumes the same amounts from its parent, and from the parent's parent
// when the parent cascades too, up to four entities in all (see
// limiter.MaxCascadeLevels).
type Entity struct {
	// ID is the entity identifier (validated as an identifier).
	ID string
	// Name is a display name; it defaults to ID.
	Name string
	// ParentID is the parent entity's ID, or "" for a root entity.
	ParentID string
	// Cascade makes acquires also consume from the parent (and from its
	// ancestors while each of them cascades too).
	Cascade bool
	// Metadata holds free-form string attributes.
	Metadata map[string]string
	// CreatedAt is the creation time, at second precision (zero if unknown).
	CreatedAt time.Time
}

// IsParent reports whether e has no parent.
func (e Entity) IsParent() bool { return e.ParentID == "" }

// BucketState is the stored state of one limit in a bucket item. Token
// quantities are millitokens (tokens × 1000) and times are epoch milliseconds,
// exactly as stored in DynamoDB.
type BucketState struct {
	EntityID  string
	Resource  string
	LimitName string
	// ShardID is the shard of the bucket item the state was read from.
	ShardID int

	TokensMilli       int64
	LastRefillMs      int64
	CapacityMilli     int64
	RefillAmountMilli int64
	RefillPeriodMs    int64
	// TotalConsumedMilli is the net consumption counter (b_{L}_tc); zero when
	// the item has none.
	TotalConsumedMilli int64
}

// Tokens returns the balance in whole tokens (floored).
func (s BucketState) Tokens() int64 { return bucketmath.FloorDiv(s.TokensMilli, 1000) }

// Capacity returns the capacity in whole tokens (floored).
func (s BucketState) Capacity() int64 { return bucketmath.FloorDiv(s.CapacityMilli, 1000) }

// Window types of usage snapshots.
const (
	WindowHourly  = "hourly"
	WindowDaily   = "daily"
	WindowMonthly = "monthly"
)

// UsageSnapshot is the consumption of one entity and resource in one time
// window, as written by the aggregator.
type UsageSnapshot struct {
	EntityID    string
	Resource    string
	WindowType  string // WindowHourly, WindowDaily or WindowMonthly
	WindowStart time.Time
	WindowEnd   time.Time
	// Counters maps limit names to consumed tokens in the window.
	Counters map[string]int64
	// TotalEvents counts the limit deltas recorded in the window.
	TotalEvents int64
}

// UsageSummary aggregates usage snapshots.
type UsageSummary struct {
	SnapshotCount  int
	Total          map[string]int64
	Average        map[string]float64
	MinWindowStart time.Time // zero when there are no snapshots
	MaxWindowStart time.Time // zero when there are no snapshots
}

// AuditEvent is one security audit record of an entity or config change.
type AuditEvent struct {
	// EventID is a ULID; lexicographic order is time order.
	EventID   string
	Timestamp time.Time
	Action    string
	EntityID  string
	Principal string // "" when unknown
	Resource  string // "" when not resource-specific
	Details   map[string]any
}

// EntityCapacity is one entity's share of a resource's capacity.
type EntityCapacity struct {
	EntityID       string
	Capacity       int64
	Available      int64
	UtilizationPct float64
}

// ResourceCapacity aggregates one limit of a resource over all entities.
type ResourceCapacity struct {
	Resource       string
	LimitName      string
	TotalCapacity  int64
	TotalAvailable int64
	UtilizationPct float64
	Entities       []EntityCapacity
}

// RefilledAt returns s refilled to now: the balance it holds at now if
// nothing is consumed in between, computed as the limiter does before each
// consumption. Refill is linear, RefillAmountMilli every RefillPeriodMs from
// LastRefillMs, counted in whole millitokens and capped at CapacityMilli;
// the result's LastRefillMs is the refill timestamp the limiter stores with
// that balance. A now not after LastRefillMs, or a zero RefillPeriodMs,
// returns s unchanged. Only TokensMilli and LastRefillMs change; s itself
// is not modified.
//
// A [BucketState] read from the table is the state as of its last write;
// RefilledAt(time.Now()) gives the balance available now.
func (s BucketState) RefilledAt(now time.Time) BucketState {
	s.TokensMilli, s.LastRefillMs = bucketmath.Refill(s.TokensMilli, s.LastRefillMs, now.UnixMilli(),
		s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
	return s
}

// Audit actions.
const (
	AuditEntityCreated = "entity_created"
	AuditEntityDeleted = "entity_deleted"
	AuditLimitsSet     = "limits_set"
	AuditLimitsDeleted = "limits_deleted"
)

// DefaultAuditEventsLimit is the number of events AuditEvents returns when
// its limit is zero or negative.
const DefaultAuditEventsLimit = 100

// AuditEntitySystem is the pseudo entity id under which changes of the
// system defaults are audited; pass it to AuditEvents to read them.
const AuditEntitySystem = "$SYSTEM"

// auditResourcePrefix starts the pseudo entity ids of resource defaults.
const auditResourcePrefix = "$RESOURCE:"

// AuditEntityResource returns the pseudo entity id, "$RESOURCE:{resource}",
// under which changes of resource's default limits are audited; pass it to
// AuditEvents to read them.
func AuditEntityResource(resource string) string { return auditResourcePrefix + resource }

// AuditBucketReset is the audit action of [limiter.RateLimiter.Reset].
const AuditBucketReset = "bucket_reset"

// Usage query limits.
const (
	// DefaultUsageSnapshotsLimit is the page size of UsageSnapshots when
	// UsageQuery.Limit is zero or negative.
	DefaultUsageSnapshotsLimit = 100
	// MaxUsageSummarySnapshots caps the snapshots UsageSummary aggregates,
	// bounding its reads and memory: a summary with this SnapshotCount may
	// leave older snapshots out.
	MaxUsageSummarySnapshots = 10_000
)

// UsageQuery selects usage snapshots. EntityID, Resource or both must be
// set. It is a plain value.
type UsageQuery struct {
	// EntityID selects the snapshots of one entity (every resource, or only
	// Resource when it is set too).
	EntityID string
	// Resource selects the snapshots of one resource; without EntityID,
	// those of every entity (read through GSI2).
	Resource string
	// WindowType keeps only snapshots of this window: [WindowHourly],
	// [WindowDaily] or [WindowMonthly]. "" keeps all.
	WindowType string
	// Start keeps only snapshots whose window starts at or after Start;
	// End, only those whose window starts at or before End. Both are
	// compared in UTC at second precision; zero means unbounded.
	Start, End time.Time
	// Limit is the most snapshots one UsageSnapshots call returns
	// ([DefaultUsageSnapshotsLimit] when ≤ 0). UsageSummary ignores it.
	Limit int
	// Cursor continues a previous UsageSnapshots call made with the same
	// query: pass the cursor it returned. "" starts with the newest
	// snapshot. UsageSummary ignores it.
	Cursor string
}

// Validate checks every field of q but the cursor; the limiter calls it
// before it passes q to a [UsageStore].
func (q UsageQuery) Validate() error {
	if q.EntityID == "" && q.Resource == "" {
		return NewValidationError(ErrValidation, "query", "", "either entity_id or resource must be given")
	}
	if q.EntityID != "" {
		if err := ValidateIdentifier(q.EntityID, "entity_id"); err != nil {
			return err
		}
	}
	if q.Resource != "" {
		if err := ValidateResource(q.Resource); err != nil {
			return err
		}
	}
	switch q.WindowType {
	case "", WindowHourly, WindowDaily, WindowMonthly:
	default:
		return NewValidationError(ErrValidation, "window_type", q.WindowType, "must be 'hourly', 'daily' or 'monthly'")
	}
	if !q.Start.IsZero() && !q.End.IsZero() && isoSeconds(q.End) < isoSeconds(q.Start) {
		return NewValidationError(ErrValidation, "end", isoSeconds(q.End), "must not be before start "+isoSeconds(q.Start))
	}
	return nil
}

// Namespace statuses, as reported in [NamespaceInfo.Status].
const (
	// NamespaceStatusActive is a registered namespace in use.
	NamespaceStatusActive = "active"
	// NamespaceStatusDeleted is a namespace removed by
	// [limiter.DynamoDBRepository.DeleteNamespace]; its data is kept and it can be
	// recovered or purged.
	NamespaceStatusDeleted = "deleted"
	// NamespaceStatusPurging is a deleted namespace whose data
	// [limiter.DynamoDBRepository.PurgeNamespace] is deleting. Purging is terminal:
	// the namespace cannot be recovered, and an interrupted purge is resumed
	// by calling PurgeNamespace again.
	NamespaceStatusPurging = "purging"
)

// NamespaceInfo describes one namespace of the registry. It is a plain
// value.
type NamespaceInfo struct {
	// Name is the namespace name given to RegisterNamespace.
	Name string
	// ID is the opaque namespace id (11 URL-safe base64 characters, never
	// starting with '-') that prefixes every key of the namespace's data.
	ID string
	// Status is [NamespaceStatusActive], [NamespaceStatusDeleted] or
	// [NamespaceStatusPurging]; "unknown" when the record has none.
	Status string
	// CreatedAt is when the namespace was registered (UTC, second
	// precision; zero when the record has no parsable created_at).
	CreatedAt time.Time
	// DeletedAt is when the namespace was deleted (UTC, second precision);
	// zero for active namespaces.
	DeletedAt time.Time
}

// isoSeconds formats t as the usage snapshots' window keys compare it: UTC,
// second precision.
func isoSeconds(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// AuditBalanceTopUp is the audit action of [limiter.RateLimiter.TopUp]:
// details name the limit, the amount (tokens) and the top-up's id.
const AuditBalanceTopUp = "balance_topped_up"
