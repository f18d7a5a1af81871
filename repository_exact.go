// Layer 5, the DynamoDB repository: the speculative write, exact on every
// bucket: it takes from the stored balances while that is exact, and
// otherwise writes the refilled state in one conditional write.

package limiter

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The speculative write takes from the stored balances and leaves rf alone,
// which is exact only while no limit it takes from can have refilled to its
// capacity (store.RefillDue); a condition expression cannot compute a
// refill, so each limit keeps a lower bound of the time it is full (fa),
// which the write is conditioned on, with a copy of its balance (ts) and
// its parameters (fp) that tell a write of another library apart (see
// ddbschema.BucketLimit).
//
// When the bucket may be full (the common case of a key used now and
// then), the refilled state is written in one conditional write computed
// from the item as this repository last saw it: the exact write
// (ddbschema.ExactUpdates), conditioned on the item being unchanged (rf
// and each balance written). The repository keeps every item its writes
// return (bucketCache), so in steady state the write it sends is the one
// that applies:
//
//   - the kept item says the bucket may be full, or its exact state is
//     stale: the exact write from it;
//   - else (or none is kept): the speculative write; when it is refused,
//     the item it returns (ALL_OLD) decides: a request that does not fit,
//     or that the item no longer holds the limits of, is refused as
//     before, and one that fits is written exactly from it.
//
// An exact write refused because the item changed meanwhile returns the
// item too, and is computed again from it, at most maxExactWrites times;
// then the request is refused with store.RefusedRefillDue and the limiter
// takes the read-then-write path. The retry of a read-then-write whose
// lock was lost (store.WriteRetry) is an exact write too.

// maxExactWrites bounds the writes of one request whose item keeps
// changing under it. Each refusal of an exact write means another write
// of the item applied, so writers racing for one item all get through
// within about as many rounds as there are of them (group commit sends
// one write of an item per limiter at a time).
const maxExactWrites = 8

// keepItem parses item, the item of key as a write returned it, and keeps
// it (nothing when it cannot be parsed).
func (r *dynamoRepository) keepItem(key store.BucketKey, item map[string]types.AttributeValue) (*store.Bucket, error) {
	b, err := bucketFromDynamoDB(item)
	if err != nil {
		r.shared.buckets.forget(r.nsID, key)
		return nil, err
	}
	r.shared.buckets.put(r.nsID, key, b)
	return b, nil
}

// keepContended is keepItem of item, the item a write of id decided on
// base left (ALL_NEW, or a refusal's that holds id), with the item's
// count of full writes to come (see itemExtras.contended) set before it is
// shared: contendedWrites when another writer moved the item, by a
// refusal of this request's writes (moved) or by a write that came
// between base and this one (nextContended), else one less than base's.
func (r *dynamoRepository) keepContended(key store.BucketKey, item map[string]types.AttributeValue, base *store.Bucket, moved bool, id ddbschema.WriteID) (*store.Bucket, error) {
	b, err := bucketFromDynamoDB(item)
	if err != nil {
		r.shared.buckets.forget(r.nsID, key)
		return nil, err
	}
	if x := extrasOf(b); x != nil {
		x.contended = nextContended(base, x, moved, id)
	}
	r.shared.buckets.put(r.nsID, key, b)
	return b, nil
}

// nextContended is the count of full writes to come after the write id,
// decided on base, left the item whose extras are after: contendedWrites
// when a write of this request from an item was refused (moved), or when
// the write that preceded it on the item (after's wid1, when after is what
// it returned) is not base's newest, i.e. another writer wrote between
// the item this one decided on and this write, which the next write of
// an unchanged item would be refused for; else the count of base less
// the one made. Writers that keep moving an item thus keep their writes
// full without a refused write to tell them, and one that writes alone
// again sees it on its next write.
func nextContended(base *store.Bucket, after *itemExtras, moved bool, id ddbschema.WriteID) uint8 {
	if moved {
		return contendedWrites
	}
	if x := extrasOf(base); x != nil && x.newestID != 0 && after.newestID == id && after.priorID != x.newestID {
		return contendedWrites
	}
	if n := contendedOf(base); n > 0 {
		return n - 1
	}
	return 0
}

