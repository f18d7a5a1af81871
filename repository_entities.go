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

// CreateEntity implements [Repository]: one PutItem of the META record,
// conditioned on its absence.
func (r *DynamoDBRepository) CreateEntity(ctx context.Context, e Entity) error {
	_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(r.opts.Table),
		Item:                entityItem(r.nsID, e),
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return &EntityExistsError{EntityID: e.ID}
	}
	return wrapErr("create entity "+e.ID, err)
}

// GetEntity implements [Repository]: one GetItem of the META record.
func (r *DynamoDBRepository) GetEntity(ctx context.Context, id string) (Entity, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       primaryKey(pkEntity(r.nsID, id), skMeta),
	})
	if err != nil {
		return Entity{}, wrapErr("get entity "+id, err)
	}
	if len(out.Item) == 0 {
		return Entity{}, &EntityNotFoundError{EntityID: id}
	}
	return entityFromItem(out.Item), nil
}

// Children implements [Repository]: a Query of GSI1 (every page).
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

// DeleteEntity implements [Repository]: a Query of the entity's partition
// (META, configs, usage snapshots) and one of GSI3 (its buckets), deletes
// in batches of 25, and a decrement of the entity-config registry for each
// config deleted.
func (r *DynamoDBRepository) DeleteEntity(ctx context.Context, id string) (int, error) {
	pk := pkEntity(r.nsID, id)
	own, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		KeyConditionExpression:    aws.String("PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
		ProjectionExpression:      aws.String("PK, SK"),
	})
	if err != nil {
		return 0, wrapErr("delete entity "+id, err)
	}
	buckets, err := r.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(r.opts.Table),
		IndexName:                 aws.String(indexGSI3),
		KeyConditionExpression:    aws.String("GSI3PK = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": schemaS(pk)},
	})
	if err != nil {
		return 0, wrapErr("delete entity "+id, err)
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
		return 0, nil
	}
	if err := r.batchDelete(ctx, keys); err != nil {
		return 0, wrapErr("delete entity "+id, err)
	}
	for _, res := range configResources {
		if err := r.decrementEntityConfigCount(ctx, res); err != nil {
			return len(keys), err
		}
	}
	return len(keys), nil
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
