package limiter

import (
	"context"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/zaelimiter/limiter/store"
)

// Audit events: every entity and limit change made through a [RateLimiter]
// is recorded, when the repository is an [store.AuditLog], with who made it (the
// principal), when, and what changed, in the Python library's format.

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
// [WithPrincipal].
func ContextWithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// principalFor returns the audit principal of a change made with ctx: the
// context's, else the limiter's. ARNs are taken as they are; anything else
// must be a valid identifier. It is called before the change's first write,
// so that an invalid principal writes nothing. A done ctx returns its error.
func (rl *RateLimiter) principalFor(ctx context.Context) (string, error) {
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
func (rl *RateLimiter) record(ctx context.Context, principal, action, entityID, resource string, details map[string]any) error {
	if rl.audit == nil {
		return nil
	}
	now := rl.now()
	id, err := ulid.New(ulid.Timestamp(now), ulid.DefaultEntropy())
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
// per limit with the original's keys (tokens and seconds).
func auditLimitDetails(limits []Limit) []any {
	out := make([]any, len(limits))
	for i, l := range limits {
		out[i] = auditLimitDetail(l)
	}
	return out
}

// auditLimitDetail is one limit as the original records it in audit
// details (Limit.to_dict).
func auditLimitDetail(l Limit) map[string]any {
	return map[string]any{
		"name":                  l.Name,
		"capacity":              l.Capacity,
		"refill_amount":         l.RefillAmount,
		"refill_period_seconds": l.RefillPeriodSeconds(),
	}
}
