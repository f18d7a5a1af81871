package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// maxShardCount bounds shard propagation: a shard count above it is not
// propagated (the record fails), so a corrupt image cannot make the
// aggregator create millions of items.
const maxShardCount = 1024

// bucketKey identifies one bucket item.
type bucketKey struct {
	ns, entity, resource string
	shard                int
}

// bucketAgg is one bucket item as the batch left it.
type bucketAgg struct {
	// item is the last record's new image.
	item ddbschema.Bucket
	// deltas sums the records' tc deltas per limit (millitokens), wcu
	// included.
	deltas map[string]int64
	// shardCountChanged reports that a record of the batch changed the
	// item's shard count.
	shardCountChanged bool
}

// aggregateBuckets folds the batch's bucket records per item, in order of
// first appearance: the last image wins (rf, shard count, tk/cp/ra/rp) and
// tc deltas add up.
func aggregateBuckets(recs []record) []*bucketAgg {
	byKey := map[bucketKey]*bucketAgg{}
	var order []*bucketAgg
	for _, r := range recs {
		if r.kind != kindBucket {
			continue
		}
		k := bucketKey{ns: r.newItem.Namespace, entity: r.newItem.EntityID, resource: r.newItem.Resource, shard: r.newItem.Shard}
		b, ok := byKey[k]
		if !ok {
			b = &bucketAgg{deltas: map[string]int64{}}
			byKey[k] = b
			order = append(order, b)
		}
		b.item = r.newItem
		for name, d := range limitDeltas(r) {
			b.deltas[name] += d
		}
		if r.oldItem != nil && r.oldItem.ShardCount != r.newItem.ShardCount {
			b.shardCountChanged = true
		}
	}
	return order
}

// isConditionFailed reports whether err is a ConditionalCheckFailed: the
// write did not apply because someone else changed the item first.
func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// refillCredits returns, per limit of b, the tokens (millitokens) that
// accrued between rf and nowMs. Limits with a non-positive refill amount or
// period are skipped; a limit other than wcu refills at 1/shard count of
// its capacity and rate, because each shard owns that share, while wcu is
// per item, each shard being its own partition.
// Limits that accrued nothing are left out.
func refillCredits(b *bucketAgg, nowMs int64) map[string]int64 {
	n := int64(max(b.item.ShardCount, 1))
	credits := map[string]int64{}
	for _, l := range b.item.Limits {
		if l.RefillPeriodMs <= 0 || l.RefillAmountMilli <= 0 {
			continue
		}
		capMilli, rate := l.CapacityMilli, l.RefillAmountMilli
		if l.Name != ddbschema.WCULimitName {
			capMilli, rate = floorDiv(capMilli, n), floorDiv(rate, n)
		}
		tk := refilled(l.TokensMilli, b.item.RefillMs, nowMs, capMilli, rate, l.RefillPeriodMs)
		if d := tk - l.TokensMilli; d > 0 {
			credits[l.Name] = d
		}
	}
	return credits
}

// refilled returns the balance, in millitokens, of a limit that held
// tokensMilli at refillMs, refilled to nowMs with the limiter's arithmetic.
func refilled(tokensMilli, refillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) int64 {
	s := store.BucketState{
		TokensMilli:       tokensMilli,
		LastRefillMs:      refillMs,
		CapacityMilli:     capacityMilli,
		RefillAmountMilli: refillAmountMilli,
		RefillPeriodMs:    refillPeriodMs,
	}
	return s.RefilledAt(time.UnixMilli(nowMs)).TokensMilli
}

// refillDue reports whether a proactive refill of b is due: the batch
// consumed from b's item and some limit's
// refilled balance does not cover the batch's consumption of it. Only a
// bucket that the batch consumed from is refilled: the processor's own
// refill writes come back through the stream, and a bucket in debt would
// otherwise be refilled on every poll.
func refillDue(b *bucketAgg, credits map[string]int64) bool {
	if !consumed(b) {
		return false
	}
	for name, c := range credits {
		l, _ := b.item.Limit(name)
		if l.TokensMilli+c < max(0, b.deltas[name]) {
			return true
		}
	}
	return false
}

// consumed reports whether the batch consumed from b's item: some limit's
// summed tc delta is positive.
func consumed(b *bucketAgg) bool {
	for _, d := range b.deltas {
		if d > 0 {
			return true
		}
	}
	return false
}

