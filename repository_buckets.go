// Layer 5, the DynamoDB repository: bucket items: reads, writes, adjustments
// and speculative writes.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/internal/ddbschema"
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
		_, err = r.client.UpdateItem(ctx, ddbschema.UpdateInput(it.Update), writeOptions)
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
// unconditional ADD does.
//
// When the condition fails the item as it was comes back (ALL_OLD), and the
// adjustment is written again from it. That write is conditioned on ranges,
// not on the exact balances read, so that the acquires and adjustments of
// other clients, which move the balances all the time on a busy item, do
// not refuse it: a charge is an ADD that needs only its limit to exist, and
// a refund of R on a limit of capacity C falls in one of three cases, each
// exact over its whole range of balances:
//
//   - tk ≤ C − R: ADD R (the refund fits);
//   - C − R < tk < C: SET tk = C (the refund is capped at the capacity);
//   - tk ≥ C: the balance stays (a full bucket takes no refund).
//
// Each case is conditioned on its range and on the capacity read, so only a
// balance that crosses from one case to another between the read and the
// write, or a limit changed meanwhile, makes it fail and be written again.

// maxAdjustRounds bounds the rewrites of an adjustment whose item keeps
// changing under it.
const maxAdjustRounds = 8

// errAdjustContended reports an adjustment that lost the race for its
// item maxAdjustRounds times; nothing of it was written.
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
// it was when the previous write failed: per limit old holds, a charge is
// ADDed, and a refund takes the case of its balance (see above), with the
// item's capacity; the totals are ADDed. It returns nil when old holds none
// of the limits.
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
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		add = append(add, b.name(bucketAttr(l.Name, fieldTotalConsumed))+" "+b.n(l.ConsumedMilli))
		if l.ConsumedMilli >= 0 {
			add = append(add, tk+" "+b.n(-l.ConsumedMilli))
			conds = append(conds, "attribute_exists("+cp+")")
			continue
		}
		c := s.CapacityMilli
		fits := bucketmath.AddSat(c, l.ConsumedMilli) // C − R
		conds = append(conds, cp+" = "+b.n(c))
		switch {
		case s.TokensMilli >= c:
			conds = append(conds, tk+" >= "+b.n(c))
		case s.TokensMilli > fits:
			conds = append(conds, tk+" > "+b.n(fits), tk+" < "+b.n(c))
			set = append(set, tk+" = "+b.n(c))
		default:
			conds = append(conds, tk+" <= "+b.n(fits))
			add = append(add, tk+" "+b.n(-l.ConsumedMilli))
		}
	}
	if len(add) == 0 {
		return nil
	}
	return r.adjustInput(b, w.Key, updateExpr(set, add, nil), conds)
}

func (r *DynamoDBRepository) adjustInput(b *exprBuilder, key store.BucketKey, expr string, conds []string) *dynamodb.UpdateItemInput {
	in := ddbschema.UpdateInput(b.update(r.opts.Table, bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard), expr, conds))
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}

// buildSpeculativeUpdate is the Python library's speculative UpdateItem:
// take every named amount and one wcu token, conditioned on the item
// existing and not being expired, each positively consumed limit having
// enough tokens (only positive amounts gate admission; the others must
// exist), and wcu having a token. Unlike the original it is also
// conditioned on every limit of req.Limits being stored with the
// parameters the limiter resolved, so that a limit change is noticed on
// the fast path. Names are sorted. It is sent on every acquire, so it is
// built from a template of its shape (ddbschema.SpeculativeUpdates), and
// the slices handed to it stay on the stack for up to eight limits and
// amounts.
func buildSpeculativeUpdate(spec *ddbschema.SpeculativeUpdates, ns string, req store.SpeculativeRequest) *dynamodb.UpdateItemInput {
	var lbuf [8]ddbschema.SpecLimit
	limits := lbuf[:0]
	for _, l := range req.Limits {
		limits = append(limits, ddbschema.SpecLimit{
			Name:              l.Name,
			CapacityMilli:     bucketmath.SatMul(l.Capacity, 1000),
			RefillAmountMilli: bucketmath.SatMul(l.RefillAmount, 1000),
			RefillPeriodMs:    l.RefillPeriod.Milliseconds(),
		})
	}
	var abuf [8]ddbschema.SpecAmount
	amounts := abuf[:0]
	for name, n := range req.Consume {
		amounts = append(amounts, ddbschema.SpecAmount{Name: name, Milli: bucketmath.SatMul(n, 1000)})
	}
	slices.SortFunc(amounts, func(a, b ddbschema.SpecAmount) int { return strings.Compare(a.Name, b.Name) })
	key := ddbschema.BucketKeyValue(ns, req.Key.EntityID, req.Key.Resource, req.Key.Shard)
	return spec.Input(key, limits, amounts, bucketmath.FloorDiv(req.NowMs, 1000))
}

// SpeculativeConsume implements [store.SpeculativeStore]: one conditional
// UpdateItem on key, which also takes one token of the item's hidden wcu
// limit. A refused write returns the old item (ALL_OLD) and the reason;
// only other errors are returned as errors.
func (r *DynamoDBRepository) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	out, err := r.client.UpdateItem(ctx, buildSpeculativeUpdate(r.shared.spec, r.nsID, req), writeOptions)
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

