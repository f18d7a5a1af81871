package ddbschema

import (
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ConfigLimit is one limit of a config item, stored as l_{Name}_cp and
// l_{Name}_ra (whole tokens) and l_{Name}_rp (SECONDS).
type ConfigLimit struct {
	Name                string
	Capacity            int64
	RefillAmount        int64
	RefillPeriodSeconds int64
}

// putConfigLimits adds the l_* attributes of limits to item.
func putConfigLimits(item map[string]types.AttributeValue, limits []ConfigLimit) {
	for _, l := range limits {
		item[LimitAttr(l.Name, FieldCapacity)] = N(l.Capacity)
		item[LimitAttr(l.Name, FieldRefillAmount)] = N(l.RefillAmount)
		item[LimitAttr(l.Name, FieldRefillPeriod)] = N(l.RefillPeriodSeconds)
	}
}

// EntityConfigItem returns the config item of an entity for resource (which
// may be the default resource `_default_`): PK {ns}/ENTITY#{id}, SK
// #CONFIG#{res}.
func EntityConfigItem(ns, entityID, resource string, limits []ConfigLimit) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrPK:            S(PKEntity(ns, entityID)),
		AttrSK:            S(SKConfig(resource)),
		AttrEntityID:      S(entityID),
		AttrResource:      S(resource),
		AttrConfigVersion: N(ConfigVersion),
		AttrGSI3PK:        S(GSI3PKEntityConfig(ns, resource)),
		AttrGSI3SK:        S(GSI3SKEntity(entityID)),
		AttrGSI4PK:        S(ns),
		AttrGSI4SK:        S(PKEntity(ns, entityID)),
	}
	putConfigLimits(item, limits)
	return item
}

// ResourceConfigItem returns the default config of a resource: PK
// {ns}/RESOURCE#{res}, SK #CONFIG.
func ResourceConfigItem(ns, resource string, limits []ConfigLimit) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrPK:            S(PKResource(ns, resource)),
		AttrSK:            S(SKConfigPrefix),
		AttrResource:      S(resource),
		AttrConfigVersion: N(ConfigVersion),
		AttrGSI4PK:        S(ns),
		AttrGSI4SK:        S(PKResource(ns, resource)),
	}
	putConfigLimits(item, limits)
	return item
}

// SystemConfigItem returns the system config: PK {ns}/SYSTEM#, SK #CONFIG,
// with on_unavailable only when onUnavailable is not "".
func SystemConfigItem(ns string, limits []ConfigLimit, onUnavailable string) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrPK:            S(PKSystem(ns)),
		AttrSK:            S(SKConfigPrefix),
		AttrConfigVersion: N(ConfigVersion),
		AttrGSI4PK:        S(ns),
		AttrGSI4SK:        S(PKSystem(ns)),
	}
	if onUnavailable != "" {
		item[AttrOnUnavailable] = S(onUnavailable)
	}
	putConfigLimits(item, limits)
	return item
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
	return ConfigLimit{Name: name, Capacity: v[0], RefillAmount: v[1], RefillPeriodSeconds: v[2]}, nil
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
