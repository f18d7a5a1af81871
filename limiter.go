// Layer 4, mechanics: the RateLimiter, its options and New, which put the
// rules and the mechanics together; its administration (Admin) and its
// counters (Stats).

package limiter

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter/store"
)

// RateLimiter rate-limits calls per (entity, resource) against a
// [Repository]. It owns every rule — validation, the precedence of stored
// limits and their cache, bucket math and TTLs, audit events — and keeps
// the per-key state of this process (config cache, entity cache, group
// commit, over-limit cache); the repository only stores. It is safe for
// concurrent use. The zero value is not usable; call [New].
//
// # Guarantees
//
// The limit an operator sets is the limit enforced. No request is admitted
// beyond a limit's capacity plus its refill, under any concurrency, on any
// backend. A limit change takes effect on the next acquire (in another
// process, within its config cache TTL). Invalid input — a negative amount,
// a limit name no limit has, an entity that would be its own ancestor — is
// a *[ValidationError] before anything is written. An Acquire returns
// within its context's deadline even when the store hangs, and each store
// call ends within the store timeout ([Options.StoreTimeout]); in allow mode
// the no-op lease comes before the deadline, and once the store failed
// repeatedly the circuit breaker ([Options.CircuitFailures]) decides at once.
// What a write took after its caller gave up is given back when its
// answer comes within the store timeout: the consumption counters equal
// what the committed leases consumed.
//
// # Options
//
// New takes functions over an [Options] struct, which it fills with the
// defaults first, as every constructor of this module does (the AWS SDK's
// style: func(*DynamoDBOptions), func(*httplimit.Options), ...); most
// users set none. Each call takes [AcquireOption]s (WithLimits and its
// friends), built once and reused.
//
// # Hot keys
//
// Group commit ([Options.GroupCommit], on by default) merges concurrent writes
// to one bucket item from this process into one conditional write; the
// over-limit cache ([Options.OverLimitCacheMaxWait], opt-in) refuses requests for a
// bucket just found exhausted without a store call, for a bounded time.
// [Options.Logger] logs the limiter's decisions with log/slog and [Options.Metrics]
// reports acquire outcomes, latencies and store calls (package otelmetrics
// reports them to OpenTelemetry).
//
// # Memory
//
// Everything a RateLimiter keeps per key (stored limits, entity hints,
// exhausted buckets) is bounded in size and in age, so that a long-running
// service that sees a steady stream of new keys keeps a flat heap:
// [Options.ConfigCacheSize], [Options.EntityCacheTTL], [RateLimiter.Stats] and
// [CacheMetrics]. An evicted key costs a read when it comes back, never a
// wrong decision.
//
// # Units
//
// Limits are configured in whole tokens and whole-second periods. Buckets
// are stored in millitokens (tokens × 1000) and epoch milliseconds, as
// package store's BucketState exposes them.
type RateLimiter struct {
	rules // the repository, the clock, the caches and settings of the rules

	speculative bool
	// pairWrites is set when an acquire of one or two bucket items is
	// cheaper as one conditional write per item than as one atomic batch
	// (DynamoDB; see itemsShape).
	pairWrites bool
	slotTTL    time.Duration // of in-flight limits; 0 is defaultSlotTTL
	slotWaits  slotWaiters   // the Waits refused by an in-flight limit, per item
	slotViews  slotViews     // the free slots those Waits read, per item
	slotItems  slotGens      // the generations of in-flight slots items hold
	// slotGenFlights holds the acquires preparing an item's generations
	// (addSlotGens), per item.
	slotGenFlights slowFlights
	stats          specStats
	slowFlights    slowFlights // read-then-write acquires in flight, per bucket item
	// slotPoll, when positive, is the longest a slot keeper sleeps before
	// it reads the clock again; zero sleeps until the renewal is due. Only
	// tests set it: their clock (Options.Clock) jumps ahead of the real time
	// a keeper's timer counts.
	slotPoll time.Duration

	admin Admin // its administration (Admin), bound to it by New

	// Bounds of the per-key caches.
	cacheSizes [numCaches]int
	entityTTL  time.Duration
	cacheEvent cacheEventFunc // nil: cache events are not reported

	// Hot keys: group commit and the over-limit cache.
	noGroupCommit    bool
	overLimitMaxWait time.Duration
	gc               *groupCommit // nil when group commit is off
	backgroundCommit bool
	commits          *commits        // nil when background commit is off
	olc              *overLimitCache // nil when the over-limit cache is off

	// The store's bound and circuit breaker.
	storeTimeout    time.Duration
	circuitFailures int
	circuitCooldown time.Duration

	gate closeGate // the calls in progress, and Close
}

