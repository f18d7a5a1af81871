// Layer 5, the DynamoDB repository: the atomic speculative batch, the
// write of every item of an AcquireAll (a cascade of three or four levels,
// a calendar limit's period buckets) in one TransactWriteItems.

package limiter

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// SpeculativeConsumeAll implements [store.BatchStore]: the write of every
// request, each the one SpeculativeConsume would send (the speculative
// write, or the exact write computed from the item as last seen when a
// limit it takes from may be full by now or its exact state is stale), as
// the Update items of one TransactWriteItems: all apply or none. In
// steady state, with every item kept from the last write, that is the
// whole cost: one call.
//
// Each item needs the item as last seen: the one this repository keeps
// (bucketCache) or, for those it keeps none of, the item read
// consistently, in one BatchGetItem for all of them. When a kept item
// refuses its request (it may be stale), every kept item is read again
// likewise before anything is written. An item that does not exist
// refuses the batch (store.RefusedBucketMissing) without a write.
//
// A refused transaction writes nothing. DynamoDB returns, per item, the
// reason and, for an item whose condition failed, the item as it was
// (ReturnValuesOnConditionCheckFailure ALL_OLD). Such an item decides as
// it does for SpeculativeConsume: a request it does not fit refuses the
// batch; one it fits is written exactly from it in the next transaction.
// An item in another transaction (TransactionConflict) is sent again after
// a short wait: a conflict never refuses as a rate limit would. After
// maxExactWrites transactions refused so, the batch is refused with
// store.RefusedRefillDue (the limiter then reads and writes every item).
// When the batch is refused, every result holds its item as it was: the
// items the transaction did not return (those whose condition held, or
// kept ones) are read consistently first, and each result holds the
// reason its item refuses the request (store.RefusedNone when it fits).
//
// An applied transaction returns no item. Each result then holds its item
// as last seen with this write applied, as DynamoDB applies it (afterSpec,
// afterExact): that is the item after the write whenever the item as last
// seen was the item before it, which the condition of an exact write
// ensures for the limits it sets, and which holds for a speculative write
// unless another client wrote the item since this repository last saw it.
// The lease built from a result needs exact parameters (the write was
// conditioned on them) and a balance for its local view (its statuses,
// Lease.Consume's local check, AcquireAll's statuses), which, like the
// rest of that view, need not see other clients' writes. The computed
// items are kept as the hints of the next writes, whose conditions check
// them.
//
// Each transaction carries a ClientRequestToken, derived from the write
// identifier its items carry: the SDK's retry of a transaction whose answer
// was lost is applied once (writeOptions retries it).
func (r *dynamoRepository) SpeculativeConsumeAll(ctx context.Context, reqs []store.SpeculativeRequest) ([]store.SpeculativeResult, error) {
	n := len(reqs)
	results := make([]store.SpeculativeResult, n)
	if n == 0 {
		return results, nil
	}
	bases := make([]*store.Bucket, n)
	fresh := make([]bool, n) // bases[i] was just returned or read (nil: the item is missing)
	keys := make([]map[string]types.AttributeValue, n)
	for i, req := range reqs {
		results[i].Key = req.Key
		bases[i], keys[i] = r.shared.buckets.getWithKey(r.nsID, req.Key)
		if keys[i] == nil {
			keys[i] = ddbschema.BucketKeyValue(r.nsID, req.Key.EntityID, req.Key.Resource, req.Key.Shard)
		}
	}
	plans := make([]batchPlan, n)
	rounds := 0
	for {
		if err := r.readBases(ctx, reqs, bases, fresh); err != nil {
			return results, err
		}
		reread := false
		for i, req := range reqs {
			if bases[i] == nil {
				return r.refuseBatch(ctx, reqs, bases, fresh, results, nil)
			}
			var reason store.RefusalReason
			plans[i], reason = planBatchItem(bases[i], req)
			switch {
			case reason != store.RefusedNone && fresh[i]:
				return r.refuseBatch(ctx, reqs, bases, fresh, results, nil)
			case reason != store.RefusedNone:
				reread = true // a kept item that refuses is no answer: read the item
			}
		}
		if reread {
			// Read every kept item with it, in the same call: a refusal
			// returns them all as they are.
			for i := range reqs {
				if !fresh[i] {
					bases[i] = nil
				}
			}
			continue
		}
		if rounds >= maxExactWrites {
			// The items keep changing: the read-then-write path decides.
			forced := make(map[int]store.RefusalReason, n)
			for i := range reqs {
				forced[i] = store.RefusedRefillDue
			}
			return r.refuseBatch(ctx, reqs, bases, fresh, results, forced)
		}
		rounds++
		id := ddbschema.NewWriteID()
		items := make([]types.TransactWriteItem, n)
		for i, req := range reqs {
			if plans[i].exact {
				w := plans[i].w
				w.ID = id
				items[i].Update = r.shared.exact.Update(keys[i], &w)
				continue
			}
			limits, amounts := specInputs(req, nil, nil)
			items[i].Update = r.shared.spec.Update(keys[i], limits, amounts, req.NowMs, id)
		}
		token := batchToken(id)
		_, err := r.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: items, ClientRequestToken: &token,
		}, writeOptions)
		applied, conflict, err := r.batchAnswer(err, id, reqs, bases, fresh)
		if applied {
			for i, req := range reqs {
				b := plans[i].after(bases[i], req, id)
				r.shared.buckets.put(r.nsID, req.Key, b)
				results[i] = store.SpeculativeResult{Key: req.Key, Applied: true, Bucket: b}
			}
			return results, nil
		}
		if err != nil {
			for _, req := range reqs {
				r.shared.buckets.forget(r.nsID, req.Key)
			}
			return results, err
		}
		if conflict {
			if err := sleepCtx(ctx, rand.N(writeRetryDelay<<min(rounds-1, 3))+time.Millisecond); err != nil {
				return results, err
			}
		}
	}
}

