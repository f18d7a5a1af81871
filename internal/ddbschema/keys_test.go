package ddbschema

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyBuilders(t *testing.T) {
	t.Parallel()
	const ns = "a7x3kq"
	for _, tc := range []struct {
		name, got, want string
	}{
		{"PKEntity", PKEntity(ns, "user-123"), "a7x3kq/ENTITY#user-123"},
		{"PKEntity reserved", PKEntity("_", "user-123"), "_/ENTITY#user-123"},
		{"PKSystem", PKSystem(ns), "a7x3kq/SYSTEM#"},
		{"PKSystem reserved", PKSystem(ReservedNamespace), "_/SYSTEM#"},
		{"PKResource", PKResource(ns, "gpt-4"), "a7x3kq/RESOURCE#gpt-4"},
		{"PKResource slash", PKResource(ns, "openai/gpt-4"), "a7x3kq/RESOURCE#openai/gpt-4"},
		{"PKAudit", PKAudit(ns, "user-123"), "a7x3kq/AUDIT#user-123"},
		{"PKAudit system", PKAudit(ns, "$SYSTEM"), "a7x3kq/AUDIT#$SYSTEM"},
		{"PKAudit resource", PKAudit(ns, "$RESOURCE:gpt-4"), "a7x3kq/AUDIT#$RESOURCE:gpt-4"},
		{"PKBucket", PKBucket(ns, "user-1", "gpt-4", 0), "a7x3kq/BUCKET#user-1#gpt-4#0"},
		{"PKBucket slash shard", PKBucket(ns, "user-1", "openai/gpt-4", 12), "a7x3kq/BUCKET#user-1#openai/gpt-4#12"},
		{"SKMeta", SKMeta, "#META"},
		{"SKState", SKState, "#STATE"},
		{"SKVersion", SKVersion, "#VERSION"},
		{"SKConfig system", SKConfig(""), "#CONFIG"},
		{"SKConfig resource", SKConfig("gpt-4"), "#CONFIG#gpt-4"},
		{"SKConfig default", SKConfig("_default_"), "#CONFIG#_default_"},
		{"SKConfig slash", SKConfig("openai/gpt-4"), "#CONFIG#openai/gpt-4"},
		{"SKResources", SKResources, "#RESOURCES"},
		{"SKEntityConfigResources", SKEntityConfigResources, "#ENTITY_CONFIG_RESOURCES"},
		{"SKProvisioner", SKProvisioner, "#PROVISIONER"},
		{"SKUsage", SKUsage("gpt-4", "2024-01-15T10:00:00Z", WindowHourly), "#USAGE#gpt-4#2024-01-15T10:00:00Z#hourly"},
		{"SKUsage slash", SKUsage("openai/gpt-4", "2024-01-15T00:00:00Z", WindowDaily), "#USAGE#openai/gpt-4#2024-01-15T00:00:00Z#daily"},
		{"SKUsageShared", SKUsageShared("gpt-4", "2024-01-15T10:00:00Z"), "#USAGE#gpt-4#2024-01-15T10:00:00Z"},
		{"SKUsagePrefix", SKUsagePrefix, "#USAGE#"},
		{"SKUsageResourcePrefix", SKUsageResourcePrefix("gpt-4"), "#USAGE#gpt-4#"},
		{"SKAudit", SKAudit("01M812K98TDJXJ05Q7ZQETE6EN"), "#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"},
		{"SKAuditPrefix", SKAuditPrefix, "#AUDIT#"},
		{"SKNamespace", SKNamespace("default"), "#NAMESPACE#default"},
		{"SKNSID", SKNSID("1oUM39eGSNc"), "#NSID#1oUM39eGSNc"},
		{"SKNamespacePrefix", SKNamespacePrefix, "#NAMESPACE#"},
		{"SKNSIDPrefix", SKNSIDPrefix, "#NSID#"},
		{"SKBucketLegacy", SKBucketLegacy("gpt-4"), "#BUCKET#gpt-4"},
		{"SKLimitLegacy", SKLimitLegacy("gpt-4", "rpm"), "#LIMIT#gpt-4#rpm"},
		{"SKLimitLegacyResourcePrefix", SKLimitLegacyResourcePrefix("gpt-4"), "#LIMIT#gpt-4#"},
		{"SKSystemLimitLegacy", SKSystemLimitLegacy("rpm"), "#LIMIT#rpm"},
		{"SKResourceLegacy", SKResourceLegacy("gpt-4"), "#RESOURCE#gpt-4"},
		{"GSI1PKParent", GSI1PKParent(ns, "org-abc"), "a7x3kq/PARENT#org-abc"},
		{"GSI1SKChild", GSI1SKChild("user-123"), "CHILD#user-123"},
		{"GSI2PKResource", GSI2PKResource(ns, "gpt-4"), "a7x3kq/RESOURCE#gpt-4"},
		{"GSI2PKResource slash", GSI2PKResource(ns, "anthropic/claude-3"), "a7x3kq/RESOURCE#anthropic/claude-3"},
		{"GSI2SKBucket", GSI2SKBucket("user-1", 0), "BUCKET#user-1#0"},
		{"GSI2SKBucket shard", GSI2SKBucket("user-1", 3), "BUCKET#user-1#3"},
		{"GSI2SKUsage", GSI2SKUsage("2024-01-15T10:00:00Z", "user-1", WindowMonthly), "USAGE#2024-01-15T10:00:00Z#user-1#monthly"},
		{"GSI2SKUsageShared", GSI2SKUsageShared("2024-01-15T10:00:00Z", "user-1"), "USAGE#2024-01-15T10:00:00Z#user-1"},
		{"GSI2SKAccess", GSI2SKAccess("user-1"), "ACCESS#user-1"},
		{"GSI3PKEntityConfig", GSI3PKEntityConfig(ns, "gpt-4"), "a7x3kq/ENTITY_CONFIG#gpt-4"},
		{"GSI3PKEntityConfig default", GSI3PKEntityConfig(ns, "_default_"), "a7x3kq/ENTITY_CONFIG#_default_"},
		{"GSI3SKEntity", GSI3SKEntity("user-1"), "user-1"},
		{"GSI3PKEntity", GSI3PKEntity(ns, "user-1"), "a7x3kq/ENTITY#user-1"},
		{"GSI3SKBucket", GSI3SKBucket("gpt-4", 0), "BUCKET#gpt-4#0"},
		{"GSI3SKBucket slash", GSI3SKBucket("openai/gpt-4", 7), "BUCKET#openai/gpt-4#7"},
		{"GSI4SKBucket", GSI4SKBucket("user-1", "openai/gpt-4", 2), "BUCKET#user-1#openai/gpt-4#2"},
		{"BucketAttr", BucketAttr("rpm", FieldTokens), "b_rpm_tk"},
		{"BucketAttr underscore", BucketAttr("tokens_per_min", FieldTotalConsumed), "b_tokens_per_min_tc"},
		{"BucketAttr wcu", BucketAttr(WCULimitName, FieldRefillPeriod), "b_wcu_rp"},
		{"LimitAttr", LimitAttr("tpm", FieldCapacity), "l_tpm_cp"},
		{"LimitAttr ra", LimitAttr("tpm", FieldRefillAmount), "l_tpm_ra"},
		{"LimitAttr rp", LimitAttr("my_limit", FieldRefillPeriod), "l_my_limit_rp"},
	} {
		assert.Equal(t, tc.want, tc.got, "%s = %q, want %q", tc.name, tc.got, tc.want)
	}
}

