package limiter

// Bucket, entity and config items in this package's types: thin
// conversions over internal/ddbschema, which owns the layout.

import (
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// ---------------------------------------------------------------------------
// Bucket items: PK {ns}/BUCKET#{id}#{res}#{shard}, SK #STATE.

// bucketItemSpec describes a bucket item to create.
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
// attribute_not_exists(PK)). The hidden wcu limit is written as a full
// bucket unless States carries a wcu state, which is then written as given.
func bucketItem(ns string, b bucketItemSpec) map[string]types.AttributeValue {
	limits := make([]ddbschema.BucketLimit, len(b.States))
	for i, s := range b.States {
		limits[i] = ddbschema.BucketLimit{
			Name:               s.LimitName,
			TokensMilli:        s.TokensMilli,
			CapacityMilli:      s.CapacityMilli,
			RefillAmountMilli:  s.RefillAmountMilli,
			RefillPeriodMs:     s.RefillPeriodMs,
			TotalConsumedMilli: s.TotalConsumedMilli,
		}
	}
	return ddbschema.BucketItem(ddbschema.Bucket{
		Namespace:  ns,
		EntityID:   b.EntityID,
		Resource:   b.Resource,
		Shard:      b.Shard,
		ShardCount: b.ShardCount,
		RefillMs:   b.RefillMs,
		Cascade:    b.Cascade,
		ParentID:   b.ParentID,
		TTL:        b.TTL,
		Limits:     limits,
	})
}

// bucketFromItem reads a bucket item (see ddbschema.BucketFromItem). States
// holds one entry per limit, sorted by name and including wcu, each with
// the item's entity, resource and shard and LastRefillMs = rf.
func bucketFromItem(item map[string]types.AttributeValue) (bucketItemData, error) {
	b, err := ddbschema.BucketFromItem(item)
	if err != nil {
		return bucketItemData{}, err
	}
	d := bucketItemData{Namespace: b.Namespace, bucketItemSpec: bucketItemSpec{
		EntityID:   b.EntityID,
		Resource:   b.Resource,
		Shard:      b.Shard,
		ShardCount: b.ShardCount,
		RefillMs:   b.RefillMs,
		Cascade:    b.Cascade,
		ParentID:   b.ParentID,
		TTL:        b.TTL,
		States:     make([]BucketState, len(b.Limits)),
	}}
	for i, l := range b.Limits {
		d.States[i] = BucketState{
			EntityID:           b.EntityID,
			Resource:           b.Resource,
			LimitName:          l.Name,
			ShardID:            b.Shard,
			TokensMilli:        l.TokensMilli,
			LastRefillMs:       b.RefillMs,
			CapacityMilli:      l.CapacityMilli,
			RefillAmountMilli:  l.RefillAmountMilli,
			RefillPeriodMs:     l.RefillPeriodMs,
			TotalConsumedMilli: l.TotalConsumedMilli,
		}
	}
	return d, nil
}

// ---------------------------------------------------------------------------
// Entity metadata: PK {ns}/ENTITY#{id}, SK #META.

// entityItem returns the entity metadata item (see ddbschema.EntityItem).
// CreatedAt is set by the caller, normally to now.
func entityItem(ns string, e Entity) map[string]types.AttributeValue {
	return ddbschema.EntityItem(ns, ddbschema.Entity{
		ID:        e.ID,
		Name:      e.Name,
		ParentID:  e.ParentID,
		Cascade:   e.Cascade,
		Metadata:  e.Metadata,
		CreatedAt: e.CreatedAt,
	})
}

// entityFromItem reads an entity metadata item (see
// ddbschema.EntityFromItem).
func entityFromItem(item map[string]types.AttributeValue) Entity {
	e := ddbschema.EntityFromItem(item)
	return Entity{
		ID:        e.ID,
		Name:      e.Name,
		ParentID:  e.ParentID,
		Cascade:   e.Cascade,
		Metadata:  e.Metadata,
		CreatedAt: e.CreatedAt,
	}
}

// ---------------------------------------------------------------------------
// Config items. Limits are stored as l_{L}_cp / l_{L}_ra (tokens) and
// l_{L}_rp (SECONDS).

// configLimits converts limits to their stored form.
func configLimits(limits []Limit) []ddbschema.ConfigLimit {
	out := make([]ddbschema.ConfigLimit, len(limits))
	for i, l := range limits {
		out[i] = ddbschema.ConfigLimit{
			Name:                l.Name,
			Capacity:            l.Capacity,
			RefillAmount:        l.RefillAmount,
			RefillPeriodSeconds: l.RefillPeriodSeconds(),
		}
	}
	return out
}

// entityConfigItem returns the config item of an entity for resource (which
// may be [DefaultResource]): PK {ns}/ENTITY#{id}, SK #CONFIG#{res}.
func entityConfigItem(ns, entityID, resource string, limits []Limit) map[string]types.AttributeValue {
	return ddbschema.EntityConfigItem(ns, entityID, resource, configLimits(limits))
}

// resourceConfigItem returns the default config of a resource: PK
// {ns}/RESOURCE#{res}, SK #CONFIG.
func resourceConfigItem(ns, resource string, limits []Limit) map[string]types.AttributeValue {
	return ddbschema.ResourceConfigItem(ns, resource, configLimits(limits))
}

// systemConfigItem returns the system config: PK {ns}/SYSTEM#, SK #CONFIG,
// with on_unavailable only when onUnavailable is not "".
func systemConfigItem(ns string, limits []Limit, onUnavailable OnUnavailable) map[string]types.AttributeValue {
	return ddbschema.SystemConfigItem(ns, configLimits(limits), string(onUnavailable))
}

// limitsFromItem reads the limits of any config item (entity, resource or
// system), one per l_{L}_cp attribute, sorted by name. A missing field reads
// as 0, so, as in the original, an incomplete or otherwise invalid stored
// limit is an error (wrapping the *[ValidationError]). An item without
// limits yields an empty slice: "no config at this level".
func limitsFromItem(item map[string]types.AttributeValue) ([]Limit, error) {
	names := ddbschema.ConfigLimitNames(item)
	limits := make([]Limit, 0, len(names))
	for _, name := range names {
		c, err := ddbschema.ConfigLimitFromItem(item, name)
		if err != nil {
			return nil, err
		}
		if c.RefillPeriodSeconds > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("config limit %s: refill period %d s out of range", name, c.RefillPeriodSeconds)
		}
		l := Limit{Name: name, Capacity: c.Capacity, RefillAmount: c.RefillAmount, RefillPeriod: time.Duration(c.RefillPeriodSeconds) * time.Second}
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
	return OnUnavailable(ddbschema.OnUnavailableFromItem(item))
}

// resourceRegistryFromItem returns the sorted resource names of the
// resource registry ({ns}/SYSTEM#, #RESOURCES).
func resourceRegistryFromItem(item map[string]types.AttributeValue) []string {
	return ddbschema.ResourceRegistryFromItem(item)
}

// entityConfigRegistryFromItem returns, sorted, the resources of the
// entity-config registry ({ns}/SYSTEM#, #ENTITY_CONFIG_RESOURCES) whose
// count of entity configs is positive.
func entityConfigRegistryFromItem(item map[string]types.AttributeValue) ([]string, error) {
	return ddbschema.EntityConfigRegistryFromItem(item)
}