// keepHint keeps item, the item of key as a write returned it, when it
// parses (the kept items are hints: one that does not parse is dropped).
func (r *dynamoRepository) keepHint(key store.BucketKey, item map[string]types.AttributeValue) {
	if b, err := bucketFromDynamoDB(item); err == nil {
		r.shared.buckets.put(r.nsID, key, b)
	} else {
		r.shared.buckets.forget(r.nsID, key)
	}
}

// specInputs converts req's limits and amounts to the speculative
// template's, sorted by name, in the caller's storage.
func specInputs(req store.SpeculativeRequest, lbuf []ddbschema.SpecLimit, abuf []ddbschema.SpecAmount) ([]ddbschema.SpecLimit, []ddbschema.SpecAmount) {
	limits := lbuf[:0]
	for _, l := range req.Limits {
		limits = append(limits, ddbschema.SpecLimit{
			Name:              l.Name,
			CapacityMilli:     bucketmath.SatMul(l.Capacity, 1000),
			RefillAmountMilli: bucketmath.SatMul(l.RefillAmount, 1000),
			RefillPeriodMs:    l.RefillPeriod.Milliseconds(),
		})
	}
	amounts := abuf[:0]
	for name, n := range req.Consume {
		amounts = append(amounts, ddbschema.SpecAmount{Name: name, Milli: bucketmath.SatMul(n, 1000)})
	}
	slices.SortFunc(amounts, func(a, b ddbschema.SpecAmount) int { return strings.Compare(a.Name, b.Name) })
	return limits, amounts
}

// buildSpeculativeUpdate is the speculative UpdateItem of req in namespace
// ns: take every named amount and one wcu token, conditioned on the item
// existing and not being expired, on every limit of req.Limits being
// stored with the parameters the limiter resolved, on each positive
// amount fitting in its balance and its limit not being full by now (its
// exact state, see ddbschema.BucketLimit), and on wcu having a token. It
// is sent on every acquire, so it is built from a template of its shape
// (ddbschema.SpeculativeUpdates), and the slices handed to it stay on the
// stack for up to eight limits and amounts. It carries the write
// identifier id. ddbschema.Exact must hold for req.
func buildSpeculativeUpdate(spec *ddbschema.SpeculativeUpdates, ns string, req store.SpeculativeRequest, id ddbschema.WriteID) *dynamodb.UpdateItemInput {
	var lbuf [8]ddbschema.SpecLimit
	var abuf [8]ddbschema.SpecAmount
	limits, amounts := specInputs(req, lbuf[:], abuf[:])
	key := ddbschema.BucketKeyValue(ns, req.Key.EntityID, req.Key.Resource, req.Key.Shard)
	return spec.Input(key, limits, amounts, req.NowMs, id)
}

// SpeculativeConsume implements [store.SpeculativeStore]: one conditional
// UpdateItem on key, which also takes one token of the item's hidden wcu
// limit, exact as the contract requires (see above): in steady state one
// write, the speculative one or the exact one. A refused write returns the
// old item (ALL_OLD) and the reason; only other errors are returned as
// errors.
func (r *dynamoRepository) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	base, key := r.shared.buckets.getWithKey(r.nsID, req.Key)
	return r.consumeFrom(ctx, req, key, base, false)
}