// closeGate counts the calls of the limiter in progress and refuses new
// ones once Close started.
type closeGate struct {
	// state is the number of calls in progress, plus gateClosed once
	// Close started.
	state atomic.Int64
	// life ends when Close starts: it wakes Wait's sleeps.
	life     context.Context
	stopLife context.CancelFunc
	// drained is closed once Close started and no call is in progress.
	drained   chan struct{}
	drainOnce sync.Once
	closeOnce sync.Once
	// closed is closed when Close has ended.
	closed chan struct{}
}

// gateClosed is added to closeGate.state by Close: far above any number
// of calls in progress.
const gateClosed = 1 << 62

// closeWait returns how long Close waits for the calls in progress: every
// store call they make ends within the store timeout of Close's start (the
// last epoch, storeBound.closing), and they get as long again for what
// they do between calls. Without a store timeout, closeWaitUnbounded.
func (rl *RateLimiter) closeWait() time.Duration {
	if d := rl.store.bound.d; d > 0 {
		return 2 * d
	}
	return closeWaitUnbounded
}

// closeWaitUnbounded is closeWait when store calls are not bounded
// (Options.StoreTimeout of zero or less).
const closeWaitUnbounded = 20 * time.Second

func (g *closeGate) init() {
	g.life, g.stopLife = context.WithCancel(context.Background())
	g.drained = make(chan struct{})
	g.closed = make(chan struct{})
}

// enter starts a call of the limiter: ErrClosed once Close started;
// otherwise the caller calls exit when the call ends.
func (rl *RateLimiter) enter() error {
	if rl.gate.state.Add(1) >= gateClosed {
		rl.exit()
		return ErrClosed
	}
	return nil
}

// enterAs is enter for an administrative call: it also resolves the
// principal its audit events name, and exits again when that fails. The
// caller must call exit once it returned no error.
func (rl *RateLimiter) enterAs(ctx context.Context) (string, error) {
	if err := rl.enter(); err != nil {
		return "", err
	}
	principal, err := rl.principalFor(ctx)
	if err != nil {
		rl.exit()
		return "", err
	}
	return principal, nil
}

// exit ends a call started by enter.
func (rl *RateLimiter) exit() {
	if rl.gate.state.Add(-1) == gateClosed {
		rl.gate.drainOnce.Do(func() { close(rl.gate.drained) })
	}
}