// serialItemWrites marks the writes to one item as a resource of their
// own: each takes a write-capacity unit of the item's partition, and
// DynamoDB applies them one after the other. Group commit keeps one write
// of a hot item in flight, so that each carries the largest batch.
func (r *DynamoDBRepository) serialItemWrites() {}

// speculativeConsumeAdjust is SpeculativeConsume with adj, a pending
// adjustment of the same item (a committed lease's, whole tokens), folded
// into the same UpdateItem: one write for both, exactly as adj followed by
// the acquire. The acquire's condition holds for the balance after the
// adjustment, a refund is conditioned on fitting under the capacity before
// the acquire takes its amount (as an adjustment alone is), and both ADDs
// go into one per limit. When the write is refused, nothing was written:
// the caller writes the adjustment alone, then the acquire.
func (r *DynamoDBRepository) speculativeConsumeAdjust(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite) (store.SpeculativeResult, foldOutcome, error) {
	res := store.SpeculativeResult{Key: req.Key}
	in := buildSpeculativeFold(r.opts.Table, r.nsID, req, adj)
	if in == nil {
		return res, foldNotApplied, nil
	}
	out, err := r.client.UpdateItem(ctx, in, writeOptions)
	if err == nil {
		b, err := bucketFromDynamoDB(out.Attributes)
		if err != nil {
			return res, foldApplied, err
		}
		res.Applied, res.Bucket = true, b
		return res, foldApplied, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return res, foldUnknown, wrapErr("speculative write", err)
	}
	return res, foldNotApplied, nil
}

// buildSpeculativeFold is buildSpeculativeUpdate with the adjustment adj
// of the same item folded in (see SpeculativeConsumeAdjust); nil when adj
// holds a refund of unknown capacity, which only the exact adjustment
// path can cap.
func buildSpeculativeFold(table, ns string, req store.SpeculativeRequest, adj store.BucketWrite) *dynamodb.UpdateItemInput {
	type delta struct{ milli, capMilli int64 }
	deltas := make(map[string]delta, len(adj.Limits))
	names := consumeNames(req.Consume)
	for _, lw := range adj.Limits {
		if lw.ConsumedMilli < 0 && lw.CapacityMilli <= 0 {
			return nil
		}
		if _, ok := req.Consume[lw.Name]; !ok {
			names = append(names, lw.Name)
		}
		d := deltas[lw.Name]
		deltas[lw.Name] = delta{bucketmath.AddSat(d.milli, lw.ConsumedMilli), max(d.capMilli, lw.CapacityMilli)}
	}
	slices.Sort(names)
	b := newExprBuilder()
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	var add []string
	for _, l := range req.Limits {
		conds = append(conds,
			b.name(bucketAttr(l.Name, fieldCapacity))+" = "+b.n(bucketmath.SatMul(l.Capacity, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(bucketmath.SatMul(l.RefillAmount, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(l.RefillPeriod.Milliseconds()))
	}
	for _, name := range names {
		amount, acquired := req.Consume[name]
		a := bucketmath.SatMul(amount, 1000)
		d := deltas[name]
		tk := b.name(bucketAttr(name, fieldTokens))
		switch {
		case acquired && a > 0:
			// The balance after the adjustment must hold the amount.
			conds = append(conds, tk+" >= "+b.n(bucketmath.AddSat(a, d.milli)))
		case acquired:
			conds = append(conds, "attribute_exists("+tk+")")
		}
		switch {
		case d.milli > 0:
			conds = append(conds, "attribute_exists("+b.name(bucketAttr(name, fieldCapacity))+")")
		case d.milli < 0:
			// The refund fits under the capacity before the acquire takes
			// its amount, as it would written first: tk + refund ≤
			// capacity.
			conds = append(conds, b.name(bucketAttr(name, fieldCapacity))+" = "+b.n(d.capMilli),
				tk+" <= "+b.n(bucketmath.AddSat(d.capMilli, d.milli)))
		}
		if total := bucketmath.AddSat(a, d.milli); total != 0 {
			add = append(add, tk+" "+b.n(-total), b.name(bucketAttr(name, fieldTotalConsumed))+" "+b.n(total))
		}
	}
	wtk := b.name(bucketAttr(wcuLimitName, fieldTokens))
	conds = append(conds, wtk+" >= "+b.n(wcuWriteCostMilli))
	add = append(add, wtk+" "+b.n(-wcuWriteCostMilli), b.name(bucketAttr(wcuLimitName, fieldTotalConsumed))+" "+b.n(wcuWriteCostMilli))
	ttl := b.name(attrTTL)
	conds = append(conds, "(attribute_not_exists("+ttl+") OR "+ttl+" > "+b.n(bucketmath.FloorDiv(req.NowMs, 1000))+")")
	u := b.update(table, bucketPrimaryKey(ns, req.Key.EntityID, req.Key.Resource, req.Key.Shard), updateExpr(nil, add, nil), conds)
	in := ddbschema.UpdateInput(u)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}
