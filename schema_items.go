package limiter

// store.Bucket, entity and config items in this package's types: thin
// conversions over internal/ddbschema, which owns the layout.

import (
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// ---------------------------------------------------------------------------
// store.Bucket items: PK {ns}/BUCKET#{id}#{res}#{shard}, SK #STATE.

// bucketItem returns the full item of bucket b in namespace ns, for a
// create (a PutItem guarded by attribute_not_exists(PK)). The hidden wcu
// limit is written from b's wcu state, or from a state of States named
// wcu, else as a full bucket. ShardCount zero is written as 1; TTL zero
// writes no ttl attribute and ParentID "" no parent_id attribute.
func bucketItem(ns string, b *store.Bucket) map[string]types.AttributeValue {
	limits := make([]ddbschema.BucketLimit, 0, len(b.States)+1)
	for _, s := range b.States {
		limits = append(limits, bucketLimit(s))
	}
	if wcuOf(b) != nil {
		limits = append(limits, bucketLimit(*wcuOf(b)))
	}
	return ddbschema.BucketItem(ddbschema.Bucket{
		Namespace:  ns,
		EntityID:   b.Key.EntityID,
		Resource:   b.Key.Resource,
		Shard:      b.Key.Shard,
		ShardCount: b.ShardCount,
		RefillMs:   b.RefillMs,
		Cascade:    b.Cascade,
		ParentID:   b.ParentID,
		TTL:        b.TTL,
		Limits:     limits,
	})
}

func bucketLimit(s store.BucketState) ddbschema.BucketLimit {
	return ddbschema.BucketLimit{
		Name:               s.LimitName,
		TokensMilli:        s.TokensMilli,
		CapacityMilli:      s.CapacityMilli,
		RefillAmountMilli:  s.RefillAmountMilli,
		RefillPeriodMs:     s.RefillPeriodMs,
		TotalConsumedMilli: s.TotalConsumedMilli,
	}
}

// bucketFromItem reads a bucket item: its namespace and the bucket, whose
// States hold one state per limit, sorted by name, each with the item's
// entity, resource and shard and LastRefillMs = rf. The hidden wcu limit
// goes to the unexported wcu field, not to States.
func bucketFromItem(item map[string]types.AttributeValue) (string, *store.Bucket, error) {
	d, err := ddbschema.BucketFromItem(item)
	if err != nil {
		return "", nil, err
	}
	b := &store.Bucket{
		Key:        store.BucketKey{EntityID: d.EntityID, Resource: d.Resource, Shard: d.Shard},
		ShardCount: max(d.ShardCount, 1),
		RefillMs:   d.RefillMs,
		Cascade:    d.Cascade,
		ParentID:   d.ParentID,
		TTL:        d.TTL,
		States:     make([]store.BucketState, 0, len(d.Limits)),
	}
	for _, l := range d.Limits {
		s := store.BucketState{
			EntityID:           d.EntityID,
			Resource:           d.Resource,
			LimitName:          l.Name,
			ShardID:            d.Shard,
			TokensMilli:        l.TokensMilli,
			LastRefillMs:       d.RefillMs,
			CapacityMilli:      l.CapacityMilli,
			RefillAmountMilli:  l.RefillAmountMilli,
			RefillPeriodMs:     l.RefillPeriodMs,
			TotalConsumedMilli: l.TotalConsumedMilli,
		}
		if s.LimitName == wcuLimitName {
			b.Private = &s
			continue
		}
		b.States = append(b.States, s)
	}
	return d.Namespace, b, nil
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
// store.Config items. Limits are stored as l_{L}_cp / l_{L}_ra (tokens) and
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