// consumeFrom writes req to the item of key (its key value, nil to build
// it), deciding on base, the item as last seen (nil: none; fresh: as a
// refused write returned it just now, else as kept):
// the exact write when a limit it takes from may be full or its exact
// state is stale, else the speculative write. Each write refused because
// the item changed returns the item, and the next is decided on it; the
// item as refused decides a refusal. After maxExactWrites writes refused
// so, the request is refused with store.RefusedRefillDue. Every write
// carries one write identifier (no write of it applied before a refusal
// that does not hold it, so the next may carry it too).
func (r *dynamoRepository) consumeFrom(ctx context.Context, req store.SpeculativeRequest, key map[string]types.AttributeValue, base *store.Bucket, fresh bool) (store.SpeculativeResult, error) {
	id := ddbschema.NewWriteID()
	var lbuf [8]ddbschema.SpecLimit
	var abuf [8]ddbschema.SpecAmount
	limits, amounts := specInputs(req, lbuf[:], abuf[:])
	signed := ddbschema.Exact(limits, amounts)
	if key == nil {
		key = ddbschema.BucketKeyValue(r.nsID, req.Key.EntityID, req.Key.Resource, req.Key.Shard)
	}
	if base == nil && !fresh && r.shared.buckets.keeps() {
		// No item kept: one this process has not written lately, often
		// missing (a key's first acquire) or full by now (a key used now
		// and then), where the speculative write would be refused. It is
		// read first instead (one consistent read: a read unit, where the
		// refused write costs a write unit and a round trip too), and
		// decided as a refused write's item would be.
		got, missing, err := r.readToDecide(ctx, req.Key)
		if got == nil {
			return missing, err
		}
		base, fresh = got, true
	}
	var ebuf [8]ddbschema.ExactLimit
	var pbuf [8]ddbschema.SpecLimit
	var w ddbschema.ExactWrite
	moved := false
	for round := 0; ; round++ {
		exact := false
		if base != nil {
			var reason store.RefusalReason
			var direct bool
			w, reason, direct = planSpec(base, req, ebuf[:0], pbuf[:0])
			if fresh || contendedOf(base) > 0 {
				fullWrite(&w, base, wcuWriteCostMilli)
			}
			switch {
			case reason != store.RefusedNone && fresh:
				return refusedResult(req.Key, base, reason, req.NowMs), nil
			case reason != store.RefusedNone:
				base = nil // a kept item that refuses is no answer (it may be stale): ask the item
			case round > maxExactWrites:
				// The item keeps changing: the read-then-write path decides.
				return store.SpeculativeResult{Key: req.Key, Bucket: base, Reason: store.RefusedRefillDue}, nil
			default:
				exact = direct || !signed
			}
		}
		if !exact && !signed {
			// Without the parameters of a limit it takes from, the
			// speculative write cannot tell whether taking is exact: read
			// the item, and write the exact state from it.
			if round > 0 {
				return store.SpeculativeResult{Key: req.Key, Reason: store.RefusedRefillDue}, nil
			}
			got, missing, err := r.readToDecide(ctx, req.Key)
			if got == nil {
				return missing, err
			}
			base, fresh = got, true
			continue
		}
		var out *dynamodb.UpdateItemOutput
		var err error
		if exact {
			w.ID = id
			out, err = r.client.UpdateItem(ctx, r.shared.exact.Input(key, &w), writeOptions)
		} else {
			out, err = r.client.UpdateItem(ctx, r.shared.spec.Input(key, limits, amounts, req.NowMs, id), writeOptions)
		}
		item, applied, ccf := writeAnswer(out, err, id)
		if applied {
			b, err := r.keepContended(req.Key, item, base, moved, id)
			if err != nil {
				return store.SpeculativeResult{Key: req.Key}, err
			}
			return store.SpeculativeResult{Key: req.Key, Applied: true, Bucket: b}, nil
		}
		if ccf == nil {
			r.shared.buckets.forget(r.nsID, req.Key)
			return store.SpeculativeResult{Key: req.Key}, wrapErr("speculative write", err)
		}
		if len(ccf.Item) == 0 {
			r.shared.buckets.forget(r.nsID, req.Key)
			return store.SpeculativeResult{Key: req.Key, Reason: store.RefusedBucketMissing}, nil
		}
		moved = moved || base != nil // refused though computed from an item: another writer moved it
		if base, err = r.keepItem(req.Key, ccf.Item); err != nil {
			return store.SpeculativeResult{Key: req.Key}, err
		}
		fresh = true
	}
}

