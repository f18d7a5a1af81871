package ddbschema

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/store/bucketmath"
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
// attributes b_{Name}_tk, _cp, _ra, _rp and _tc, and the state of the exact
// speculative write, _fa, _ts and _fp.
//
// The speculative write takes from tk without refilling, which is exact only
// while the limit cannot have refilled to its capacity (before
// bucketmath.FullAtMs of its state). fa is a lower bound of that time, ts a
// copy of tk and fp the parameters fa was computed for: every write of this
// library that changes tk changes ts alike, and either sets fa exactly
// (create, a write computed from the item as read) or moves it so that it
// stays a lower bound (a take by ⌊amount × rp / ra⌋, a give-back by
// −⌈amount × rp / ra⌉), or removes it. The speculative write is conditioned
// on fa > now, tk = ts and fp matching its parameters, so that a write of
// another library (which moves tk or the parameters without ts or fp), a
// missing attribute or a stale one only refuses it.
type BucketLimit struct {
	Name               string
	TokensMilli        int64 // tk: the balance
	CapacityMilli      int64 // cp
	RefillAmountMilli  int64 // ra
	RefillPeriodMs     int64 // rp
	TotalConsumedMilli int64 // tc: the net consumption counter

	FullAtMs    int64  // fa, saturated to int64; valid when HasFullAt
	ShadowMilli int64  // ts, saturated to int64; valid when HasShadow
	ParamsSig   string // fp as stored (a decimal number), "" when absent
	HasFullAt   bool
	HasShadow   bool
}

// ExactValid reports whether the stored fa of l can be trusted as a lower
// bound of the time l is full: fa and ts are present, ts equals tk, and fp
// is the signature of l's stored parameters.
func (l BucketLimit) ExactValid() bool {
	if !l.HasFullAt || !l.HasShadow || l.ShadowMilli != l.TokensMilli {
		return false
	}
	var buf [40]byte
	sig, ok := appendParamsSig(buf[:0], l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs)
	return ok && string(sig) == l.ParamsSig
}

// Widths of the fields of [ParamsSig]: cp before them, 24 digits for ra
// and rp, within the 38 significant digits of a DynamoDB number.
const (
	sigRefillAmountDigits = 14
	sigRefillPeriodDigits = 10
	sigCapacityLimit      = 100_000_000_000_000 // 10^14: cp's 14 digits
	sigRefillAmountLimit  = 100_000_000_000_000 // 10^14
	sigRefillPeriodLimit  = 10_000_000_000      // 10^10 ms, about 115 days

	// LongRefillPeriodMs is the refill period of the limits that do not
	// refill in any practical time (the buckets of calendar periods and
	// prepaid balances, the generations of in-flight slots: one token a
	// century). Its 13 digits do not fit the signature's rp field, which
	// holds it as sigLongPeriodCode, a period no other limit is signed
	// with, so that the speculative write takes from these limits too.
	LongRefillPeriodMs = 3_155_760_000_000
	sigLongPeriodCode  = sigRefillPeriodLimit - 1
)

// ParamsSig returns the fp value of a limit's parameters (millitokens,
// ms): the decimal digits of cp, then ra and rp zero-padded to 14 and 10
// digits, a number of at most 38 digits that identifies them exactly. ok
// is false for parameters it cannot hold (a non-positive one, cp or ra of
// 10^14 millitokens or more, rp of 10^10 − 1 ms or more other than
// [LongRefillPeriodMs], which is held as 10^10 − 1): such a limit keeps no
// fa, and the speculative write does not take from it.
func ParamsSig(capacityMilli, refillAmountMilli, refillPeriodMs int64) (string, bool) {
	var buf [40]byte
	b, ok := appendParamsSig(buf[:0], capacityMilli, refillAmountMilli, refillPeriodMs)
	if !ok {
		return "", false
	}
	return string(b), true
}

// AppendParamsSig appends [ParamsSig] of the parameters to dst (dst as
// it is, and false, when [Signed] does not hold): the signature without
// a string of its own, for a request that keeps its numbers' digits in
// one.
func AppendParamsSig(dst []byte, capacityMilli, refillAmountMilli, refillPeriodMs int64) ([]byte, bool) {
	return appendParamsSig(dst, capacityMilli, refillAmountMilli, refillPeriodMs)
}

// Signed reports whether [ParamsSig] holds a limit's parameters, without
// building the signature.
func Signed(capacityMilli, refillAmountMilli, refillPeriodMs int64) bool {
	return capacityMilli > 0 && capacityMilli < sigCapacityLimit && refillAmountMilli > 0 && refillAmountMilli < sigRefillAmountLimit &&
		refillPeriodMs > 0 && (refillPeriodMs < sigLongPeriodCode || refillPeriodMs == LongRefillPeriodMs)
}

// appendParamsSig appends [ParamsSig] of the parameters to dst.
func appendParamsSig(dst []byte, capacityMilli, refillAmountMilli, refillPeriodMs int64) ([]byte, bool) {
	if !Signed(capacityMilli, refillAmountMilli, refillPeriodMs) {
		return dst, false
	}
	dst = strconv.AppendInt(dst, capacityMilli, 10)
	dst = appendPadded(dst, refillAmountMilli, sigRefillAmountDigits)
	if refillPeriodMs == LongRefillPeriodMs {
		refillPeriodMs = sigLongPeriodCode
	}
	return appendPadded(dst, refillPeriodMs, sigRefillPeriodDigits), true
}

