package limiter

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zaelimiter/limiter/internal/bucketmath"
)

// Reserved names and well-known limit names.
const (
	// DefaultResource is the resource name under which an entity's
	// resource-independent limits are stored (SetLimits with this resource).
	DefaultResource = "_default_"

	// wcuLimitName is the hidden infrastructure limit injected into every bucket
	// item. It never appears in statuses, errors or any other output.
	wcuLimitName = "wcu"

	// LimitRPM, LimitTPM and friends are conventional limit names.
	LimitRPM = "rpm" // requests per minute
	LimitRPH = "rph" // requests per hour
	LimitRPD = "rpd" // requests per day
	LimitTPM = "tpm" // tokens per minute
	LimitTPH = "tph" // tokens per hour
	LimitTPD = "tpd" // tokens per day
)

// Limit is one token-bucket rule: a bucket of Capacity tokens that regains
// RefillAmount tokens every RefillPeriod. Limit is a small immutable value.
//
// Construct limits with [PerSecond], [PerMinute], [PerHour], [PerDay] (and
// [Limit.WithBurst]) or [NewLimit]; a Limit is validated wherever it is used
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
}

// PerSecond returns a limit of rate tokens per second with capacity rate.
func PerSecond(name string, rate int64) Limit { return perPeriod(name, rate, time.Second) }

// PerMinute returns a limit of rate tokens per minute with capacity rate.
func PerMinute(name string, rate int64) Limit { return perPeriod(name, rate, time.Minute) }

// PerHour returns a limit of rate tokens per hour with capacity rate.
func PerHour(name string, rate int64) Limit { return perPeriod(name, rate, time.Hour) }

// PerDay returns a limit of rate tokens per day with capacity rate.
func PerDay(name string, rate int64) Limit { return perPeriod(name, rate, 24*time.Hour) }

func perPeriod(name string, rate int64, period time.Duration) Limit {
	return Limit{Name: name, Capacity: rate, RefillAmount: rate, RefillPeriod: period}
}

// WithBurst returns a copy of l whose capacity is burst. Burst may be smaller
// than the refill amount.
func (l Limit) WithBurst(burst int64) Limit {
	l.Capacity = burst
	return l
}

// NewLimit returns a validated limit with the given capacity, refill amount
// and refill period. The error is a *[ValidationError].
func NewLimit(name string, capacity, refillAmount int64, refillPeriod time.Duration) (Limit, error) {
	l := Limit{Name: name, Capacity: capacity, RefillAmount: refillAmount, RefillPeriod: refillPeriod}
	if err := l.Validate(); err != nil {
		return Limit{}, err
	}
	return l, nil
}

// RefillPeriodSeconds returns the refill period in whole seconds, the unit in
// which stored limit configs keep it.
func (l Limit) RefillPeriodSeconds() int64 { return int64(l.RefillPeriod / time.Second) }

// RefillRate returns the refill rate in tokens per second (for display).
func (l Limit) RefillRate() float64 {
	return float64(l.RefillAmount) / l.RefillPeriod.Seconds()
}

// Validate reports whether l is usable: a valid name, positive capacity and
// refill amount, and a positive whole-second refill period. The error is a
// *[ValidationError] matching [ErrInvalidName] or [ErrValidation].
func (l Limit) Validate() error {
	if err := validateLimitName(l.Name, "name"); err != nil {
		return err
	}
	switch {
	case l.Capacity <= 0:
		return newValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity must be positive")
	case l.RefillAmount <= 0:
		return newValidationError(ErrValidation, "refill_amount", fmt.Sprint(l.RefillAmount), "refill_amount must be positive")
	case l.RefillPeriod <= 0:
		return newValidationError(ErrValidation, "refill_period", l.RefillPeriod.String(), "refill_period_seconds must be positive")
	case l.RefillPeriod%time.Second != 0:
		return newValidationError(ErrValidation, "refill_period", l.RefillPeriod.String(), "refill period must be a whole number of seconds")
	case l.Capacity > math.MaxInt64/1000 || l.RefillAmount > math.MaxInt64/1000:
		return newValidationError(ErrValidation, "capacity", fmt.Sprint(l.Capacity), "capacity and refill_amount must fit in int64 millitokens")
	}
	return nil
}

