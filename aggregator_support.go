package limiter

// This file is the stable contract between the root package and the stream
// aggregator (package aggregator) and other tools that read or write the
// table from outside the package: bucket items in domain terms, the bucket
// refill math, usage windows, and the requests that the aggregator sends
// (proactive refill, shard doubling and propagation, usage snapshots). Key
// formats, attribute names, item layouts and expressions stay in schema*.go;
// everything here delegates to them. Requests use index-based placeholders
// (#a0, :v0), so limit names with '-' or '.' are safe (fix B6).

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WCULimitName is the hidden infrastructure limit of every bucket item: the
// item's share of DynamoDB's per-partition write ceiling (1000 write units
// per second). It never appears in statuses or usage snapshots.
const WCULimitName = wcuLimitName

// BucketItem is one bucket item (PK {ns}/BUCKET#{entity}#{resource}#{shard},
// SK #STATE) in domain terms. It is a plain value.
type BucketItem struct {
	NamespaceID string
	EntityID    string
	Resource    string
	Shard       int
	// ShardCount is the entity/resource's shard count as stored on this
	// item (1 when absent).
	ShardCount int
	// RefillMs is the shared refill timestamp rf, epoch milliseconds: the
	// optimistic lock of slow-path writes and proactive refills.
	RefillMs int64
	Cascade  bool
	ParentID string // "" when absent
	TTL      int64  // epoch seconds; 0 when absent
	// States holds one state per limit of the item (discovered by its
	// b_{L}_tk attribute), the hidden wcu limit included, sorted by name,
	// each with LastRefillMs = RefillMs. Amounts are millitokens and
	// milliseconds; a missing field reads as 0.
	States []BucketState
}

// State returns the state of limit name.
func (b BucketItem) State(name string) (BucketState, bool) {
	for _, s := range b.States {
		if s.LimitName == name {
			return s, true
		}
	}
	return BucketState{}, false
}

// IsBucketKey reports whether pk and sk are the keys of a bucket item:
// pk is `{ns}/BUCKET#…` and sk is `#STATE`. It does not check that pk
// parses; [ParseBucketItem] does.
func IsBucketKey(pk, sk string) bool {
	_, rest, err := parseNamespace(pk)
	return err == nil && sk == skState && strings.HasPrefix(rest, prefixBucket)
}

// IsAuditKey reports whether pk is the partition key of audit events,
// `{ns}/AUDIT#{entity}`, the namespaced form (the original's archival
// filter matched the bare `AUDIT#` prefix and so missed them, bug B7).
func IsAuditKey(pk string) bool {
	_, rest, err := parseNamespace(pk)
	return err == nil && strings.HasPrefix(rest, prefixAudit)
}

// ParseBucketItem reads a bucket item, e.g. a stream image. The shard (and
// entity and resource when the item lacks them) come from the PK. A PK that
// is not a bucket PK, a layout attribute of the wrong type (b_* limit
// fields, rf, shard_count and ttl must be numbers; keys, entity_id,
// resource and the index keys strings; cascade a boolean; parent_id a
// string or NULL) and a malformed number are errors.
func ParseBucketItem(item map[string]types.AttributeValue) (BucketItem, error) {
	if err := checkBucketTypes(item); err != nil {
		return BucketItem{}, err
	}
	d, err := bucketFromItem(item)
	if err != nil {
		return BucketItem{}, err
	}
	return BucketItem{
		NamespaceID: d.Namespace,
		EntityID:    d.EntityID,
		Resource:    d.Resource,
		Shard:       d.Shard,
		ShardCount:  d.ShardCount,
		RefillMs:    d.RefillMs,
		Cascade:     d.Cascade,
		ParentID:    d.ParentID,
		TTL:         d.TTL,
		States:      d.States,
	}, nil
}

