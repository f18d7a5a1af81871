package limiter

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxBatchGetKeys is DynamoDB's BatchGetItem limit.
const maxBatchGetKeys = 100

// unprocessedBackoff is the wait before re-requesting unprocessed keys or
// items (doubling per round).
const unprocessedBackoff = 20 * time.Millisecond

// batchGet reads keys (de-duplicated, in chunks of 100), re-requesting
// UnprocessedKeys until none are left (fix B17). consistent selects strongly
// consistent reads.
func (r *DynamoDBRepository) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, consistent bool) ([]map[string]types.AttributeValue, error) {
	seen := make(map[[2]string]bool, len(keys))
	var unique []map[string]types.AttributeValue
	for _, k := range keys {
		id := [2]string{k[attrPK].(*types.AttributeValueMemberS).Value, k[attrSK].(*types.AttributeValueMemberS).Value}
		if !seen[id] {
			seen[id] = true
			unique = append(unique, k)
		}
	}
	var items []map[string]types.AttributeValue
	for start := 0; start < len(unique); start += maxBatchGetKeys {
		req := map[string]types.KeysAndAttributes{r.opts.Table: {
			Keys:           unique[start:min(start+maxBatchGetKeys, len(unique))],
			ConsistentRead: aws.Bool(consistent),
		}}
		for round := 0; len(req) > 0; round++ {
			if round > 0 {
				if err := sleepContext(ctx, unprocessedBackoff<<min(round-1, 6)); err != nil {
					return nil, err
				}
			}
			out, err := r.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			items = append(items, out.Responses[r.opts.Table]...)
			req = out.UnprocessedKeys
		}
	}
	return items, nil
}

// LoadBuckets implements BucketStore.
func (r *DynamoDBRepository) LoadBuckets(ctx context.Context, entityIDs []string, keys []BucketKey) (map[string]Entity, map[BucketKey]*StoredBucket, error) {
	req := make([]map[string]types.AttributeValue, 0, len(entityIDs)+len(keys))
	for _, id := range entityIDs {
		req = append(req, primaryKey(pkEntity(r.nsID, id), skMeta))
	}
	for _, k := range keys {
		req = append(req, bucketPrimaryKey(r.nsID, k.EntityID, k.Resource, k.Shard))
	}
	items, err := r.batchGet(ctx, req, false)
	if err != nil {
		return nil, nil, err
	}
	metas := make(map[string]Entity)
	buckets := make(map[BucketKey]*StoredBucket)
	for _, item := range items {
		sk, _ := schemaGetS(item, attrSK)
		switch sk {
		case skMeta:
			e := entityFromItem(item)
			metas[e.ID] = e
		case skState:
			b, err := storedBucketFromItem(item)
			if err != nil {
				return nil, nil, err
			}
			buckets[b.Key] = b
		}
	}
	return metas, buckets, nil
}

// storedBucketFromItem converts a bucket item.
func storedBucketFromItem(item map[string]types.AttributeValue) (*StoredBucket, error) {
	d, err := bucketFromItem(item)
	if err != nil {
		return nil, fmt.Errorf("read bucket item: %w", err)
	}
	b := &StoredBucket{
		Key:        BucketKey{EntityID: d.EntityID, Resource: d.Resource, Shard: d.Shard},
		ShardCount: max(d.ShardCount, 1),
		RefillMs:   d.RefillMs,
		Cascade:    d.Cascade,
		ParentID:   d.ParentID,
		TTL:        d.TTL,
		States:     d.States,
	}
	for i := range b.States {
		b.States[i].EntityID, b.States[i].Resource, b.States[i].ShardID = d.EntityID, d.Resource, d.Shard
	}
	return b, nil
}

// GetBucket implements BucketStore.
func (r *DynamoDBRepository) GetBucket(ctx context.Context, key BucketKey) (*StoredBucket, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return storedBucketFromItem(out.Item)
}

