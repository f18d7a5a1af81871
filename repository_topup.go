package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

var _ store.TopUpStore = (*dynamoRepository)(nil)

// Top-up records: one item per applied top-up id in the entity's
// partition, PK {ns}/ENTITY#{id}, SK #TOPUP#{resource}#{limit}#{top-up
// id}, kept until its ttl. Neither the original nor this library reads the
// entity's partition but by exact sort key or by the prefixes of its own
// items (#META, #CONFIG, #USAGE#), so they are ignored there. Deleting the
// entity keeps them: a top-up id stays applied until its record expires.
const (
	skTopUpPrefix   = "#TOPUP#"
	attrTopUpLimit  = "limit_name"
	attrTopUpAmount = "amount"  // N, tokens
	attrTopUpCall   = "call_id" // N, the identifier of the call that applied it
)

// maxTopUpWrites bounds the transactions of one TopUp that finds the
// balance's stored parameters other than the request's, or lost a race.
const maxTopUpWrites = 3

// TopUp implements [store.TopUpStore]: one TransactWriteItems of a Put of
// the top-up's record, conditioned on its absence, and an Update that ADDs
// the amount to the balance (and to its copy ts; its fa moves earlier by
// what the amount may advance the time it is full, as a refund's does),
// conditioned on the limit's parameters and on the balance staying within
// the ceiling (req.CeilingMilli, the prepaid limit's capacity). The record names a random identifier of the call: a
// retry of the call's own transaction that applied (the SDK retries
// after a 5xx) finds it and answers applied, any other call duplicate.
func (r *dynamoRepository) TopUp(ctx context.Context, req store.TopUpRequest) (store.TopUpOutcome, error) {
	call := ddbschema.NewWriteID()
	record := r.topUpRecord(req, call)
	params := store.BucketState{CapacityMilli: req.CapacityMilli, RefillAmountMilli: req.RefillAmountMilli, RefillPeriodMs: req.RefillPeriodMs}
	for attempt := 1; ; attempt++ {
		_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(r.opts.Table), Item: record,
				ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames:            map[string]string{"#pk": attrPK},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
			{Update: r.topUpUpdate(req, params)},
		}}, writeOptions)
		r.shared.buckets.forget(r.nsID, req.Key)
		if err == nil {
			return store.TopUpApplied, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 {
			return store.TopUpApplied, classifyWriteErr("top up", err)
		}
		rec, bal := tce.CancellationReasons[0], tce.CancellationReasons[1]
		if aws.ToString(rec.Code) == "ConditionalCheckFailed" {
			if n, ok, _ := schemaGetN(rec.Item, attrTopUpCall); ok && ddbschema.WriteID(uint64(n)) == call {
				return store.TopUpApplied, nil // this call's own transaction, sent again
			}
			if n, ok, _ := schemaGetN(rec.Item, attrTopUpAmount); ok && n != bucketmath.FloorDiv(req.AmountMilli, 1000) {
				return store.TopUpConflict, nil
			}
			return store.TopUpDuplicate, nil
		}
		if aws.ToString(bal.Code) != "ConditionalCheckFailed" {
			return store.TopUpApplied, classifyWriteErr("top up", err)
		}
		b, berr := bucketFromDynamoDB(bal.Item)
		if berr != nil || b == nil {
			return store.TopUpApplied, fmt.Errorf("top up %s: no balance bucket: %w", req.Key.Resource, store.ErrConditionFailed)
		}
		s, ok := b.State(req.Limit)
		switch {
		case !ok:
			return store.TopUpApplied, fmt.Errorf("top up %s: no limit %s: %w", req.Key.Resource, req.Limit, store.ErrConditionFailed)
		case s.TokensMilli > bucketmath.AddSat(req.CeilingMilli, -req.AmountMilli):
			return store.TopUpApplied, fmt.Errorf("top up %s: over capacity: %w", req.Key.Resource, store.ErrConditionFailed)
		case attempt >= maxTopUpWrites:
			return store.TopUpApplied, fmt.Errorf("top up %s: %w", req.Key.Resource, store.ErrConditionFailed)
		}
		params = s // the stored parameters, or a race: write again
	}
}

// topUpRecord is the record of top-up req applied by call: its keys, the
// entity, resource, limit and amount, and the ttl after which it may go.
func (r *dynamoRepository) topUpRecord(req store.TopUpRequest, call ddbschema.WriteID) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:          schemaS(pkEntity(r.nsID, req.Key.EntityID)),
		attrSK:          schemaS(skTopUpPrefix + req.Resource + "#" + req.Limit + "#" + req.ID),
		attrEntityID:    schemaS(req.Key.EntityID),
		attrResource:    schemaS(req.Resource),
		attrTopUpLimit:  schemaS(req.Limit),
		attrTopUpAmount: schemaN(bucketmath.FloorDiv(req.AmountMilli, 1000)),
		attrTopUpCall:   &types.AttributeValueMemberN{Value: fmt.Sprint(uint64(call))},
		attrTTL:         schemaN(bucketmath.FloorDiv(req.ExpiresMs, 1000)),
	}
}

// topUpUpdate is the balance's part of a top-up: ADD the amount to tk and
// ts and move fa (adjustExact of a refund of the amount under params), on
// an item that holds the limit with params' capacity and a balance that
// stays within req.CeilingMilli with the amount.
func (r *dynamoRepository) topUpUpdate(req store.TopUpRequest, params store.BucketState) *types.Update {
	b := newExprBuilder()
	tk := b.name(bucketAttr(req.Limit, fieldTokens))
	cp := b.name(bucketAttr(req.Limit, fieldCapacity))
	v := b.n(req.AmountMilli)
	add := []string{tk + " " + v}
	xa, xr, xc := adjustExact(b, req.Limit, v, -req.AmountMilli, &params)
	add = append(add, xa...)
	conds := append([]string{"attribute_exists(" + b.name(attrPK) + ")",
		cp + " = " + b.n(params.CapacityMilli),
		tk + " <= " + b.n(bucketmath.AddSat(req.CeilingMilli, -req.AmountMilli))}, xc...)
	u := b.update(r.opts.Table, bucketPrimaryKey(r.nsID, req.Key.EntityID, req.Key.Resource, req.Key.Shard), updateExpr(nil, add, xr), conds)
	u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return u
}
