package limiter

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/store"
)

// maxBatchGetKeys is DynamoDB's BatchGetItem limit.
const maxBatchGetKeys = 100

// unprocessedBackoff is the wait before re-requesting unprocessed keys or
// items (doubling per round).
const unprocessedBackoff = 20 * time.Millisecond

// batchGet reads keys (de-duplicated, in chunks of 100), re-requesting
// UnprocessedKeys until none are left (the original drops them). consistent
// selects strongly consistent reads.
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

// LoadBuckets implements [Repository]: one BatchGetItem (eventually
// consistent) for the entities' META records and the bucket items.
func (r *DynamoDBRepository) LoadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]Entity, map[store.BucketKey]*store.Bucket, error) {
	req := make([]map[string]types.AttributeValue, 0, len(entityIDs)+len(keys))
	for _, id := range entityIDs {
		req = append(req, primaryKey(pkEntity(r.nsID, id), skMeta))
	}
	for _, k := range keys {
		req = append(req, bucketPrimaryKey(r.nsID, k.EntityID, k.Resource, k.Shard))
	}
	items, err := r.batchGet(ctx, req, false)
	if err != nil {
		return nil, nil, wrapErr("read buckets", err)
	}
	metas := make(map[string]Entity)
	buckets := make(map[store.BucketKey]*store.Bucket)
	for _, item := range items {
		sk, _ := schemaGetS(item, attrSK)
		switch sk {
		case skMeta:
			e := entityFromItem(item)
			metas[e.ID] = e
		case skState:
			b, err := bucketFromDynamoDB(item)
			if err != nil {
				return nil, nil, err
			}
			buckets[b.Key] = b
		}
	}
	return metas, buckets, nil
}

// bucketFromDynamoDB converts a bucket item (see bucketFromItem).
func bucketFromDynamoDB(item map[string]types.AttributeValue) (*store.Bucket, error) {
	_, b, err := bucketFromItem(item)
	if err != nil {
		return nil, fmt.Errorf("read bucket item: %w", err)
	}
	return b, nil
}

// GetBucket implements [Repository]: one GetItem (eventually consistent).
func (r *DynamoDBRepository) GetBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.opts.Table),
		Key:       bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard),
	})
	if err != nil {
		return nil, wrapErr("read bucket", err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return bucketFromDynamoDB(out.Item)
}

// WriteBuckets implements [Repository]: one write uses the single-item API
// (1 WCU instead of 2), several one TransactWriteItems. An adjustment alone
// caps refunds at the capacity (repository_adjust.go); the limiter never
// sends one within several writes, where refunds are not capped.
func (r *DynamoDBRepository) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	switch {
	case len(writes) == 0:
		return nil
	case len(writes) == 1 && writes[0].Kind == store.WriteAdjust:
		return r.writeAdjust(ctx, writes[0])
	case len(writes) == 1:
		return r.writeOne(ctx, r.bucketWriteItem(writes[0]))
	}
	items := make([]types.TransactWriteItem, len(writes))
	for i, w := range writes {
		items[i] = r.bucketWriteItem(w)
	}
	_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return classifyWriteErr("write buckets", err)
}

// bucketWriteItem builds the request of one bucket write. A normal write
// also refills the hidden wcu limit from the item it was computed from, so
// that wcu measures the write rate rather than lifetime writes.
func (r *DynamoDBRepository) bucketWriteItem(w store.BucketWrite) types.TransactWriteItem {
	switch w.Kind {
	case store.WriteSync:
		return types.TransactWriteItem{Update: r.syncUpdate(w)}
	case store.WriteReset:
		return types.TransactWriteItem{Update: r.resetUpdate(w)}
	case store.WriteNormal:
		if lw, ok := wcuRefill(w.Base, w.NowMs); ok {
			w.Limits = append(w.Limits[:len(w.Limits):len(w.Limits)], lw)
		}
	}
	return buildBucketWrite(r.opts.Table, r.nsID, w)
}

// syncUpdate is the UpdateItem of a store.WriteSync: add each limit the item
// lacks (every attribute if_not_exists, so that a limit it holds is left as
// it is), apply the TTL mode and remove the attributes of the removed
// limits, on an existing item.
func (r *DynamoDBRepository) syncUpdate(w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	var set, remove []string
	for _, l := range w.Limits {
		s := l.Initial
		cp := b.n(s.CapacityMilli)
		start := cp // a new limit usually starts full
		if s.TokensMilli != s.CapacityMilli {
			start = b.n(s.TokensMilli)
		}
		for _, f := range []struct{ attr, v string }{
			{bucketAttr(l.Name, fieldCapacity), cp},
			{bucketAttr(l.Name, fieldRefillAmount), b.n(s.RefillAmountMilli)},
			{bucketAttr(l.Name, fieldRefillPeriod), b.n(s.RefillPeriodMs)},
			{bucketAttr(l.Name, fieldTokens), start},
		} {
			a := b.name(f.attr)
			set = append(set, a+" = if_not_exists("+a+", "+f.v+")")
		}
	}
	switch w.TTL {
	case store.TTLSet:
		set = append(set, b.name(attrTTL)+" = "+b.n(ttlEpochSeconds(w.NowMs, w.TTLSeconds)))
	case store.TTLRemove:
		remove = append(remove, b.name(attrTTL))
	}
	for _, name := range w.Remove {
		for _, f := range []string{fieldTokens, fieldCapacity, fieldRefillAmount, fieldRefillPeriod, fieldTotalConsumed} {
			remove = append(remove, b.name(bucketAttr(name, f)))
		}
	}
	return b.update(r.opts.Table, bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard), updateExpr(set, nil, remove),
		[]string{"attribute_exists(" + b.name(attrPK) + ")"})
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
		}, writeOptions)
	case it.Update != nil:
		u := it.Update
		_, err = r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
			ConditionExpression:      u.ConditionExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		}, writeOptions)
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

// resetUpdate is the UpdateItem of a store.WriteReset: SET b_L_tk = b_L_cp for
// every limit named (attribute to attribute, so no read of the balances
// is needed) and rf = now, on an existing item holding each of them. The
// hidden wcu limit is left as it is.
func (r *DynamoDBRepository) resetUpdate(w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	set := []string{b.name(attrRefill) + " = " + b.n(w.NowMs)}
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	for _, l := range w.Limits {
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		set = append(set, b.name(bucketAttr(l.Name, fieldTokens))+" = "+cp)
		conds = append(conds, "attribute_exists("+cp+")")
	}
	return b.update(r.opts.Table, bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard), updateExpr(set, nil, nil), conds)
}