// New returns a RateLimiter backed by repo. Nil options are skipped.
//
// A nil repo (also a nil pointer of a repository type, such as the
// *[DynamoDBRepository] of a failed [OpenDynamoDB] whose error went
// unchecked) is a programming error: New panics with "limiter: New: nil
// repository", as [regexp.MustCompile] and net/http's Handle do on misuse
// at setup, rather than failing later at the first call with a nil
// dereference.
func New(repo Repository, optFns ...func(*Options)) *RateLimiter {
	if isNil(repo) {
		panic(fmt.Sprintf("limiter: New: nil repository (%T)", repo))
	}
	repo = store.Unwrap(repo)
	o := defaultOptions()
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.CircuitCooldown <= 0 {
		o.CircuitCooldown = defaultCircuitCooldown
	}
	rl := &RateLimiter{
		rules: rules{
			repo:           repo,
			now:            o.Clock,
			sleep:          sleepContext,
			intN:           rand.IntN,
			ttlMultiplier:  o.BucketTTLPeriods,
			configTTL:      max(o.ConfigCacheTTL, 0),
			principal:      o.Principal,
			auditRetention: o.AuditRetention,
		},
		speculative:      o.SpeculativeWrites,
		noGroupCommit:    !o.GroupCommit,
		backgroundCommit: o.BackgroundCommit,
		entityTTL:        max(o.EntityCacheTTL, 0),
		storeTimeout:     o.StoreTimeout,
		circuitFailures:  o.CircuitFailures,
		circuitCooldown:  o.CircuitCooldown,
		overLimitMaxWait: o.OverLimitCacheMaxWait,
		slotTTL:          o.SlotTTL,
		cacheSizes:       [numCaches]int{max(o.ConfigCacheSize, 0), max(o.EntityCacheSize, 0), max(o.OverLimitCacheSize, 0)},
	}
	rl.obs.log, rl.obs.metrics = o.Logger, o.Metrics
	rl.admin.rl = rl
	if rl.auditRetention <= 0 {
		rl.auditRetention = defaultAuditRetention
	}
	rl.audit, _ = repo.(store.AuditLog)
	rl.store.init(repo, rl.obs.metrics, rl.storeTimeout, rl.circuitFailures, rl.circuitCooldown)
	rl.store.brk.changed = rl.circuitChanged
	if rl.store.spec == nil {
		rl.speculative = false
	}
	_, rl.pairWrites = repo.(pairWriter)
	if rl.obs.metrics != nil {
		rl.stats.hook = rl.obs.metrics.SpeculativeOutcome
	}
	rl.initCaches()
	rl.initHotKeys()
	rl.gate.init()
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

// Now returns the limiter's reading of the clock ([Options.Clock]; the system
// clock by default): the time its acquires and calendar periods are
// computed at.
func (rl *RateLimiter) Now() time.Time { return rl.now() }

// Close shuts the limiter down. It is safe to call while other goroutines
// use the limiter, and more than once (a later call waits for the first
// and returns nil). From the moment it starts, every new call that reads
// or writes buckets or stored settings (Acquire, AcquireAll, Wait, Do,
// Available, TimeUntilAvailable, Lease.Commit, Lease.Rollback,
// LowerTokens, Reset and the administrative writes) fails with
// [ErrClosed] and writes nothing, and a Wait sleeping for a refill wakes
// with it; every store call started from then on ends within one store
// timeout ([Options.StoreTimeout]) of the call to Close. Close then waits for
// the calls in progress to end (at most twice the store timeout), writes
// the adjustments queued by background commits ([Options.BackgroundCommit]),
// and waits until every write the limiter still runs for callers that gave
// up has ended and its tokens were given back: with a store that does not
// answer, it returns within about the store timeout. After it returns, no
// goroutine of the limiter runs. A lease acquired before Close can no
// longer be committed or rolled back: its acquire stays charged.
func (rl *RateLimiter) Close() error {
	g := &rl.gate
	first := false
	g.closeOnce.Do(func() { first = true })
	if !first {
		<-g.closed
		return nil
	}
	g.stopLife()
	rl.store.bound.closing()
	if g.state.Add(gateClosed) == gateClosed {
		g.drainOnce.Do(func() { close(g.drained) })
	}
	t := time.NewTimer(rl.closeWait())
	select {
	case <-g.drained:
	case <-t.C:
	}
	t.Stop()
	if rl.commits != nil {
		rl.commits.close()
	}
	rl.bg.wait()
	rl.store.bound.close()
	rl.store.brk.stop()
	close(g.closed)
	return nil
}

// initCaches creates the per-key caches from the options.
func (rl *RateLimiter) initCaches() {
	if cm, ok := rl.obs.metrics.(CacheMetrics); ok {
		rl.cacheEvent = cm.CacheEvent
	}
	rl.configs = newConfigCache(rl.configTTL, rl.cacheSizes[CacheConfigs], rl.now, rl.store.loadConfigs)
	rl.configs.event = rl.cacheEvent
	rl.ents = newEntityCache(rl.cacheSizes[CacheEntities], rl.entityTTL, rl.now)
	rl.ents.event = rl.cacheEvent
}

// initHotKeys sets up group commit and the over-limit cache from the
// options.
func (rl *RateLimiter) initHotKeys() {
	if !rl.noGroupCommit {
		rl.gc = newGroupCommit(&rl.store, &rl.bg, rl.nowMs)
	}
	if rl.backgroundCommit {
		rl.commits = newCommits(&rl.rules)
		rl.store.pending = rl.commits
	}
	if rl.overLimitMaxWait > 0 {
		rl.olc = newOverLimitCache(rl.overLimitMaxWait, rl.cacheSizes[CacheOverLimit], rl.cacheEvent)
	}
}

// overLimitRefuse refuses an acquire locally when a cached exhausted bucket
// of the entity, or of the parent it cascades to, refilled to now, cannot
// satisfy consume. It returns nil when the store must decide.
func (rl *RateLimiter) overLimitRefuse(entityID, resource string, consume Consume) error {
	c := rl.olc
	if c == nil {
		return nil
	}
	info, _ := rl.ents.get(entityID)
	parentID := info.cascadeParent(entityID)
	now := rl.nowMs()
	child, cok := c.get(store.BucketKey{EntityID: entityID, Resource: resource}, now)
	var parent *store.Bucket
	pok := false
	if parentID != "" {
		parent, pok = c.get(store.BucketKey{EntityID: parentID, Resource: resource}, now)
	}
	if !cok && !pok {
		return nil
	}
	refused := false
	var statuses []LimitStatus
	for _, b := range []*store.Bucket{child, parent} {
		if b == nil {
			continue
		}
		ok, st := wouldRefillSatisfy(b.States, consume, now)
		refused = refused || !ok
		statuses = append(statuses, st...)
	}
	if !refused {
		return nil
	}
	c.hits.Add(1)
	return newRateLimitExceededError(statuses)
}

// overLimitRemember caches b, whose stored state refused an acquire at now
// with err (a fast rejection), until min(err.RetryAfter, maxWait).
func (rl *RateLimiter) overLimitRemember(b *store.Bucket, now int64, err *RateLimitExceededError) {
	c := rl.olc
	if c == nil || b == nil || b.ShardCount > 1 || b.Key.Shard != 0 || err.RetryAfter <= 0 {
		return
	}
	wait := min(err.RetryAfter, c.maxWait)
	key := store.BucketKey{EntityID: b.Key.EntityID, Resource: b.Key.Resource}
	c.mu.Lock()
	evicted := c.entries.Add(key, overLimitEntry{bucket: b, expiresMs: now + wait.Milliseconds()}, time.UnixMilli(now))
	c.mu.Unlock()
	if evicted > 0 && c.event != nil {
		c.event(CacheOverLimit, CacheEviction, int64(evicted))
	}
}

// overLimitSeen clears the entry of the bucket w adjusts: a commit or
// rollback by this process may have given tokens back.
func (rl *RateLimiter) overLimitSeen(w store.BucketWrite) {
	c := rl.olc
	if c == nil {
		return
	}
	c.mu.Lock()
	c.entries.Remove(store.BucketKey{EntityID: w.Key.EntityID, Resource: w.Key.Resource})
	c.mu.Unlock()
}

// overLimitReset forgets every entry: stored limits changed through this
// limiter, so a kept item's limits may be stale.
func (rl *RateLimiter) overLimitReset() {
	c := rl.olc
	if c == nil {
		return
	}
	c.mu.Lock()
	c.entries.Clear()
	c.mu.Unlock()
}

// Admin administers what a [RateLimiter] enforces: entities, stored
// limits, and the records the store keeps (audit events, usage snapshots).
// Get it with [RateLimiter.Admin]; it shares the limiter's store, clock,
// caches and audit principal, so a change made through it takes effect on
// the limiter's next acquire. It is safe for concurrent use.
//
// Its calls are not bounded by [Options.StoreTimeout] (their context
// decides), and fail with [ErrClosed] once the limiter is closed.
type Admin struct {
	rl *RateLimiter
}

// Admin returns the limiter's administration.
func (rl *RateLimiter) Admin() *Admin { return &rl.admin }

// Scope names where stored limits live:
//
//   - Scope{Entity: e, Resource: r}: entity e's limits on resource r; with
//     Resource empty (or [DefaultResource]), e's limits on every resource
//     without limits of its own; with Resource [AllResources], e's
//     entity-wide budget.
//   - Scope{Resource: r}: the defaults of resource r, for every entity
//     without limits of its own there.
//   - Scope{}: the namespace's system defaults, for every resource
//     without defaults of its own.
//
// An acquire takes the first of entity (resource), entity (default),
// resource and system that holds limits ([Admin.ResolveLimits]).
type Scope struct {
	Entity   string
	Resource string
}

// resource returns the config resource of an entity scope.
func (s Scope) resource() string {
	if s.Resource == "" {
		return DefaultResource
	}
	return s.Resource
}

// CreateEntity creates e, or fails with *[EntityExistsError]. With
// e.Cascade its acquires also charge its parent's buckets (up to
// [MaxCascadeLevels] levels of parents). It records an entity_created
// audit event.
func (a *Admin) CreateEntity(ctx context.Context, e Entity) (Entity, error) {
	return a.rl.createEntity(ctx, e)
}

// Entity returns the entity id, or an *[EntityNotFoundError].
func (a *Admin) Entity(ctx context.Context, id string) (Entity, error) {
	return a.rl.getEntity(ctx, id)
}

// DeleteEntity deletes an entity with its stored limits and buckets, and
// records an entity_deleted audit event; see [Admin.CreateEntity].
func (a *Admin) DeleteEntity(ctx context.Context, id string) error {
	return a.rl.deleteEntity(ctx, id)
}

// Entities yields the namespace's entities in ID order, reading them a page
// at a time as the loop asks for more. A failure is yielded once, last.
func (a *Admin) Entities(ctx context.Context) iter.Seq2[Entity, error] {
	return pages(func(cursor string) ([]Entity, string, error) {
		return a.rl.listEntities(ctx, listPageSize, cursor)
	})
}

// Children yields the entities whose parent is parentID.
func (a *Admin) Children(ctx context.Context, parentID string) iter.Seq2[Entity, error] {
	return all(func() ([]Entity, error) { return a.rl.children(ctx, parentID) })
}

// SetLimits stores limits at scope s, replacing any stored there before,
// and records a limits_set audit event. An entity's bucket takes the new
// parameters at once and no longer expires (entity-level config). A limit
// whose kind (rolling, calendar, prepaid, in flight), calendar period or
// zone changes keeps what the old definition spent at this instant: the
// new one's bucket for now holds at most its capacity less that (nothing
// carries into or out of a prepaid balance). At the system scope the
// stored on-unavailable mode stays ([Admin.SetSystemDefaults]); on DynamoDB
// what other tools keep on the system config's item stays too.
func (a *Admin) SetLimits(ctx context.Context, s Scope, limits []Limit) error {
	ls := storeLimits(limits)
	switch {
	case s.Entity != "":
		return a.rl.setLimits(ctx, s.Entity, s.resource(), ls)
	case s.Resource != "":
		return a.rl.setResourceDefaults(ctx, s.Resource, ls)
	}
	return a.rl.setSystemDefaults(ctx, ls, keepOnUnavailable)
}

// Limits returns the limits stored at scope s, nil when none are.
func (a *Admin) Limits(ctx context.Context, s Scope) ([]Limit, error) {
	var ls []store.Limit
	var err error
	switch {
	case s.Entity != "":
		ls, err = a.rl.getLimits(ctx, s.Entity, s.resource())
	case s.Resource != "":
		ls, err = a.rl.getResourceDefaults(ctx, s.Resource)
	default:
		ls, _, err = a.rl.getSystemDefaults(ctx)
	}
	return callerLimits(ls), err
}

// DeleteLimits deletes the limits stored at scope s (nothing stored is no
// error) and records a limits_deleted audit event. At the system scope it
// deletes the on-unavailable mode too; the records of switches of kinds
// stay, so that buckets created later still keep what the old definitions
// spent.
func (a *Admin) DeleteLimits(ctx context.Context, s Scope) error {
	switch {
	case s.Entity != "":
		return a.rl.deleteLimits(ctx, s.Entity, s.resource())
	case s.Resource != "":
		return a.rl.deleteResourceDefaults(ctx, s.Resource)
	}
	return a.rl.deleteSystemDefaults(ctx)
}

// SetSystemDefaults stores the namespace's system defaults, limits and
// on-unavailable mode (what acquires do when the store fails:
// [OnUnavailableAllow] or [OnUnavailableBlock]; "" leaves it unset, which
// means block), in one write that replaces both, and records one
// limits_set audit event. An acquire's [WithOnUnavailable] overrides the
// mode. [Admin.SetLimits] at Scope{} changes the limits alone.
func (a *Admin) SetSystemDefaults(ctx context.Context, limits []Limit, mode OnUnavailable) error {
	if mode == keepOnUnavailable {
		mode = ""
	}
	ls := storeLimits(limits)
	if ls == nil {
		ls = []store.Limit{}
	}
	return a.rl.setSystemDefaults(ctx, ls, mode)
}

// SystemDefaults returns the system defaults: their limits, as
// Limits(ctx, Scope{}) does, and their on-unavailable mode ("" when
// unset), as [Admin.SetSystemDefaults] stores them.
func (a *Admin) SystemDefaults(ctx context.Context) ([]Limit, OnUnavailable, error) {
	ls, mode, err := a.rl.getSystemDefaults(ctx)
	return callerLimits(ls), mode, err
}

// ResolveLimits returns the stored limits that apply to (entityID,
// resource) and the level they come from, without the config cache.
func (a *Admin) ResolveLimits(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, error) {
	ls, src, err := a.rl.resolveLimits(ctx, entityID, resource)
	return callerLimits(ls), src, err
}

// EntitiesWithLimits yields, in ID order, the entities with limits stored
// for resource (or [DefaultResource]).
func (a *Admin) EntitiesWithLimits(ctx context.Context, resource string) iter.Seq2[string, error] {
	return pages(func(cursor string) ([]string, string, error) {
		return a.rl.listEntitiesWithCustomLimits(ctx, resource, listPageSize, cursor)
	})
}

// ResourcesWithDefaults yields, sorted, the resources with default limits.
func (a *Admin) ResourcesWithDefaults(ctx context.Context) iter.Seq2[string, error] {
	return all(func() ([]string, error) { return a.rl.listResourcesWithDefaults(ctx) })
}

// ResourcesWithEntityLimits yields, sorted, the resources some entity has
// limits stored for.
func (a *Admin) ResourcesWithEntityLimits(ctx context.Context) iter.Seq2[string, error] {
	return all(func() ([]string, error) { return a.rl.listResourcesWithEntityConfigs(ctx) })
}

// AuditEvents yields the audit events of entityID, newest first, reading
// them a page at a time as the loop asks for more. Use
// [store.AuditEntitySystem] or [store.AuditEntityResource] as entityID for
// the events of system and resource defaults. An invalid id is a
// *[ValidationError]. It needs an [store.AuditLog] store.
func (a *Admin) AuditEvents(ctx context.Context, entityID string) iter.Seq2[AuditEvent, error] {
	return func(yield func(AuditEvent, error) bool) {
		start := ""
		for {
			evs, err := a.rl.auditEvents(ctx, entityID, store.DefaultAuditEventsLimit, start)
			if err != nil {
				yield(AuditEvent{}, err)
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
			}
			if len(evs) < store.DefaultAuditEventsLimit {
				return
			}
			start = evs[len(evs)-1].EventID
		}
	}
}

// UsageSnapshots yields the usage snapshots q selects, newest first,
// reading them q.Limit at a time as the loop asks for more (q.Cursor, when
// set, is where the first page starts). An invalid query is a
// *[ValidationError]. It needs a [store.UsageStore] store.
func (a *Admin) UsageSnapshots(ctx context.Context, q UsageQuery) iter.Seq2[UsageSnapshot, error] {
	return pages(func(cursor string) ([]UsageSnapshot, string, error) {
		if cursor != "" {
			q.Cursor = cursor
		}
		return a.rl.usageSnapshots(ctx, q)
	})
}

// UsageSummary aggregates the usage snapshots q selects. It needs a
// [store.UsageStore] store.
func (a *Admin) UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	return a.rl.usageSummary(ctx, q)
}