// writeAnswer sorts the answer of an UpdateItem that carried the write
// identifier id: applied, with the item it left (ALL_NEW), or, when a
// retry of it was refused because it had applied, the item the refusal
// returned (which holds id, and whatever later writes did); else refused,
// with the refusal (ccf); else failed (ccf nil).
func writeAnswer(out *dynamodb.UpdateItemOutput, err error, id ddbschema.WriteID) (item map[string]types.AttributeValue, applied bool, ccf *types.ConditionalCheckFailedException) {
	if err == nil {
		return out.Attributes, true, nil
	}
	if !errors.As(err, &ccf) {
		return nil, false, nil
	}
	if id.In(ccf.Item) {
		return ccf.Item, true, nil
	}
	return nil, false, ccf
}

// foldFrom writes req with adj folded in (see SpeculativeConsumeAdjust) to
// the item of key (its key value, nil to build it), in the write in, the
// take of both, or, when base (the item as last seen; nil: none) says a
// limit may be full or its exact state is stale, in the exact write of
// both computed from base (planFold). Each write refused because the item
// changed returns it, and the next is decided on it. When the acquire does
// not fit once adjusted, or after maxExactWrites refusals, nothing is
// written (store.FoldNotApplied): the caller writes the adjustment, then the
// acquire, each alone. Every write carries the write identifier id, as in
// does.
func (r *dynamoRepository) foldFrom(ctx context.Context, req store.SpeculativeRequest, adj store.BucketWrite, in *dynamodb.UpdateItemInput,
	id ddbschema.WriteID, key map[string]types.AttributeValue, base *store.Bucket) (store.SpeculativeResult, store.FoldOutcome, error) {
	if key == nil {
		key = ddbschema.BucketKeyValue(r.nsID, req.Key.EntityID, req.Key.Resource, req.Key.Shard)
	}
	var ebuf [8]ddbschema.ExactLimit
	var pbuf [8]ddbschema.SpecLimit
	fresh, moved := false, false
	for round := 0; ; round++ {
		exact := false
		var w ddbschema.ExactWrite
		if base != nil {
			var reason store.RefusalReason
			var direct bool
			w, reason, direct = planFold(base, req, adj, ebuf[:0], pbuf[:0])
			if fresh || contendedOf(base) > 0 {
				fullWrite(&w, base, wcuWriteCostMilli)
			}
			switch {
			case (reason != store.RefusedNone && fresh) || round > maxExactWrites:
				return store.SpeculativeResult{Key: req.Key}, store.FoldNotApplied, nil
			case reason != store.RefusedNone:
				base = nil // a kept item that refuses is no answer: ask the item
			default:
				exact = direct
			}
		}
		var out *dynamodb.UpdateItemOutput
		var err error
		if exact {
			w.ID = id
			out, err = r.client.UpdateItem(ctx, withTTLExtension(r.shared.exact.Input(key, &w), adj, base), writeOptions)
		} else {
			out, err = r.client.UpdateItem(ctx, withTTLExtension(in, adj, base), writeOptions)
		}
		res := store.SpeculativeResult{Key: req.Key}
		item, applied, ccf := writeAnswer(out, err, id)
		if applied {
			if res.Bucket, err = r.keepContended(req.Key, item, base, moved, id); err != nil {
				return res, store.FoldApplied, err
			}
			res.Applied = true
			return res, store.FoldApplied, nil
		}
		if ccf == nil {
			r.shared.buckets.forget(r.nsID, req.Key)
			return res, store.FoldUnknown, wrapErr("speculative write", err)
		}
		if len(ccf.Item) == 0 {
			r.shared.buckets.forget(r.nsID, req.Key)
			res.Reason = store.RefusedBucketMissing
			return res, store.FoldNotApplied, nil
		}
		moved = moved || base != nil // refused though computed from an item: another writer moved it
		if base, err = r.keepItem(req.Key, ccf.Item); err != nil {
			return res, store.FoldNotApplied, err
		}
		fresh = true
	}
}

