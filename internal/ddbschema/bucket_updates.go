package ddbschema

import (
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The requests of the stream aggregator on bucket items: proactive refill,
// shard doubling, and the propagation of a raised shard count.

// RefillUpdate returns the proactive refill of bucket b: ADD credits[L]
// millitokens to each b_{L}_tk (sorted by name; non-positive credits are
// left out) and SET rf = nowMs, on condition that rf still equals
// b.RefillMs, so that a normal write (which moves rf) made since b was read
// wins. tc is untouched. It returns nil when no credit is positive.
//
// A limit's ts (its copy of tk, see [BucketLimit]) gets the same credit
// when b holds one. Its fa stays a lower bound of the time it is full as
// long as the credit is at most the refill accrued since b.RefillMs, which
// the rf condition makes the refill of the state the credit was computed
// from.
func RefillUpdate(table string, b Bucket, credits map[string]int64, nowMs int64) *dynamodb.UpdateItemInput {
	eb := NewExpr()
	rf := eb.Name(AttrRefill)
	var add []string
	for _, name := range slices.Sorted(maps.Keys(credits)) {
		if c := credits[name]; c > 0 {
			v := eb.N(c)
			add = append(add, eb.Name(BucketAttr(name, FieldTokens))+" "+v)
			if l, ok := b.Limit(name); ok && l.HasShadow {
				add = append(add, eb.Name(BucketAttr(name, FieldShadow))+" "+v)
			}
		}
	}
	if len(add) == 0 {
		return nil
	}
	set := []string{rf + " = " + eb.N(nowMs)}
	cond := []string{rf + " = " + eb.N(b.RefillMs)}
	u := eb.Update(table, BucketPrimaryKey(b.Namespace, b.EntityID, b.Resource, b.Shard), UpdateExpr(set, add, nil), cond)
	return UpdateInput(u)
}

// ShardDoublingUpdate returns the UpdateItem that doubles b's shard count:
// SET shard_count = 2×b.ShardCount on b's item, on condition that
// shard_count still equals b.ShardCount (a concurrent doubling wins). Shard
// counts live on shard 0: b should be shard 0.
//
// The doubling also restarts the measure of the item's write rate: it sets
// the wcu balance back to capacity and rf to nowMs, crediting every other
// limit with credits[L] millitokens, the refill accrued since b.RefillMs
// (like [RefillUpdate], with the same rf lock). From then on the item takes
// a halved share of the writes, and its wcu falls again only if that share
// still exceeds the partition's 1000 writes per second. Without the restart
// the balance, drained below the doubling threshold, would take a while to
// recover even at the halved load, and every batch in between would double
// the shard count again.
func ShardDoublingUpdate(table string, b Bucket, credits map[string]int64, nowMs int64) *dynamodb.UpdateItemInput {
	eb := NewExpr()
	sc, rf := eb.Name(AttrShardCount), eb.Name(AttrRefill)
	set := []string{sc + " = " + eb.N(2*int64(b.ShardCount)), rf + " = " + eb.N(nowMs)}
	if w, ok := b.Limit(WCULimitName); ok {
		set = append(set, eb.Name(BucketAttr(WCULimitName, FieldTokens))+" = "+eb.N(w.CapacityMilli))
	}
	var add []string
	for _, name := range slices.Sorted(maps.Keys(credits)) {
		if c := credits[name]; c > 0 && name != WCULimitName {
			v := eb.N(c)
			add = append(add, eb.Name(BucketAttr(name, FieldTokens))+" "+v)
			if l, ok := b.Limit(name); ok && l.HasShadow {
				add = append(add, eb.Name(BucketAttr(name, FieldShadow))+" "+v) // as RefillUpdate
			}
		}
	}
	cond := []string{sc + " = " + eb.N(int64(b.ShardCount)), rf + " = " + eb.N(b.RefillMs)}
	u := eb.Update(table, BucketPrimaryKey(b.Namespace, b.EntityID, b.Resource, b.Shard), UpdateExpr(set, add, nil), cond)
	return UpdateInput(u)
}

// ShardCountPropagation returns the UpdateItem that raises the shard count
// stored on an existing shard of b's entity and resource to b.ShardCount:
// SET shard_count = b.ShardCount on condition shard_count < b.ShardCount (a
// missing shard item fails the condition and is not created).
func ShardCountPropagation(table string, b Bucket, shard int) *dynamodb.UpdateItemInput {
	eb := NewExpr()
	sc := eb.Name(AttrShardCount)
	n := int64(b.ShardCount)
	u := eb.Update(table, BucketPrimaryKey(b.Namespace, b.EntityID, b.Resource, shard),
		UpdateExpr([]string{sc + " = " + eb.N(n)}, nil, nil), []string{sc + " < " + eb.N(n)})
	return UpdateInput(u)
}

// NewShardItem returns the PutItem that creates shard `shard` of b's entity
// and resource from shard 0's item b after its shard count was raised to
// b.ShardCount: the keys of the new shard, shard_count = b.ShardCount, every
// limit with cp/ra/rp as on shard 0 (each shard item stores the full
// configuration), tc = 0 and tk = cp for wcu (a shard is its own partition)
// or cp / shard count (floored) for the other limits (a shard owns its share
// of the capacity); rf, ttl, cascade and parent_id as on shard 0. The
// condition attribute_not_exists(PK) leaves an existing shard alone.
func NewShardItem(table string, b Bucket, shard int) *dynamodb.PutItemInput {
	n := max(int64(b.ShardCount), 1)
	nb := b
	nb.Shard = shard
	nb.ShardCount = int(n)
	nb.Limits = make([]BucketLimit, 0, len(b.Limits))
	for _, l := range b.Limits {
		l.TotalConsumedMilli = 0
		l.TokensMilli = l.CapacityMilli
		if l.Name != WCULimitName {
			l.TokensMilli = floorDiv(l.CapacityMilli, n)
		}
		nb.Limits = append(nb.Limits, l)
	}
	eb := NewExpr()
	return &dynamodb.PutItemInput{
		TableName:                aws.String(table),
		Item:                     BucketItem(nb),
		ConditionExpression:      aws.String("attribute_not_exists(" + eb.Name(AttrPK) + ")"),
		ExpressionAttributeNames: eb.Names(),
	}
}
