package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/bucketmath"
	"github.com/zaelimiter/limiter/store"
)

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
