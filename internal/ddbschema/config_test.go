package ddbschema

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistries(t *testing.T) {
	t.Parallel()
	res := map[string]types.AttributeValue{
		"PK":        S("ns/SYSTEM#"),
		"SK":        S(SKResources),
		"resources": &types.AttributeValueMemberSS{Value: []string{"gpt-4", "claude", "openai/gpt-4o"}},
	}
	assert.Equal(t, []string{"claude", "gpt-4", "openai/gpt-4o"}, ResourceRegistryFromItem(res), "ResourceRegistryFromItem")
	assert.Empty(t, ResourceRegistryFromItem(nil), "ResourceRegistryFromItem(nil)")
	ec := map[string]types.AttributeValue{
		"PK":        S("ns/SYSTEM#"),
		"SK":        S(SKEntityConfigResources),
		"GSI4PK":    S("ns"),
		"GSI4SK":    S("ns/SYSTEM#"),
		"gpt-4":     N(2),
		"_default_": N(1),
		"claude":    N(0),
		"old":       N(-1),
		"openai/o1": N(5),
	}
	got, err := EntityConfigRegistryFromItem(ec)
	require.NoError(t, err)
	assert.Equal(t, []string{"_default_", "gpt-4", "openai/o1"}, got, "EntityConfigRegistryFromItem")
}

func TestConfigItems(t *testing.T) {
	t.Parallel()
	limits := []ConfigLimit{
		{Name: "tpm", Capacity: 10000, RefillAmount: 10000, RefillPeriodSeconds: 60},
		{Name: "rps", Capacity: 20, RefillAmount: 10, RefillPeriodSeconds: 1},
		{Name: "req_per_day", Capacity: 5, RefillAmount: 5, RefillPeriodSeconds: 86400},
	}
	checkItem(t, "entity config", EntityConfigItem("ns", "e-1", "openai/gpt-4", limits), map[string]string{
		"PK":               `S:"ns/ENTITY#e-1"`,
		"SK":               `S:"#CONFIG#openai/gpt-4"`,
		"entity_id":        `S:"e-1"`,
		"resource":         `S:"openai/gpt-4"`,
		"config_version":   `N:1`,
		"GSI3PK":           `S:"ns/ENTITY_CONFIG#openai/gpt-4"`,
		"GSI3SK":           `S:"e-1"`,
		"GSI4PK":           `S:"ns"`,
		"GSI4SK":           `S:"ns/ENTITY#e-1"`,
		"l_tpm_cp":         `N:10000`,
		"l_tpm_ra":         `N:10000`,
		"l_tpm_rp":         `N:60`,
		"l_rps_cp":         `N:20`,
		"l_rps_ra":         `N:10`,
		"l_rps_rp":         `N:1`,
		"l_req_per_day_cp": `N:5`,
		"l_req_per_day_ra": `N:5`,
		"l_req_per_day_rp": `N:86400`,
	})
	checkItem(t, "resource config", ResourceConfigItem("ns", "gpt-4", limits[:1]), map[string]string{
		"PK":             `S:"ns/RESOURCE#gpt-4"`,
		"SK":             `S:"#CONFIG"`,
		"resource":       `S:"gpt-4"`,
		"config_version": `N:1`,
		"GSI4PK":         `S:"ns"`,
		"GSI4SK":         `S:"ns/RESOURCE#gpt-4"`,
		"l_tpm_cp":       `N:10000`,
		"l_tpm_ra":       `N:10000`,
		"l_tpm_rp":       `N:60`,
	})
	checkItem(t, "system config", SystemConfigItem("ns", limits[:1], "allow"), map[string]string{
		"PK":             `S:"ns/SYSTEM#"`,
		"SK":             `S:"#CONFIG"`,
		"config_version": `N:1`,
		"on_unavailable": `S:"allow"`,
		"GSI4PK":         `S:"ns"`,
		"GSI4SK":         `S:"ns/SYSTEM#"`,
		"l_tpm_cp":       `N:10000`,
		"l_tpm_ra":       `N:10000`,
		"l_tpm_rp":       `N:60`,
	})
	_, ok := SystemConfigItem("ns", nil, "")[AttrOnUnavailable]
	assert.False(t, ok, "SystemConfigItem without on_unavailable wrote the attribute")

	sorted := []ConfigLimit{limits[2], limits[1], limits[0]} // req_per_day, rps, tpm
	for name, item := range map[string]map[string]types.AttributeValue{
		"entity":   EntityConfigItem("ns", "e-1", "_default_", limits),
		"resource": ResourceConfigItem("ns", "r", limits),
		"system":   SystemConfigItem("ns", limits, "block"),
	} {
		names := ConfigLimitNames(item)
		got := make([]ConfigLimit, len(names))
		for i, n := range names {
			var err error
			got[i], err = ConfigLimitFromItem(item, n)
			require.NoError(t, err, "%s: ConfigLimitFromItem(%s)", name, n)
		}
		assert.Equal(t, sorted, got, "%s limits round trip", name)
	}
	assert.Equal(t, "block", OnUnavailableFromItem(SystemConfigItem("ns", nil, "block")), "OnUnavailableFromItem")
	assert.Equal(t, "", OnUnavailableFromItem(SystemConfigItem("ns", nil, "")), "OnUnavailableFromItem(unset)")
	assert.Empty(t, ConfigLimitNames(SystemConfigItem("ns", nil, "")), "ConfigLimitNames(no limits)")

	// Missing fields read as 0, unvalidated; malformed numbers are errors.
	incomplete := map[string]types.AttributeValue{"l_rpm_cp": N(10), "l_rpm_ra": N(10)}
	got, err := ConfigLimitFromItem(incomplete, "rpm")
	require.NoError(t, err, "ConfigLimitFromItem(missing rp) = %+v", got)
	assert.Equal(t, (ConfigLimit{Name: "rpm", Capacity: 10, RefillAmount: 10}), got, "ConfigLimitFromItem(missing rp) = %+v", got)
	badNumber := map[string]types.AttributeValue{"l_rpm_cp": &types.AttributeValueMemberN{Value: "ten"}}
	_, err = ConfigLimitFromItem(badNumber, "rpm")
	assert.EqualError(t, err, `config limit rpm: attribute l_rpm_cp: invalid integer "ten"`, "ConfigLimitFromItem(bad number)")

	sys := map[string]types.AttributeValue{"audit_retention_days": N(30)}
	days, ok, err := AuditRetentionDaysFromItem(sys)
	assert.EqualValues(t, 30, days, "AuditRetentionDaysFromItem = %d, %v; want 30, true, nil", days, ok)
	require.True(t, ok, "AuditRetentionDaysFromItem = %d, %v; want 30, true, nil", days, ok)
	require.NoError(t, err, "AuditRetentionDaysFromItem = %d, %v; want 30, true, nil", days, ok)
	_, ok, err = AuditRetentionDaysFromItem(nil)
	require.False(t, ok, "AuditRetentionDaysFromItem(absent) = %v", ok)
	require.NoError(t, err, "AuditRetentionDaysFromItem(absent) = %v", ok)
}