// batchPlan is the write of one item of a batch: the exact write w, or
// (exact false) the speculative write.
type batchPlan struct {
	exact bool
	w     ddbschema.ExactWrite
}

// planBatchItem decides req on base, the item as last seen, as
// SpeculativeConsume does: the reason base refuses it, and the write to
// send when it fits.
func planBatchItem(base *store.Bucket, req store.SpeculativeRequest) (batchPlan, store.RefusalReason) {
	limits, amounts := specInputs(req, nil, nil)
	w, reason, direct := planSpec(base, req, nil, nil)
	return batchPlan{exact: direct || !ddbschema.Exact(limits, amounts), w: w}, reason
}

// after returns base, the item the plan was computed from, with the
// plan's write of req, which carried the write identifier id, applied.
func (p *batchPlan) after(base *store.Bucket, req store.SpeculativeRequest, id ddbschema.WriteID) *store.Bucket {
	if p.exact {
		w := p.w
		w.ID = id
		return afterExact(base, &w)
	}
	return afterSpec(base, req, id)
}

// batchToken is the ClientRequestToken of the transaction whose items
// carry the write identifier id.
func batchToken(id ddbschema.WriteID) string {
	return "zael-batch-" + strconv.FormatUint(uint64(id), 16)
}

// batchAnswer sorts the answer of a batch's transaction, whose items
// carried the write identifier id: applied; or refused, with the item of
// each whose condition failed kept in bases (fresh; nil when it is
// missing), conflict reporting an item in another transaction; or failed
// (err).
func (r *dynamoRepository) batchAnswer(err error, id ddbschema.WriteID, reqs []store.SpeculativeRequest, bases []*store.Bucket, fresh []bool) (applied, conflict bool, _ error) {
	if err == nil {
		return true, false, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		var tcf *types.TransactionConflictException
		if errors.As(err, &tcf) {
			return false, true, nil
		}
		return false, false, wrapErr("speculative batch", err)
	}
	for i, reason := range tce.CancellationReasons {
		if i >= len(reqs) {
			break
		}
		switch code := aws.ToString(reason.Code); code {
		case "", "None":
		case "ConditionalCheckFailed":
			if id.In(reason.Item) {
				// An earlier attempt of this transaction applied (every
				// item of it did).
				return true, false, nil
			}
			if len(reason.Item) == 0 {
				r.shared.buckets.forget(r.nsID, reqs[i].Key)
				bases[i], fresh[i] = nil, true
				continue
			}
			b, err := r.keepItem(reqs[i].Key, reason.Item)
			if err != nil {
				return false, false, err
			}
			bases[i], fresh[i] = b, true
		case "TransactionConflict":
			conflict = true
		default:
			return false, false, wrapErr("speculative batch", err)
		}
	}
	return false, conflict, nil
}

