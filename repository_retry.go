// Layer 5, the DynamoDB repository: the retry of a read-then-write whose
// refill-timestamp lock was lost, an exact write from the item too.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// planRetry returns the exact write of wr, a store.WriteRetry, on base: it
// takes each amount from its limit (creating a limit base lacks from its
// Initial), from the stored balances, or from balances refilled to
// w.NowMs when a limit it takes from may be full by then (store.RefillDue),
// every limit of the item then written and rf moved. ok is false when the
// write does not fit base: a balance short of its amount, or a limit base
// lacks without an Initial. direct is false when the take from the stored
// balances may be written instead (retrySubtract): no limit is created or
// refilled, and each limit taken from has a valid exact state whose fa
// lies after now.
func planRetry(base *store.Bucket, wr store.BucketWrite) (w ddbschema.ExactWrite, ok, direct bool) {
	now := wr.NowMs
	refill := false
	x := extrasOf(base)
	for _, lw := range wr.Limits {
		i := slices.IndexFunc(base.States, func(s store.BucketState) bool { return s.LimitName == lw.Name })
		if i < 0 {
			direct = true // created
			continue
		}
		s := base.States[i]
		if lw.ConsumedMilli < 0 {
			direct = true // a give-back: only the exact write keeps fa
		}
		if lw.ConsumedMilli <= 0 {
			continue
		}
		if now >= bucketmath.FullAtMs(s.TokensMilli, base.RefillMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs) {
			refill = true
		}
		if x == nil || i >= len(x.exact) || !x.exact[i].valid || x.exact[i].fullAtMs <= now {
			direct = true
		}
	}
	refill = refill && now > base.RefillMs
	rf := base.RefillMs
	if refill {
		rf = now
	}
	w = ddbschema.ExactWrite{OldRefillMs: base.RefillMs, NewRefillMs: rf, CheckIncarnation: true, Incarnation: wr.Incarnation}
	if base.Incarnation != wr.Incarnation {
		return w, false, false // another life of the item
	}
	taken := func(name string) (int64, bool) {
		for _, lw := range wr.Limits {
			if lw.Name == name {
				return lw.ConsumedMilli, true
			}
		}
		return 0, false
	}
	for _, s := range base.States {
		c, named := taken(s.LimitName)
		balance := s.TokensMilli
		if refill {
			balance, _ = bucketmath.Refill(s.TokensMilli, base.RefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		}
		if named && c > 0 && balance < c {
			return w, false, false
		}
		if refill || (named && c != 0) {
			w.Limits = append(w.Limits, exactLimit(s, s.TokensMilli, bucketmath.AddSat(balance, -c), c, rf))
		}
	}
	for _, lw := range wr.Limits {
		if _, found := base.State(lw.Name); found {
			continue
		}
		if lw.Initial == nil {
			return w, false, false
		}
		i := lw.Initial
		w.Limits = append(w.Limits, ddbschema.ExactLimit{
			Name: lw.Name, Create: true, NewMilli: bucketmath.AddSat(i.TokensMilli, -lw.ConsumedMilli), TakenMilli: lw.ConsumedMilli,
			CapacityMilli: i.CapacityMilli, RefillAmountMilli: i.RefillAmountMilli, RefillPeriodMs: i.RefillPeriodMs,
		})
	}
	slices.SortFunc(w.Limits, func(a, b ddbschema.ExactLimit) int { return strings.Compare(a.Name, b.Name) })
	if wcu := wcuOf(base); wcu != nil && refill {
		refilled, _ := bucketmath.Refill(wcu.TokensMilli, base.RefillMs, now, wcu.CapacityMilli, wcu.RefillAmountMilli, wcu.RefillPeriodMs)
		w.WCU, w.HasWCU = ddbschema.ExactWCU{DeltaMilli: refilled - wcu.TokensMilli}, true
	}
	if refill {
		fullWrite(&w, base, 0)
	}
	return w, true, direct || refill
}

// subtractable reports whether retrySubtract can take w from b: b holds
// every limit w writes, and each limit w takes from has the parameters
// signature (ddbschema.ParamsSig) its condition names. A limit whose
// parameters have none (a refill period of 10^10 ms or more, such as the
// century of a calendar period's bucket) keeps no exact state to
// condition on: its item is read again instead.
func subtractable(b *store.Bucket, w store.BucketWrite) bool {
	if !holdsAll(b, w) {
		return false
	}
	for _, lw := range w.Limits {
		if lw.ConsumedMilli <= 0 {
			continue
		}
		if s, _ := b.State(lw.Name); !ddbschema.Signed(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs) {
			return false
		}
	}
	return true
}

// holdsAll reports whether b holds every limit w writes.
func holdsAll(b *store.Bucket, w store.BucketWrite) bool {
	for _, lw := range w.Limits {
		if _, ok := b.State(lw.Name); !ok {
			return false
		}
	}
	return true
}

// retrySubtract is the take of w, a store.WriteRetry, from the stored
// balances, for when exactPlan.retry allows it on base: per limit ADD
// −amount to tk and ts and the amount to tc, and move fa by what the take
// delays it, conditioned on the balance covering the amount and on the
// limit's exact state (fa after now, ts = tk, fp and the parameters as in
// base), so that concurrent takes, which move tk and ts alike, do not
// refuse it. A non-zero id is its write identifier.
func (r *dynamoRepository) retrySubtract(key map[string]types.AttributeValue, base *store.Bucket, w store.BucketWrite, id ddbschema.WriteID) *types.Update {
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")", b.incarnationCond(w.Incarnation)}
	var add []string
	for _, lw := range w.Limits {
		s, _ := base.State(lw.Name)
		tk, ts := b.name(bucketAttr(lw.Name, fieldTokens)), b.name(bucketAttr(lw.Name, fieldShadow))
		v := b.n(-lw.ConsumedMilli)
		add = append(add, tk+" "+v, ts+" "+v, b.name(bucketAttr(lw.Name, fieldTotalConsumed))+" "+b.n(lw.ConsumedMilli))
		if lw.ConsumedMilli <= 0 {
			conds = append(conds, "attribute_exists("+tk+")")
			continue
		}
		fa := b.name(bucketAttr(lw.Name, fieldFullAt))
		sig, _ := ddbschema.ParamsSig(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		conds = append(conds, tk+" >= "+b.n(lw.ConsumedMilli), fa+" > "+b.n(w.NowMs), tk+" = "+ts,
			b.name(bucketAttr(lw.Name, fieldParams))+" = "+b.value(&types.AttributeValueMemberN{Value: sig}),
			b.name(bucketAttr(lw.Name, fieldCapacity))+" = "+b.n(s.CapacityMilli),
			b.name(bucketAttr(lw.Name, fieldRefillAmount))+" = "+b.n(s.RefillAmountMilli),
			b.name(bucketAttr(lw.Name, fieldRefillPeriod))+" = "+b.n(s.RefillPeriodMs))
		add = append(add, fa+" "+b.n(bucketmath.TakeDelayMs(lw.ConsumedMilli, s.RefillAmountMilli, s.RefillPeriodMs)))
	}
	u := b.update(r.opts.Table, key, updateExpr(nil, add, nil), conds)
	ddbschema.AddWriteID(u, id)
	u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return u
}

// writeRetries applies writes, among them store.WriteRetry ones, each of
// those as an exact write from its item: the one kept (bucketCache), else
// one read consistently. A write refused because its item changed is
// computed again from the item it returns, at most maxExactWrites times;
// then the writes fail as contended (store.ErrTransactionConflict, which
// the limiter retries). A retry that does not fit its item as read or
// returned fails with store.ErrConditionFailed. A lone write carries a
// write identifier, several are one transaction (see writeOptions).
func (r *dynamoRepository) writeRetries(ctx context.Context, writes []store.BucketWrite) error {
	var id ddbschema.WriteID
	if len(writes) == 1 {
		id = ddbschema.NewWriteID()
	}
	bases := make([]*store.Bucket, len(writes))
	fresh := make([]bool, len(writes))
	for round := 0; round < maxExactWrites; round++ {
		if err := r.retryBases(ctx, writes, bases, fresh, round > 0); err != nil {
			return err
		}
		items := make([]types.TransactWriteItem, len(writes))
		// after holds the item each exact write leaves when it applies
		// (a transaction returns none): the hint its next write starts
		// from.
		after := make([]*store.Bucket, len(writes))
		reread := false
		for i, w := range writes {
			if w.Kind != store.WriteRetry {
				items[i] = r.bucketWriteItem(w)
				continue
			}
			plan, ok, direct := planRetry(bases[i], w)
			key := bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard)
			switch {
			case !ok && fresh[i]:
				return store.ErrConditionFailed
			case !ok && subtractable(bases[i], w):
				// A kept item that refuses is no answer: the take from the
				// stored balances, whose condition checks them, asks the
				// item (and returns it when refused).
				items[i] = types.TransactWriteItem{Update: r.retrySubtract(key, bases[i], w, id)}
				continue
			case !ok:
				bases[i], reread = nil, true // read it
				continue
			}
			if direct {
				plan.ID = id
				items[i] = types.TransactWriteItem{Update: r.shared.exact.Update(key, &plan)}
				after[i] = afterExact(bases[i], &plan)
			} else {
				items[i] = types.TransactWriteItem{Update: r.retrySubtract(key, bases[i], w, id)}
			}
		}
		if reread {
			continue
		}
		if len(writes) == 1 {
			in := ddbschema.UpdateInput(items[0].Update)
			in.ReturnValues = types.ReturnValueAllNew
			in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
			out, err := r.client.UpdateItem(ctx, in, writeOptions)
			item, applied, ccf := writeAnswer(out, err, id)
			if applied {
				_, err = r.keepItem(writes[0].Key, item)
				return err
			}
			if ccf == nil {
				return wrapErr("write bucket", err)
			}
			if len(ccf.Item) == 0 {
				r.shared.buckets.forget(r.nsID, writes[0].Key)
				return store.ErrConditionFailed
			}
			if bases[0], err = r.keepItem(writes[0].Key, ccf.Item); err != nil {
				return err
			}
			fresh[0] = true
			continue
		}
		_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, writeOptions)
		if err == nil {
			r.forgetWritten(writes)
			for i, w := range writes {
				switch {
				case after[i] != nil:
					r.shared.buckets.put(r.nsID, w.Key, after[i])
				case items[i].Put != nil:
					r.keepHint(w.Key, items[i].Put.Item)
				}
			}
			return nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return classifyWriteErr("write buckets", err)
		}
		for i, reason := range tce.CancellationReasons {
			if i >= len(writes) || aws.ToString(reason.Code) != "ConditionalCheckFailed" {
				continue
			}
			if writes[i].Kind != store.WriteRetry || len(reason.Item) == 0 {
				return store.ErrConditionFailed
			}
			b, perr := r.keepItem(writes[i].Key, reason.Item)
			if perr != nil {
				return perr
			}
			bases[i], fresh[i] = b, true
		}
		if err := classifyWriteErr("write buckets", err); !errors.Is(err, store.ErrConditionFailed) {
			return err // a conflict, or another failure
		}
	}
	return errExactContended
}

