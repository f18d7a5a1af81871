// Layer 5, the DynamoDB repository: bucket items: reads, writes, adjustments
// and speculative writes.

package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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
// UnprocessedKeys until none are left. consistent
// selects strongly consistent reads.
func (r *dynamoRepository) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, consistent bool) ([]map[string]types.AttributeValue, error) {
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
func (r *dynamoRepository) LoadBuckets(ctx context.Context, entityIDs []string, keys []store.BucketKey) (map[string]Entity, map[store.BucketKey]*store.Bucket, error) {
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
			r.shared.buckets.putIfAbsent(r.nsID, b.Key, cloneBucket(b)) // the caller may change b
		}
	}
	return metas, buckets, nil
}

// GetBucket implements [Repository]: one GetItem (eventually consistent).
func (r *dynamoRepository) GetBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
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
// sends one within several writes, where refunds are not capped. A retry
// is an exact write from its item (writeRetries). The items the writes
// return are kept for the exact writes of the speculative path.
func (r *dynamoRepository) WriteBuckets(ctx context.Context, writes []store.BucketWrite) error {
	switch {
	case len(writes) == 0:
		return nil
	case len(writes) == 1 && writes[0].Kind == store.WriteAdjust:
		return r.writeAdjust(ctx, writes[0])
	}
	for _, w := range writes {
		if w.Kind == store.WriteRetry {
			return r.writeRetries(ctx, writes)
		}
	}
	if len(writes) == 1 {
		return r.writeBucket(ctx, writes[0])
	}
	items := make([]types.TransactWriteItem, len(writes))
	for i, w := range writes {
		items[i] = r.bucketWriteItem(w)
		if u := items[i].Update; u != nil {
			u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		}
	}
	_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, writeOptions)
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
		for i, w := range writes {
			if items[i].Put != nil {
				r.keepHint(w.Key, items[i].Put.Item)
				continue
			}
			if b := afterNormal(w); b != nil {
				r.shared.buckets.put(r.nsID, w.Key, b)
				continue
			}
			r.shared.buckets.forget(r.nsID, w.Key)
		}
	case errors.As(err, &tce):
		for i, reason := range tce.CancellationReasons {
			if i < len(writes) && len(reason.Item) > 0 {
				r.keepHint(writes[i].Key, reason.Item)
			}
		}
	}
	return classifyWriteErr("write buckets", err)
}

// writeBucket applies one bucket write with the single-item API and keeps
// the item it leaves, or the one that refused it (a normal write returns
// either; a create's is the one it puts; other writes drop the kept
// item). The write carries a write identifier (see writeOptions).
func (r *dynamoRepository) writeBucket(ctx context.Context, w store.BucketWrite) error {
	it := r.bucketWriteItem(w)
	id := ddbschema.NewWriteID()
	switch {
	case it.Put != nil:
		err := r.writeOne(ctx, it, id)
		if err == nil {
			r.keepHint(w.Key, it.Put.Item)
		}
		return err
	case w.Kind != store.WriteNormal:
		r.shared.buckets.forget(r.nsID, w.Key)
		return r.writeOne(ctx, it, id)
	}
	ddbschema.AddWriteID(it.Update, id)
	in := ddbschema.UpdateInput(it.Update)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := r.client.UpdateItem(ctx, in, writeOptions)
	item, applied, ccf := writeAnswer(out, err, id)
	switch {
	case applied:
		r.keepHint(w.Key, item)
		return nil
	case ccf != nil && len(ccf.Item) > 0:
		r.keepHint(w.Key, ccf.Item)
	default:
		r.shared.buckets.forget(r.nsID, w.Key)
	}
	return classifyWriteErr("write bucket", err)
}