// readBases reads consistently, in one BatchGetItem, the items of reqs
// that have no base and were not found missing, and keeps them (fresh).
func (r *dynamoRepository) readBases(ctx context.Context, reqs []store.SpeculativeRequest, bases []*store.Bucket, fresh []bool) error {
	var keys []map[string]types.AttributeValue
	for i, req := range reqs {
		if bases[i] == nil && !fresh[i] {
			keys = append(keys, bucketPrimaryKey(r.nsID, req.Key.EntityID, req.Key.Resource, req.Key.Shard))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	items, err := r.batchGet(ctx, keys, true)
	if err != nil {
		return wrapErr("read buckets", err)
	}
	for i, req := range reqs {
		if bases[i] == nil && !fresh[i] {
			fresh[i] = true // missing unless read below
			r.shared.buckets.forget(r.nsID, req.Key)
		}
	}
	for _, item := range items {
		b, err := bucketFromDynamoDB(item)
		if err != nil {
			return err
		}
		for i, req := range reqs {
			if req.Key == b.Key && bases[i] == nil {
				bases[i] = b
				r.shared.buckets.put(r.nsID, b.Key, b)
			}
		}
	}
	return nil
}

// refuseBatch returns the results of a refused batch: every item as it
// was (those not fresh read consistently first) with the reason it
// refuses its request, or the reason forced gives it.
func (r *dynamoRepository) refuseBatch(ctx context.Context, reqs []store.SpeculativeRequest, bases []*store.Bucket, fresh []bool, results []store.SpeculativeResult, forced map[int]store.RefusalReason) ([]store.SpeculativeResult, error) {
	for i := range reqs {
		if !fresh[i] {
			bases[i] = nil
		}
	}
	if err := r.readBases(ctx, reqs, bases, fresh); err != nil {
		return results, err
	}
	for i, req := range reqs {
		res := store.SpeculativeResult{Key: req.Key, Bucket: bases[i]}
		switch reason, ok := forced[i]; {
		case ok:
			res.Reason = reason
		case bases[i] == nil:
			res.Reason = store.RefusedBucketMissing
		default:
			_, res.Reason, _ = planSpec(bases[i], req, nil, nil)
			if res.Reason == store.RefusedWriteCapacity || res.Reason == store.RefusedBothExhausted {
				res.CapacityRefills = wcuRefills(bases[i], req.NowMs)
			}
		}
		results[i] = res
	}
	return results, nil
}

// afterSpec returns base with the speculative write of req applied as
// DynamoDB applies it: per amount the balance (and its copy) less it, the
// total plus it, fa moved by what a take delays it (a give-back removes
// fa); one wcu token taken; id the newest write identifier.
func afterSpec(base *store.Bucket, req store.SpeculativeRequest, id ddbschema.WriteID) *store.Bucket {
	b := cloneBucket(base)
	x := extrasOf(b)
	x.wrote(id)
	for i := range b.States {
		s := &b.States[i]
		m := bucketmath.SatMul(req.Consume[s.LimitName], 1000)
		if m == 0 {
			continue
		}
		s.TokensMilli = bucketmath.AddSat(s.TokensMilli, -m)
		s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, m)
		if x == nil || i >= len(x.exact) {
			continue
		}
		if m > 0 && x.exact[i].valid {
			x.exact[i].fullAtMs = bucketmath.AddSat(x.exact[i].fullAtMs, bucketmath.TakeDelayMs(m, s.RefillAmountMilli, s.RefillPeriodMs))
		} else {
			x.exact[i] = exactState{}
		}
	}
	if x != nil && x.wcu != nil {
		x.wcu.TokensMilli -= wcuWriteCostMilli
		x.wcu.TotalConsumedMilli += wcuWriteCostMilli
	}
	return b
}

// afterExact returns base with the exact write w applied as DynamoDB
// applies it: rf moved, each limit w sets at its new balance (and exact
// state), its total plus what it took; the wcu limit moved; w.ID the
// newest write identifier.
func afterExact(base *store.Bucket, w *ddbschema.ExactWrite) *store.Bucket {
	b := cloneBucket(base)
	x := extrasOf(b)
	x.wrote(w.ID)
	b.RefillMs = w.NewRefillMs
	for i := range b.States {
		s := &b.States[i]
		s.LastRefillMs = w.NewRefillMs
		for _, l := range w.Limits {
			if l.Name != s.LimitName {
				continue
			}
			s.TokensMilli = l.NewMilli
			s.TotalConsumedMilli = bucketmath.AddSat(s.TotalConsumedMilli, l.TakenMilli)
			if x != nil && i < len(x.exact) {
				x.exact[i] = exactState{valid: ddbschema.Signed(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs), fullAtMs: l.FullAtMs}
			}
		}
	}
	if x != nil && x.wcu != nil {
		x.wcu.LastRefillMs = w.NewRefillMs
		switch {
		case w.HasWCU && w.Full:
			x.wcu.TokensMilli = w.WCU.NewMilli
			x.wcu.TotalConsumedMilli = bucketmath.AddSat(x.wcu.TotalConsumedMilli, w.WCU.TakenMilli)
		case w.HasWCU:
			x.wcu.TokensMilli = bucketmath.AddSat(x.wcu.TokensMilli, w.WCU.DeltaMilli)
			x.wcu.TotalConsumedMilli = bucketmath.AddSat(x.wcu.TotalConsumedMilli, w.WCU.TakenMilli)
		}
	}
	return b
}
