package limiter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxQueryPageLimit caps the Limit of a single Query request.
const maxQueryPageLimit = 1 << 30

// AppendAudit implements [store.AuditLog]: one PutItem of the event under the
// entity's audit partition, with a TTL of expires.
func (r *DynamoDBRepository) AppendAudit(ctx context.Context, ev AuditEvent, expires time.Time) error {
	item, err := auditItem(r.nsID, ev, expires.Unix())
	if err != nil {
		return err
	}
	_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
	return wrapErr("write audit event", err)
}

// AuditEvents implements [store.AuditLog]: a Query of the entity's audit
// partition, newest first, from after startEventID. Unlike the original,
// which returns one DynamoDB page that may fall short of limit, it reads
// pages until it has limit events or there are no more.
func (r *DynamoDBRepository) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
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