// planFold is planWrite of req on base with adj applied first, as a
// store.WriteAdjust would apply it: the exact write of both. direct
// reports whether the take of both (the write buildSpeculativeFold builds)
// would be refused on base for want of an exact state: a limit the
// acquire takes from, or one adj charges, may be full by now (once a
// refund of it advances that time), or its exact state is stale; or a
// refund does not fit under the capacity whole.
func planFold(base *store.Bucket, req store.SpeculativeRequest, adj store.BucketWrite, lim []ddbschema.ExactLimit, par []ddbschema.SpecLimit) (w ddbschema.ExactWrite, reason store.RefusalReason, direct bool) {
	if base.Incarnation != adj.Incarnation {
		// Another life of the item than the adjustment's: the caller
		// writes the adjustment alone, which is refused.
		return w, store.RefusedBucketMissing, false
	}
	if w, reason, direct = planWrite(base, req, adj.Limits, lim, par); reason != store.RefusedNone {
		return w, reason, false
	}
	w.CheckIncarnation, w.Incarnation = true, adj.Incarnation
	x := extrasOf(base)
	for i, s := range base.States {
		d, _ := limitDelta(adj.Limits, s.LimitName)
		// A refund the capacity cuts is refused by the take of both,
		// whose refund is conditioned on fitting whole.
		if d < 0 && bucketmath.AddSat(s.TokensMilli, -d) > s.CapacityMilli {
			direct = true
		}
		if req.Consume[s.LimitName] <= 0 && d <= 0 {
			continue
		}
		advance := int64(0)
		if d < 0 {
			advance = bucketmath.GiveDelayMs(-d, s.RefillAmountMilli, s.RefillPeriodMs)
		}
		if x == nil || i >= len(x.exact) || !x.exact[i].valid || bucketmath.AddSat(x.exact[i].fullAtMs, -advance) <= req.NowMs {
			direct = true
		}
	}
	return w, store.RefusedNone, direct
}

// refunded is base with the refunds of adj applied to its stored
// balances, each capped at the capacity (base itself when adj refunds
// nothing): a limit a refund may make full by now must be refilled before
// a take, else the take from the capped balance would leave the refill
// since rf to be added on top of it.
func refunded(base *store.Bucket, adj []store.LimitWrite) *store.Bucket {
	if !slices.ContainsFunc(adj, func(l store.LimitWrite) bool { return l.ConsumedMilli < 0 }) {
		return base
	}
	b := *base
	b.States = slices.Clone(base.States)
	for i := range b.States {
		s := &b.States[i]
		if d, _ := limitDelta(adj, s.LimitName); d < 0 && s.TokensMilli < s.CapacityMilli {
			s.TokensMilli = min(bucketmath.AddSat(s.TokensMilli, -d), s.CapacityMilli)
		}
	}
	return &b
}

// limitDelta is the sum of the deltas adj holds for the limit name, and
// whether it holds any.
func limitDelta(adj []store.LimitWrite, name string) (d int64, ok bool) {
	for _, lw := range adj {
		if lw.Name == name {
			d, ok = bucketmath.AddSat(d, lw.ConsumedMilli), true
		}
	}
	return d, ok
}

// readBucket reads the item of key consistently and keeps it; nil when it
// is missing.
func (r *dynamoRepository) readBucket(ctx context.Context, key store.BucketKey) (*store.Bucket, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.opts.Table),
		Key:            bucketPrimaryKey(r.nsID, key.EntityID, key.Resource, key.Shard),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, wrapErr("read bucket", err)
	}
	if len(out.Item) == 0 {
		r.shared.buckets.forget(r.nsID, key)
		return nil, nil
	}
	return r.keepItem(key, out.Item)
}

// readToDecide reads the item of key (readBucket) for a write to be
// decided from it. A missing item, or a failed read (err), is answered
// instead (got nil): a refusal for want of the item.
func (r *dynamoRepository) readToDecide(ctx context.Context, key store.BucketKey) (got *store.Bucket, missing store.SpeculativeResult, err error) {
	if got, err = r.readBucket(ctx, key); err != nil || got == nil {
		return nil, store.SpeculativeResult{Key: key, Reason: store.RefusedBucketMissing}, err
	}
	return got, missing, nil
}