// bucketWriteItem builds the request of one bucket write. A normal write
// also refills the hidden wcu limit from the item it was computed from, so
// that wcu measures the write rate rather than lifetime writes.
func (r *dynamoRepository) bucketWriteItem(w store.BucketWrite) types.TransactWriteItem {
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
func (r *dynamoRepository) syncUpdate(w store.BucketWrite) *types.Update {
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
		// Whether the limit is new or kept, its exact state is not known
		// here: the next speculative write of it writes it exactly.
		remove = append(remove, b.name(bucketAttr(l.Name, fieldFullAt)))
	}
	switch w.TTL {
	case store.TTLSet:
		set = append(set, b.name(attrTTL)+" = "+b.n(ttlEpochSeconds(w.NowMs, w.TTLSeconds)))
	case store.TTLRemove:
		remove = append(remove, b.name(attrTTL))
	}
	for _, name := range w.Remove {
		for _, f := range []string{fieldTokens, fieldCapacity, fieldRefillAmount, fieldRefillPeriod, fieldTotalConsumed, fieldFullAt, fieldShadow, fieldParams} {
			a := b.name(bucketAttr(name, f))
			if !slices.Contains(remove, a) {
				remove = append(remove, a)
			}
		}
	}
	return b.update(r.opts.Table, bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard), updateExpr(set, nil, remove),
		[]string{"attribute_exists(" + b.name(attrPK) + ")"})
}

// writeOne issues a transactional write item with the single-item API. A
// put or an update carries the write identifier id (a retry of it that
// applied is refused, and the item the refusal returns holds id: applied).
func (r *dynamoRepository) writeOne(ctx context.Context, it types.TransactWriteItem, id ddbschema.WriteID) error {
	var err error
	switch {
	case it.Put != nil:
		p := it.Put
		ddbschema.PutWriteID(p.Item, id)
		_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
			ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, writeOptions)
	case it.Update != nil:
		ddbschema.AddWriteID(it.Update, id)
		in := ddbschema.UpdateInput(it.Update)
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		_, err = r.client.UpdateItem(ctx, in, writeOptions)
	case it.Delete != nil:
		d := it.Delete
		_, err = r.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: d.TableName, Key: d.Key, ConditionExpression: d.ConditionExpression,
			ExpressionAttributeNames: d.ExpressionAttributeNames, ExpressionAttributeValues: d.ExpressionAttributeValues,
		})
	default:
		_, err = r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{it}}, writeOptions)
	}
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) && id.In(ccf.Item) {
		return nil // a retry of the write, which had applied
	}
	return classifyWriteErr("write bucket", err)
}

// resetUpdate is the UpdateItem of a store.WriteReset: SET b_L_tk = b_L_cp for
// every limit named (attribute to attribute, so no read of the balances
// is needed; its copy ts alike, and its fa removed) and rf = now, on an
// existing item holding each of them. The hidden wcu limit is left as it
// is.
func (r *dynamoRepository) resetUpdate(w store.BucketWrite) *types.Update {
	b := newExprBuilder()
	set := []string{b.name(attrRefill) + " = " + b.n(w.NowMs)}
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")"}
	var remove []string
	for _, l := range w.Limits {
		cp := b.name(bucketAttr(l.Name, fieldCapacity))
		set = append(set, b.name(bucketAttr(l.Name, fieldTokens))+" = "+cp, b.name(bucketAttr(l.Name, fieldShadow))+" = "+cp)
		// Full: the speculative write refuses it until an exact write.
		remove = append(remove, b.name(bucketAttr(l.Name, fieldFullAt)))
		conds = append(conds, "attribute_exists("+cp+")")
	}
	return b.update(r.opts.Table, bucketPrimaryKey(r.nsID, w.Key.EntityID, w.Key.Resource, w.Key.Shard), updateExpr(set, nil, remove), conds)
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

