package limiter

import (
	"context"
	"fmt"
)

// The read-only queries below need optional abilities of the repository
// (STYLE R27). Each finds its interface with a type assertion on
// [RateLimiter.Repository] and returns an error matching [ErrUnsupported]
// when the repository does not implement it. [*DynamoDBRepository]
// implements them all.

// AuditEvents returns up to limit audit events of entityID, newest first
// (100 when limit ≤ 0), older than startEventID when it is not empty. Use
// [AuditEntitySystem] or [AuditEntityResource] as entityID for the events of
// system and resource defaults. See [DynamoDBRepository.AuditEvents]. It
// needs an [AuditLog] repository.
func (rl *RateLimiter) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	a, ok := rl.Repository().(AuditLog)
	if !ok {
		return nil, fmt.Errorf("audit events: %w", ErrUnsupported)
	}
	return a.AuditEvents(ctx, entityID, limit, startEventID)
}

// UsageSnapshots returns one page of the usage snapshots q selects, newest
// first, and the cursor of the next page ("" after the last). See
// [DynamoDBRepository.UsageSnapshots]. It needs a [UsageStore] repository.
func (rl *RateLimiter) UsageSnapshots(ctx context.Context, q UsageQuery) ([]UsageSnapshot, string, error) {
	u, ok := rl.Repository().(UsageStore)
	if !ok {
		return nil, "", fmt.Errorf("usage snapshots: %w", ErrUnsupported)
	}
	return u.UsageSnapshots(ctx, q)
}

// UsageSummary aggregates the usage snapshots q selects (at most
// [MaxUsageSummarySnapshots]). See [DynamoDBRepository.UsageSummary]. It
// needs a [UsageStore] repository.
func (rl *RateLimiter) UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	u, ok := rl.Repository().(UsageStore)
	if !ok {
		return UsageSummary{}, fmt.Errorf("usage summary: %w", ErrUnsupported)
	}
	return u.UsageSummary(ctx, q)
}

// ResourceCapacity aggregates limit limitName of resource over every entity
// with a bucket for it (only root entities when parentsOnly), refilled to
// the repository's clock (not the one set by [WithClock]). See
// [DynamoDBRepository.ResourceCapacity]. It needs a [CapacityReader]
// repository.
func (rl *RateLimiter) ResourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool) (ResourceCapacity, error) {
	c, ok := rl.Repository().(CapacityReader)
	if !ok {
		return ResourceCapacity{}, fmt.Errorf("resource capacity: %w", ErrUnsupported)
	}
	return c.ResourceCapacity(ctx, resource, limitName, parentsOnly)
}