// exactLimit returns the exact write of s, a state of an item refilled to
// rfMs (or not, when rfMs is the item's rf), whose balance goes from old
// to now newMilli, with takenMilli added to its total.
func exactLimit(s store.BucketState, oldMilli, newMilli, takenMilli, rfMs int64) ddbschema.ExactLimit {
	return ddbschema.ExactLimit{
		Name: s.LimitName, OldMilli: oldMilli, NewMilli: newMilli, TakenMilli: takenMilli,
		CapacityMilli: s.CapacityMilli, RefillAmountMilli: s.RefillAmountMilli, RefillPeriodMs: s.RefillPeriodMs,
		FullAtMs: bucketmath.StoredFullAtMs(newMilli, rfMs, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs),
	}
}

// planSpec decides req on base as the speculative write would if base
// were the item, and returns the exact write of it (its limits and
// parameter conditions in the room of lim and par), the reason it is
// refused (store.RefusedNone when it fits), and whether the speculative
// write would be refused on base for want of an exact state (a limit it
// takes from may be full, or its fa is stale, missing or reached).
//
// When a limit it takes from may be full by NowMs, every limit of the item
// is refilled to NowMs (rf moves to NowMs), the request decided on the
// refilled balances, and every limit written; otherwise only the limits
// it takes from are written, their balances less the amounts. The hidden
// wcu limit gives one token (refilled too when rf moves). The write is
// also conditioned on the other limits of req.Limits keeping their
// parameters and on the item not having expired.
func planSpec(base *store.Bucket, req store.SpeculativeRequest, lim []ddbschema.ExactLimit, par []ddbschema.SpecLimit) (w ddbschema.ExactWrite, reason store.RefusalReason, direct bool) {
	return planWrite(base, req, nil, lim, par)
}