// adjustYieldRound is the rewrite from which a refund yields to a busy
// item: a limit whose balance was read within the refund of its capacity
// (full, or to be capped) is left as it is, with no condition on its
// balance, and the rewrites are spaced (adjustBackoff). On an item that
// every acquire refills to its capacity and charges again (a generous
// rpm, a generation of slots all free), the balance crosses the capacity
// minus the refund between each read and write, and the exact cases
// above would refuse every rewrite. A refund left out is at most the
// refund less the room the balance had: fewer tokens come back, never
// more; a slot of a generation read all free is not held, so none is
// lost.
const adjustYieldRound = 2

// adjustRewriteHook, when set (by tests only), runs between the refusal
// of an adjustment's write and its rewrite: another client's write there
// is what contention looks like.
var adjustRewriteHook func(store.BucketKey)

// adjustBackoff is the pause before rewrite round of an adjustment from
// adjustYieldRound on: 2, 4, 8 … ms, at most 32 ms, and a random part of
// as much again, so that the writers of one item spread out.
func adjustBackoff(round int) time.Duration {
	d := time.Millisecond << min(round-adjustYieldRound+1, 5)
	return d + rand.N(d)
}

// errAdjustContended reports an adjustment that lost the race for its
// item maxAdjustRounds times; nothing of it was written.
var errAdjustContended = fmt.Errorf("adjustment raced with other writes %d times: %w", maxAdjustRounds, store.ErrTransactionConflict)

// writeAdjust applies one store.WriteAdjust. Its writes carry one write
// identifier: a retry of one that applied is recognised (see writeOptions).
func (r *dynamoRepository) writeAdjust(ctx context.Context, w store.BucketWrite) error {
	id := ddbschema.NewWriteID()
	kept, key := r.shared.buckets.getWithKey(r.nsID, w.Key)
	if kept != nil && kept.Incarnation != w.Incarnation {
		kept = nil // another life of the item: the optimistic write, conditioned on w's, asks it
	}
	key = r.adjustKey(w.Key, key)
	var in *dynamodb.UpdateItemInput
	if kept != nil && store.ChargeRefillDue(kept, w.Limits, w.NowMs) {
		// A charge on a limit the kept item says may be full: the exact
		// write from it at once (the optimistic one would be refused).
		in = r.exactAdjust(w, kept, key, id, false)
	}
	if in == nil {
		in = r.optimisticAdjust(w, kept, key, id)
	}
	out, err := r.client.UpdateItem(ctx, withTTLExtension(in, w, kept), writeOptions)
	for round := 0; ; round++ {
		item, applied, ccf := writeAnswer(out, err, id)
		if applied {
			r.keepHint(w.Key, item)
			return nil
		}
		if ccf == nil {
			r.shared.buckets.forget(r.nsID, w.Key)
			return wrapErr("adjust bucket", err)
		}
		if len(ccf.Item) == 0 {
			r.shared.buckets.forget(r.nsID, w.Key)
			return store.ErrConditionFailed // the item is gone: nothing to adjust
		}
		if round >= maxAdjustRounds {
			return errAdjustContended
		}
		old, err2 := r.keepItem(w.Key, ccf.Item)
		if err2 != nil {
			return err2
		}
		if old.Incarnation != w.Incarnation {
			return store.ErrConditionFailed // the item was deleted and created again: not the lease's
		}
		if round >= adjustYieldRound {
			if err := sleepCtx(ctx, adjustBackoff(round)); err != nil {
				return wrapErr("adjust bucket", err)
			}
		}
		if adjustRewriteHook != nil {
			adjustRewriteHook(w.Key)
		}
		exact := r.exactAdjustFrom(w, old, key, id, round >= adjustYieldRound, true)
		if exact == nil {
			return nil // none of its limits is in the item
		}
		out, err = r.client.UpdateItem(ctx, withTTLExtension(exact, w, old), writeOptions)
	}
}

