// Layer 5, the DynamoDB repository: bucket items: reads, writes, adjustments
// and speculative writes.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
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
// caps refunds at the capacity (writeAdjust, below); the limiter never
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

// Adjustments (commits, rollbacks, give-backs) on DynamoDB.
//
// An adjustment adds to balances without any admission condition, but it
// must not create a limit the item lacks (a bare ADD would create b_{L}_tk
// and b_{L}_tc without parameters) and a refund must not lift a balance
// above the limit's capacity. DynamoDB's update expressions cannot take a
// minimum, so the write is optimistic: one UpdateItem that ADDs every delta,
// conditioned on each limit existing and, for a refund, on its balance
// leaving room for it (tk ≤ capacity − refund, with the capacity the
// limiter expects). That is the common case and costs one call, as an
// unconditional ADD does. When the condition fails the item as it was comes
// back (ALL_OLD), and the exact result is written with SET, conditioned on
// the balances read (an optimistic lock on the values), until it applies.

// maxAdjustRounds bounds the exact writes of an adjustment whose balances
// keep changing under it.
const maxAdjustRounds = 5

// errAdjustContended reports an adjustment that lost the race for its
// balances maxAdjustRounds times; nothing of it was written.
var errAdjustContended = fmt.Errorf("adjustment raced with other writes %d times: %w", maxAdjustRounds, store.ErrTransactionConflict)

// writeAdjust applies one store.WriteAdjust.
func (r *DynamoDBRepository) writeAdjust(ctx context.Context, w store.BucketWrite) error {
	in := r.optimisticAdjust(w)
	_, err := r.client.UpdateItem(ctx, in, writeOptions)
	for round := 0; ; round++ {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return wrapErr("adjust bucket", err)
		}
		if len(ccf.Item) == 0 {
			return store.ErrConditionFailed // the item is gone: nothing to adjust
		}
		if round >= maxAdjustRounds {
			return errAdjustContended
		}
		old, err2 := bucketFromDynamoDB(ccf.Item)
		if err2 != nil {
			return err2
		}
		exact := r.exactAdjust(w, old)
		if exact == nil {
			return nil // none of its limits is in the item
		}
		_, err = r.client.UpdateItem(ctx, exact, writeOptions)
	}
}

// optimisticAdjust is the first write of an adjustment: ADD every delta,
// conditioned on the item and each limit existing and, for a refund with a
// known capacity, on the refund fitting under it.
func (r *DynamoDBRepository) optimisticAdjust(w store.BucketWrite) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	var add []string
	for _, l := range w.Limits {
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		add = append(add, tk+" "+b.n(-l.ConsumedMilli), b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
		switch {
		case l.ConsumedMilli >= 0:
			conds = append(conds, "attribute_exists("+cp+")")
		case l.CapacityMilli > 0:
			// A refund of R fits when tk ≤ capacity − R.
			conds = append(conds, cp+" = "+b.n(l.CapacityMilli), tk+" <= "+b.n(bucketmath.AddSat(l.CapacityMilli, l.ConsumedMilli)))
		default:
			conds = append(conds, "attribute_not_exists("+cp+")") // unknown capacity: always take the exact path
		}
	}
	return r.adjustInput(b, w.Key, updateExpr(nil, add, nil), conds)
}

// exactAdjust is the write of an adjustment computed from old, the item as
// it is: SET each balance to its exact new value (a refund capped at the
// capacity), ADD the totals, conditioned on the balances still being the
// ones read. It returns nil when old holds none of the limits.
func (r *DynamoDBRepository) exactAdjust(w store.BucketWrite, old *store.Bucket) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	var set, add []string
	for _, l := range w.Limits {
		s, ok := old.State(l.Name)
		if !ok {
			continue // removed from the item: nothing to adjust
		}
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		next := bucketmath.AddSat(s.TokensMilli, -l.ConsumedMilli)
		if l.ConsumedMilli < 0 {
			next = refund(s.TokensMilli, -l.ConsumedMilli, s.CapacityMilli)
		}
		conds = append(conds, tk+" = "+b.n(s.TokensMilli))
		set = append(set, tk+" = "+b.n(next))
		add = append(add, b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
	}
	if len(set) == 0 {
		return nil
	}
	return r.adjustInput(b, w.Key, updateExpr(set, add, nil), conds)
}

func (r *DynamoDBRepository) adjustInput(b *exprBuilder, key store.BucketKey, expr string, conds []string) *dynamodb.UpdateItemInput {
	u := b.update(r.opts.Table, bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard), expr, conds)
	return &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
		ConditionExpression:      u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// buildSpeculativeUpdate is the Python library's speculative UpdateItem:
// take every named amount and one wcu token, conditioned on the item
// existing and not being expired, each positively consumed limit having
// enough tokens (only positive amounts gate admission; the others must
// exist), and wcu having a token. Unlike the original it is also
// conditioned on every limit of req.Limits being stored with the
// parameters the limiter resolved, so that a limit change is noticed on
// the fast path. Names are sorted.
func buildSpeculativeUpdate(table, ns string, req store.SpeculativeRequest) *dynamodb.UpdateItemInput {
	key, consume, nowMs := req.Key, req.Consume, req.NowMs
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	var add []string
	for _, l := range req.Limits {
		conds = append(conds,
			b.name(bucketAttr(l.Name, fieldCapacity))+" = "+b.n(bucketmath.SatMul(l.Capacity, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(bucketmath.SatMul(l.RefillAmount, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(l.RefillPeriod.Milliseconds()))
	}
	for _, name := range consumeNames(consume) {
		amount := bucketmath.SatMul(consume[name], 1000)
		tk := b.name(bucketAttr(name, fieldTokens))
		if amount > 0 {
			conds = append(conds, tk+" >= "+b.n(amount))
		} else {
			conds = append(conds, "attribute_exists("+tk+")")
		}
		if amount != 0 {
			add = append(add, tk+" "+b.n(-amount), b.name(bucketAttr(name, fieldTotalConsumed))+" "+b.n(amount))
		}
	}
	wtk := b.name(bucketAttr(wcuLimitName, fieldTokens))
	conds = append(conds, wtk+" >= "+b.n(wcuWriteCostMilli))
	add = append(add, wtk+" "+b.n(-wcuWriteCostMilli), b.name(bucketAttr(wcuLimitName, fieldTotalConsumed))+" "+b.n(wcuWriteCostMilli))
	ttl := b.name(attrTTL)
	conds = append(conds, "(attribute_not_exists("+ttl+") OR "+ttl+" > "+b.n(bucketmath.FloorDiv(nowMs, 1000))+")")
	u := b.update(table, bucketPrimaryKey(ns, key.EntityID, key.Resource, key.Shard), updateExpr(nil, add, nil), conds)
	return &dynamodb.UpdateItemInput{
		TableName:                           u.TableName,
		Key:                                 u.Key,
		UpdateExpression:                    u.UpdateExpression,
		ConditionExpression:                 u.ConditionExpression,
		ExpressionAttributeNames:            u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// SpeculativeConsume implements [store.SpeculativeStore]: one conditional
// UpdateItem on key, which also takes one token of the item's hidden wcu
// limit. A refused write returns the old item (ALL_OLD) and the reason;
// only other errors are returned as errors.
func (r *DynamoDBRepository) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	out, err := r.client.UpdateItem(ctx, buildSpeculativeUpdate(r.opts.Table, r.nsID, req), writeOptions)
	res := store.SpeculativeResult{Key: req.Key}
	if err == nil {
		b, err := bucketFromDynamoDB(out.Attributes)
		if err != nil {
			return res, err
		}
		res.Applied, res.Bucket = true, b
		return res, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return res, wrapErr("speculative write", err)
	}
	if len(ccf.Item) == 0 {
		res.Reason = store.RefusedBucketMissing
		return res, nil
	}
	b, err := bucketFromDynamoDB(ccf.Item)
	if err != nil {
		return res, err
	}
	return refusedResult(req.Key, b, classifySpecFailure(b, req), req.NowMs), nil
}

// classifySpecFailure explains a refused speculative write from the old item:
// [specRefusal], except that a DynamoDB item without a wcu limit refuses the
// write (the update expression needs it) and that a refusal nothing else
// explains (a concurrent change) counts as an exhausted limit.
func classifySpecFailure(b *store.Bucket, req store.SpeculativeRequest) store.RefusalReason {
	reason := specRefusal(b, req.Consume, req.Limits, req.NowMs)
	if wcuOf(b) == nil {
		switch reason {
		case store.RefusedLimitExhausted:
			return store.RefusedBothExhausted
		case store.RefusedNone:
			return store.RefusedWriteCapacity
		}
	}
	if reason == store.RefusedNone {
		return store.RefusedLimitExhausted
	}
	return reason
}

// BumpShardCount implements [store.ShardStore]: a conditional UpdateItem of the
// shard count on shard 0. It returns the count now in force (current when
// someone else changed it first).
func (r *DynamoDBRepository) BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
	next := current * 2
	_, err := r.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.opts.Table),
		Key:                       bucketPrimaryKey(r.nsID, entityID, resource, 0),
		UpdateExpression:          aws.String("SET #sc = :new"),
		ConditionExpression:       aws.String("#sc = :old"),
		ExpressionAttributeNames:  map[string]string{"#sc": attrShardCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":new": schemaN(int64(next)), ":old": schemaN(int64(current))},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return current, nil
	case err != nil:
		return current, wrapErr("double shard count", err)
	}
	return next, nil
}
