package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxBatchWriteItems is DynamoDB's BatchWriteItem limit.
const maxBatchWriteItems = 25

// CreateEntity stores a new entity. ID (and ParentID, when set) must be
// valid identifiers; Name defaults to ID. The parent's existence is not
// checked. It fails with *[EntityExistsError] when the entity exists, and
// records an entity_created audit event.
func (r *DynamoDBRepository) CreateEntity(ctx context.Context, e Entity) (Entity, error) {
	if err := ValidateIdentifier(e.ID, "entity_id"); err != nil {
		return Entity{}, err
	}
	if e.ParentID != "" {
		if err := ValidateIdentifier(e.ParentID, "parent_id"); err != nil {
			return Entity{}, err
		}
	}
	principal, err := r.principal(ctx)
	if err != nil {
		return Entity{}, err
	}
	if e.Name == "" {
		e.Name = e.ID
	}
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	e.CreatedAt = r.opts.Now().UTC().Truncate(1e9)
	_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(r.opts.Table),
		Item:                entityItem(r.nsID, e),
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return Entity{}, &EntityExistsError{EntityID: e.ID}
	}
	if err != nil {
		return Entity{}, wrapErr("create entity "+e.ID, err)
	}
	r.ents.SetEntity(e.ID, true, e.Cascade, e.ParentID)
	metadata := make(map[string]any, len(e.Metadata))
	for k, v := range e.Metadata {
		metadata[k] = v
	}
	var parent any
	if e.ParentID != "" {
		parent = e.ParentID
	}
	details := map[string]any{"name": e.Name, "parent_id": parent, "cascade": e.Cascade, "metadata": metadata}
	if err := r.logAudit(ctx, principal, AuditEntityCreated, e.ID, "", details); err != nil {
		return e, err
	}
	return e, nil
}

// GetEntity returns the entity, or *[EntityNotFoundError].
func (r *DynamoDBRepository) GetEntity(ctx context.Context, id string) (Entity, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       primaryKey(pkEntity(r.nsID, id), skMeta),
	})
	if err != nil {
		return Entity{}, wrapErr("get entity "+id, err)
	}
	if len(out.Item) == 0 {
		r.ents.SetEntity(id, false, false, "")
		return Entity{}, &EntityNotFoundError{EntityID: id}
	}
	e := entityFromItem(out.Item)
	r.ents.SetEntity(id, true, e.Cascade, e.ParentID)
	return e, nil
}

// Children returns the entities whose parent is parentID (every page).
func (r *DynamoDBRepository) Children(ctx context.Context, parentID string) ([]Entity, error) {
	items, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI1),
		KeyConditionExpression:    aws.String("GSI1PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(gsi1PKParent(r.nsID, parentID))},
	})
	if err != nil {
		return nil, wrapErr("children of "+parentID, err)
	}
	out := make([]Entity, 0, len(items))
	for _, item := range items {
		out = append(out, entityFromItem(item))
	}
	return out, nil
}

// DeleteEntity deletes the entity's META record, stored limits, usage
// snapshots and every bucket (all resources and shards), and records an
// entity_deleted audit event. Audit events are kept; children are not
// touched. Deleting a missing entity does nothing.
func (r *DynamoDBRepository) DeleteEntity(ctx context.Context, id string) error {
	principal, err := r.principal(ctx)
	if err != nil {
		return err
	}
	pk := pkEntity(r.nsID, id)
	own, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
		ProjectionExpression:      aws.String("PK, SK"),
	})
	if err != nil {
		return wrapErr("delete entity "+id, err)
	}
	buckets, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
	})
	if err != nil {
		return wrapErr("delete entity "+id, err)
	}
	keys := make([]map[string]types.AttributeValue, 0, len(own)+len(buckets))
	var configResources []string
	for _, item := range append(own, buckets...) {
		keys = append(keys, map[string]types.AttributeValue{attrPK: item[attrPK], attrSK: item[attrSK]})
		if sk, _ := schemaGetS(item, attrSK); strings.HasPrefix(sk, skConfigPrefix+"#") {
			configResources = append(configResources, strings.TrimPrefix(sk, skConfigPrefix+"#"))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := r.batchDelete(ctx, keys); err != nil {
		return wrapErr("delete entity "+id, err)
	}
	for _, res := range configResources {
		r.cache.evict(configKey{level: levelEntity, entityID: id, resource: res})
		if err := r.decrementEntityConfigCount(ctx, res); err != nil {
			return err
		}
	}
	r.ents.Forget(id)
	return r.logAudit(ctx, principal, AuditEntityDeleted, id, "", map[string]any{"records_deleted": int64(len(keys))})
}

// queryAll runs a query through every page.
func (r *DynamoDBRepository) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(r.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// batchDelete deletes keys with BatchWriteItem in chunks of 25, re-sending
// UnprocessedItems until none are left.
func (r *DynamoDBRepository) batchDelete(ctx context.Context, keys []map[string]types.AttributeValue) error {
	for start := 0; start < len(keys); start += maxBatchWriteItems {
		reqs := make([]types.WriteRequest, 0, maxBatchWriteItems)
		for _, k := range keys[start:min(start+maxBatchWriteItems, len(keys))] {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		pending := map[string][]types.WriteRequest{r.opts.Table: reqs}
		for round := 0; len(pending) > 0; round++ {
			if round > 0 {
				if err := sleepContext(ctx, unprocessedBackoff<<min(round-1, 6)); err != nil {
					return err
				}
			}
			out, err := r.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("batch delete: %w", err)
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}
