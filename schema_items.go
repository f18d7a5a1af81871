package limiter

// Item (de)serialisation for every layout of schema 0.10.0 (reference §4.4).
// Items are map[string]types.AttributeValue; numbers are written as decimal
// int64 strings without exponent. Readers are lenient where the original is
// (missing attributes take defaults) and strict about malformed numbers.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------------------
// Attribute value helpers.

// schemaS returns a string attribute value.
func schemaS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// schemaN returns a number attribute value holding n in decimal.
func schemaN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// schemaBool returns a BOOL attribute value.
func schemaBool(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// schemaNull returns a NULL attribute value.
func schemaNull() types.AttributeValue { return &types.AttributeValueMemberNULL{Value: true} }

// schemaSOrNull returns S(s), or NULL when s is empty (the original writes
// None as NULL).
func schemaSOrNull(s string) types.AttributeValue {
	if s == "" {
		return schemaNull()
	}
	return schemaS(s)
}

// schemaGetS returns the string attribute name of item; ok is false when it
// is absent or not of type S.
func schemaGetS(item map[string]types.AttributeValue, name string) (s string, ok bool) {
	if v, isS := item[name].(*types.AttributeValueMemberS); isS {
		return v.Value, true
	}
	return "", false
}

// schemaGetN returns the number attribute name of item as an int64; ok is
// false when it is absent or not of type N. A number that is not a decimal
// int64 is an error.
func schemaGetN(item map[string]types.AttributeValue, name string) (n int64, ok bool, err error) {
	v, isN := item[name].(*types.AttributeValueMemberN)
	if !isN {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s: invalid integer %q", name, v.Value)
	}
	return n, true, nil
}

// schemaGetNOr returns the number attribute name of item, or def when it is
// absent.
func schemaGetNOr(item map[string]types.AttributeValue, name string, def int64) (int64, error) {
	n, ok, err := schemaGetN(item, name)
	if err != nil || !ok {
		return def, err
	}
	return n, nil
}

// schemaGetBool returns the BOOL attribute name of item; ok is false when it
// is absent or not of type BOOL.
func schemaGetBool(item map[string]types.AttributeValue, name string) (b, ok bool) {
	if v, isBool := item[name].(*types.AttributeValueMemberBOOL); isBool {
		return v.Value, true
	}
	return false, false
}

// schemaGetTime parses the timestamp attribute name of item; the zero time
// when it is absent, NULL or unparsable.
func schemaGetTime(item map[string]types.AttributeValue, name string) time.Time {
	s, ok := schemaGetS(item, name)
	if !ok {
		return time.Time{}
	}
	t, err := parseISOSeconds(s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// primaryKey returns the key map {PK: pk, SK: sk}.
func primaryKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: schemaS(pk), attrSK: schemaS(sk)}
}

// bucketPrimaryKey returns the key of a bucket item.
func bucketPrimaryKey(ns, entityID, resource string, shard int) map[string]types.AttributeValue {
	return primaryKey(pkBucket(ns, entityID, resource, shard), skState)
}

// discoverLimitNames returns, sorted, the limit names L for which item has an
// attribute `{prefix}{L}_{field}` with a non-empty L. This is how the original
// discovers limits: buckets by b_*_tk, configs by l_*_cp (the aggregator uses
// b_*_tc and b_*_cp).
func discoverLimitNames(item map[string]types.AttributeValue, prefix, field string) []string {
	suffix := "_" + field
	var names []string
	for attr := range item {
		if len(attr) > len(prefix)+len(suffix) && strings.HasPrefix(attr, prefix) && strings.HasSuffix(attr, suffix) {
			names = append(names, attr[len(prefix):len(attr)-len(suffix)])
		}
	}
	sort.Strings(names)
	return names
}

// ---------------------------------------------------------------------------
// Bucket items: PK {ns}/BUCKET#{id}#{res}#{shard}, SK #STATE.

// bucketItemSpec describes a bucket item to create (the original's
// build_composite_create).
type bucketItemSpec struct {
	EntityID string
	Resource string
	Shard    int
	// ShardCount is the entity/resource's shard count; zero means 1.
	ShardCount int
	// RefillMs is rf: the writer's clock in epoch milliseconds (not the
	// states' LastRefillMs).
	RefillMs int64
	// Cascade and ParentID are denormalised from the entity; ParentID ""
	// means no parent_id attribute.
	Cascade  bool
	ParentID string
	// TTL is the ttl attribute in epoch seconds (see [ttlEpochSeconds]);
	// zero means no ttl attribute.
	TTL int64
	// States are written as b_{L}_tk/cp/ra/rp/tc. Only the limit name and
	// the millitoken/millisecond fields are used.
	States []BucketState
}

// bucketItemData is a bucket item read back by [bucketFromItem].
type bucketItemData struct {
	Namespace string
	bucketItemSpec
}

// bucketItem returns the full bucket item for a create (a PutItem guarded by
// attribute_not_exists(PK)). The hidden wcu limit is injected as a full
// bucket (tk=cp=1000000, ra=1000000, rp=1000, tc=0) unless States carries a
// wcu state, which is then written as given.
func bucketItem(ns string, b bucketItemSpec) map[string]types.AttributeValue {
	if b.ShardCount == 0 {
		b.ShardCount = 1
	}
	item := map[string]types.AttributeValue{
		attrPK:         schemaS(pkBucket(ns, b.EntityID, b.Resource, b.Shard)),
		attrSK:         schemaS(skState),
		attrEntityID:   schemaS(b.EntityID),
		attrResource:   schemaS(b.Resource),
		attrRefill:     schemaN(b.RefillMs),
		attrShardCount: schemaN(int64(b.ShardCount)),
		attrCascade:    schemaBool(b.Cascade),
		attrGSI2PK:     schemaS(gsi2PKResource(ns, b.Resource)),
		attrGSI2SK:     schemaS(gsi2SKBucket(b.EntityID, b.Shard)),
		attrGSI3PK:     schemaS(gsi3PKEntity(ns, b.EntityID)),
		attrGSI3SK:     schemaS(gsi3SKBucket(b.Resource, b.Shard)),
		attrGSI4PK:     schemaS(ns),
		attrGSI4SK:     schemaS(gsi4SKBucket(b.EntityID, b.Resource, b.Shard)),
	}
	if b.ParentID != "" {
		item[attrParentID] = schemaS(b.ParentID)
	}
	if b.TTL != 0 {
		item[attrTTL] = schemaN(b.TTL)
	}
	putState := func(s BucketState) {
		item[bucketAttr(s.LimitName, fieldTokens)] = schemaN(s.TokensMilli)
		item[bucketAttr(s.LimitName, fieldCapacity)] = schemaN(s.CapacityMilli)
		item[bucketAttr(s.LimitName, fieldRefillAmount)] = schemaN(s.RefillAmountMilli)
		item[bucketAttr(s.LimitName, fieldRefillPeriod)] = schemaN(s.RefillPeriodMs)
		item[bucketAttr(s.LimitName, fieldTotalConsumed)] = schemaN(s.TotalConsumedMilli)
	}
	putState(wcuInitialState())
	for _, s := range b.States {
		putState(s)
	}
	return item
}

// wcuInitialState is the wcu limit of a newly created bucket item.
func wcuInitialState() BucketState {
	return BucketState{
		LimitName:         wcuLimitName,
		TokensMilli:       wcuCapacityMilli,
		CapacityMilli:     wcuCapacityMilli,
		RefillAmountMilli: wcuRefillAmountMilli,
		RefillPeriodMs:    wcuRefillPeriodMs,
	}
}

// bucketFromItem reads a bucket item. The shard (and, when the item lacks
// them, entity and resource) come from the PK; shardCount defaults to 1,
// cascade to false, parentID and ttl to empty. States holds one entry per
// limit with a b_{L}_tk attribute, sorted by name and including wcu (see
// [withoutWCU]); each has LastRefillMs = rf and missing cp/ra/rp/tc read as
// 0. A limit whose rp is 0 is returned as stored: callers must not divide
// by it. Items whose PK is not a bucket PK, and malformed numbers, are
// errors.
func bucketFromItem(item map[string]types.AttributeValue) (bucketItemData, error) {
	pk, _ := schemaGetS(item, attrPK)
	key, err := parseBucketPK(pk)
	if err != nil {
		return bucketItemData{}, err
	}
	d := bucketItemData{Namespace: key.Namespace}
	d.Shard = key.Shard
	d.EntityID = key.EntityID
	if s, ok := schemaGetS(item, attrEntityID); ok {
		d.EntityID = s
	}
	d.Resource = key.Resource
	if s, ok := schemaGetS(item, attrResource); ok {
		d.Resource = s
	}
	d.ParentID, _ = schemaGetS(item, attrParentID)
	d.Cascade, _ = schemaGetBool(item, attrCascade)
	if d.RefillMs, err = schemaGetNOr(item, attrRefill, 0); err != nil {
		return bucketItemData{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	if d.TTL, err = schemaGetNOr(item, attrTTL, 0); err != nil {
		return bucketItemData{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	shardCount, err := schemaGetNOr(item, attrShardCount, 1)
	if err != nil {
		return bucketItemData{}, fmt.Errorf("bucket %s: %w", pk, err)
	}
	if shardCount < math.MinInt32 || shardCount > math.MaxInt32 {
		return bucketItemData{}, fmt.Errorf("bucket %s: shard_count %d out of range", pk, shardCount)
	}
	d.ShardCount = int(shardCount)

	names := discoverLimitNames(item, bucketAttrPrefix, fieldTokens)
	d.States = make([]BucketState, 0, len(names))
	for _, name := range names {
		s := BucketState{
			EntityID:     d.EntityID,
			Resource:     d.Resource,
			LimitName:    name,
			ShardID:      d.Shard,
			LastRefillMs: d.RefillMs,
		}
		for _, f := range []struct {
			field string
			dst   *int64
		}{
			{fieldTokens, &s.TokensMilli},
			{fieldCapacity, &s.CapacityMilli},
			{fieldRefillAmount, &s.RefillAmountMilli},
			{fieldRefillPeriod, &s.RefillPeriodMs},
			{fieldTotalConsumed, &s.TotalConsumedMilli},
		} {
			if *f.dst, err = schemaGetNOr(item, bucketAttr(name, f.field), 0); err != nil {
				return bucketItemData{}, fmt.Errorf("bucket %s: %w", pk, err)
			}
		}
		d.States = append(d.States, s)
	}
	return d, nil
}

// withoutWCU returns states without the hidden wcu limit, in a new slice.
func withoutWCU(states []BucketState) []BucketState {
	out := make([]BucketState, 0, len(states))
	for _, s := range states {
		if s.LimitName != wcuLimitName {
			out = append(out, s)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Entity metadata: PK {ns}/ENTITY#{id}, SK #META.

// entityItem returns the entity metadata item. Name "" is written as the id;
// ParentID "" as NULL (and then no GSI1 keys); Metadata as a map of strings;
// CreatedAt (set by the caller, normally to now) at second precision in UTC.
func entityItem(ns string, e Entity) map[string]types.AttributeValue {
	name := e.Name
	if name == "" {
		name = e.ID
	}
	meta := make(map[string]types.AttributeValue, len(e.Metadata))
	for k, v := range e.Metadata {
		meta[k] = schemaS(v)
	}
	item := map[string]types.AttributeValue{
		attrPK:        schemaS(pkEntity(ns, e.ID)),
		attrSK:        schemaS(skMeta),
		attrEntityID:  schemaS(e.ID),
		attrName:      schemaS(name),
		attrParentID:  schemaSOrNull(e.ParentID),
		attrCascade:   schemaBool(e.Cascade),
		attrMetadata:  &types.AttributeValueMemberM{Value: meta},
		attrCreatedAt: schemaS(formatISOSeconds(e.CreatedAt)),
		attrGSI4PK:    schemaS(ns),
		attrGSI4SK:    schemaS(pkEntity(ns, e.ID)),
	}
	if e.ParentID != "" {
		item[attrGSI1PK] = schemaS(gsi1PKParent(ns, e.ParentID))
		item[attrGSI1SK] = schemaS(gsi1SKChild(e.ID))
	}
	return item
}

// entityFromItem reads an entity metadata item. Absent or NULL attributes
// read as zero values (name "" when absent, as stored). Metadata values that
// are not strings are converted: numbers to their decimal text, booleans to
// "true"/"false"; other types are skipped. An unparsable created_at reads as
// the zero time.
func entityFromItem(item map[string]types.AttributeValue) Entity {
	var e Entity
	e.ID, _ = schemaGetS(item, attrEntityID)
	e.Name, _ = schemaGetS(item, attrName)
	e.ParentID, _ = schemaGetS(item, attrParentID)
	e.Cascade, _ = schemaGetBool(item, attrCascade)
	e.CreatedAt = schemaGetTime(item, attrCreatedAt)
	if m, ok := item[attrMetadata].(*types.AttributeValueMemberM); ok {
		e.Metadata = make(map[string]string, len(m.Value))
		for k, v := range m.Value {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				e.Metadata[k] = v.Value
			case *types.AttributeValueMemberN:
				e.Metadata[k] = v.Value
			case *types.AttributeValueMemberBOOL:
				e.Metadata[k] = strconv.FormatBool(v.Value)
			}
		}
	}
	return e
}

// ---------------------------------------------------------------------------
// Config items. Limits are stored as l_{L}_cp / l_{L}_ra (tokens) and
// l_{L}_rp (SECONDS).

// putLimitAttrs adds the l_* attributes of limits to item.
func putLimitAttrs(item map[string]types.AttributeValue, limits []Limit) {
	for _, l := range limits {
		item[limitAttr(l.Name, fieldCapacity)] = schemaN(l.Capacity)
		item[limitAttr(l.Name, fieldRefillAmount)] = schemaN(l.RefillAmount)
		item[limitAttr(l.Name, fieldRefillPeriod)] = schemaN(l.RefillPeriodSeconds())
	}
}

// entityConfigItem returns the config item of an entity for resource (which
// may be [DefaultResource]): PK {ns}/ENTITY#{id}, SK #CONFIG#{res}.
func entityConfigItem(ns, entityID, resource string, limits []Limit) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:            schemaS(pkEntity(ns, entityID)),
		attrSK:            schemaS(skConfig(resource)),
		attrEntityID:      schemaS(entityID),
		attrResource:      schemaS(resource),
		attrConfigVersion: schemaN(configVersion),
		attrGSI3PK:        schemaS(gsi3PKEntityConfig(ns, resource)),
		attrGSI3SK:        schemaS(gsi3SKEntity(entityID)),
		attrGSI4PK:        schemaS(ns),
		attrGSI4SK:        schemaS(pkEntity(ns, entityID)),
	}
	putLimitAttrs(item, limits)
	return item
}

// resourceConfigItem returns the default config of a resource: PK
// {ns}/RESOURCE#{res}, SK #CONFIG.
func resourceConfigItem(ns, resource string, limits []Limit) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:            schemaS(pkResource(ns, resource)),
		attrSK:            schemaS(skConfigPrefix),
		attrResource:      schemaS(resource),
		attrConfigVersion: schemaN(configVersion),
		attrGSI4PK:        schemaS(ns),
		attrGSI4SK:        schemaS(pkResource(ns, resource)),
	}
	putLimitAttrs(item, limits)
	return item
}

// systemConfigItem returns the system config: PK {ns}/SYSTEM#, SK #CONFIG,
// with on_unavailable only when onUnavailable is not "".
func systemConfigItem(ns string, limits []Limit, onUnavailable OnUnavailable) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:            schemaS(pkSystem(ns)),
		attrSK:            schemaS(skConfigPrefix),
		attrConfigVersion: schemaN(configVersion),
		attrGSI4PK:        schemaS(ns),
		attrGSI4SK:        schemaS(pkSystem(ns)),
	}
	if onUnavailable != "" {
		item[attrOnUnavailable] = schemaS(string(onUnavailable))
	}
	putLimitAttrs(item, limits)
	return item
}

// limitsFromItem reads the limits of any config item (entity, resource or
// system), one per l_{L}_cp attribute, sorted by name. A missing field reads
// as 0, so, as in the original, an incomplete or otherwise invalid stored
// limit is an error (wrapping the *[ValidationError]). An item without
// limits yields an empty slice: "no config at this level".
func limitsFromItem(item map[string]types.AttributeValue) ([]Limit, error) {
	names := discoverLimitNames(item, limitAttrPrefix, fieldCapacity)
	limits := make([]Limit, 0, len(names))
	for _, name := range names {
		var v [3]int64
		for i, field := range []string{fieldCapacity, fieldRefillAmount, fieldRefillPeriod} {
			var err error
			if v[i], err = schemaGetNOr(item, limitAttr(name, field), 0); err != nil {
				return nil, fmt.Errorf("config limit %s: %w", name, err)
			}
		}
		if v[2] > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("config limit %s: refill period %d s out of range", name, v[2])
		}
		l := Limit{Name: name, Capacity: v[0], RefillAmount: v[1], RefillPeriod: time.Duration(v[2]) * time.Second}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("config limit %s: %w", name, err)
		}
		limits = append(limits, l)
	}
	return limits, nil
}