// refill writes a proactive refill of b when one is due (see refillDue),
// crediting every limit that accrued: rf moves to now for all of them. It
// reports whether the write applied; a lost rf lock (someone wrote the
// bucket since) is not an error.
func (p *Processor) refill(ctx context.Context, b *bucketAgg, credits map[string]int64, now time.Time) (bool, error) {
	if !refillDue(b, credits) {
		return false, nil
	}
	in := ddbschema.RefillUpdate(p.table, b.item, credits, now.UnixMilli())
	if in == nil {
		return false, nil
	}
	_, err := p.client.UpdateItem(ctx, in)
	switch {
	case isConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("refill %s/%s shard %d: %w", b.item.EntityID, b.item.Resource, b.item.Shard, err)
	}
	return true, nil
}

// wcuLevel returns the wcu balance of b's item refilled to nowMs, and its
// capacity, in millitokens; ok is false when the item has no usable wcu.
func wcuLevel(b *bucketAgg, nowMs int64) (level, capacity int64, ok bool) {
	l, found := b.item.Limit(ddbschema.WCULimitName)
	if !found || l.CapacityMilli <= 0 {
		return 0, 0, false
	}
	level = refilled(l.TokensMilli, b.item.RefillMs, nowMs, l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)
	return level, l.CapacityMilli, true
}

// shouldShard reports whether b's shard 0 needs another shard: the batch wrote to it speculatively, its shard count
// did not change within the batch (the doubling's effect is judged by the
// next batch), and its wcu level, refilled to nowMs, is below
// [ShardThreshold] of capacity — a partition taking more than its 1000
// writes per second. A bucket that has seen many writes at a lower rate
// refills and is never sharded.
func shouldShard(b *bucketAgg, nowMs int64) bool {
	if b.item.Shard != 0 || b.shardCountChanged || b.deltas[ddbschema.WCULimitName] <= 0 {
		return false
	}
	level, capacity, ok := wcuLevel(b, nowMs)
	return ok && float64(level) < ShardThreshold*float64(capacity)
}

// proactiveShard doubles b's shard count when shouldShard says so; the
// same write refills b with credits and restarts its wcu (see
// ddbschema.ShardDoublingUpdate). It reports whether the doubling applied; a
// concurrent change of the shard count or of rf is not an error (the next
// batch judges again).
func (p *Processor) proactiveShard(ctx context.Context, b *bucketAgg, credits map[string]int64, now time.Time) (bool, error) {
	_, err := p.client.UpdateItem(ctx, ddbschema.ShardDoublingUpdate(p.table, b.item, credits, now.UnixMilli()))
	switch {
	case isConditionFailed(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("double shards of %s/%s: %w", b.item.EntityID, b.item.Resource, err)
	}
	next := 2 * b.item.ShardCount
	level := slog.LevelInfo
	if next > shardWarnCount {
		level = slog.LevelWarn
	}
	p.opts.Logger.LogAttrs(ctx, level, "proactive shard doubling",
		slog.String("entity_id", b.item.EntityID), slog.String("resource", b.item.Resource),
		slog.Int("old_shard_count", b.item.ShardCount), slog.Int("new_shard_count", next))
	return true, nil
}

// propagate handles a raised shard count on shard 0: the
// existing shards 1…old−1 get the new count, the new shards old…new−1 are
// created as full items. Writes that find their work done are ignored, so
// a redelivered record is harmless. It returns the number of items created.
func (p *Processor) propagate(ctx context.Context, r record) (int, error) {
	if r.kind != kindBucket || r.oldItem == nil || r.newItem.Shard != 0 {
		return 0, nil
	}
	from, to := max(r.oldItem.ShardCount, 1), r.newItem.ShardCount
	if to <= from {
		return 0, nil
	}
	if to > maxShardCount {
		return 0, fmt.Errorf("propagate shards of %s/%s: shard count %d above %d", r.newItem.EntityID, r.newItem.Resource, to, maxShardCount)
	}
	for k := 1; k < from; k++ {
		if _, err := p.client.UpdateItem(ctx, ddbschema.ShardCountPropagation(p.table, r.newItem, k)); err != nil && !isConditionFailed(err) {
			return 0, fmt.Errorf("propagate shard count to %s/%s shard %d: %w", r.newItem.EntityID, r.newItem.Resource, k, err)
		}
	}
	created := 0
	for k := from; k < to; k++ {
		_, err := p.client.PutItem(ctx, ddbschema.NewShardItem(p.table, r.newItem, k))
		switch {
		case isConditionFailed(err):
		case err != nil:
			return created, fmt.Errorf("create shard %d of %s/%s: %w", k, r.newItem.EntityID, r.newItem.Resource, err)
		default:
			created++
		}
	}
	return created, nil
}
