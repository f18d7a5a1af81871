package limiter

// The requests of bucket writes ([store.BucketWrite]) on the DynamoDB layout of
// internal/ddbschema.

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// exprBuilder accumulates an expression's attribute names and values with
// index-based placeholders (#a0, :v0), so that limit names containing '-' or
// '.' are safe (see ddbschema.Expr).
type exprBuilder struct {
	e *ddbschema.Expr
}

func newExprBuilder() *exprBuilder { return &exprBuilder{e: ddbschema.NewExpr()} }

// name returns the placeholder of attribute name n.
func (b *exprBuilder) name(n string) string { return b.e.Name(n) }

// value returns a new placeholder for v.
func (b *exprBuilder) value(v types.AttributeValue) string { return b.e.Value(v) }

// n returns a new placeholder for the number v.
func (b *exprBuilder) n(v int64) string { return b.e.N(v) }

// update returns the transactional Update of key in table with update
// expression expr and the conditions conds joined by AND.
func (b *exprBuilder) update(table string, key map[string]types.AttributeValue, expr string, conds []string) *types.Update {
	return b.e.Update(table, key, expr, conds)
}

// updateExpr joins SET, ADD and REMOVE clauses.
func updateExpr(set, add, remove []string) string { return ddbschema.UpdateExpr(set, add, remove) }

// initLimitClauses returns the SET clauses that initialise a limit missing
// from an existing item: tk from tk (an expression), cp/ra/rp kept
// when already stored (e.g. synced by SetLimits) or set from initial.
func (b *exprBuilder) initLimitClauses(name, tkExpr string, initial *store.BucketState) []string {
	set := []string{b.name(bucketAttr(name, fieldTokens)) + " = " + tkExpr}
	for _, f := range []struct {
		field string
		v     int64
	}{
		{fieldCapacity, initial.CapacityMilli},
		{fieldRefillAmount, initial.RefillAmountMilli},
		{fieldRefillPeriod, initial.RefillPeriodMs},
	} {
		a := b.name(bucketAttr(name, f.field))
		set = append(set, a+" = if_not_exists("+a+", "+b.n(f.v)+")")
	}
	return set
}

// buildBucketWrite returns w as a transactional write item (exactly one of
// Put or Update set), for table and namespace ns.
func buildBucketWrite(table, ns string, w store.BucketWrite) types.TransactWriteItem {
	key := bucketPrimaryKey(ns, w.Key.EntityID, w.Key.Resource, w.Key.Shard)
	switch w.Kind {
	case store.WriteCreate:
		spec := &store.Bucket{
			Key:        w.Key,
			ShardCount: w.ShardCount,
			RefillMs:   w.NowMs,
			Cascade:    w.Cascade,
			ParentID:   w.ParentID,
			States:     w.States,
		}
		if w.TTL == store.TTLSet {
			spec.TTL = ttlEpochSeconds(w.NowMs, w.TTLSeconds)
		}
		b := newExprBuilder()
		return types.TransactWriteItem{Put: &types.Put{
			TableName:                aws.String(table),
			Item:                     bucketItem(ns, spec),
			ConditionExpression:      aws.String("attribute_not_exists(" + b.name(attrPK) + ")"),
			ExpressionAttributeNames: b.e.Names(),
		}}
	case store.WriteNormal:
		return types.TransactWriteItem{Update: buildNormalUpdate(table, key, w)}
	case store.WriteRetry:
		return types.TransactWriteItem{Update: buildRetryUpdate(table, key, w)}
	default:
		return types.TransactWriteItem{Update: buildAdjustUpdate(table, key, w)}
	}
}

// buildNormalUpdate is the original's build_composite_normal: refill and
// consume under the rf optimistic lock, with a floor guard per limit whose
// consumption exceeds its refill (concurrent speculative writes drain tk
// without moving rf).
func buildNormalUpdate(table string, key map[string]types.AttributeValue, w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	rf := b.name(attrRefill)
	set := []string{rf + " = " + b.n(w.NowMs)}
	var add, remove []string
	conds := []string{rf + " = " + b.n(w.ExpectedRefillMs)}
	switch w.TTL {
	case store.TTLSet:
		set = append(set, b.name(attrTTL)+" = "+b.n(ttlEpochSeconds(w.NowMs, w.TTLSeconds)))
	case store.TTLRemove:
		remove = append(remove, b.name(attrTTL))
	}
	if w.RefreshEntity {
		set = append(set, b.name(attrCascade)+" = "+b.value(schemaBool(w.Cascade)))
		if w.ParentID != "" {
			set = append(set, b.name(attrParentID)+" = "+b.value(schemaS(w.ParentID)))
		} else {
			remove = append(remove, b.name(attrParentID))
		}
	}
	for _, l := range w.Limits {
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		tc := b.name(bucketAttr(l.Name, fieldTotalConsumed))
		if l.Initial != nil {
			set = append(set, b.initLimitClauses(l.Name, b.n(l.Initial.TokensMilli-l.ConsumedMilli), l.Initial)...)
			add = append(add, tc+" "+b.n(l.ConsumedMilli))
			conds = append(conds, "attribute_not_exists("+tk+")")
			continue
		}
		add = append(add, tk+" "+b.n(l.RefillMilli-l.ConsumedMilli), tc+" "+b.n(l.ConsumedMilli))
		if floor := l.ConsumedMilli - l.RefillMilli; floor > 0 {
			conds = append(conds, tk+" >= "+b.n(floor))
		}
		if p := l.Params; p != nil { // a limit change
			set = append(set,
				b.name(bucketAttr(l.Name, fieldCapacity))+" = "+b.n(p.CapacityMilli),
				b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(p.RefillAmountMilli),
				b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(p.RefillPeriodMs))
		}
	}
	return b.update(table, key, updateExpr(set, add, remove), conds)
}

// buildRetryUpdate is the original's build_composite_retry: consume without
// refill, guarded by tk >= consumed; a limit missing from the item is
// initialised as full first.
func buildRetryUpdate(table string, key map[string]types.AttributeValue, w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	var set, add []string
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	for _, l := range w.Limits {
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		tc := b.name(bucketAttr(l.Name, fieldTotalConsumed))
		c := b.n(l.ConsumedMilli)
		if l.Initial != nil {
			set = append(set, b.initLimitClauses(l.Name, "if_not_exists("+tk+", "+b.n(l.Initial.TokensMilli)+") - "+c, l.Initial)...)
			add = append(add, tc+" "+c)
			conds = append(conds, "(attribute_not_exists("+tk+") OR "+tk+" >= "+c+")")
			continue
		}
		add = append(add, tk+" "+b.n(-l.ConsumedMilli), tc+" "+c)
		conds = append(conds, tk+" >= "+c)
	}
	return b.update(table, key, updateExpr(set, add, nil), conds)
}

// buildAdjustUpdate is the original's build_composite_adjust: unconditional
// ADDs of tk -= delta, tc += delta. Unlike the original it requires the item
// to exist, so that a refund to an expired bucket does not leave a stub item
// without capacity attributes.
func buildAdjustUpdate(table string, key map[string]types.AttributeValue, w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	var add []string
	for _, l := range w.Limits {
		add = append(add,
			b.name(bucketAttr(l.Name, fieldTokens))+" "+b.n(-l.ConsumedMilli),
			b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
	}
	return b.update(table, key, updateExpr(nil, add, nil), []string{"attribute_exists(" + b.name(attrPK) + ")"})
}