// onUnavailableFromItem returns the system config's on_unavailable, or ""
// when it is absent or empty. The value is returned as stored; check it with
// [OnUnavailable.Valid].
func onUnavailableFromItem(item map[string]types.AttributeValue) OnUnavailable {
	s, _ := schemaGetS(item, attrOnUnavailable)
	return OnUnavailable(s)
}

// auditRetentionDaysFromItem returns the system config's
// audit_retention_days; ok is false when it is absent.
func auditRetentionDaysFromItem(item map[string]types.AttributeValue) (days int64, ok bool, err error) {
	return schemaGetN(item, attrAuditRetentionDays)
}

// resourceRegistryFromItem returns the sorted resource names of the
// resource registry ({ns}/SYSTEM#, #RESOURCES): its `resources` string set.
func resourceRegistryFromItem(item map[string]types.AttributeValue) []string {
	ss, ok := item[attrResources].(*types.AttributeValueMemberSS)
	if !ok {
		return []string{}
	}
	out := append([]string{}, ss.Value...)
	sort.Strings(out)
	return out
}

// entityConfigRegistryFromItem returns, sorted, the resources of the
// entity-config registry ({ns}/SYSTEM#, #ENTITY_CONFIG_RESOURCES) whose
// reference count (a number attribute named after the resource) is positive.
func entityConfigRegistryFromItem(item map[string]types.AttributeValue) ([]string, error) {
	out := []string{}
	for name := range item {
		if name == attrPK || name == attrSK {
			continue
		}
		n, ok, err := schemaGetN(item, name)
		if err != nil {
			return nil, fmt.Errorf("entity config registry: %w", err)
		}
		if ok && n > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}