// validateLimits validates every limit and rejects duplicate names.
func validateLimits(limits []Limit) error {
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Name] {
			return newValidationError(ErrValidation, "limits", l.Name, "duplicate limit name")
		}
		seen[l.Name] = true
	}
	return nil
}

// limitFromBucketState derives the configured limit of a stored bucket
// (capacity, refill amount and period floored to tokens and seconds). It does
// not validate: callers skip the hidden wcu limit.
func limitFromBucketState(s BucketState) Limit {
	return Limit{
		Name:         s.LimitName,
		Capacity:     bucketmath.FloorDiv(s.CapacityMilli, 1000),
		RefillAmount: bucketmath.FloorDiv(s.RefillAmountMilli, 1000),
		RefillPeriod: time.Duration(bucketmath.FloorDiv(s.RefillPeriodMs, 1000)) * time.Second,
	}
}

// Consume maps limit names to token amounts, e.g. Consume{"rpm": 1, "tpm": 500}.
// Wherever order matters (expressions, status lists) names are taken in
// sorted order.
type Consume map[string]int64

// names returns the limit names of c in sorted order.
func (c Consume) names() []string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// OnUnavailable says what Acquire does when DynamoDB cannot be reached.
type OnUnavailable string

const (
	// OnUnavailableBlock makes Acquire fail with an *[UnavailableError] (the default).
	OnUnavailableBlock OnUnavailable = "block"
	// OnUnavailableAllow makes Acquire return a no-op lease (fail open).
	OnUnavailableAllow OnUnavailable = "allow"
)

// Valid reports whether o is one of the defined values.
func (o OnUnavailable) Valid() bool { return o == OnUnavailableAllow || o == OnUnavailableBlock }

// ConfigSource tells which level of the config hierarchy supplied the limits
// of an acquire.
type ConfigSource string

// Config sources, in precedence order, plus the caller's override.
const (
	SourceEntity        ConfigSource = "entity"
	SourceEntityDefault ConfigSource = "entity_default"
	SourceResource      ConfigSource = "resource"
	SourceSystem        ConfigSource = "system"
	SourceOverride      ConfigSource = "override"
)

// Entity is a rate-limited principal (an API key, a project, a tenant). An
// entity may have a parent; with Cascade set, every acquire on the entity also
// consumes the same amounts from its parent.
type Entity struct {
	// ID is the entity identifier (validated as an identifier).
	ID string
	// Name is a display name; it defaults to ID.
	Name string
	// ParentID is the parent entity's ID, or "" for a root entity.
	ParentID string
	// Cascade makes acquires also consume from the parent.
	Cascade bool
	// Metadata holds free-form string attributes.
	Metadata map[string]string
	// CreatedAt is the creation time, at second precision (zero if unknown).
	CreatedAt time.Time
}

// IsParent reports whether e has no parent.
func (e Entity) IsParent() bool { return e.ParentID == "" }

// LimitStatus is the outcome of checking one limit of one bucket.
type LimitStatus struct {
	EntityID  string
	Resource  string
	LimitName string
	// Limit is the limit that was checked.
	Limit Limit
	// Available is the number of whole tokens available (floored; negative
	// when the bucket is in debt).
	Available int64
	// Requested is the number of tokens asked for.
	Requested int64
	// Exceeded reports whether the request could not be satisfied.
	Exceeded bool
	// RetryAfter is how long until the request could succeed; zero when not
	// exceeded.
	RetryAfter time.Duration
}

// Deficit returns how many tokens are missing: max(0, Requested-Available).
func (s LimitStatus) Deficit() int64 {
	if d := s.Requested - s.Available; d > 0 {
		return d
	}
	return 0
}

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

// bucketStateFromLimit returns a full bucket for l, refilled at nowMs.
func bucketStateFromLimit(entityID, resource string, l Limit, nowMs int64) BucketState {
	return BucketState{
		EntityID:          entityID,
		Resource:          resource,
		LimitName:         l.Name,
		TokensMilli:       l.Capacity * 1000,
		LastRefillMs:      nowMs,
		CapacityMilli:     l.Capacity * 1000,
		RefillAmountMilli: l.RefillAmount * 1000,
		RefillPeriodMs:    l.RefillPeriod.Milliseconds(),
	}
}

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