// ResourceCapacity sums the capacity of limitName over the entities with
// limits stored for resource (their parents only, with parentsOnly).
func (a *Admin) ResourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool) (ResourceCapacity, error) {
	return a.rl.resourceCapacity(ctx, resource, limitName, parentsOnly)
}

// InvalidateCaches drops every cached config (and the remembered
// on-unavailable mode), so that the next acquire reads them again.
func (a *Admin) InvalidateCaches() { a.rl.configs.invalidate() }

// listPageSize is the page size of the paged listings.
const listPageSize = 100

// pages turns a paged listing (cursor in, page and next cursor out; ""
// after the last page) into a sequence. A failure is yielded once, last.
func pages[T any](page func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			items, next, err := page(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" || next == cursor {
				return
			}
			cursor = next
		}
	}
}

// all turns a listing read whole into a sequence: one page, no cursor.
func all[T any](list func() ([]T, error)) iter.Seq2[T, error] {
	return pages(func(string) ([]T, string, error) {
		items, err := list()
		return items, "", err
	})
}

// Stats are a limiter's counters since [New] ([RateLimiter.Stats]).
type Stats struct {
	// Configs, Entities and OverLimit are the per-key caches' statistics
	// (OverLimit is all zero while the over-limit cache is off).
	Configs, Entities, OverLimit CacheStats
	// OverLimitHits counts the acquires the over-limit cache refused
	// without a store call.
	OverLimitHits int64
	// Speculative counts the speculative writes and their outcomes.
	Speculative store.SpeculativeStats
	// CircuitOpen is set while the circuit breaker is open or half-open.
	CircuitOpen bool
}