// WriteBuckets implements BucketStore: one write uses the single-item API
// (1 WCU instead of 2), several one TransactWriteItems.
func (r *DynamoDBRepository) WriteBuckets(ctx context.Context, writes []BucketWrite) error {
	switch len(writes) {
	case 0:
		return nil
	case 1:
		return r.writeOne(ctx, buildBucketWrite(r.opts.Table, r.nsID, writes[0]))
	}
	items := make([]types.TransactWriteItem, len(writes))
	for i, w := range writes {
		items[i] = buildBucketWrite(r.opts.Table, r.nsID, w)
	}
	_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return classifyWriteErr("write buckets", err)
}

// writeOne issues a transactional write item with the single-item API.
func (r *DynamoDBRepository) writeOne(ctx context.Context, it types.TransactWriteItem) error {
	var err error
	switch {
	case it.Put != nil:
		p := it.Put
		_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
			ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
		})
	case it.Update != nil:
		u := it.Update
		_, err = r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
			ConditionExpression:      u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		})
	case it.Delete != nil:
		d := it.Delete
		_, err = r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: d.TableName, Key: d.Key, ConditionExpression: d.ConditionExpression,
			ExpressionAttributeNames: d.ExpressionAttributeNames, ExpressionAttributeValues: d.ExpressionAttributeValues,
		})
	default:
		_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{it}})
	}
	return classifyWriteErr("write bucket", err)
}

// configItemKey returns the primary key of a config slot.
func (r *DynamoDBRepository) configItemKey(k configKey) map[string]types.AttributeValue {
	switch k.level {
	case levelEntity:
		return primaryKey(pkEntity(r.nsID, k.entityID), skConfig(k.resource))
	case levelResource:
		return primaryKey(pkResource(r.nsID, k.resource), skConfig(""))
	default:
		return primaryKey(pkSystem(r.nsID), skConfig(""))
	}
}

// loadConfigs is the config cache's loader: one BatchGetItem (eventually
// consistent) for all slots.
func (r *DynamoDBRepository) loadConfigs(ctx context.Context, keys []configKey) (map[configKey]configValue, error) {
	req := make([]map[string]types.AttributeValue, len(keys))
	byID := make(map[[2]string]configKey, len(keys))
	for i, k := range keys {
		req[i] = r.configItemKey(k)
		byID[[2]string{req[i][attrPK].(*types.AttributeValueMemberS).Value, req[i][attrSK].(*types.AttributeValueMemberS).Value}] = k
	}
	items, err := r.batchGet(ctx, req, false)
	if err != nil {
		return nil, wrapErr("read configs", err)
	}
	out := make(map[configKey]configValue, len(items))
	for _, item := range items {
		pk, _ := schemaGetS(item, attrPK)
		sk, _ := schemaGetS(item, attrSK)
		k, ok := byID[[2]string{pk, sk}]
		if !ok {
			continue
		}
		limits, err := limitsFromItem(item)
		if err != nil {
			// A corrupt stored config is an infrastructure problem for the
			// caller (the on-unavailable mode applies), not invalid input.
			return nil, fmt.Errorf("read config %s %s: %v", pk, sk, err)
		}
		v := configValue{limits: limits}
		if k.level == levelSystem {
			v.onUnavailable = onUnavailableFromItem(item)
		}
		out[k] = v
	}
	return out, nil
}

// ResolveLimits returns the stored limits that apply to (entityID, resource)
// — entity > entity _default_ > resource > system, the first level with any
// limits — and the level they came from. Limits is nil when nothing is
// configured. Results are cached for DynamoDBOptions.ConfigCacheTTL.
func (r *DynamoDBRepository) ResolveLimits(ctx context.Context, entityID, resource string) ([]Limit, ConfigSource, error) {
	limits, source, _, err := r.cache.resolve(ctx, entityID, resource)
	return limits, source, err
}

// CacheStats returns the config cache's statistics.
func (r *DynamoDBRepository) CacheStats() CacheStats { return r.cache.stats() }

// InvalidateConfigCache drops every cached config (and the remembered
// on-unavailable mode).
func (r *DynamoDBRepository) InvalidateConfigCache() { r.cache.invalidate() }
