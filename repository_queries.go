// Layer 5, the DynamoDB repository: the audit log, usage snapshots and
// resource capacity.

package limiter

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// maxQueryPageLimit caps the Limit of a single Query request.
const maxQueryPageLimit = 1 << 30

// AppendAudit implements [store.AuditLog]: one PutItem of the event under the
// entity's audit partition, with a TTL of expires.
func (r *dynamoRepository) AppendAudit(ctx context.Context, ev AuditEvent, expires time.Time) error {
	item, err := auditItem(r.nsID, ev, expires.Unix())
	if err != nil {
		return err
	}
	_, err = r.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.opts.Table), Item: item})
	return wrapErr("write audit event", err)
}

// AuditEvents implements [store.AuditLog]: a Query of the entity's audit
// partition, newest first, from after startEventID. It reads pages until
// it has limit events or there are no more, so it returns fewer than limit
// only at the end.
func (r *dynamoRepository) AuditEvents(ctx context.Context, entityID string, limit int, startEventID string) ([]AuditEvent, error) {
	pk := pkAudit(r.nsID, entityID)
	in := &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		KeyConditionExpression: aws.String("PK = :pk AND begins_with(SK, :sk_prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": schemaS(pk), ":sk_prefix": schemaS(skAuditPrefix),
		},
		ScanIndexForward: aws.Bool(false),
	}
	if startEventID != "" {
		in.ExclusiveStartKey = primaryKey(pk, skAudit(startEventID))
	}
	events := make([]AuditEvent, 0, min(limit, 1000))
	for {
		// Asking for no more than still missing keeps the events returned
		// contiguous: the next page starts right after the last one kept.
		in.Limit = aws.Int32(int32(min(limit-len(events), maxQueryPageLimit)))
		out, err := r.client.Query(ctx, in)
		if err != nil {
			return nil, wrapErr("audit events of "+entityID, err)
		}
		for _, item := range out.Items {
			ev, ok, err := auditEventFromItem(item)
			if err != nil {
				return nil, err
			}
			if ok {
				events = append(events, ev)
			}
		}
		if len(out.LastEvaluatedKey) == 0 || len(events) >= limit {
			return events, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// usageSummaryPage is the page size UsageSummary reads with.
const usageSummaryPage = 1000

// usageQueryPlan is a validated UsageQuery turned into a DynamoDB query.
type usageQueryPlan struct {
	in         *dynamodb.QueryInput
	pkAttr     string // partition-key attribute of the table or index queried
	skAttr     string // sort-key attribute
	pk         string // partition-key value
	prefix     string // sort-key prefix of every result
	lo, hi     string // sort-key range (inclusive) of a time-bounded query; "" when unbounded
	keyAttrs   []string
	startKey   string // formatted Start, "" when unbounded
	endKey     string // formatted End, "" when unbounded
	windowType string
	limit      int
}

// usagePlan validates q and builds its query: on the table for an entity,
// on GSI2 for a resource alone, newest first. Where the window key directly
// follows the sort-key prefix (entity and resource, or resource alone), a
// time range becomes a key condition, so only snapshots inside it are read;
// the same bounds are also applied to the results. GSI2 entries of items
// outside the namespace are dropped.
func (r *dynamoRepository) usagePlan(q UsageQuery) (*usageQueryPlan, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	p := &usageQueryPlan{windowType: q.WindowType, limit: q.Limit}
	if p.limit <= 0 {
		p.limit = store.DefaultUsageSnapshotsLimit
	}
	if !q.Start.IsZero() {
		p.startKey = formatISOSeconds(q.Start)
	}
	if !q.End.IsZero() {
		p.endKey = formatISOSeconds(q.End)
	}
	p.in = &dynamodb.QueryInput{TableName: aws.String(r.opts.Table), ScanIndexForward: aws.Bool(false)}
	var prefix string
	if q.EntityID != "" {
		p.pkAttr, p.skAttr, p.pk = attrPK, attrSK, pkEntity(r.nsID, q.EntityID)
		p.keyAttrs = []string{attrPK, attrSK}
		prefix = skUsagePrefix
		if q.Resource != "" {
			prefix = skUsageResourcePrefix(q.Resource)
		}
	} else {
		p.in.IndexName = aws.String(indexGSI2)
		p.pkAttr, p.skAttr, p.pk = attrGSI2PK, attrGSI2SK, gsi2PKResource(r.nsID, q.Resource)
		p.keyAttrs = []string{attrGSI2PK, attrGSI2SK, attrPK, attrSK}
		prefix = prefixUsage
	}
	p.in.ExpressionAttributeNames = map[string]string{"#pk": p.pkAttr, "#sk": p.skAttr}
	p.in.ExpressionAttributeValues = map[string]types.AttributeValue{":pk": schemaS(p.pk)}
	p.prefix = prefix
	windowKeyed := q.EntityID == "" || q.Resource != ""
	if windowKeyed && (p.startKey != "" || p.endKey != "") {
		// Window keys are made of ASCII digits, '-', ':', 'T' and 'Z', all
		// below '~'; '$' sorts just above the '#' that follows the window
		// key in the sort keys (#USAGE#{res}#{start}#{type},
		// USAGE#{start}#{id}#{type}), so a range ending at a window start
		// takes every window type starting then, and the items of the
		// shared layout (no type) too.
		p.lo, p.hi = prefix, prefix+"~"
		if p.startKey != "" {
			p.lo = prefix + p.startKey
		}
		if p.endKey != "" {
			p.hi = prefix + p.endKey + "$"
		}
		p.in.KeyConditionExpression = aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi")
		p.in.ExpressionAttributeValues[":lo"] = schemaS(p.lo)
		p.in.ExpressionAttributeValues[":hi"] = schemaS(p.hi)
	} else {
		p.in.KeyConditionExpression = aws.String("#pk = :pk AND begins_with(#sk, :prefix)")
		p.in.ExpressionAttributeValues[":prefix"] = schemaS(prefix)
	}
	if q.Cursor != "" {
		start, err := p.decodeCursor(q.Cursor)
		if err != nil {
			return nil, err
		}
		p.in.ExclusiveStartKey = start
	}
	return p, nil
}

// decodeCursor decodes a UsageSnapshots cursor and checks that it belongs to
// this query: the key attributes of the table or index queried, the same
// partition and a sort key inside the query's range. Anything else is a
// *[ValidationError] (DynamoDB would reject it with an untyped error).
func (p *usageQueryPlan) decodeCursor(cursor string) (map[string]types.AttributeValue, error) {
	bad := store.NewValidationError(ErrValidation, "cursor", cursor, "not a cursor returned by UsageSnapshots for this query")
	key, err := decodeCursor(cursor)
	if err != nil || len(key) != len(p.keyAttrs) {
		return nil, bad
	}
	for _, attr := range p.keyAttrs {
		if _, ok := schemaGetS(key, attr); !ok {
			return nil, bad
		}
	}
	pk, _ := schemaGetS(key, p.pkAttr)
	sk, _ := schemaGetS(key, p.skAttr)
	if pk != p.pk || !strings.HasPrefix(sk, p.prefix) || (p.hi != "" && (sk < p.lo || sk > p.hi)) {
		return nil, bad
	}
	return key, nil
}

// keep applies the query's filters to a snapshot after fetching: window
// type equality and the window-start range.
func (p *usageQueryPlan) keep(s UsageSnapshot) bool {
	start := formatISOSeconds(s.WindowStart)
	switch {
	case p.windowType != "" && s.WindowType != p.windowType:
		return false
	case p.startKey != "" && start < p.startKey:
		return false
	case p.endKey != "" && start > p.endKey:
		return false
	}
	return true
}

// UsageSnapshots returns up to q.Limit usage snapshots selected by q, newest
// window first (for an entity without a resource: by resource, then newest
// window first), and a cursor for the next call ("" when there are no
// more). Pass the cursor back in q.Cursor with the rest of q unchanged. A
// non-empty cursor may lead to an empty last page.
//
// It reads pages until it has q.Limit matching snapshots or there are no
// more, so a page falls short of q.Limit only at the end. Snapshots are
// written by the aggregator, one item per window type and start. An item
// of the shared layout, keyed by the start only (the Python library's
// aggregator writes them), is returned as the window type its window
// attribute names; at 00:00 UTC its counters may hold the sum of the
// window types that start then. Items lacking entity_id, resource or a
// parsable window_start are skipped, and the hidden wcu limit never
// appears in Counters. Invalid queries are *[ValidationError]s; nothing is
// read then.
func (r *dynamoRepository) UsageSnapshots(ctx context.Context, q UsageQuery) ([]UsageSnapshot, string, error) {
	p, err := r.usagePlan(q)
	if err != nil {
		return nil, "", err
	}
	snapshots := make([]UsageSnapshot, 0, min(p.limit, usageSummaryPage))
	for {
		// Asking for no more than still missing keeps the pages contiguous:
		// the cursor is the key of the last item evaluated.
		p.in.Limit = aws.Int32(int32(min(p.limit-len(snapshots), maxQueryPageLimit)))
		out, err := r.client.Query(ctx, p.in)
		if err != nil {
			return nil, "", wrapErr("usage snapshots", err)
		}
		items := out.Items
		if p.in.IndexName != nil {
			items = r.ownIndexItems(ctx, *p.in.IndexName, r.nsID, items)
		}
		for _, item := range items {
			s, ok, err := usageSnapshotFromItem(item)
			if err != nil {
				return nil, "", err
			}
			if !ok || !p.keep(s) {
				continue
			}
			delete(s.Counters, wcuLimitName)
			snapshots = append(snapshots, s)
		}
		if len(out.LastEvaluatedKey) == 0 {
			return snapshots, "", nil
		}
		if len(snapshots) >= p.limit {
			return snapshots, encodeCursor(out.LastEvaluatedKey), nil
		}
		p.in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// UsageSummary aggregates the snapshots q selects (q.Limit and q.Cursor are
// ignored), reading pages of 1000 until none are left or
// [store.MaxUsageSummarySnapshots] snapshots are collected: Total sums each
// counter, Average divides it by the number of snapshots that have that
// counter, MinWindowStart and MaxWindowStart bound the windows seen, and
// SnapshotCount counts the snapshots. With no snapshots the maps are empty
// and the times zero. Invalid queries are *[ValidationError]s.
func (r *dynamoRepository) UsageSummary(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	q.Cursor = ""
	sum := UsageSummary{Total: map[string]int64{}, Average: map[string]float64{}}
	counts := map[string]int{}
	for {
		q.Limit = min(usageSummaryPage, store.MaxUsageSummarySnapshots-sum.SnapshotCount)
		page, next, err := r.UsageSnapshots(ctx, q)
		if err != nil {
			return UsageSummary{}, err
		}
		for _, s := range page {
			if sum.SnapshotCount == 0 || s.WindowStart.Before(sum.MinWindowStart) {
				sum.MinWindowStart = s.WindowStart
			}
			if sum.SnapshotCount == 0 || s.WindowStart.After(sum.MaxWindowStart) {
				sum.MaxWindowStart = s.WindowStart
			}
			sum.SnapshotCount++
			for name, n := range s.Counters {
				sum.Total[name] = bucketmath.AddSat(sum.Total[name], n)
				counts[name]++
			}
		}
		if next == "" || sum.SnapshotCount >= store.MaxUsageSummarySnapshots {
			break
		}
		q.Cursor = next
	}
	for name, total := range sum.Total {
		sum.Average[name] = float64(total) / float64(counts[name])
	}
	return sum, nil
}

// entityShards accumulates the shards of one entity's bucket.
type entityShards struct {
	capacity  int64 // whole tokens, from the lowest shard seen
	lowShard  int
	available int64 // whole tokens, summed over shards
}

// ResourceCapacity implements [store.CapacityReader]. The buckets are found with
// a GSI2 query (every page; the index projects whole items), those of the
// namespace only. The shards of
// an entity count once: its capacity is the shard-0 capacity (each shard
// stores the full one) and its available tokens are the sum of every
// shard's balance refilled to now, capped at the capacity. Available is
// negative for a bucket in debt, which puts utilisation above 100 %.
// UtilizationPct is (capacity − available) / capacity × 100, and 0 when
// the capacity is 0. Entities are sorted by id.
//
// With parentsOnly, only entities whose META record has no parent are kept
// (entities without META are dropped); their META
// records are read with one BatchGetItem rather than one GetItem per bucket.
func (r *dynamoRepository) ResourceCapacity(ctx context.Context, resource, limitName string, parentsOnly bool, now time.Time) (ResourceCapacity, error) {
	op := "resource capacity " + resource + "/" + limitName
	items, err := r.queryIndexAll(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(r.opts.Table),
		IndexName:              aws.String(indexGSI2),
		KeyConditionExpression: aws.String("GSI2PK = :pk AND begins_with(GSI2SK, :sk_prefix)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": schemaS(gsi2PKResource(r.nsID, resource)), ":sk_prefix": schemaS(prefixBucket),
		},
	})
	if err != nil {
		return ResourceCapacity{}, wrapErr(op, err)
	}
	nowMs := now.UnixMilli()
	byEntity := make(map[string]*entityShards)
	for _, item := range items {
		b, err := bucketFromDynamoDB(item)
		if err != nil {
			return ResourceCapacity{}, wrapErr(op, err)
		}
		s, ok := b.State(limitName)
		if !ok {
			continue
		}
		avail := calculateAvailable(s, nowMs)
		e, seen := byEntity[b.Key.EntityID]
		if !seen {
			byEntity[b.Key.EntityID] = &entityShards{capacity: s.Capacity(), lowShard: b.Key.Shard, available: avail}
			continue
		}
		if b.Key.Shard < e.lowShard {
			e.capacity, e.lowShard = s.Capacity(), b.Key.Shard
		}
		e.available = bucketmath.AddSat(e.available, avail)
	}
	if parentsOnly && len(byEntity) > 0 {
		if err := r.keepParents(ctx, byEntity); err != nil {
			return ResourceCapacity{}, wrapErr(op, err)
		}
	}
	ids := make([]string, 0, len(byEntity))
	for id := range byEntity {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := ResourceCapacity{Resource: resource, LimitName: limitName, Entities: make([]store.EntityCapacity, 0, len(ids))}
	for _, id := range ids {
		e := byEntity[id]
		available := min(e.available, e.capacity)
		out.Entities = append(out.Entities, store.EntityCapacity{
			EntityID: id, Capacity: e.capacity, Available: available,
			UtilizationPct: utilizationPct(e.capacity, available),
		})
		out.TotalCapacity = bucketmath.AddSat(out.TotalCapacity, e.capacity)
		out.TotalAvailable = bucketmath.AddSat(out.TotalAvailable, available)
	}
	out.UtilizationPct = utilizationPct(out.TotalCapacity, out.TotalAvailable)
	return out, nil
}

// keepParents removes from byEntity the entities whose META record has a
// parent or does not exist, reading every META record in one BatchGetItem
// (chunks of 100).
func (r *dynamoRepository) keepParents(ctx context.Context, byEntity map[string]*entityShards) error {
	keys := make([]map[string]types.AttributeValue, 0, len(byEntity))
	for id := range byEntity {
		keys = append(keys, primaryKey(pkEntity(r.nsID, id), skMeta))
	}
	metas, err := r.batchGet(ctx, keys, false)
	if err != nil {
		return err
	}
	parents := make(map[string]bool, len(metas))
	prefix := pkEntity(r.nsID, "")
	for _, item := range metas {
		pk, _ := schemaGetS(item, attrPK)
		if entityFromItem(item).IsParent() {
			parents[strings.TrimPrefix(pk, prefix)] = true
		}
	}
	for id := range byEntity {
		if !parents[id] {
			delete(byEntity, id)
		}
	}
	return nil
}

// utilizationPct returns (capacity − available) / capacity × 100, or 0 when
// capacity is not positive.
func utilizationPct(capacity, available int64) float64 {
	if capacity <= 0 {
		return 0
	}
	return (float64(capacity) - float64(available)) / float64(capacity) * 100
}