// appendPadded appends n (≥ 0) in decimal, zero-padded to width digits.
func appendPadded(b []byte, n int64, width int) []byte {
	var d [20]byte
	digits := strconv.AppendInt(d[:0], n, 10)
	for range width - len(digits) {
		b = append(b, '0')
	}
	return append(b, digits...)
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
	// Incarnation is the inc attribute; zero means none.
	Incarnation int64
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
// written as given. Every other limit gets its exact state: ts = tk, and fa
// (the time it is full, from b.RefillMs) with fp when [ParamsSig] can hold
// its parameters; the fields of that state in b.Limits are not read.
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
	if b.Incarnation != 0 {
		item[AttrIncarnation] = N(b.Incarnation)
	}
	put := func(l BucketLimit) {
		item[BucketAttr(l.Name, FieldTokens)] = N(l.TokensMilli)
		item[BucketAttr(l.Name, FieldCapacity)] = N(l.CapacityMilli)
		item[BucketAttr(l.Name, FieldRefillAmount)] = N(l.RefillAmountMilli)
		item[BucketAttr(l.Name, FieldRefillPeriod)] = N(l.RefillPeriodMs)
		item[BucketAttr(l.Name, FieldTotalConsumed)] = N(l.TotalConsumedMilli)
		if l.Name == WCULimitName {
			return
		}
		item[BucketAttr(l.Name, FieldShadow)] = N(l.TokensMilli)
		if sig, ok := ParamsSig(l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs); ok {
			item[BucketAttr(l.Name, FieldFullAt)] = N(bucketmath.StoredFullAtMs(l.TokensMilli, b.RefillMs, l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs))
			item[BucketAttr(l.Name, FieldParams)] = &types.AttributeValueMemberN{Value: sig}
		}
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
	if b.Incarnation, err = GetNOr(item, AttrIncarnation, 0); err != nil {
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

	if b.Limits, err = bucketLimits(item); err != nil {
		return Bucket{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	return b, nil
}

// bucketLimits reads the limits of a bucket item in one pass over its
// attributes, without building attribute names (this is on the path of
// every acquire): a limit for every b_{L}_tk (whatever its type, as
// [DiscoverLimitNames] finds them), sorted by name, its fields read as
// [GetNOr] reads them.
func bucketLimits(item map[string]types.AttributeValue) ([]BucketLimit, error) {
	type found struct {
		name   string
		hasTk  bool
		fields [8]*types.AttributeValueMemberN // tk, cp, ra, rp, tc, fa, ts, fp
		attrs  [8]string
	}
	var stack [8]found
	limits := stack[:0]
	for attr, v := range item {
		rest, ok := strings.CutPrefix(attr, BucketAttrPrefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '_')
		if i <= 0 {
			continue
		}
		f := bucketField(rest[i+1:])
		if f < 0 {
			continue
		}
		name := rest[:i]
		j := 0
		for j < len(limits) && limits[j].name != name {
			j++
		}
		if j == len(limits) {
			limits = append(limits, found{name: name})
		}
		if f == 0 {
			limits[j].hasTk = true
		}
		limits[j].fields[f], _ = v.(*types.AttributeValueMemberN)
		limits[j].attrs[f] = attr
	}
	n := 0
	for _, l := range limits {
		if l.hasTk {
			n++
		}
	}
	out := make([]BucketLimit, 0, n)
	for _, l := range limits {
		if !l.hasTk {
			continue
		}
		bl := BucketLimit{Name: l.name}
		dst := [5]*int64{&bl.TokensMilli, &bl.CapacityMilli, &bl.RefillAmountMilli, &bl.RefillPeriodMs, &bl.TotalConsumedMilli}
		for k, v := range l.fields[:5] {
			if v == nil {
				continue
			}
			// A value beyond int64 (a total or a debt that ADDs carried
			// past it) saturates: the item stays readable.
			x, ok := parseIntSat(v.Value)
			if !ok {
				return nil, fmt.Errorf("attribute %s: invalid integer %q", l.attrs[k], v.Value)
			}
			*dst[k] = x
		}
		// The exact state is a hint: a value that is not an integer reads
		// as absent (the speculative write then refuses), one beyond int64
		// saturates.
		if v := l.fields[5]; v != nil {
			bl.FullAtMs, bl.HasFullAt = parseIntSat(v.Value)
		}
		if v := l.fields[6]; v != nil {
			bl.ShadowMilli, bl.HasShadow = parseIntSat(v.Value)
		}
		if v := l.fields[7]; v != nil {
			bl.ParamsSig = v.Value
		}
		out = append(out, bl)
	}
	slices.SortFunc(out, func(a, b BucketLimit) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// bucketField returns the index of a bucket limit field in the order tk,
// cp, ra, rp, tc, fa, ts, fp, or -1.
func bucketField(field string) int {
	switch field {
	case FieldTokens:
		return 0
	case FieldCapacity:
		return 1
	case FieldRefillAmount:
		return 2
	case FieldRefillPeriod:
		return 3
	case FieldTotalConsumed:
		return 4
	case FieldFullAt:
		return 5
	case FieldShadow:
		return 6
	case FieldParams:
		return 7
	}
	return -1
}

// parseIntSat parses a decimal integer, saturating one beyond int64; ok is
// false when s is not an integer.
func parseIntSat(s string) (int64, bool) {
	x, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return x, true
	}
	if ne, isNum := err.(*strconv.NumError); isNum && ne.Err == strconv.ErrRange {
		return x, true // ParseInt returns the saturated value with ErrRange
	}
	return 0, false
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
