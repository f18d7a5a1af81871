package limiter

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"
)

type principalKey struct{}

// ContextWithPrincipal returns a context whose entity and config changes are
// audited as made by principal (an ARN, or an identifier). It overrides
// DynamoDBOptions.Principal.
func ContextWithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// principal returns the audit principal for ctx, validated: ARNs are taken
// as they are, anything else must be a valid identifier. It is called before
// the audited write, so an invalid principal writes nothing (fix B17).
func (r *DynamoDBRepository) principal(ctx context.Context) (string, error) {
	return principalFrom(ctx, r.opts.Principal)
}

// principalFrom returns the principal carried by ctx, else def, validated
// as [DynamoDBRepository.principal] describes.
func principalFrom(ctx context.Context, def string) (string, error) {
	p, _ := ctx.Value(principalKey{}).(string)
	if p == "" {
		p = def
	}
	if p == "" || strings.HasPrefix(p, "arn:") {
		return p, nil
	}
	if err := ValidateIdentifier(p, "principal"); err != nil {
		return "", err
	}
	return p, nil
}

// logAudit writes one audit event (an unconditional PutItem with a ULID id
// and a TTL of the audit retention).
func (r *DynamoDBRepository) logAudit(ctx context.Context, principal, action, entityID, resource string, details map[string]any) error {
	now := r.opts.Now()
	id, err := ulid.New(ulid.Timestamp(now), ulid.DefaultEntropy())
	if err != nil {
		return err
	}
	if details == nil {
		details = map[string]any{}
	}
	ev := AuditEvent{
		EventID: id.String(), Timestamp: now, Action: action, EntityID: entityID,
		Principal: principal, Resource: resource, Details: details,
	}
	item, err := auditItem(r.nsID, ev, now.Unix()+int64(r.opts.AuditRetention.Seconds()))
	if err != nil {
		return err
	}
	_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
	return wrapErr("write audit event", err)
}
