package aggregator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// limitDeltas returns a bucket record's consumption per limit in
// millitokens, from the net counter tc: new − old for a MODIFY (a limit
// missing from the old image, e.g. one initialised on an existing item,
// counts from 0), the new tc for an INSERT (the item's creation carries its
// first consumption). Zero deltas are left out; wcu is included.
func limitDeltas(r record) map[string]int64 {
	out := map[string]int64{}
	for _, l := range r.newItem.Limits {
		d := l.TotalConsumedMilli
		if r.oldItem != nil {
			if old, ok := r.oldItem.Limit(l.Name); ok {
				d -= old.TotalConsumedMilli
			}
		}
		if d != 0 {
			out[l.Name] = d
		}
	}
	return out
}

// maxChunkSnapshots is the most snapshot items one write covers: the
// TransactWriteItems limit.
const maxChunkSnapshots = 100

// snapshotKey identifies one usage snapshot item: a window of one type.
// Windows of different types that start at the same instant (the hour from
// midnight, the day, the month on the 1st) are items of their own.
type snapshotKey struct {
	ns, entity, resource string
	window               string
	start                time.Time
}

// snapshotGroup is what a chunk adds to one usage snapshot item.
type snapshotGroup struct {
	key      snapshotKey
	counters map[string]int64 // tokens
	events   int64
}

// snapshotChunk is the snapshot writes of a run of whole records,
// starting at record index start, applied atomically.
type snapshotChunk struct {
	start  int
	groups []*snapshotGroup
}

// snapshotChunks sums the batch's bucket deltas per snapshot item: each
// record's delta of each limit but wcu goes to every configured window
// containing the record's event time, floored to whole tokens per record,
// and counts one event. Records are
// taken in order and a chunk is closed before a record that would take it
// past maxChunkSnapshots items, so every chunk covers whole records.
func (p *Processor) snapshotChunks(recs []record) []snapshotChunk {
	var chunks []snapshotChunk
	var cur *snapshotChunk
	var groups map[snapshotKey]*snapshotGroup
	for _, r := range recs {
		if r.kind != kindBucket {
			continue
		}
		deltas := limitDeltas(r)
		delete(deltas, ddbschema.WCULimitName)
		for name := range deltas {
			// The limits of in-flight slots' generations: held, not
			// consumed, and a new name each generation.
			if _, _, ok := store.ParseSlotLimitName(name); ok {
				delete(deltas, name)
			}
		}
		if len(deltas) == 0 {
			continue
		}
		keys := make([]snapshotKey, 0, len(p.opts.Windows))
		fresh := 0
		for _, w := range p.opts.Windows {
			start, err := ddbschema.WindowStart(w, r.at)
			if err != nil {
				continue // windows are validated by NewProcessor
			}
			k := snapshotKey{ns: r.newItem.Namespace, entity: r.newItem.EntityID, resource: r.newItem.Resource, window: w, start: start}
			if _, ok := groups[k]; !ok && !slices.Contains(keys, k) {
				fresh++
			}
			keys = append(keys, k)
		}
		if cur == nil || len(cur.groups)+fresh > maxChunkSnapshots {
			chunks = append(chunks, snapshotChunk{start: r.index})
			cur, groups = &chunks[len(chunks)-1], map[snapshotKey]*snapshotGroup{}
		}
		for _, k := range keys {
			g, ok := groups[k]
			if !ok {
				g = &snapshotGroup{key: k, counters: map[string]int64{}}
				groups[k] = g
				cur.groups = append(cur.groups, g)
			}
			for name, d := range deltas {
				g.counters[name] += floorDiv(d, 1000)
				g.events++
			}
		}
	}
	return chunks
}

// Transaction conflicts (another aggregator instance writing the same
// snapshot) are retried after 25, 50 and 100 ms.
const (
	chunkRetries = 3
	chunkBackoff = 25 * time.Millisecond
)

// writeChunk applies c atomically: one UpdateItem for a single snapshot,
// one TransactWriteItems for several.
func (p *Processor) writeChunk(ctx context.Context, c snapshotChunk, now time.Time) error {
	items := make([]types.TransactWriteItem, 0, len(c.groups))
	var single *dynamodb.UpdateItemInput
	for _, g := range c.groups {
		in, err := ddbschema.UsageSnapshotUpdate(p.table, g.key.ns, ddbschema.UsageSnapshot{
			EntityID:    g.key.entity,
			Resource:    g.key.resource,
			WindowType:  g.key.window,
			WindowStart: g.key.start,
			Counters:    g.counters,
			TotalEvents: g.events,
		}, now.Add(p.opts.SnapshotTTL))
		if err != nil {
			return fmt.Errorf("usage snapshot %s/%s %s: %w", g.key.entity, g.key.resource, g.key.window, err)
		}
		single = in
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                 in.TableName,
			Key:                       in.Key,
			UpdateExpression:          in.UpdateExpression,
			ConditionExpression:       in.ConditionExpression,
			ExpressionAttributeNames:  in.ExpressionAttributeNames,
			ExpressionAttributeValues: in.ExpressionAttributeValues,
		}})
	}
	if len(items) == 1 {
		if _, err := p.client.UpdateItem(ctx, single); err != nil {
			g := c.groups[0]
			return fmt.Errorf("usage snapshot %s/%s %s: %w", g.key.entity, g.key.resource, g.key.window, err)
		}
		return nil
	}
	for attempt := 0; ; attempt++ {
		_, err := p.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		if attempt >= chunkRetries || !isTransactionConflict(err) {
			return fmt.Errorf("usage snapshots of %d items: %w", len(items), err)
		}
		t := time.NewTimer(chunkBackoff << attempt)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("usage snapshots of %d items: %w", len(items), ctx.Err())
		case <-t.C:
		}
	}
}

// isTransactionConflict reports whether err is a transaction canceled by a
// conflicting concurrent write, which is worth retrying.
func isTransactionConflict(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return true
			}
		}
		return false
	}
	var tcf *types.TransactionConflictException
	return errors.As(err, &tcf)
}

// floorDiv returns a / b rounded toward negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
