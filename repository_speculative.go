package limiter

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/bucketmath"
	"github.com/zaelimiter/limiter/store"
)

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
