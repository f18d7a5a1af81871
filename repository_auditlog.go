package limiter

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
)

// AuditLog is the optional ability to read back the audit events a
// repository records for entity and config changes. A backend may implement
// it; [*DynamoDBRepository] does, and is safe for concurrent use.
// [RateLimiter.AuditEvents] finds it with a type assertion.
type AuditLog interface {
	// AuditEvents returns up to limit events of entityID, newest first,
	// starting after startEventID when it is not empty.
	AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error)
}

var _ AuditLog = (*DynamoDBRepository)(nil)

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
func AuditEntityResource(resource string) string { return auditEntityResource(resource) }

// maxQueryPageLimit caps the Limit of a single Query request.
const maxQueryPageLimit = 1 << 30

// validateAuditEntityID accepts an entity id, [AuditEntitySystem] or
// "$RESOURCE:{resource}" with a valid resource.
func validateAuditEntityID(id string) error {
	switch {
	case id == AuditEntitySystem:
		return nil
	case strings.HasPrefix(id, auditResourcePrefix):
		return ValidateResource(strings.TrimPrefix(id, auditResourcePrefix))
	}
	return ValidateIdentifier(id, "entity_id")
}

// AuditEvents returns up to limit audit events of entityID, newest first
// ([DefaultAuditEventsLimit] when limit ≤ 0). With startEventID (the EventID
// of the last event of a previous call) it returns the events older than
// that one, so a caller pages back through history by passing the last id
// it got; fewer than limit events means there are no more. entityID is an
// entity id, [AuditEntitySystem] or [AuditEntityResource](resource).
//
// Unlike the original, which returns one DynamoDB page that may fall short
// of limit, it reads pages until it has limit events or there are no more.
// Invalid ids are *[ValidationError]s; nothing is read then.
func (r *DynamoDBRepository) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	if err := validateAuditEntityID(entityID); err != nil {
		return nil, err
	}
	if startEventID != "" {
		if _, err := ulid.ParseStrict(startEventID); err != nil {
			return nil, newValidationError(ErrValidation, "start_event_id", startEventID,
				"must be an audit event id (a 26-character ULID)")
		}
	}
	if limit <= 0 {
		limit = DefaultAuditEventsLimit
	}
	pk := pkAudit(r.nsID, entityID)
	in := &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :sk_prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": schemaS(pk), ":sk_prefix": schemaS(skAuditPrefix),
		},
		ScanIndexForward: aws.Bool(false),
	}
	if startEventID != "" {
		in.ExclusiveStartKey = primaryKey(pk, skAudit(startEventID))
	}
	events := make([]AuditEvent, 0, min(limit, 1000))
	for {
		// Asking for no more than still missing keeps the events returned
		// contiguous: the next page starts right after the last one kept.
		in.Limit = aws.Int32(int32(min(limit-len(events), maxQueryPageLimit)))
		out, err := r.client.Query(ctx, in)
		if err != nil {
			return nil, wrapErr("audit events of "+entityID, err)
		}
		for _, item := range out.Items {
			ev, ok, err := auditEventFromItem(item)
			if err != nil {
				return nil, err
			}
			if ok {
				events = append(events, ev)
			}
		}
		if len(out.LastEvaluatedKey) == 0 || len(events) >= limit {
			return events, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
