package ddbschema

import (
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ConfigLimit is one limit of a config item, stored as l_{Name}_cp and
// l_{Name}_ra (whole tokens) and l_{Name}_rp (SECONDS). A calendar limit
// is stored with ra 0, a negative rp (its period's code) and, unless its
// zone is UTC, l_{Name}_tz (an IANA zone name); a prepaid limit with ra 0
// and rp −4.
type ConfigLimit struct {
	Name                string
	Capacity            int64
	RefillAmount        int64
	RefillPeriodSeconds int64
	// TimeZone is a calendar limit's zone; "" is UTC (and omitted).
	TimeZone string
}

// putConfigLimits adds the l_* attributes of limits to item. They are
// named after the limits, so they are written by hand; the rest of a config
// item has a fixed shape.
func putConfigLimits(item map[string]types.AttributeValue, limits []ConfigLimit) map[string]types.AttributeValue {
	for _, l := range limits {
		item[LimitAttr(l.Name, FieldCapacity)] = N(l.Capacity)
		item[LimitAttr(l.Name, FieldRefillAmount)] = N(l.RefillAmount)
		item[LimitAttr(l.Name, FieldRefillPeriod)] = N(l.RefillPeriodSeconds)
		if l.TimeZone != "" {
			item[LimitAttr(l.Name, FieldTimeZone)] = &types.AttributeValueMemberS{Value: l.TimeZone}
		}
	}
	return item
}

// configVersion is the config_version attribute of every config item.
type configVersion struct {
	ConfigVersion int64 `dynamodbav:"config_version"`
}

// entityConfigRecord is the layout of an entity config item without its
// limits.
type entityConfigRecord struct {
	tableKey
	EntityID string `dynamodbav:"entity_id"`
	Resource string `dynamodbav:"resource"`
	configVersion
	GSI3PK string `dynamodbav:"GSI3PK"`
	GSI3SK string `dynamodbav:"GSI3SK"`
	gsi4Key
}

// resourceConfigRecord is the layout of a resource config item without its
// limits.
type resourceConfigRecord struct {
	tableKey
	Resource string `dynamodbav:"resource"`
	configVersion
	gsi4Key
}

// systemConfigRecord is the layout of the system config item without its
// limits.
type systemConfigRecord struct {
	tableKey
	configVersion
	OnUnavailable string `dynamodbav:"on_unavailable,omitempty"`
	gsi4Key
}

// EntityConfigItem returns the config item of an entity for resource (which
// may be the default resource `_default_`): PK {ns}/ENTITY#{id}, SK
// #CONFIG#{res}.
func EntityConfigItem(ns, entityID, resource string, limits []ConfigLimit) map[string]types.AttributeValue {
	return putConfigLimits(marshalItem(&entityConfigRecord{
		tableKey:      tableKey{PK: PKEntity(ns, entityID), SK: SKConfig(resource)},
		EntityID:      entityID,
		Resource:      resource,
		configVersion: configVersion{ConfigVersion},
		GSI3PK:        GSI3PKEntityConfig(ns, resource),
		GSI3SK:        GSI3SKEntity(entityID),
		gsi4Key:       gsi4Key{GSI4PK: ns, GSI4SK: PKEntity(ns, entityID)},
	}), limits)
}

// ResourceConfigItem returns the default config of a resource: PK
// {ns}/RESOURCE#{res}, SK #CONFIG.
func ResourceConfigItem(ns, resource string, limits []ConfigLimit) map[string]types.AttributeValue {
	return putConfigLimits(marshalItem(&resourceConfigRecord{
		tableKey:      tableKey{PK: PKResource(ns, resource), SK: SKConfigPrefix},
		Resource:      resource,
		configVersion: configVersion{ConfigVersion},
		gsi4Key:       gsi4Key{GSI4PK: ns, GSI4SK: PKResource(ns, resource)},
	}), limits)
}

// SystemConfigItem returns the system config: PK {ns}/SYSTEM#, SK #CONFIG,
// with on_unavailable only when onUnavailable is not "".
func SystemConfigItem(ns string, limits []ConfigLimit, onUnavailable string) map[string]types.AttributeValue {
	return putConfigLimits(marshalItem(&systemConfigRecord{
		tableKey:      tableKey{PK: PKSystem(ns), SK: SKConfigPrefix},
		configVersion: configVersion{ConfigVersion},
		OnUnavailable: onUnavailable,
		gsi4Key:       gsi4Key{GSI4PK: ns, GSI4SK: PKSystem(ns)},
	}), limits)
}

// ConfigLimitNames returns, sorted, the names of the limits of any config
// item (entity, resource or system): one per l_{L}_cp attribute.
func ConfigLimitNames(item map[string]types.AttributeValue) []string {
	return DiscoverLimitNames(item, LimitAttrPrefix, FieldCapacity)
}

// ConfigLimitFromItem reads limit name of a config item. A missing field
// reads as 0; the values are returned as stored, unvalidated. A malformed
// number is an error ("config limit {name}: …").
func ConfigLimitFromItem(item map[string]types.AttributeValue, name string) (ConfigLimit, error) {
	var v [3]int64
	for i, field := range []string{FieldCapacity, FieldRefillAmount, FieldRefillPeriod} {
		var err error
		if v[i], err = GetNOr(item, LimitAttr(name, field), 0); err != nil {
			return ConfigLimit{}, fmt.Errorf("config limit %s: %w", name, err)
		}
	}
	tz, _ := GetS(item, LimitAttr(name, FieldTimeZone))
	return ConfigLimit{Name: name, Capacity: v[0], RefillAmount: v[1], RefillPeriodSeconds: v[2], TimeZone: tz}, nil
}

// OnUnavailableFromItem returns the system config's on_unavailable as
// stored, or "" when it is absent or empty.
func OnUnavailableFromItem(item map[string]types.AttributeValue) string {
	s, _ := GetS(item, AttrOnUnavailable)
	return s
}

// AuditRetentionDaysFromItem returns the system config's
// audit_retention_days; ok is false when it is absent.
func AuditRetentionDaysFromItem(item map[string]types.AttributeValue) (days int64, ok bool, err error) {
	return GetN(item, AttrAuditRetentionDays)
}

// ResourceRegistryFromItem returns the sorted resource names of the
// resource registry ({ns}/SYSTEM#, #RESOURCES): its `resources` string set.
func ResourceRegistryFromItem(item map[string]types.AttributeValue) []string {
	ss, ok := item[AttrResources].(*types.AttributeValueMemberSS)
	if !ok {
		return []string{}
	}
	out := append([]string{}, ss.Value...)
	sort.Strings(out)
	return out
}

// EntityConfigRegistryFromItem returns, sorted, the resources of the
// entity-config registry ({ns}/SYSTEM#, #ENTITY_CONFIG_RESOURCES) whose
// count of entity configs (a number attribute named after the resource) is
// positive.
func EntityConfigRegistryFromItem(item map[string]types.AttributeValue) ([]string, error) {
	out := []string{}
	for name := range item {
		if name == AttrPK || name == AttrSK {
			continue
		}
		n, ok, err := GetN(item, name)
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
