package limiter

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The adjustments' writes built expression by expression, as they were
// before templates: the reference the templated writes are tested against
// (repository_adjust_template_test.go).

// optimisticAdjustExpr is optimisticAdjust built expression by
// expression, the reference its template must equal.
//
// optimisticAdjust is the first write of an adjustment: ADD every delta,
// conditioned on the item and each limit existing and, for a refund with a
// known capacity, on the refund fitting under it. kept, the item as last
// seen (nil when none is kept), supplies the refill parameters that move a
// refunded limit's fa (see adjustExact). It carries the write identifier
// id.
func (r *dynamoRepository) optimisticAdjustExpr(w store.BucketWrite, kept *store.Bucket, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")", b.incarnationCond(w.Incarnation)}
	var add, remove []string
	for _, l := range w.Limits {
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		v := b.n(-l.ConsumedMilli)
		add = append(add, tk+" "+v, b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
		var s *store.BucketState
		if st, ok := kept.State(l.Name); ok && st.CapacityMilli == l.CapacityMilli {
			s = &st
		}
		xa, xr, xc := adjustExact(b, l.Name, v, l.ConsumedMilli, s)
		add, remove, conds = append(add, xa...), append(remove, xr...), append(conds, xc...)
		switch {
		case l.ConsumedMilli > 0:
			// A charge is taken from the stored balance only while the
			// limit cannot have refilled to its capacity by now (its exact
			// state, as the speculative take is conditioned); otherwise
			// the exact write refills the item first.
			conds = append(conds, "attribute_exists("+cp+")",
				b.name(bucketAttr(l.Name, fieldFullAt))+" > "+b.n(w.NowMs),
				tk+" = "+b.name(bucketAttr(l.Name, fieldShadow)))
			if s != nil {
				if sig, ok := ddbschema.ParamsSig(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs); ok {
					conds = append(conds, b.name(bucketAttr(l.Name, fieldParams))+" = "+b.value(&types.AttributeValueMemberN{Value: sig}))
				}
			}
		case l.ConsumedMilli == 0:
			conds = append(conds, "attribute_exists("+cp+")")
		case l.CapacityMilli > 0:
			// A refund of R fits when tk ≤ capacity − R.
			conds = append(conds, cp+" = "+b.n(l.CapacityMilli), tk+" <= "+b.n(bucketmath.AddSat(l.CapacityMilli, l.ConsumedMilli)))
		default:
			conds = append(conds, "attribute_not_exists("+cp+")") // unknown capacity: always take the exact path
		}
	}
	return r.adjustInputExpr(b, w.Key, updateExpr(nil, add, remove), conds, id)
}

// exactAdjustExpr is exactAdjust built expression by expression, the
// reference its template must equal.
//
// exactAdjust is the write of an adjustment computed from old, the item as
// it was when the previous write failed: per limit old holds, a charge is
// ADDed, and a refund takes the case of its balance (see above), with the
// item's capacity; the totals are ADDed. It returns nil when old holds none
// of the limits. It carries the write identifier id. With yield, a refund
// on a limit read full or to be capped is left out (see adjustYieldRound).
func (r *dynamoRepository) exactAdjustExpr(w store.BucketWrite, old *store.Bucket, id ddbschema.WriteID, yield bool) *dynamodb.UpdateItemInput {
	if store.ChargeRefillDue(old, w.Limits, w.NowMs) && w.NowMs > old.RefillMs {
		return r.exactAdjust(w, old, nil, id, yield) // the refill first: an exact write, not an adjustment's
	}
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")", b.incarnationCond(w.Incarnation)}
	var set, add, remove []string
	for _, l := range w.Limits {
		s, ok := old.State(l.Name)
		if !ok {
			continue // removed from the item: nothing to adjust
		}
		add = append(add, b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
		c := s.CapacityMilli
		fits := bucketmath.AddSat(c, l.ConsumedMilli) // C − R
		if yield && l.ConsumedMilli < 0 && s.TokensMilli > fits {
			continue // full or to be capped: left as it is (see adjustYieldRound)
		}
		tk := b.name(bucketAttr(l.Name, fieldTokens))
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		if l.ConsumedMilli >= 0 {
			v := b.n(-l.ConsumedMilli)
			xa, _, _ := adjustExact(b, l.Name, v, l.ConsumedMilli, &s)
			add = append(append(add, tk+" "+v), xa...)
			conds = append(conds, "attribute_exists("+cp+")")
			if l.ConsumedMilli > 0 {
				// Not full by now on old (above), so not on a balance no
				// higher with the same rf.
				conds = append(conds, tk+" <= "+b.n(s.TokensMilli), b.name(attrRefill)+" = "+b.n(old.RefillMs))
			}
			continue
		}
		conds = append(conds, cp+" = "+b.n(c))
		switch {
		case s.TokensMilli >= c:
			conds = append(conds, tk+" >= "+b.n(c))
		case s.TokensMilli > fits:
			// Capped at the capacity: the limit is full, its fa goes (the
			// speculative write refuses it until an exact write).
			conds = append(conds, tk+" > "+b.n(fits), tk+" < "+b.n(c))
			v := b.n(c)
			set = append(set, tk+" = "+v, b.name(bucketAttr(l.Name, fieldShadow))+" = "+v)
			remove = append(remove, b.name(bucketAttr(l.Name, fieldFullAt)))
		default:
			conds = append(conds, tk+" <= "+b.n(fits))
			v := b.n(-l.ConsumedMilli)
			xa, _, xc := adjustExact(b, l.Name, v, l.ConsumedMilli, &s)
			add = append(append(add, tk+" "+v), xa...)
			conds = append(conds, xc...)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return r.adjustInputExpr(b, w.Key, updateExpr(set, add, remove), conds, id)
}

func (r *dynamoRepository) adjustInputExpr(b *exprBuilder, key store.BucketKey, expr string, conds []string, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
	u := b.update(r.opts.Table, bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard), expr, conds)
	ddbschema.AddWriteID(u, id)
	in := ddbschema.UpdateInput(u)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}