// optimisticAdjust is the first write of an adjustment: ADD every delta,
// conditioned on the item and each limit existing and, for a refund with a
// known capacity, on the refund fitting under it. kept, the item as last
// seen (nil when none is kept), supplies the refill parameters that move a
// refunded limit's fa (see adjustExact). It carries the write identifier
// id. key is the item's key (nil: built here). It comes from a cached
// template (see adjustTemplates).
func (r *dynamoRepository) optimisticAdjust(w store.BucketWrite, kept *store.Bucket, key map[string]types.AttributeValue, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
	return r.shared.adjust.input(r.adjustKey(w.Key, key), adjustOptimistic, &w, kept, id)
}

// exactAdjust is the write of an adjustment computed from old, the item as
// it was when the previous write failed: per limit old holds, a charge is
// ADDed, and a refund takes the case of its balance (see above), with the
// item's capacity; the totals are ADDed. It returns nil when old holds none
// of the limits. It carries the write identifier id. With yield, a refund
// on a limit read full or to be capped is left out (see adjustYieldRound).
// key is the item's key (nil: built here). Apart from the refill first
// (below), it comes from a cached template (see adjustTemplates).
func (r *dynamoRepository) exactAdjust(w store.BucketWrite, old *store.Bucket, key map[string]types.AttributeValue, id ddbschema.WriteID, yield bool) *dynamodb.UpdateItemInput {
	return r.exactAdjustFrom(w, old, key, id, yield, false)
}

// exactAdjustFrom is exactAdjust; with fresh (old is the item a refused
// write returned) the refill first is a full write when old is full (see
// fullWrite).
func (r *dynamoRepository) exactAdjustFrom(w store.BucketWrite, old *store.Bucket, key map[string]types.AttributeValue, id ddbschema.WriteID, yield, fresh bool) *dynamodb.UpdateItemInput {
	key = r.adjustKey(w.Key, key)
	if store.ChargeRefillDue(old, w.Limits, w.NowMs) && w.NowMs > old.RefillMs {
		// A charge on a limit that may be full by now: the item refilled
		// to now first, then adjusted, conditioned on it being unchanged.
		ew, _, _ := planWrite(old, store.SpeculativeRequest{Key: w.Key, NowMs: w.NowMs}, w.Limits, nil, nil)
		if fresh {
			fullWrite(&ew, old, 0)
		}
		ew.TTLCheck = false
		ew.ID = id
		ew.CheckIncarnation, ew.Incarnation = true, w.Incarnation
		in := r.shared.exact.Input(key, &ew)
		in.ReturnValues = types.ReturnValueAllNew
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		return in
	}
	mode := adjustExactMode
	if yield {
		mode = adjustExactYield
	}
	return r.shared.adjust.input(key, mode, &w, old, id)
}

// adjustKey returns key, or when nil the key of the item of k.
func (r *dynamoRepository) adjustKey(k store.BucketKey, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if key != nil {
		return key
	}
	return ddbschema.BucketKeyValue(r.nsID, k.EntityID, k.Resource, k.Shard)
}