// Stats returns the limiter's counters. It is cheap: it reads atomic
// counters and takes no lock the acquires hold for long.
func (rl *RateLimiter) Stats() Stats {
	st := Stats{
		Configs:  rl.configs.stats(),
		Entities: rl.ents.stats(),
	}
	if rl.olc != nil {
		st.OverLimit = rl.olc.stats()
		st.OverLimitHits = rl.olc.hits.Load()
	}
	st.Speculative.Attempts = rl.stats.attempts.Load()
	for i := range st.Speculative.Counts {
		st.Speculative.Counts[i] = rl.stats.counts[i].Load()
	}
	st.CircuitOpen = rl.store.brk.state.Load() != int32(circuitClosed)
	return st
}

// writeAdjusts writes the single-item adjustments writes (a lease's
// commit, one per item) and returns each one's error: one after the other,
// or all at once on a repository whose single-item writes are cheaper
// than its atomic batch (pairWrites: DynamoDB, where each is a round
// trip), as the acquire wrote them. On DynamoDB a cascade's commit thus
// costs one round trip, and the parent's slots and tokens come back no
// later than the child's.
func (rl *RateLimiter) writeAdjusts(ctx context.Context, writes []store.BucketWrite) []error {
	errs := make([]error, len(writes))
	if len(writes) == 1 || !rl.pairWrites {
		for i, w := range writes {
			errs[i] = rl.writeAdjust(ctx, w)
		}
		return errs
	}
	var wg sync.WaitGroup
	for i, w := range writes[1:] {
		wg.Go(func() { errs[i+1] = rl.writeAdjust(ctx, w) })
	}
	errs[0] = rl.writeAdjust(ctx, writes[0])
	wg.Wait()
	return errs
}

// commitsLater implements leaseWriter.
func (rl *RateLimiter) commitsLater() bool { return rl.commits != nil }

// commitLater implements leaseWriter: with background commit on, it
// queues writes (a committed lease's adjustments) and
// reports true; off, or once Close started, it does nothing and reports
// false.
func (rl *RateLimiter) commitLater(writes []store.BucketWrite) bool {
	if rl.commits == nil {
		return false
	}
	if !rl.commits.queue(writes) {
		return false // Close started: Commit writes them itself
	}
	for _, w := range writes {
		rl.overLimitSeen(w)
	}
	return true
}

// checkContext refuses a nil context (a typed error, not a panic) and
// returns a done context's error.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return ctx.Err()
}