// planWrite is planSpec with the adjustment adj (limit deltas, a
// store.WriteAdjust's) applied before the request, as a store.WriteAdjust
// at req.NowMs would apply it: after the refill (a charge on a limit that
// may be full by now refills the item first, see store.ChargeRefillDue),
// a charge taken, a refund capped at the capacity, a limit base lacks
// skipped. Each total moves by the amount taken and the adjustment. A
// request without amounts (an adjustment alone) takes nothing from the
// wcu limit.
func planWrite(base *store.Bucket, req store.SpeculativeRequest, adj []store.LimitWrite, lim []ddbschema.ExactLimit, par []ddbschema.SpecLimit) (w ddbschema.ExactWrite, reason store.RefusalReason, direct bool) {
	now := req.NowMs
	if base.Expired(now) {
		return w, store.RefusedExpired, false
	}
	for _, l := range req.Limits {
		s, ok := base.State(l.Name)
		if !ok {
			return w, store.RefusedLimitMissing, false
		}
		if !sameParams(s, l) {
			return w, store.RefusedLimitsChanged, false
		}
	}
	for name := range req.Consume {
		if _, ok := base.State(name); !ok {
			return w, store.RefusedLimitMissing, false
		}
	}
	x := extrasOf(base)
	refill := (store.RefillDue(refunded(base, adj), req.Consume, now) || store.ChargeRefillDue(base, adj, now)) && now > base.RefillMs
	rf := base.RefillMs
	if refill {
		rf = now
	}
	short := false
	w = ddbschema.ExactWrite{OldRefillMs: base.RefillMs, NewRefillMs: rf, Limits: lim, Params: par, NowMs: now, TTLCheck: true}
	for i, s := range base.States {
		amount, named := req.Consume[s.LimitName]
		taken := bucketmath.SatMul(amount, 1000)
		balance := s.TokensMilli
		if refill {
			balance, _ = bucketmath.Refill(s.TokensMilli, base.RefillMs, now, s.CapacityMilli, s.RefillAmountMilli, s.RefillPeriodMs)
		}
		d, adjusted := limitDelta(adj, s.LimitName)
		switch {
		case d > 0:
			balance = bucketmath.AddSat(balance, -d)
		case d < 0 && balance < s.CapacityMilli:
			balance = min(bucketmath.AddSat(balance, -d), s.CapacityMilli)
		}
		if amount > 0 {
			short = short || balance < taken
			if !refill && (x == nil || i >= len(x.exact) || !x.exact[i].valid || (x.exact[i].fullAtMs <= now && base.RefillMs < now)) {
				direct = true
			}
		}
		if refill || (named && amount != 0) || (adjusted && d != 0) {
			w.Limits = append(w.Limits, exactLimit(s, s.TokensMilli, bucketmath.AddSat(balance, -taken), bucketmath.AddSat(taken, d), rf))
		}
	}
	for _, l := range req.Limits {
		if !slices.ContainsFunc(w.Limits, func(e ddbschema.ExactLimit) bool { return e.Name == l.Name }) {
			w.Params = append(w.Params, ddbschema.SpecLimit{
				Name: l.Name, CapacityMilli: bucketmath.SatMul(l.Capacity, 1000),
				RefillAmountMilli: bucketmath.SatMul(l.RefillAmount, 1000), RefillPeriodMs: l.RefillPeriod.Milliseconds(),
			})
		}
	}
	slices.SortFunc(w.Params, func(a, b ddbschema.SpecLimit) int { return strings.Compare(a.Name, b.Name) })
	wcu := wcuOf(base)
	cost := int64(wcuWriteCostMilli)
	if len(req.Consume) == 0 {
		cost = 0 // an adjustment alone
	}
	wcuShort := wcu == nil && cost > 0 // an item without wcu refuses the write, as the speculative one does
	if wcu != nil {
		refilled := wcu.TokensMilli
		if refill {
			refilled, _ = bucketmath.Refill(wcu.TokensMilli, base.RefillMs, now, wcu.CapacityMilli, wcu.RefillAmountMilli, wcu.RefillPeriodMs)
		}
		wcuShort = refilled < cost
		credit := refilled - wcu.TokensMilli
		w.WCU = ddbschema.ExactWCU{DeltaMilli: credit - cost, TakenMilli: cost, NeedMilli: cost - credit, HasNeed: cost > 0}
		w.HasWCU = w.WCU.DeltaMilli != 0 || cost > 0
	}
	switch {
	case short && wcuShort:
		return w, store.RefusedBothExhausted, direct
	case wcuShort:
		return w, store.RefusedWriteCapacity, direct
	case short:
		return w, store.RefusedLimitExhausted, direct
	}
	return w, store.RefusedNone, direct || refill
}

// fullWrite makes w, a write of base that refills it to w.NowMs, a
// ddbschema.ExactWrite.Full one when base says every limit is full by then
// and w writes every limit of it and creates none: then what w leaves does
// not depend on the balances read, and it is conditioned on the limits
// being full instead of on the item being unchanged, so that writes of
// other writers meanwhile do not refuse it (see ddbschema.ExactWrite).
// costMilli is what w takes from the wcu limit.
//
// It is for writes from an item another writer moved: one a refused write
// returned or a read found (contention), a retry, a read-then-write, and
// the next contendedWrites writes from the items kept after a write of
// them was so refused (see itemExtras.contended). A write from the item
// this repository's last write left when no other writer moves it (one
// process writing an item, as group commit does) is conditioned on it
// being unchanged, which holds and costs a shorter condition.
func fullWrite(w *ddbschema.ExactWrite, base *store.Bucket, costMilli int64) {
	if w.NewRefillMs != w.NowMs || len(base.States) > maxFullLimits || !fullBy(base, w.NowMs) || len(w.Limits) != len(base.States) {
		return
	}
	for i := range w.Limits {
		if w.Limits[i].Create {
			return
		}
	}
	wcu := wcuOf(base)
	w.Full, w.HasWCU = true, true
	w.WCU = ddbschema.ExactWCU{
		TakenMilli: costMilli, NewMilli: bucketmath.AddSat(wcu.CapacityMilli, -costMilli),
		CapacityMilli: wcu.CapacityMilli, RefillAmountMilli: wcu.RefillAmountMilli, RefillPeriodMs: wcu.RefillPeriodMs,
	}
}
