package aggregator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	limiter "github.com/zaelimiter/limiter"
)

// limitDeltas returns a bucket record's consumption per limit in
// millitokens, from the net counter tc: new − old for a MODIFY (a limit
// missing from the old image, e.g. one initialised on an existing item,
// counts from 0), the new tc for an INSERT (the item's creation carries its
// first consumption). Zero deltas are left out; wcu is included.
func limitDeltas(r record) map[string]int64 {
	out := map[string]int64{}
	for _, s := range r.newItem.States {
		d := s.TotalConsumedMilli
		if r.oldItem != nil {
			if old, ok := r.oldItem.State(s.LimitName); ok {
				d -= old.TotalConsumedMilli
			}
		}
		if d != 0 {
			out[s.LimitName] = d
		}
	}
	return out
}

// snapshotKey identifies one usage snapshot.
type snapshotKey struct {
	ns, entity, resource, window string
	start                        time.Time
}

// snapshotGroup is what a batch adds to one usage snapshot.
type snapshotGroup struct {
	key      snapshotKey
	counters map[string]int64 // tokens
	events   int64
	first    int // index of the first record contributing
}

// snapshotGroups sums the batch's bucket deltas per snapshot: each record's
// delta of each limit but wcu goes to every configured window containing the
// record's event time, floored to whole tokens per record (as the original
// floors each delta), and counts one event.
func (p *Processor) snapshotGroups(recs []record) []*snapshotGroup {
	groups := map[snapshotKey]*snapshotGroup{}
	var order []*snapshotGroup
	for _, r := range recs {
		if r.kind != kindBucket {
			continue
		}
		deltas := limitDeltas(r)
		delete(deltas, limiter.WCULimitName)
		if len(deltas) == 0 {
			continue
		}
		for _, w := range p.opts.Windows {
			start, err := limiter.UsageWindowStart(w, r.at)
			if err != nil {
				continue // windows are validated by NewProcessor
			}
			k := snapshotKey{ns: r.newItem.NamespaceID, entity: r.newItem.EntityID, resource: r.newItem.Resource, window: w, start: start}
			g, ok := groups[k]
			if !ok {
				g = &snapshotGroup{key: k, counters: map[string]int64{}, first: r.index}
				groups[k] = g
				order = append(order, g)
			}
			for name, d := range deltas {
				g.counters[name] += floorDiv(d, 1000)
				g.events++
			}
		}
	}
	slices.SortStableFunc(order, func(a, b *snapshotGroup) int { return cmp.Compare(a.first, b.first) })
	return order
}

// writeSnapshot adds g to its snapshot with one UpdateItem.
func (p *Processor) writeSnapshot(ctx context.Context, g *snapshotGroup, now time.Time) error {
	in, err := limiter.UsageSnapshotUpdate(p.table, g.key.ns, limiter.UsageSnapshot{
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
	if _, err := p.client.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("usage snapshot %s/%s %s: %w", g.key.entity, g.key.resource, g.key.window, err)
	}
	return nil
}

// floorDiv returns a / b rounded toward negative infinity (b > 0), like
// Python's //.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