func TestSchemaConstants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"SchemaVersion", SchemaVersion, "0.10.0"},
		{"ReservedNamespace", ReservedNamespace, "_"},
		{"DefaultNamespace", DefaultNamespace, "default"},
		{"WCUCapacityMilli", WCUCapacityMilli, 1000000},
		{"WCURefillAmountMilli", WCURefillAmountMilli, 1000000},
		{"WCURefillPeriodMs", WCURefillPeriodMs, 1000},
		{"namespace statuses", NamespaceActive + "," + NamespaceDeleted + "," + NamespacePurging, "active,deleted,purging"},
		{"TTLEpochSeconds", TTLEpochSeconds(1767225600999, 420), int64(1767226020)},
		{"TTLEpochSeconds negative ms floors", TTLEpochSeconds(-1, 0), int64(-1)},
	} {
		assert.Equal(t, tc.want, tc.got, "%s = %v, want %v", tc.name, tc.got, tc.want)
	}
}

func TestParseNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, wantNS, wantRest string
	}{
		{"a7x3kq/ENTITY#user-123", "a7x3kq", "ENTITY#user-123"},
		{"_/SYSTEM#", "_", "SYSTEM#"},
		{"ns/RESOURCE#openai/gpt-4", "ns", "RESOURCE#openai/gpt-4"},
		{"/x", "", "x"},
	} {
		ns, rest, err := ParseNamespace(tc.key)
		require.NoError(t, err, "ParseNamespace(%q) = %q, %q; want %q, %q, nil", tc.key, ns, rest, tc.wantNS, tc.wantRest)
		assert.Equal(t, tc.wantNS, ns, "ParseNamespace(%q) = %q, %q; want %q, %q, nil", tc.key, ns, rest, tc.wantNS, tc.wantRest)
		assert.Equal(t, tc.wantRest, rest, "ParseNamespace(%q) = %q, %q; want %q, %q, nil", tc.key, ns, rest, tc.wantNS, tc.wantRest)
	}
	_, _, err := ParseNamespace("ENTITY#user-123")
	var kerr *KeyFormatError
	require.ErrorAs(t, err, &kerr, "ParseNamespace(no slash) error, want *KeyFormatError")
	got, want := err.Error(), "Key has no namespace separator '/': ENTITY#user-123"
	assert.Equal(t, want, got, "error = %q, want %q", got, want)
}

func TestParseBucketPKRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []BucketPK{
		{"a7x3kq", "user-1", "gpt-4", 0},
		{"ns", "user.name@example.com", "openai/gpt-4", 3},
		{"_", "arn:aws:iam::123456789012:user", "anthropic/claude-3.5/sonnet", 1024},
		{"-AbC_12", "a-b.c:d@e_f", "res_with-dash.and/slash", 7},
		{"1oUM39eGSNc", "C", "api", 0},
	} {
		pk := PKBucket(tc.Namespace, tc.EntityID, tc.Resource, tc.Shard)
		got, err := ParseBucketPK(pk)
		if assert.NoError(t, err, "ParseBucketPK(%q)", pk) {
			assert.Equal(t, tc, got, "ParseBucketPK(%q)", pk)
		}
	}
}

func TestParseBucketPKErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pk, wantMsg string
	}{
		{"BUCKET#a#b#0", "Key has no namespace separator '/': BUCKET#a#b#0"},
		{"ns/ENTITY#a", "Not a bucket PK: ns/ENTITY#a"},
		{"ns/BUCKET#a", "Invalid bucket PK format: ns/BUCKET#a"},
		{"ns/BUCKET#a#0", "Invalid bucket PK format: ns/BUCKET#a#0"},
		{"ns/BUCKET#a#b#x", "Invalid bucket PK shard: ns/BUCKET#a#b#x"},
		{"ns/BUCKET#a#b#", "Invalid bucket PK shard: ns/BUCKET#a#b#"},
		{"ns/BUCKET#a#b#-1", "Invalid bucket PK shard: ns/BUCKET#a#b#-1"},
		{"ns/BUCKET#a#b#+1", "Invalid bucket PK shard: ns/BUCKET#a#b#+1"},
		{"ns/BUCKET#a#b#99999999999999999999", "Invalid bucket PK shard: ns/BUCKET#a#b#99999999999999999999"},
	} {
		_, err := ParseBucketPK(tc.pk)
		var kerr *KeyFormatError
		if assert.ErrorAs(t, err, &kerr, "ParseBucketPK(%q)", tc.pk) {
			assert.EqualError(t, err, tc.wantMsg, "ParseBucketPK(%q)", tc.pk)
		}
	}
}

