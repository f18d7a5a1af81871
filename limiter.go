package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// RateLimiter rate-limits calls per (entity, resource) against a
// [Repository]. It owns every rule — validation, the precedence of stored
// limits and their cache, bucket math and TTLs, audit events — and keeps
// the per-key state of this process (config cache, entity cache, group
// commit, over-limit cache); the repository only stores. It is safe for
// concurrent use. The zero value is not usable; call [New].
type RateLimiter struct {
	repo  Repository
	store storeOps   // the repository's bucket operations, metered (observe.go)
	audit AuditLog   // nil: changes are not audited
	bg    background // writes that outlive their caller's wait (background.go)

	speculative bool
	stats       specStats
	obs         observer // WithLogger, WithMetrics (observe.go)
	now         func() time.Time
	// sleep waits d or until ctx is done (the transaction-conflict backoff).
	sleep func(ctx context.Context, d time.Duration) error
	// intN returns a random int in [0, n) (shard choice); a test seam.
	intN func(n int) int

	// Rules (limiter_admin.go, audit.go, config_cache.go, entity_cache.go).
	principal      string
	auditRetention time.Duration
	ttlMultiplier  int64
	configTTL      time.Duration
	configs        *configCache
	ents           *entityCache

	// Bounds of the per-key caches (caches.go).
	cacheSizes   [numCaches]int
	cacheSizeSet [numCaches]bool
	entityTTL    time.Duration
	cacheEvent   cacheEventFunc // nil: cache events are not reported

	// Hot keys (groupcommit.go, overlimit.go).
	noGroupCommit    bool
	overLimitMaxWait time.Duration
	gc               *groupCommit    // nil when group commit is off
	olc              *overLimitCache // nil when the over-limit cache is off
}

// Defaults of the limiter's options.
const (
	// DefaultConfigCacheTTL is how long resolved stored limits are reused
	// ([WithConfigCacheTTL]).
	DefaultConfigCacheTTL = time.Minute
	// DefaultBucketTTLMultiplier sets how long idle buckets of default
	// config live: their time to fill from empty times this
	// ([WithBucketTTL]).
	DefaultBucketTTLMultiplier = 7
	// DefaultAuditRetention is how long audit events are kept
	// ([WithAuditRetention]).
	DefaultAuditRetention = 90 * 24 * time.Hour
)

// Option configures a [RateLimiter].
type Option func(*RateLimiter)

// WithSpeculativeWrites turns the speculative fast path (one conditional
// write, no read) on or off. It is on by default; it needs a repository
// that implements [SpeculativeStore].
func WithSpeculativeWrites(on bool) Option { return func(rl *RateLimiter) { rl.speculative = on } }

// WithClock sets the clock of the bucket math, TTLs, the config cache and
// audit timestamps. Nil means time.Now, the default.
func WithClock(now func() time.Time) Option {
	return func(rl *RateLimiter) {
		if now != nil {
			rl.now = now
		}
	}
}

// WithConfigCacheTTL sets how long stored limits, once read, are reused
// before they are read again ([DefaultConfigCacheTTL] by default). A
// change made through this limiter takes effect at once; a change made by
// another process is seen within this time. Zero or less disables the
// cache: every acquire reads the configs. The cache holds at most
// [DefaultConfigCacheSize] slots ([WithCacheSize]).
func WithConfigCacheTTL(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.configTTL = max(d, 0) }
}

// WithBucketTTL sets how long an idle bucket of default config (resource
// or system level) lives: its time to fill from empty times multiplier
// ([DefaultBucketTTLMultiplier] by default). Buckets of entity-level
// config never expire. Zero or less disables bucket TTLs.
func WithBucketTTL(multiplier int64) Option {
	return func(rl *RateLimiter) { rl.ttlMultiplier = multiplier }
}

// WithPrincipal sets who entity and limit changes are audited as made by
// (an ARN, or an identifier), when the context carries none (see
// [ContextWithPrincipal]). Empty, the default, records no principal.
func WithPrincipal(principal string) Option {
	return func(rl *RateLimiter) { rl.principal = principal }
}