// checkBucketTypes checks the types of a bucket item's layout attributes
// (the readers of schema_items.go treat a wrongly typed value as absent).
func checkBucketTypes(item map[string]types.AttributeValue) error {
	for name, v := range item {
		var ok bool
		switch {
		case name == attrRefill || name == attrShardCount || name == attrTTL || strings.HasPrefix(name, bucketAttrPrefix):
			_, ok = v.(*types.AttributeValueMemberN)
		case name == attrPK || name == attrSK || name == attrEntityID || name == attrResource ||
			name == attrGSI2PK || name == attrGSI2SK || name == attrGSI3PK || name == attrGSI3SK ||
			name == attrGSI4PK || name == attrGSI4SK:
			_, ok = v.(*types.AttributeValueMemberS)
		case name == attrCascade:
			_, ok = v.(*types.AttributeValueMemberBOOL)
		case name == attrParentID:
			switch v.(type) {
			case *types.AttributeValueMemberS, *types.AttributeValueMemberNULL:
				ok = true
			}
		default:
			ok = true
		}
		if !ok {
			return fmt.Errorf("bucket attribute %s: unexpected type %T", name, v)
		}
	}
	return nil
}

// ParseAuditItem reads an audit event item, e.g. the old image of a
// TTL-expired one. ok is false for an item without a string action, which
// the original skips. Details numbers read as int64, or float64 when they
// have a fraction or exponent; an unparsable timestamp reads as the zero
// time.
func ParseAuditItem(item map[string]types.AttributeValue) (e AuditEvent, ok bool, err error) {
	return auditEventFromItem(item)
}

// RefillBucket returns a bucket holding tokensMilli millitokens, last
// refilled at lastRefillMs, refilled to nowMs: the original's refill_bucket
// (reference §3.1). The new last-refill time advances only by the time that
// produced whole millitokens. A non-positive elapsed time or a zero
// refillPeriodMs returns the inputs unchanged.
func RefillBucket(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs int64) (newTokensMilli, newLastRefillMs int64) {
	return refillBucket(tokensMilli, lastRefillMs, nowMs, capacityMilli, refillAmountMilli, refillPeriodMs)
}

// UsageWindowStart returns the start, in UTC, of the usage window of type
// window ([WindowHourly], [WindowDaily] or [WindowMonthly]) that contains
// t. Any other window is an error.
func UsageWindowStart(window string, t time.Time) (time.Time, error) {
	key, err := windowKey(window, t)
	if err != nil {
		return time.Time{}, err
	}
	return parseISOSeconds(key)
}

// usageCounterCollides reports whether a limit name cannot be a snapshot
// counter because the snapshot layout uses that attribute.
func usageCounterCollides(name string) bool {
	return usageSnapshotExcluded[name] || name == attrGSI4PK || name == attrGSI4SK
}

