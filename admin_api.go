// Layer 4, the limiter's administration: the Admin value, the scope of
// stored limits and the listings.

package limiter

import (
	"context"
	"iter"

	"github.com/zaelimiter/limiter/store"
)

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

// OnUnavailable returns the stored on-unavailable mode ("" when unset).
func (a *Admin) OnUnavailable(ctx context.Context) (OnUnavailable, error) {
	_, mode, err := a.rl.getSystemDefaults(ctx)
	return mode, err
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

// all turns a listing read whole into a sequence.
func all[T any](list func() ([]T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		items, err := list()
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
	}
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