// WithAuditRetention sets how long audit events are kept
// ([DefaultAuditRetention] by default; zero or less means the default).
func WithAuditRetention(d time.Duration) Option {
	return func(rl *RateLimiter) { rl.auditRetention = d }
}

// New returns a RateLimiter backed by repo.
func New(repo Repository, opts ...Option) *RateLimiter {
	rl := &RateLimiter{
		repo:          repo,
		speculative:   true,
		now:           time.Now,
		sleep:         sleepContext,
		intN:          rand.IntN,
		ttlMultiplier: DefaultBucketTTLMultiplier,
		configTTL:     DefaultConfigCacheTTL,
		entityTTL:     DefaultEntityCacheTTL,
	}
	for _, o := range opts {
		o(rl)
	}
	if rl.auditRetention <= 0 {
		rl.auditRetention = DefaultAuditRetention
	}
	rl.audit, _ = repo.(AuditLog)
	rl.store = newStoreOps(repo, rl.obs.metrics)
	if rl.store.spec == nil {
		rl.speculative = false
	}
	if rl.obs.metrics != nil {
		rl.stats.hook = rl.obs.metrics.SpeculativeOutcome
	}
	rl.initCaches()
	rl.initHotKeys()
	return rl
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Repository returns the repository the limiter uses.
func (rl *RateLimiter) Repository() Repository { return rl.repo }

func (rl *RateLimiter) nowMs() int64 { return rl.now().UnixMilli() }

// AcquireOption configures one Acquire, Do, Available or TimeUntilAvailable
// call.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	limits        []Limit
	override      bool
	onUnavailable OnUnavailable
}

// WithLimits makes the call use limits instead of the stored config (no
// config read at all). An empty list checks nothing.
func WithLimits(limits ...Limit) AcquireOption {
	return func(o *acquireOptions) {
		o.limits = append([]Limit(nil), limits...)
		o.override = true
	}
}

// WithOnUnavailable sets what the call does when DynamoDB fails, overriding
// the stored system default (itself defaulting to block).
func WithOnUnavailable(mode OnUnavailable) AcquireOption {
	return func(o *acquireOptions) { o.onUnavailable = mode }
}

