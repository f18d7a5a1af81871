// Layer 3, rules: the state the rules share (repository, clock, caches,
// settings), the acquire options, validation of names, the cascade, and
// audit.

package limiter

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/zaelimiter/limiter/store"
)

// rules is the state of the limiter's rules: the repository and its
// metered calls, the clock, the stored-limit and entity caches, and the
// settings of audit and bucket TTLs. [RateLimiter] embeds it; the
// mechanics above (speculative writes, group commit, the over-limit cache)
// build on it.
type rules struct {
	repo  Repository
	store storeOps       // the repository's bucket operations, metered
	audit store.AuditLog // nil: changes are not audited
	bg    background     // writes that outlive their caller's wait
	obs   observer       // Options.Logger, Options.Metrics
	now   func() time.Time
	// sleep waits d or until ctx is done (the transaction-conflict backoff).
	sleep func(ctx context.Context, d time.Duration) error
	// intN returns a random int in [0, n) (shard choice); a test seam.
	intN func(n int) int

	principal      string
	auditRetention time.Duration
	ttlMultiplier  int64
	configTTL      time.Duration
	configs        *configCache
	ents           *entityCache
	eventIDs       eventIDs
}

// eventIDs hands out audit event ids that increase strictly within one
// limiter, whatever its clock does: the audit log is listed newest first by
// id, so two changes made in one millisecond (or under a clock that stood
// still or stepped back) must still list in the order they were made. The
// process-wide ULID entropy cannot promise that: another limiter's id made
// in between, at another millisecond, restarts its sequence at random.
type eventIDs struct {
	mu      sync.Mutex
	last    ulid.ULID
	entropy *ulid.MonotonicEntropy
}

// next returns an id at now's millisecond, or at the last id's when now is
// not after it, greater than every id it returned before.
func (e *eventIDs) next(now time.Time) (ulid.ULID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.entropy == nil {
		e.entropy = ulid.Monotonic(rand.Reader, 0)
	}
	ms := max(ulid.Timestamp(now), e.last.Time())
	id, err := ulid.New(ms, e.entropy)
	if err != nil {
		return ulid.ULID{}, fmt.Errorf("limiter: audit event id: %w", err)
	}
	e.last = id
	return id, nil
}

// Audit events: every entity and limit change made through a [RateLimiter]
// is recorded, when the repository is an [store.AuditLog], with who made it (the
// principal), when, and what changed, in the audit item format of the
// shared table.

// logUnavailable logs an on-unavailable decision: at Warn, or at Debug
// when the circuit breaker decided (its opening was logged at Warn).
func (rl *rules) logUnavailable(ctx context.Context, entityID, resource string, mode OnUnavailable, cause error) {
	level := slog.LevelWarn
	if errors.Is(cause, ErrCircuitOpen) {
		level = slog.LevelDebug
	}
	if !rl.obs.logging(ctx, level) {
		return
	}
	decision := "block"
	if mode == OnUnavailableAllow {
		decision = "allow"
	}
	rl.obs.log.LogAttrs(ctx, level, "limiter: backend unavailable",
		slog.String("entity_id", entityID), slog.String("resource", resource),
		slog.String("on_unavailable", decision), slog.String("store", rl.repo.Name()),
		slog.Any("error", cause))
}

// circuitChanged logs a change of the circuit breaker's state and reports
// its openings and closings to a CircuitMetrics.
func (rl *rules) circuitChanged(from, to circuitState, failures int, cause error) {
	name := rl.repo.Name()
	if cm, ok := rl.obs.metrics.(CircuitMetrics); ok {
		switch {
		case from == circuitClosed && to == circuitOpen:
			cm.CircuitChange(name, true)
		case to == circuitClosed:
			cm.CircuitChange(name, false)
		}
	}
	ctx := context.Background()
	level, msg := slog.LevelInfo, "limiter: circuit closed"
	attrs := []slog.Attr{slog.String("store", name)}
	switch {
	case from == circuitClosed:
		level, msg = slog.LevelWarn, "limiter: circuit open"
		attrs = append(attrs, slog.Int("failures", failures), slog.Duration("cooldown", rl.store.brk.cooldown), slog.Any("error", cause))
	case to == circuitOpen:
		msg = "limiter: circuit probe failed"
		attrs = append(attrs, slog.Duration("cooldown", rl.store.brk.cooldown), slog.Any("error", cause))
	case to == circuitHalfOpen:
		level, msg = slog.LevelDebug, "limiter: circuit half-open"
	}
	if rl.obs.logging(ctx, level) {
		rl.obs.log.LogAttrs(ctx, level, msg, attrs...)
	}
}