// UsageSnapshotUpdate returns the UpdateItem that adds delta to the usage
// snapshot of delta's entity, resource and window (the aggregator's
// update_snapshot, reference §7.5, flat schema): delta.WindowType selects
// the window and delta.WindowStart may be any instant inside it;
// delta.Counters (tokens per limit) and delta.TotalEvents are added with
// ADD; the item's keys and attributes are set, the ttl only on creation
// (from expires, epoch seconds). WindowEnd is ignored. The hidden wcu limit
// and limits named like a layout attribute (ttl, window, resource, …, which
// would collide) are left out. An unknown window, an empty entity or
// resource, or nothing to add is an error.
func UsageSnapshotUpdate(table, namespaceID string, delta UsageSnapshot, expires time.Time) (*dynamodb.UpdateItemInput, error) {
	key, err := windowKey(delta.WindowType, delta.WindowStart)
	if err != nil {
		return nil, err
	}
	if delta.EntityID == "" || delta.Resource == "" {
		return nil, newValidationError(ErrValidation, "usage snapshot", delta.EntityID+"/"+delta.Resource, "entity and resource are required")
	}
	names := make([]string, 0, len(delta.Counters))
	for _, name := range slices.Sorted(maps.Keys(delta.Counters)) {
		if name != wcuLimitName && !usageCounterCollides(name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 && delta.TotalEvents == 0 {
		return nil, newValidationError(ErrValidation, "usage snapshot", delta.EntityID+"/"+delta.Resource, "nothing to add")
	}
	ns, entity, res := namespaceID, delta.EntityID, delta.Resource
	b := newExprBuilder()
	keep := func(attr string, v types.AttributeValue) string {
		a := b.name(attr)
		return a + " = if_not_exists(" + a + ", " + b.value(v) + ")"
	}
	set := []string{
		b.name(attrEntityID) + " = " + b.value(schemaS(entity)),
		keep(attrResource, schemaS(res)),
		keep(attrWindow, schemaS(delta.WindowType)),
		keep(attrWindowStart, schemaS(key)),
		b.name(attrGSI2PK) + " = " + b.value(schemaS(gsi2PKResource(ns, res))),
		b.name(attrGSI2SK) + " = " + b.value(schemaS(gsi2SKUsage(key, entity))),
		keep(attrGSI4PK, schemaS(ns)),
		keep(attrGSI4SK, schemaS(pkEntity(ns, entity))),
		keep(attrTTL, schemaN(expires.Unix())),
	}
	add := make([]string, 0, len(names)+1)
	for _, name := range names {
		add = append(add, b.name(name)+" "+b.n(delta.Counters[name]))
	}
	add = append(add, b.name(attrTotalEvents)+" "+b.n(delta.TotalEvents))
	u := b.update(table, primaryKey(pkEntity(ns, entity), skUsage(res, key)), updateExpr(set, add, nil), nil)
	return updateInput(u), nil
}

// RefillUpdate returns the aggregator's proactive refill of bucket b
// (reference §7.6): ADD credits[L] millitokens to each b_{L}_tk (sorted by
// name; non-positive credits are left out) and SET rf = nowMs, on condition
// that rf still equals b.RefillMs, so that a slow-path write (which moves
// rf) made since b was read wins. tc is untouched. It returns nil when no
// credit is positive.
func RefillUpdate(table string, b BucketItem, credits map[string]int64, nowMs int64) *dynamodb.UpdateItemInput {
	eb := newExprBuilder()
	rf := eb.name(attrRefill)
	var add []string
	for _, name := range slices.Sorted(maps.Keys(credits)) {
		if c := credits[name]; c > 0 {
			add = append(add, eb.name(bucketAttr(name, fieldTokens))+" "+eb.n(c))
		}
	}
	if len(add) == 0 {
		return nil
	}
	set := []string{rf + " = " + eb.n(nowMs)}
	cond := []string{rf + " = " + eb.n(b.RefillMs)}
	u := eb.update(table, bucketPrimaryKey(b.NamespaceID, b.EntityID, b.Resource, b.Shard), updateExpr(set, add, nil), cond)
	return updateInput(u)
}

// ShardDoublingUpdate returns the UpdateItem that doubles b's shard count
// (reference §7.7): SET shard_count = 2×b.ShardCount on b's item, on
// condition that shard_count still equals b.ShardCount (a concurrent
// doubling wins). Shard counts live on shard 0: b should be shard 0.
//
// The doubling also restarts the measure of the item's write rate: it sets
// the wcu balance back to capacity and rf to nowMs, crediting every other
// limit with credits[L] millitokens, the refill accrued since b.RefillMs
// (like [RefillUpdate], with the same rf lock). From then on the item
// takes a halved share of the writes, and its wcu falls again only if that
// share still exceeds the partition's 1000 writes per second. Without the
// restart the balance, drained below the doubling threshold, would take a
// while to recover even at the halved load, and every batch in between
// would double again (the runaway of B10).
func ShardDoublingUpdate(table string, b BucketItem, credits map[string]int64, nowMs int64) *dynamodb.UpdateItemInput {
	eb := newExprBuilder()
	sc, rf := eb.name(attrShardCount), eb.name(attrRefill)
	set := []string{sc + " = " + eb.n(2*int64(b.ShardCount)), rf + " = " + eb.n(nowMs)}
	if w, ok := b.State(wcuLimitName); ok {
		set = append(set, eb.name(bucketAttr(wcuLimitName, fieldTokens))+" = "+eb.n(w.CapacityMilli))
	}
	var add []string
	for _, name := range slices.Sorted(maps.Keys(credits)) {
		if c := credits[name]; c > 0 && name != wcuLimitName {
			add = append(add, eb.name(bucketAttr(name, fieldTokens))+" "+eb.n(c))
		}
	}
	cond := []string{sc + " = " + eb.n(int64(b.ShardCount)), rf + " = " + eb.n(b.RefillMs)}
	u := eb.update(table, bucketPrimaryKey(b.NamespaceID, b.EntityID, b.Resource, b.Shard), updateExpr(set, add, nil), cond)
	return updateInput(u)
}

// ShardCountPropagation returns the UpdateItem that raises the shard count
// stored on an existing shard of b's entity and resource to b.ShardCount
// (reference §7.8 step 1): SET shard_count = b.ShardCount on condition
// shard_count < b.ShardCount (a missing shard item fails the condition and
// is not created).
func ShardCountPropagation(table string, b BucketItem, shard int) *dynamodb.UpdateItemInput {
	eb := newExprBuilder()
	sc := eb.name(attrShardCount)
	n := int64(b.ShardCount)
	u := eb.update(table, bucketPrimaryKey(b.NamespaceID, b.EntityID, b.Resource, shard),
		updateExpr([]string{sc + " = " + eb.n(n)}, nil, nil), []string{sc + " < " + eb.n(n)})
	return updateInput(u)
}

// NewShardItem returns the PutItem that creates shard `shard` of b's entity
// and resource from shard 0's item b after its shard count was raised to
// b.ShardCount (reference §7.8 step 2): the keys of the new shard,
// shard_count = b.ShardCount, every limit with cp/ra/rp as on shard 0 (each
// shard item stores the full configuration), tc = 0 and tk = cp for wcu (a
// shard is its own partition) or cp / shard count (floored) for the other
// limits (a shard owns its share of the capacity); rf, ttl, cascade and
// parent_id as on shard 0. The condition attribute_not_exists(PK) leaves an
// existing shard alone.
func NewShardItem(table string, b BucketItem, shard int) *dynamodb.PutItemInput {
	n := max(int64(b.ShardCount), 1)
	spec := bucketItemSpec{
		EntityID:   b.EntityID,
		Resource:   b.Resource,
		Shard:      shard,
		ShardCount: int(n),
		RefillMs:   b.RefillMs,
		Cascade:    b.Cascade,
		ParentID:   b.ParentID,
		TTL:        b.TTL,
		States:     make([]BucketState, 0, len(b.States)),
	}
	for _, s := range b.States {
		s.ShardID = shard
		s.TotalConsumedMilli = 0
		s.TokensMilli = s.CapacityMilli
		if s.LimitName != wcuLimitName {
			s.TokensMilli = floorDiv(s.CapacityMilli, n)
		}
		spec.States = append(spec.States, s)
	}
	eb := newExprBuilder()
	return &dynamodb.PutItemInput{
		TableName:                aws.String(table),
		Item:                     bucketItem(b.NamespaceID, spec),
		ConditionExpression:      aws.String("attribute_not_exists(" + eb.name(attrPK) + ")"),
		ExpressionAttributeNames: eb.names,
	}
}

// updateInput turns a transactional Update into an UpdateItemInput.
func updateInput(u *types.Update) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 u.TableName,
		Key:                       u.Key,
		UpdateExpression:          u.UpdateExpression,
		ConditionExpression:       u.ConditionExpression,
		ExpressionAttributeNames:  u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	}
}