func resolveAcquireOptions(opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 {
		return acquireOptions{}, nil // no heap allocation on the hot path
	}
	op := new(acquireOptions)
	for _, fn := range opts {
		fn(op)
	}
	o := *op
	if o.onUnavailable != "" && !o.onUnavailable.Valid() {
		return o, newValidationError(ErrValidation, "on_unavailable", string(o.onUnavailable), "must be 'allow' or 'block'")
	}
	if o.override {
		if err := validateLimits(o.limits); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Acquire takes consume from the (entityID, resource) bucket — and from the
// parent's when the entity cascades — and returns a [Lease] whose consumption
// is already durable in DynamoDB. Finish the lease with [Lease.Commit] (after
// [Lease.Adjust] to the real amounts) or [Lease.Rollback].
//
// When a limit cannot satisfy the request the error is a
// *[RateLimitExceededError] (matching [ErrRateLimited]) and nothing is
// written. Invalid input gives a *[ValidationError]. When DynamoDB fails the
// on-unavailable mode decides: block returns an *[UnavailableError], allow
// returns a no-op lease; a refusal for want of permission is an
// *[AccessDeniedError] in either mode. Context cancellation is returned as
// is.
func (rl *RateLimiter) Acquire(ctx context.Context, entityID, resource string, consume Consume, opts ...AcquireOption) (*Lease, error) {
	m := rl.obs.metrics
	if m == nil {
		return rl.acquireChecked(ctx, entityID, resource, consume, opts)
	}
	start := time.Now()
	lease, err := rl.acquireChecked(ctx, entityID, resource, consume, opts)
	m.AcquireDone(ctx, acquireOutcome(ctx, lease, err), time.Since(start))
	return lease, err
}

// acquireChecked is Acquire without metrics.
func (rl *RateLimiter) acquireChecked(ctx context.Context, entityID, resource string, consume Consume, opts []AcquireOption) (*Lease, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := ValidateIdentifier(entityID, "entity_id"); err != nil {
		return nil, err
	}
	if err := ValidateResource(resource); err != nil {
		return nil, err
	}
	if err := validateAmounts(consume, false); err != nil {
		return nil, err
	}
	lease, err := rl.acquire(ctx, entityID, resource, consume, o)
	if err == nil {
		return lease, nil
	}
	if errors.Is(err, ErrRateLimited) || errors.Is(err, ErrValidation) || ctx.Err() != nil {
		return nil, err
	}
	if isAccessDenied(err) {
		return nil, &AccessDeniedError{Cause: err, Table: rl.repo.Name(), EntityID: entityID, Resource: resource}
	}
	mode := o.onUnavailable
	if mode == "" {
		mode = rl.configs.resolveOnUnavailable(ctx)
	}
	rl.logUnavailable(ctx, entityID, resource, mode, err)
	if mode == OnUnavailableAllow {
		return &Lease{rl: rl, noop: true}, nil
	}
	return nil, &UnavailableError{Cause: err, Table: rl.repo.Name(), EntityID: entityID, Resource: resource}
}

// Do acquires, runs fn with the lease, and commits when fn returns nil. When
// fn returns an error or panics, the acquire is rolled back (and the panic
// re-raised). The error is fn's, or the acquire's or commit's.
func (rl *RateLimiter) Do(ctx context.Context, entityID, resource string, consume Consume,
	fn func(ctx context.Context, lease *Lease) error, opts ...AcquireOption) (err error) {
	lease, err := rl.Acquire(ctx, entityID, resource, consume, opts...)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if rbErr := lease.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, ErrLeaseDone) && err != nil {
			err = errors.Join(err, rbErr)
		}
	}()
	if err := fn(ctx, lease); err != nil {
		return err
	}
	if err := lease.Commit(ctx); err != nil {
		return err
	}
	committed = true
	return nil
}

// limitsFor resolves the limits of one entity: the override, or the stored
// config. It fails with a *ValidationError when nothing is configured.
func (rl *RateLimiter) limitsFor(ctx context.Context, entityID, resource string, o acquireOptions) ([]Limit, ConfigSource, error) {
	if o.override {
		return o.limits, SourceOverride, nil
	}
	limits, source, err := rl.ResolveLimits(ctx, entityID, resource)
	if err != nil {
		return nil, "", err
	}
	if len(limits) == 0 {
		return nil, "", noLimitsError(entityID, resource)
	}
	return limits, source, nil
}

func noLimitsError(entityID, resource string) error {
	e := newValidationError(ErrValidation, "limits", fmt.Sprintf("entity=%s, resource=%s", entityID, resource),
		fmt.Sprintf("no limits configured for entity %q and resource %q: store them for the entity (on the resource "+
			"or on _default_), the resource or the system, or pass WithLimits", entityID, resource))
	return e
}

// acquire obtains a lease: the speculative path when enabled, else (or when
// it cannot decide) the read-then-write path. The limits are resolved first
// (the override, or the stored config through the cache), so that every
// path checks the request against them and notices a limit change.
func (rl *RateLimiter) acquire(ctx context.Context, entityID, resource string, consume Consume, o acquireOptions) (*Lease, error) {
	if err := rl.overLimitRefuse(entityID, resource, consume); err != nil {
		return nil, err
	}
	limits, source, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return nil, err
	}
	if len(limits) == 0 {
		return &Lease{rl: rl}, nil // an empty override checks nothing
	}
	child := resolved{limits: limits, source: source}
	if err := rl.checkNames(ctx, entityID, resource, consume, child, o); err != nil {
		return nil, err
	}
	if rl.speculative {
		lease, err := rl.speculativeAcquire(ctx, entityID, resource, consume, child, o)
		if err != nil || lease != nil {
			return lease, err
		}
	}
	return rl.slowAcquire(ctx, entityID, resource, consume, child, o)
}