// logGiveBackFailed logs a give-back that failed: tokens taken by a write
// whose caller went away stay taken (under-admission, never more).
func (rl *rules) logGiveBackFailed(ctx context.Context, key store.BucketKey, err error) {
	if !rl.obs.logging(ctx, slog.LevelWarn) {
		return
	}
	rl.obs.log.LogAttrs(ctx, slog.LevelWarn, "limiter: give-back failed",
		slog.String("entity_id", key.EntityID), slog.String("resource", key.Resource), slog.Any("error", err))
}

// logConflict logs a transaction-conflict retry.
func (rl *rules) logConflict(ctx context.Context, writes []store.BucketWrite, attempt int, backoff time.Duration) {
	if !rl.obs.logging(ctx, slog.LevelInfo) {
		return
	}
	keys := make([]string, len(writes))
	for i, w := range writes {
		keys[i] = fmt.Sprintf("%s/%s#%d", w.Key.EntityID, w.Key.Resource, w.Key.Shard)
	}
	rl.obs.log.LogAttrs(ctx, slog.LevelInfo, "limiter: transaction conflict, retrying",
		slog.Any("buckets", keys), slog.Int("retry", attempt+1), slog.Duration("backoff", backoff))
}

// validateAuditEntityID accepts an entity id, [store.AuditEntitySystem] or
// "$RESOURCE:{resource}" with a valid resource.
func validateAuditEntityID(id string) error {
	switch {
	case id == store.AuditEntitySystem:
		return nil
	case strings.HasPrefix(id, store.AuditEntityResource("")):
		return store.ValidateResource(strings.TrimPrefix(id, store.AuditEntityResource("")))
	}
	return store.ValidateIdentifier(id, "entity_id")
}

type principalKey struct{}