// BumpShardCount implements [store.ShardStore]: a conditional UpdateItem of the
// shard count on shard 0. It returns the count now in force (current when
// someone else changed it first).
func (r *dynamoRepository) BumpShardCount(ctx context.Context, entityID, resource string, current int) (int, error) {
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

// SerialItemWrites implements [store.SerialItemWriter]: each write of an
// item takes a write-capacity unit of its partition, and DynamoDB applies
// them one after the other. Group commit keeps one write of a hot item in
// flight, so that each carries the largest batch.
func (r *dynamoRepository) SerialItemWrites() {}

// SpeculativeConsumeAdjust implements [store.AdjustFolder]:
// SpeculativeConsume with adj, a pending adjustment of the same item (a
// committed lease's, whole tokens), folded into the same UpdateItem: one
// write for both, exactly as adj followed by the acquire. The acquire's condition holds for the balance after the
// adjustment, including that its limits are not full by now once refunded
// (their exact state, see SpeculativeConsume); a refund is conditioned on
// fitting under the capacity before the acquire takes its amount (as an
// adjustment alone is), and both ADDs go into one per limit. When a limit
// may be full, the write is the exact one of both (see foldFrom). When the
// acquire does not fit once adjusted, nothing was written: the caller
// writes the adjustment alone, then the acquire.
func (r *dynamoRepository) SpeculativeConsumeAdjust(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite) (store.SpeculativeResult, store.FoldOutcome, error) {
	res := store.SpeculativeResult{Key: req.Key}
	id := ddbschema.NewWriteID()
	in := buildSpeculativeFold(r.opts.Table, r.nsID, req, adj, id)
	if in == nil {
		return res, store.FoldNotApplied, nil
	}
	base, key := r.shared.buckets.getWithKey(r.nsID, req.Key)
	return r.foldFrom(ctx, req, adj, in, id, key, base)
}

// buildSpeculativeFold is buildSpeculativeUpdate with the adjustment adj
// of the same item folded in (see SpeculativeConsumeAdjust), carrying the
// write identifier id; nil when adj holds a refund of unknown capacity,
// which only the exact adjustment path can cap.
func buildSpeculativeFold(table, ns string, req store.SpeculativeRequest, adj store.BucketWrite, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
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
	conds := []string{"attribute_exists(" + b.name(attrPK) + ")", b.incarnationCond(adj.Incarnation)}
	var add []string
	for _, l := range req.Limits {
		conds = append(conds,
			b.name(bucketAttr(l.Name, fieldCapacity))+" = "+b.n(bucketmath.SatMul(l.Capacity, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillAmount))+" = "+b.n(bucketmath.SatMul(l.RefillAmount, 1000)),
			b.name(bucketAttr(l.Name, fieldRefillPeriod))+" = "+b.n(l.RefillPeriod.Milliseconds()))
	}
	var remove []string
	for _, name := range names {
		amount, acquired := req.Consume[name]
		a := bucketmath.SatMul(amount, 1000)
		d := deltas[name]
		tk := b.name(bucketAttr(name, fieldTokens))
		fa := func() string { return b.name(bucketAttr(name, fieldFullAt)) }
		var ra, rp int64
		sig, known := "", false
		if i := slices.IndexFunc(req.Limits, func(l store.Limit) bool { return l.Name == name }); i >= 0 {
			l := req.Limits[i]
			ra, rp = bucketmath.SatMul(l.RefillAmount, 1000), l.RefillPeriod.Milliseconds()
			sig, known = ddbschema.ParamsSig(bucketmath.SatMul(l.Capacity, 1000), ra, rp)
		}
		// The refund, written first, may bring the time the limit is full
		// that much closer.
		advance := int64(0)
		if d.milli < 0 {
			advance = bucketmath.GiveDelayMs(-d.milli, ra, rp)
		}
		switch {
		case acquired && a > 0:
			if !known {
				return nil // no exact state to condition the take on
			}
			// The balance after the adjustment must hold the amount, and
			// the limit must not be full by now once refunded.
			conds = append(conds, tk+" >= "+b.n(bucketmath.AddSat(a, d.milli)),
				fa()+" > "+b.n(bucketmath.AddSat(req.NowMs, advance)),
				tk+" = "+b.name(bucketAttr(name, fieldShadow)),
				b.name(bucketAttr(name, fieldParams))+" = "+b.value(&types.AttributeValueMemberN{Value: sig}))
			add = append(add, fa()+" "+b.n(bucketmath.AddSat(bucketmath.TakeDelayMs(a, ra, rp), -advance)))
		case acquired:
			conds = append(conds, "attribute_exists("+tk+")")
		}
		switch {
		case a > 0:
		case a < 0 || (d.milli < 0 && !known):
			remove = append(remove, fa()) // a give-back of unknown effect
		case d.milli < 0:
			add = append(add, fa()+" "+b.n(-advance))
		}
		switch {
		case d.milli > 0:
			conds = append(conds, "attribute_exists("+b.name(bucketAttr(name, fieldCapacity))+")")
			if !acquired || a <= 0 {
				// A charge is taken from the stored balance only while the
				// limit cannot be full by now (see optimisticAdjust).
				conds = append(conds, fa()+" > "+b.n(req.NowMs), tk+" = "+b.name(bucketAttr(name, fieldShadow)))
			}
		case d.milli < 0:
			// The refund fits under the capacity before the acquire takes
			// its amount, as it would written first: tk + refund ≤
			// capacity.
			conds = append(conds, b.name(bucketAttr(name, fieldCapacity))+" = "+b.n(d.capMilli),
				tk+" <= "+b.n(bucketmath.AddSat(d.capMilli, d.milli)))
		}
		if total := bucketmath.AddSat(a, d.milli); total != 0 {
			v := b.n(-total)
			add = append(add, tk+" "+v, b.name(bucketAttr(name, fieldShadow))+" "+v, b.name(bucketAttr(name, fieldTotalConsumed))+" "+b.n(total))
		}
	}
	wtk := b.name(bucketAttr(wcuLimitName, fieldTokens))
	conds = append(conds, wtk+" >= "+b.n(wcuWriteCostMilli))
	add = append(add, wtk+" "+b.n(-wcuWriteCostMilli), b.name(bucketAttr(wcuLimitName, fieldTotalConsumed))+" "+b.n(wcuWriteCostMilli))
	ttl := b.name(attrTTL)
	conds = append(conds, "(attribute_not_exists("+ttl+") OR "+ttl+" > "+b.n(bucketmath.FloorDiv(req.NowMs, 1000))+")")
	u := b.update(table, bucketPrimaryKey(ns, req.Key.EntityID, req.Key.Resource, req.Key.Shard), updateExpr(nil, add, remove), conds)
	ddbschema.AddWriteID(u, id)
	in := ddbschema.UpdateInput(u)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// afterNormal returns the item a store.WriteNormal w left when it applied,
// computed from w.Base (a transaction returns no item): a hint for the
// next write of the item, as a kept item is (its condition checks it).
// Nil when w is of another kind or creates or changes a limit.
func afterNormal(w store.BucketWrite) *store.Bucket {
	if w.Kind != store.WriteNormal || w.Base == nil || extrasOf(w.Base) == nil {
		return nil
	}
	for _, l := range w.Limits {
		if l.Initial != nil || l.Params != nil {
			return nil
		}
	}
	b := cloneBucket(w.Base)
	x := extrasOf(b)
	b.RefillMs = w.NowMs
	if w.RefreshEntity {
		b.Cascade, b.ParentID = w.Cascade, w.ParentID
	}
	switch w.TTL {
	case store.TTLSet:
		b.TTL = ttlEpochSeconds(w.NowMs, w.TTLSeconds)
	case store.TTLRemove:
		b.TTL = 0
	}
	for i := range b.States {
		s := &b.States[i]
		s.LastRefillMs = w.NowMs
		for _, l := range w.Limits {
			if l.Name != s.LimitName {
				continue
			}
			s.TokensMilli = bucketmath.AddSat(s.TokensMilli, bucketmath.AddSat(l.RefillMilli, -l.ConsumedMilli))
			s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, l.ConsumedMilli)
			if i < len(x.exact) {
				x.exact[i] = exactState{
					valid:    ddbschema.Signed(s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs),
					fullAtMs: bucketmath.StoredFullAtMs(s.TokensMilli, w.NowMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs),
				}
			}
		}
	}
	if x.wcu != nil {
		x.wcu.TokensMilli, _ = bucketmath.Refill(x.wcu.TokensMilli, w.Base.RefillMs, w.NowMs, x.wcu.CapacityMilli, x.wcu.RefillAmountMilli, x.wcu.RefillPeriodMs)
		x.wcu.LastRefillMs = w.NowMs
	}
	return b
}
