package ddbschema

import (
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The hidden write-capacity limit of every bucket item: the item's share of
// DynamoDB's per-partition write ceiling (1000 write units per second),
// stored like any other limit as b_wcu_*. It never appears in statuses or
// usage snapshots.
const (
	WCULimitName         = "wcu"
	WCUCapacityMilli     = 1000 * 1000 // b_wcu_cp, and b_wcu_tk of a new item
	WCURefillAmountMilli = 1000 * 1000 // b_wcu_ra
	WCURefillPeriodMs    = 1000        // b_wcu_rp
)

// BucketLimit is the stored state of one limit of a bucket item: the
// attributes b_{Name}_tk, _cp, _ra, _rp and _tc.
type BucketLimit struct {
	Name               string
	TokensMilli        int64 // tk: the balance
	CapacityMilli      int64 // cp
	RefillAmountMilli  int64 // ra
	RefillPeriodMs     int64 // rp
	TotalConsumedMilli int64 // tc: the net consumption counter
}

// WCUInitial returns the wcu limit of a newly created bucket item: full,
// refilling its capacity every second.
func WCUInitial() BucketLimit {
	return BucketLimit{
		Name:              WCULimitName,
		TokensMilli:       WCUCapacityMilli,
		CapacityMilli:     WCUCapacityMilli,
		RefillAmountMilli: WCURefillAmountMilli,
		RefillPeriodMs:    WCURefillPeriodMs,
	}
}

// Bucket is one bucket item: PK {ns}/BUCKET#{entity}#{resource}#{shard},
// SK #STATE. It is a plain value.
type Bucket struct {
	Namespace string
	EntityID  string
	Resource  string
	Shard     int
	// ShardCount is the (entity, resource)'s shard count as stored on this
	// item; [BucketItem] writes 0 as 1 and [BucketFromItem] reads an
	// absent one as 1.
	ShardCount int
	// RefillMs is rf, the refill timestamp shared by every limit of the
	// item, epoch milliseconds: the optimistic lock of normal writes and
	// proactive refills.
	RefillMs int64
	// Cascade and ParentID are copies of the entity's settings; ParentID
	// "" means no parent_id attribute.
	Cascade  bool
	ParentID string
	// TTL is the ttl attribute in epoch seconds (see [TTLEpochSeconds]);
	// zero means no ttl attribute.
	TTL int64
	// Limits holds one state per limit. [BucketFromItem] returns them
	// sorted by name, wcu included.
	Limits []BucketLimit
}

// Limit returns the state of limit name.
func (b Bucket) Limit(name string) (BucketLimit, bool) {
	for _, l := range b.Limits {
		if l.Name == name {
			return l, true
		}
	}
	return BucketLimit{}, false
}

// BucketItem returns the full item of b, as a create writes it (a PutItem
// guarded by attribute_not_exists(PK)). The hidden wcu limit is written
// from [WCUInitial] unless b.Limits carries a wcu limit, which is then
// written as given.
//
// Bucket items are written and read by hand, not with attributevalue like
// the other items of fixed shape: most of their attributes are named after
// the limits (b_{L}_tk, b_{L}_cp, …), and they are on the acquire path,
// where reflection cost several times the hand-written codec (see
// BenchmarkItemEntity for the same trade on entity items).
func BucketItem(b Bucket) map[string]types.AttributeValue {
	if b.ShardCount == 0 {
		b.ShardCount = 1
	}
	ns := b.Namespace
	item := map[string]types.AttributeValue{
		AttrPK:         S(PKBucket(ns, b.EntityID, b.Resource, b.Shard)),
		AttrSK:         S(SKState),
		AttrEntityID:   S(b.EntityID),
		AttrResource:   S(b.Resource),
		AttrRefill:     N(b.RefillMs),
		AttrShardCount: N(int64(b.ShardCount)),
		AttrCascade:    Bool(b.Cascade),
		AttrGSI2PK:     S(GSI2PKResource(ns, b.Resource)),
		AttrGSI2SK:     S(GSI2SKBucket(b.EntityID, b.Shard)),
		AttrGSI3PK:     S(GSI3PKEntity(ns, b.EntityID)),
		AttrGSI3SK:     S(GSI3SKBucket(b.Resource, b.Shard)),
		AttrGSI4PK:     S(ns),
		AttrGSI4SK:     S(GSI4SKBucket(b.EntityID, b.Resource, b.Shard)),
	}
	if b.ParentID != "" {
		item[AttrParentID] = S(b.ParentID)
	}
	if b.TTL != 0 {
		item[AttrTTL] = N(b.TTL)
	}
	put := func(l BucketLimit) {
		item[BucketAttr(l.Name, FieldTokens)] = N(l.TokensMilli)
		item[BucketAttr(l.Name, FieldCapacity)] = N(l.CapacityMilli)
		item[BucketAttr(l.Name, FieldRefillAmount)] = N(l.RefillAmountMilli)
		item[BucketAttr(l.Name, FieldRefillPeriod)] = N(l.RefillPeriodMs)
		item[BucketAttr(l.Name, FieldTotalConsumed)] = N(l.TotalConsumedMilli)
	}
	put(WCUInitial())
	for _, l := range b.Limits {
		put(l)
	}
	return item
}

// BucketFromItem reads a bucket item. The namespace and shard (and, when the
// item lacks them, entity and resource) come from the PK; shard_count
// defaults to 1, cascade to false, parent_id and ttl to empty. Limits holds
// one entry per limit with a b_{L}_tk attribute, sorted by name and
// including wcu; missing cp/ra/rp/tc read as 0. A limit whose rp is 0 is
// returned as stored: callers must not divide by it. Wrongly typed
// attributes read as absent (see [CheckBucketTypes] for a strict check).
// Items whose PK is not a bucket PK, and malformed numbers, are errors.
func BucketFromItem(item map[string]types.AttributeValue) (Bucket, error) {
	pk, _ := GetS(item, AttrPK)
	key, err := ParseBucketPK(pk)
	if err != nil {
		return Bucket{}, err
	}
	b := Bucket{Namespace: key.Namespace, EntityID: key.EntityID, Resource: key.Resource, Shard: key.Shard}
	if s, ok := GetS(item, AttrEntityID); ok {
		b.EntityID = s
	}
	if s, ok := GetS(item, AttrResource); ok {
		b.Resource = s
	}
	b.ParentID, _ = GetS(item, AttrParentID)
	b.Cascade, _ = GetBool(item, AttrCascade)
	if b.RefillMs, err = GetNOr(item, AttrRefill, 0); err != nil {
		return Bucket{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	if b.TTL, err = GetNOr(item, AttrTTL, 0); err != nil {
		return Bucket{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	shardCount, err := GetNOr(item, AttrShardCount, 1)
	if err != nil {
		return Bucket{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	if shardCount < math.MinInt32 || shardCount > math.MaxInt32 {
		return Bucket{}, fmt.Errorf("bucket %s: shard_count %d out of range", pk, shardCount)
	}
	b.ShardCount = int(shardCount)

	names := DiscoverLimitNames(item, BucketAttrPrefix, FieldTokens)
	b.Limits = make([]BucketLimit, 0, len(names))
	for _, name := range names {
		l := BucketLimit{Name: name}
		for _, f := range []struct {
			field string
			dst   *int64
		}{
			{FieldTokens, &l.TokensMilli},
			{FieldCapacity, &l.CapacityMilli},
			{FieldRefillAmount, &l.RefillAmountMilli},
			{FieldRefillPeriod, &l.RefillPeriodMs},
			{FieldTotalConsumed, &l.TotalConsumedMilli},
		} {
			if *f.dst, err = GetNOr(item, BucketAttr(name, f.field), 0); err != nil {
				return Bucket{}, fmt.Errorf("bucket %s: %w", pk, err)
			}
		}
		b.Limits = append(b.Limits, l)
	}
	return b, nil
}

// CheckBucketTypes checks the types of a bucket item's layout attributes,
// which [BucketFromItem] reads as absent when wrongly typed: b_* limit
// fields, rf, shard_count and ttl must be numbers; the keys, entity_id,
// resource and the index keys strings; cascade a boolean; parent_id a
// string or NULL. Other attributes may have any type.
func CheckBucketTypes(item map[string]types.AttributeValue) error {
	for name, v := range item {
		var ok bool
		switch {
		case name == AttrRefill || name == AttrShardCount || name == AttrTTL || strings.HasPrefix(name, BucketAttrPrefix):
			_, ok = v.(*types.AttributeValueMemberN)
		case name == AttrPK || name == AttrSK || name == AttrEntityID || name == AttrResource ||
			name == AttrGSI2PK || name == AttrGSI2SK || name == AttrGSI3PK || name == AttrGSI3SK ||
			name == AttrGSI4PK || name == AttrGSI4SK:
			_, ok = v.(*types.AttributeValueMemberS)
		case name == AttrCascade:
			_, ok = v.(*types.AttributeValueMemberBOOL)
		case name == AttrParentID:
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
