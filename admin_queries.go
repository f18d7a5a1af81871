// Layer 4, mechanics: the administrative read-only queries: audit events,
// usage snapshots and summaries, and the capacity of a resource.

package limiter

import (
	"context"
	"fmt"

	"github.com/oklog/ulid/v2"
	"github.com/zaelimiter/limiter/store"
)

// The read-only queries below need optional capabilities of the repository.
// Each validates its input, finds its interface with a type assertion and
// returns an error matching [ErrUnsupported] when the repository does not
// implement it. [*DynamoDBRepository] implements them all.

// AuditEvents returns up to limit audit events of entityID, newest first
// ([store.DefaultAuditEventsLimit] when limit ≤ 0). With startEventID (the EventID
// of the last event of a previous call) it returns the events older than
// that one, so a caller pages back through history by passing the last id
// it got; fewer than limit events means there are no more. Use
// [store.AuditEntitySystem] or [store.AuditEntityResource] as entityID for the events of
// system and resource defaults. Invalid ids are *[ValidationError]s; nothing
// is read then. It needs an [store.AuditLog] repository.
func (rl *RateLimiter) auditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if err := validateAuditEntityID(entityID); err != nil {
		return nil, err
	}
	if startEventID != "" {
		if _, err := ulid.ParseStrict(startEventID); err != nil {
			return nil, store.NewValidationError(ErrValidation, "start_event_id", startEventID,
				"must be an audit event id (a 26-character ULID)")
		}
	}
	if rl.audit == nil {
		return nil, fmt.Errorf("audit events: %w", ErrUnsupported)
	}
	if limit <= 0 {
		limit = store.DefaultAuditEventsLimit
	}
	return rl.audit.AuditEvents(ctx, entityID, limit, startEventID)
}

// UsageSnapshots returns one page of the usage snapshots q selects, newest
// first, and the cursor of the next page ("" after the last). An invalid
// query is a *[ValidationError]. It needs a [store.UsageStore] repository.
func (rl *RateLimiter) usageSnapshots(ctx context.Context, q UsageQuery) ([]UsageSnapshot, string, error) {
	if err := checkContext(ctx); err != nil {
		return nil, "", err
	}
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	u, ok := rl.repo.(store.UsageStore)
	if !ok {
		return nil, "", fmt.Errorf("usage snapshots: %w", ErrUnsupported)
	}
	return u.UsageSnapshots(ctx, q)
}

// UsageSummary aggregates the usage snapshots q selects (at most
// [store.MaxUsageSummarySnapshots]). An invalid query is a *[ValidationError]. It
// needs a [store.UsageStore] repository.
func (rl *RateLimiter) usageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	if err := checkContext(ctx); err != nil {
		return UsageSummary{}, err
	}
	if err := q.Validate(); err != nil {
		return UsageSummary{}, err
	}
	u, ok := rl.repo.(store.UsageStore)
	if !ok {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", ErrUnsupported)
	}
	return u.UsageSummary(ctx, q)
}

// ResourceCapacity aggregates limit limitName of resource over every entity
// with a bucket for it (only root entities when parentsOnly), with balances
// refilled to the limiter's clock. resource and limitName must be valid
// (the DynamoDB backend's hidden limit cannot be asked for); else a
// *[ValidationError] is returned before anything is read. It needs a
// [store.CapacityReader] repository.
func (rl *RateLimiter) resourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool) (ResourceCapacity, error) {
	if err := checkContext(ctx); err != nil {
		return ResourceCapacity{}, err
	}
	if err := store.ValidateResource(resource); err != nil {
		return ResourceCapacity{}, err
	}
	if err := store.ValidateLimitName(limitName, "limit_name"); err != nil {
		return ResourceCapacity{}, err
	}
	c, ok := rl.repo.(store.CapacityReader)
	if !ok {
		return ResourceCapacity{}, fmt.Errorf("resource capacity: %w", ErrUnsupported)
	}
	return c.ResourceCapacity(ctx, resource, limitName, parentsOnly, rl.now())
}