// Validation patterns (anchored with \z: a trailing newline is rejected,
// unlike the original's Python `$`, which accepts one).
var (
	identifierPattern = regexp.MustCompile(`\A[a-zA-Z0-9][a-zA-Z0-9_.\-:@]*\z`)
	namePattern       = regexp.MustCompile(`\A[a-zA-Z][a-zA-Z0-9_.\-]*\z`)
	resourcePattern   = regexp.MustCompile(`\A[a-zA-Z][a-zA-Z0-9_.\-/]*\z`)
)

const (
	maxIdentifierLength = 256
	maxNameLength       = 64
)

// nameRule is one family of identifier validation, as the original's: checks
// run in order and stop at the first failure.
type nameRule struct {
	kind          error // ErrInvalidIdentifier or ErrInvalidName
	maxLen        int
	reserved      string         // a value refused as reserved ("" for none)
	pattern       *regexp.Regexp // the rule as the original's regular expression
	chars         charClass      // the same rule, matched without the regexp engine
	patternReason string
}

// charClass is a pattern of the form \A[first][rest]*\z over ASCII: letters,
// plus digits first when firstDigit, plus digits and extra after.
type charClass struct {
	firstDigit bool
	extra      string
}

// match reports whether s matches the class (s is not empty). It agrees with
// the rule's regexp (TestCharClassMatchesPattern) at a fraction of the cost:
// validation runs on every Acquire.
func (c charClass) match(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		letter := b|0x20 >= 'a' && b|0x20 <= 'z'
		digit := b >= '0' && b <= '9'
		switch {
		case letter:
		case i == 0:
			if !(digit && c.firstDigit) {
				return false
			}
		case !digit && strings.IndexByte(c.extra, b) < 0:
			return false
		}
	}
	return true
}

var (
	identifierRule = nameRule{kind: ErrInvalidIdentifier, maxLen: maxIdentifierLength, pattern: identifierPattern,
		chars:         charClass{firstDigit: true, extra: "_.-:@"},
		patternReason: "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"}
	limitNameRule = nameRule{kind: ErrInvalidName, maxLen: maxNameLength, reserved: wcuLimitName, pattern: namePattern,
		chars:         charClass{extra: "_.-"},
		patternReason: "must start with a letter and contain only alphanumeric, underscore, hyphen, or dot characters"}
	resourceRule = nameRule{kind: ErrInvalidName, maxLen: maxNameLength, pattern: resourcePattern,
		chars:         charClass{extra: "_.-/"},
		patternReason: "must start with a letter and contain only alphanumeric, underscore, hyphen, dot, or slash characters"}
)

func (r nameRule) check(field, value string) error {
	reason := ""
	switch {
	case value == "":
		reason = "cannot be empty"
	case utf8.RuneCountInString(value) > r.maxLen:
		reason = fmt.Sprintf("exceeds maximum length of %d", r.maxLen)
	case strings.Contains(value, "#"):
		reason = "cannot contain '#' (reserved delimiter)"
	case r.reserved != "" && value == r.reserved:
		reason = fmt.Sprintf("'%s' is a reserved limit name", r.reserved)
	case !r.chars.match(value):
		reason = r.patternReason
	default:
		return nil
	}
	return newValidationError(r.kind, field, value, reason)
}

// ValidateIdentifier checks an entity ID, parent ID or principal. The error
// is a *[ValidationError] matching [ErrInvalidIdentifier].
func ValidateIdentifier(value, field string) error { return identifierRule.check(field, value) }

// ValidateLimitName checks a limit name. The error is a *[ValidationError]
// matching [ErrInvalidName].
func ValidateLimitName(value string) error { return validateLimitName(value, "name") }

func validateLimitName(value, field string) error { return limitNameRule.check(field, value) }

// ValidateResource checks a resource name. The error is a *[ValidationError]
// matching [ErrInvalidName].
func ValidateResource(value string) error { return resourceRule.check("resource", value) }