// resolved is the limits that apply to one entity and where they come from.
type resolved struct {
	limits []Limit
	source ConfigSource
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

// checkNames refuses a request that names a limit no applicable limit has
// (a typo such as "rmp" must not turn limiting off): every name must be a
// limit of the entity or, with cascade, of its parent. The parent's limits
// are resolved only when the entity's lack a name.
func (rl *RateLimiter) checkNames(ctx context.Context, entityID, resource string, consume Consume, child resolved, o acquireOptions) error {
	var parent *resolved
	for name := range consume {
		if child.has(name) {
			continue
		}
		if parent == nil && !o.override {
			parentID, err := rl.cascadeParent(ctx, entityID)
			if err != nil {
				return err
			}
			p := resolved{}
			if parentID != "" {
				if p.limits, p.source, err = rl.limitsFor(ctx, parentID, resource, o); err != nil && !errors.Is(err, ErrValidation) {
					return err
				}
			}
			parent = &p
		}
		if parent != nil && parent.has(name) {
			continue
		}
		names := make([]string, 0, len(child.limits))
		for _, l := range child.limits {
			names = append(names, l.Name)
		}
		if parent != nil {
			for _, l := range parent.limits {
				if !child.has(l.Name) {
					names = append(names, l.Name)
				}
			}
		}
		return newValidationError(ErrValidation, "consume", name,
			fmt.Sprintf("no limit named %q applies to %s/%s (limits: %s)", name, entityID, resource, strings.Join(names, ", ")))
	}
	return nil
}

// cascadeParent returns the parent entityID cascades to ("" for none),
// from the entity cache or, when it does not know, the entity's record.
func (rl *RateLimiter) cascadeParent(ctx context.Context, entityID string) (string, error) {
	if info, ok := rl.ents.get(entityID); ok && info.known {
		return info.cascadeParent(entityID), nil
	}
	e, err := rl.repo.GetEntity(ctx, entityID)
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

// Available returns, per limit, the whole tokens available now for
// (entityID, resource) — negative when in debt, the capacity when the bucket
// does not exist yet. It only reads: it is the "peek" of other throttles
// (and [RateLimiter.Reset] their "reset").
func (rl *RateLimiter) Available(ctx context.Context, entityID, resource string, opts ...AcquireOption) (map[string]int64, error) {
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	limits, _, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return nil, err
	}
	b, err := rl.store.getBucket(ctx, BucketKey{EntityID: entityID, Resource: resource})
	if err != nil {
		return nil, fmt.Errorf("available %s/%s: %w", entityID, resource, err)
	}
	now := rl.nowMs()
	out := make(map[string]int64, len(limits))
	for _, l := range limits {
		if s, ok := b.State(l.Name); ok {
			s, _ = applyLimit(s, l, now)
			out[l.Name] = calculateAvailable(s, now)
		} else {
			out[l.Name] = l.Capacity
		}
	}
	return out, nil
}

// TimeUntilAvailable returns how long until needed could be acquired for
// (entityID, resource): the longest wait over the limits with a positive
// amount. Missing buckets are full. It only reads.
func (rl *RateLimiter) TimeUntilAvailable(ctx context.Context, entityID, resource string, needed Consume, opts ...AcquireOption) (time.Duration, error) {
	o, err := resolveAcquireOptions(opts)
	if err != nil {
		return 0, err
	}
	limits, _, err := rl.limitsFor(ctx, entityID, resource, o)
	if err != nil {
		return 0, err
	}
	b, err := rl.store.getBucket(ctx, BucketKey{EntityID: entityID, Resource: resource})
	if err != nil {
		return 0, fmt.Errorf("time until available %s/%s: %w", entityID, resource, err)
	}
	now := rl.nowMs()
	var wait time.Duration
	for _, l := range limits {
		n := needed[l.Name]
		if n <= 0 {
			continue
		}
		s, ok := b.State(l.Name)
		if !ok {
			continue
		}
		s, _ = applyLimit(s, l, now)
		wait = max(wait, calculateTimeUntilAvailable(s, n, now))
	}
	return wait, nil
}