func TestParseBucketSKLegacy(t *testing.T) {
	t.Parallel()
	got, err := ParseBucketSKLegacy("#BUCKET#openai/gpt-4")
	require.NoError(t, err, "ParseBucketSKLegacy = %q; want openai/gpt-4, nil", got)
	assert.Equal(t, "openai/gpt-4", got, "ParseBucketSKLegacy = %q; want openai/gpt-4, nil", got)
	for _, sk := range []string{"#BUCKET#", "#STATE", ""} {
		_, err := ParseBucketSKLegacy(sk)
		assert.Error(t, err, "ParseBucketSKLegacy(%q) succeeded, want error", sk)
	}
}

func TestParseCompositeAttrs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attr            string
		parse           func(string) (string, string, bool)
		wantName, wantF string
		wantOK          bool
	}{
		{"b_rpm_tk", ParseBucketAttr, "rpm", "tk", true},
		{"b_tokens_per_min_tc", ParseBucketAttr, "tokens_per_min", "tc", true},
		{"b_a_b_c_cp", ParseBucketAttr, "a_b_c", "cp", true},
		{"b_wcu_rp", ParseBucketAttr, "wcu", "rp", true},
		{"b_my.limit-x_ra", ParseBucketAttr, "my.limit-x", "ra", true},
		{"b_rpm_", ParseBucketAttr, "rpm", "", true},
		{"b__tk", ParseBucketAttr, "", "", false},
		{"b_tk", ParseBucketAttr, "", "", false},
		{"b_", ParseBucketAttr, "", "", false},
		{"l_rpm_cp", ParseBucketAttr, "", "", false},
		{"rf", ParseBucketAttr, "", "", false},
		{"l_rpm_cp", ParseLimitAttr, "rpm", "cp", true},
		{"l_req_per_day_rp", ParseLimitAttr, "req_per_day", "rp", true},
		{"l__cp", ParseLimitAttr, "", "", false},
		{"b_rpm_tk", ParseLimitAttr, "", "", false},
	} {
		name, field, ok := tc.parse(tc.attr)
		assert.Equal(t, tc.wantName, name, "parse(%q) = %q, %q, %v; want %q, %q, %v", tc.attr, name, field, ok, tc.wantName, tc.wantF, tc.wantOK)
		assert.Equal(t, tc.wantF, field, "parse(%q) = %q, %q, %v; want %q, %q, %v", tc.attr, name, field, ok, tc.wantName, tc.wantF, tc.wantOK)
		assert.Equal(t, tc.wantOK, ok, "parse(%q) = %q, %q, %v; want %q, %q, %v", tc.attr, name, field, ok, tc.wantName, tc.wantF, tc.wantOK)
	}
}

func TestKeyPredicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pk, sk        string
		bucket, audit bool
	}{
		{"ns1/BUCKET#e#api#0", "#STATE", true, false},
		{"ns1/BUCKET#e#api#0", "#META", false, false},
		{"BUCKET#e#api#0", "#STATE", false, false}, // no namespace
		{"ns1/ENTITY#e", "#STATE", false, false},
		{"ns1/AUDIT#e", "#AUDIT#01", false, true},
		{"AUDIT#e", "#AUDIT#01", false, false}, // the bare prefix of pre-namespace tables
		{"ns1/AUDIT#$SYSTEM", "#AUDIT#01", false, true},
	} {
		assert.Equal(t, tc.bucket, IsBucketKey(tc.pk, tc.sk))
		assert.Equal(t, tc.audit, IsAuditKey(tc.pk))
	}
}