// errExactContended reports writes that lost the race for their items
// maxExactWrites times; nothing of them was written.
var errExactContended = fmt.Errorf("bucket items changed under their exact writes %d times: %w", maxExactWrites, store.ErrTransactionConflict)

// retryBases fills the missing bases of the retries among writes: the
// kept items (unless read, as after a kept one refused), else the items
// read consistently (fresh). A retry's item that does not exist fails the
// writes with store.ErrConditionFailed.
func (r *dynamoRepository) retryBases(ctx context.Context, writes []store.BucketWrite, bases []*store.Bucket, fresh []bool, read bool) error {
	var missing []map[string]types.AttributeValue
	for i, w := range writes {
		if w.Kind != store.WriteRetry || bases[i] != nil {
			continue
		}
		if !read {
			bases[i] = r.shared.buckets.get(r.nsID, w.Key)
		}
		if bases[i] == nil {
			missing = append(missing, bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	items, err := r.batchGet(ctx, missing, true)
	if err != nil {
		return wrapErr("read buckets", err)
	}
	for _, item := range items {
		b, err := bucketFromDynamoDB(item)
		if err != nil {
			return err
		}
		r.shared.buckets.put(r.nsID, b.Key, b)
		for i, w := range writes {
			if w.Kind == store.WriteRetry && bases[i] == nil && w.Key == b.Key {
				bases[i], fresh[i] = b, true
			}
		}
	}
	for i, w := range writes {
		if w.Kind == store.WriteRetry && bases[i] == nil {
			return store.ErrConditionFailed // the item is gone
		}
	}
	return nil
}

// forgetWritten drops the kept items of writes that a transaction changed
// (it returns no item).
func (r *dynamoRepository) forgetWritten(writes []store.BucketWrite) {
	for _, w := range writes {
		r.shared.buckets.forget(r.nsID, w.Key)
	}
}