// ContextWithPrincipal returns a context whose entity and limit changes are
// audited as made by principal (an ARN, or an identifier). It overrides
// [Options.Principal].
func ContextWithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// principalFor returns the audit principal of a change made with ctx: the
// context's, else the limiter's. ARNs are taken as they are; anything else
// must be a valid identifier. It is called before the change's first write,
// so that an invalid principal writes nothing. A done ctx returns its error.
func (rl *rules) principalFor(ctx context.Context) (string, error) {
	if ctx == nil {
		return "", errNilContext
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p, _ := ctx.Value(principalKey{}).(string)
	if p == "" {
		p = rl.principal
	}
	if p == "" || strings.HasPrefix(p, "arn:") {
		return p, nil
	}
	if err := store.ValidateIdentifier(p, "principal"); err != nil {
		return "", err
	}
	return p, nil
}

// record appends one audit event: a ULID id and the limiter's time, kept
// for the audit retention. Without an audit log it records nothing.
func (rl *rules) record(ctx context.Context, principal, action, entityID, resource string, details map[string]any) error {
	if rl.audit == nil {
		return nil
	}
	now := rl.now()
	id, err := rl.eventIDs.next(now)
	if err != nil {
		return err
	}
	if details == nil {
		details = map[string]any{}
	}
	ev := AuditEvent{
		EventID: id.String(), Timestamp: now.UTC().Truncate(time.Second), Action: action, EntityID: entityID,
		Principal: principal, Resource: resource, Details: details,
	}
	return rl.audit.AppendAudit(ctx, ev, now.Add(rl.auditRetention))
}

// auditLimitDetails is the "limits" detail of a limits_set event: one map
// per limit (see auditLimitDetail).
func auditLimitDetails(limits []store.Limit) []any {
	out := make([]any, len(limits))
	for i, l := range limits {
		out[i] = auditCalendarDetail(auditLimitDetail(l), l)
	}
	return out
}

// auditLimitDetail is one limit as audit details record it: its name,
// capacity and refill amount in tokens, and its refill period in seconds.
func auditLimitDetail(l store.Limit) map[string]any {
	return map[string]any{
		"name":                  l.Name,
		"capacity":              l.Capacity,
		"refill_amount":         l.RefillAmount,
		"refill_period_seconds": l.RefillPeriodSeconds(),
	}
}

// auditCalendarDetail adds to an audit detail of a calendar limit its
// period and, unless UTC, its time zone; of a prepaid limit, "prepaid".
func auditCalendarDetail(d map[string]any, l store.Limit) map[string]any {
	if l.IsPrepaid() {
		d["prepaid"] = true
	}
	if l.IsCalendar() {
		d["calendar"] = l.Calendar.String()
		if tz := l.LocationName(); tz != "" {
			d["timezone"] = tz
		}
	}
	return d
}

func (rl *rules) nowMs() int64 { return rl.now().UnixMilli() }

// optionsPool holds idle *acquireOptions (see resolveAcquireOptions).
var optionsPool sync.Pool

func resolveAcquireOptions(opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 {
		return acquireOptions{}, nil // no heap allocation on the hot path
	}
	for i, fn := range opts {
		if fn == nil {
			return acquireOptions{}, nilOptionError(i)
		}
	}
	// The options are applied through a pointer the compiler cannot
	// follow, so a fresh value would escape to the heap: a pooled one
	// saves an allocation per call.
	op, _ := optionsPool.Get().(*acquireOptions)
	if op == nil {
		op = new(acquireOptions)
	}
	for _, fn := range opts {
		fn(op)
	}
	o := *op
	*op = acquireOptions{}
	optionsPool.Put(op)
	if o.onUnavailable != "" && !o.onUnavailable.Valid() {
		return o, store.NewValidationError(ErrValidation, "on_unavailable", string(o.onUnavailable), "must be 'allow' or 'block'")
	}
	if o.capsErr != nil {
		return o, o.capsErr
	}
	if o.wideErr != nil {
		return o, o.wideErr
	}
	if o.override {
		err := o.limitsErr
		if !o.checked {
			err = validateLimits(o.limits)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

// nilOptionError reports the nil AcquireOption at index i of a call's
// options.
func nilOptionError(i int) error {
	return store.NewValidationError(ErrValidation, "opts", "nil",
		fmt.Sprintf("opts[%d] is a nil AcquireOption", i))
}

// limitsFor resolves the limits of one entity: the override, or the stored
// config. On AllResources the override is WithEntityWideLimits (a call
// with WithLimits alone has no entity-wide limits, as for an acquire). It
// fails with a *ValidationError when nothing is configured.
func (rl *rules) limitsFor(ctx context.Context, entityID, resource string, o acquireOptions) ([]store.Limit, ConfigSource, error) {
	if resource == AllResources && (o.override || o.wideOverride) {
		if !o.wideOverride {
			return nil, "", noLimitsError(entityID, resource)
		}
		return o.wide, SourceOverride, nil
	}
	if o.override {
		return o.limits, SourceOverride, nil
	}
	limits, source, _, err := rl.configs.resolve(ctx, entityID, resource)
	if err != nil {
		return nil, "", err
	}
	if len(limits) == 0 {
		return nil, "", noLimitsError(entityID, resource)
	}
	return limits, source, nil
}

func noLimitsError(entityID, resource string) error {
	e := store.NewValidationError(ErrValidation, "limits", fmt.Sprintf("entity=%s, resource=%s", entityID, resource),
		fmt.Sprintf("no limits configured for entity %q and resource %q: store them for the entity (on the resource "+
			"or on _default_), the resource or the system, or pass WithLimits", entityID, resource))
	return e
}

// MaxCascadeLevels bounds a cascade: an acquire charges at most this many
// entities, the entity and three ancestors (an API key, its project, the
// project's organisation and one level above). [Admin.CreateEntity]
// refuses an entity whose cascade would charge more, with a
// *[ValidationError] matching [ErrCascadeTooDeep]; an acquire on a deeper
// chain (written by a client without that check) charges the first
// MaxCascadeLevels entities and no more.
const MaxCascadeLevels = 4

// cascadeChain returns the ancestors an acquire on entityID charges,
// nearest first: the parent when the entity cascades, then the parent's
// parent when the parent cascades too, and so on, at most
// MaxCascadeLevels−1 of them. An ancestor met again (a cycle, which
// CreateEntity refuses but deletes and re-creates can still leave) ends
// the chain before it: each entity is charged once. Each entity's cascade
// settings come from the entity cache or, when it does not know them,
// from the entity's record.
func (rl *rules) cascadeChain(ctx context.Context, entityID string) ([]string, error) {
	var chain []string
	for id := entityID; len(chain) < MaxCascadeLevels-1; {
		p, err := rl.cascadeParent(ctx, id)
		if err != nil {
			return nil, err
		}
		if p == "" || p == entityID || slices.Contains(chain, p) {
			break
		}
		chain = append(chain, p)
		id = p
	}
	return chain, nil
}

// cascadeParent returns the parent entityID cascades to ("" for none),
// from the entity cache or, when it does not know, the entity's record.
func (rl *rules) cascadeParent(ctx context.Context, entityID string) (string, error) {
	if info, ok := rl.ents.get(entityID); ok && info.known {
		return info.cascadeParent(entityID), nil
	}
	e, err := rl.store.getEntity(ctx, entityID)
	if errors.Is(err, ErrEntityNotFound) {
		rl.ents.setEntity(entityID, false, false, "")
		return "", nil
	}
	if err != nil {
		return "", err
	}
	rl.ents.setEntity(entityID, true, e.Cascade, e.ParentID)
	info, _ := rl.ents.get(entityID)
	return info.cascadeParent(entityID), nil
}

// resolved is the limits that apply to one entity and where they come from.
type resolved struct {
	limits []store.Limit
	source ConfigSource
	// switches are the changes of kind, period or zone of limits
	// inherited from defaults (see carrySwitches); nil for most.
	switches switchSet
}

// has reports whether a limit named name applies.
func (r resolved) has(name string) bool {
	for _, l := range r.limits {
		if l.Name == name {
			return true
		}
	}
	return false
}
