package limiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// The -update flag rewrites golden files. It is registered only if no other
// test file of the package registered it first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite testdata/*.golden files")
	}
}

func schemaUpdateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// schemaAVText renders an attribute value canonically (maps sorted) so that
// items can be compared and diffed as map[string]string.
func schemaAVText(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + strconv.Quote(v.Value)
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberBOOL:
		return "BOOL:" + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL:" + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberM:
		keys := make([]string, 0, len(v.Value))
		for k := range v.Value {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + schemaAVText(v.Value[k])
		}
		return "M:{" + strings.Join(parts, ", ") + "}"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = schemaAVText(e)
		}
		return "L:[" + strings.Join(parts, ", ") + "]"
	case *types.AttributeValueMemberSS:
		return "SS:" + fmt.Sprint(v.Value)
	case nil:
		return "<nil>"
	}
	return fmt.Sprintf("%T", av)
}

func schemaItemText(item map[string]types.AttributeValue) map[string]string {
	out := make(map[string]string, len(item))
	for k, v := range item {
		out[k] = schemaAVText(v)
	}
	return out
}

func schemaCheckItem(t *testing.T, name string, got map[string]types.AttributeValue, want map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, schemaItemText(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

func TestKeyBuilders(t *testing.T) {
	t.Parallel()
	const ns = "a7x3kq"
	for _, tc := range []struct {
		name, got, want string
	}{
		{"pkEntity", pkEntity(ns, "user-123"), "a7x3kq/ENTITY#user-123"},
		{"pkEntity reserved", pkEntity("_", "user-123"), "_/ENTITY#user-123"},
		{"pkSystem", pkSystem(ns), "a7x3kq/SYSTEM#"},
		{"pkSystem reserved", pkSystem(reservedNamespace), "_/SYSTEM#"},
		{"pkResource", pkResource(ns, "gpt-4"), "a7x3kq/RESOURCE#gpt-4"},
		{"pkResource slash", pkResource(ns, "openai/gpt-4"), "a7x3kq/RESOURCE#openai/gpt-4"},
		{"pkAudit", pkAudit(ns, "user-123"), "a7x3kq/AUDIT#user-123"},
		{"pkAudit system", pkAudit(ns, auditEntitySystem), "a7x3kq/AUDIT#$SYSTEM"},
		{"pkAudit resource", pkAudit(ns, auditEntityResource("gpt-4")), "a7x3kq/AUDIT#$RESOURCE:gpt-4"},
		{"pkBucket", pkBucket(ns, "user-1", "gpt-4", 0), "a7x3kq/BUCKET#user-1#gpt-4#0"},
		{"pkBucket slash shard", pkBucket(ns, "user-1", "openai/gpt-4", 12), "a7x3kq/BUCKET#user-1#openai/gpt-4#12"},
		{"skMeta", skMeta, "#META"},
		{"skState", skState, "#STATE"},
		{"skVersion", skVersion, "#VERSION"},
		{"skConfig system", skConfig(""), "#CONFIG"},
		{"skConfig resource", skConfig("gpt-4"), "#CONFIG#gpt-4"},
		{"skConfig default", skConfig(DefaultResource), "#CONFIG#_default_"},
		{"skConfig slash", skConfig("openai/gpt-4"), "#CONFIG#openai/gpt-4"},
		{"skResources", skResources, "#RESOURCES"},
		{"skEntityConfigResources", skEntityConfigResources, "#ENTITY_CONFIG_RESOURCES"},
		{"skProvisioner", skProvisioner, "#PROVISIONER"},
		{"skUsage", skUsage("gpt-4", "2024-01-15T10:00:00Z"), "#USAGE#gpt-4#2024-01-15T10:00:00Z"},
		{"skUsage slash", skUsage("openai/gpt-4", "2024-01-15T00:00:00Z"), "#USAGE#openai/gpt-4#2024-01-15T00:00:00Z"},
		{"skUsagePrefix", skUsagePrefix, "#USAGE#"},
		{"skUsageResourcePrefix", skUsageResourcePrefix("gpt-4"), "#USAGE#gpt-4#"},
		{"skAudit", skAudit("01M812K98TDJXJ05Q7ZQETE6EN"), "#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"},
		{"skAuditPrefix", skAuditPrefix, "#AUDIT#"},
		{"skNamespace", skNamespace("default"), "#NAMESPACE#default"},
		{"skNSID", skNSID("1oUM39eGSNc"), "#NSID#1oUM39eGSNc"},
		{"skNamespacePrefix", skNamespacePrefix, "#NAMESPACE#"},
		{"skNSIDPrefix", skNSIDPrefix, "#NSID#"},
		{"skBucketLegacy", skBucketLegacy("gpt-4"), "#BUCKET#gpt-4"},
		{"skLimitLegacy", skLimitLegacy("gpt-4", "rpm"), "#LIMIT#gpt-4#rpm"},
		{"skLimitLegacyResourcePrefix", skLimitLegacyResourcePrefix("gpt-4"), "#LIMIT#gpt-4#"},
		{"skSystemLimitLegacy", skSystemLimitLegacy("rpm"), "#LIMIT#rpm"},
		{"skResourceLegacy", skResourceLegacy("gpt-4"), "#RESOURCE#gpt-4"},
		{"gsi1PKParent", gsi1PKParent(ns, "org-abc"), "a7x3kq/PARENT#org-abc"},
		{"gsi1SKChild", gsi1SKChild("user-123"), "CHILD#user-123"},
		{"gsi2PKResource", gsi2PKResource(ns, "gpt-4"), "a7x3kq/RESOURCE#gpt-4"},
		{"gsi2PKResource slash", gsi2PKResource(ns, "anthropic/claude-3"), "a7x3kq/RESOURCE#anthropic/claude-3"},
		{"gsi2SKBucket", gsi2SKBucket("user-1", 0), "BUCKET#user-1#0"},
		{"gsi2SKBucket shard", gsi2SKBucket("user-1", 3), "BUCKET#user-1#3"},
		{"gsi2SKUsage", gsi2SKUsage("2024-01-15T10:00:00Z", "user-1"), "USAGE#2024-01-15T10:00:00Z#user-1"},
		{"gsi2SKAccess", gsi2SKAccess("user-1"), "ACCESS#user-1"},
		{"gsi3PKEntityConfig", gsi3PKEntityConfig(ns, "gpt-4"), "a7x3kq/ENTITY_CONFIG#gpt-4"},
		{"gsi3PKEntityConfig default", gsi3PKEntityConfig(ns, DefaultResource), "a7x3kq/ENTITY_CONFIG#_default_"},
		{"gsi3SKEntity", gsi3SKEntity("user-1"), "user-1"},
		{"gsi3PKEntity", gsi3PKEntity(ns, "user-1"), "a7x3kq/ENTITY#user-1"},
		{"gsi3SKBucket", gsi3SKBucket("gpt-4", 0), "BUCKET#gpt-4#0"},
		{"gsi3SKBucket slash", gsi3SKBucket("openai/gpt-4", 7), "BUCKET#openai/gpt-4#7"},
		{"gsi4SKBucket", gsi4SKBucket("user-1", "openai/gpt-4", 2), "BUCKET#user-1#openai/gpt-4#2"},
		{"bucketAttr", bucketAttr("rpm", fieldTokens), "b_rpm_tk"},
		{"bucketAttr underscore", bucketAttr("tokens_per_min", fieldTotalConsumed), "b_tokens_per_min_tc"},
		{"bucketAttr wcu", bucketAttr(wcuLimitName, fieldRefillPeriod), "b_wcu_rp"},
		{"limitAttr", limitAttr("tpm", fieldCapacity), "l_tpm_cp"},
		{"limitAttr ra", limitAttr("tpm", fieldRefillAmount), "l_tpm_ra"},
		{"limitAttr rp", limitAttr("my_limit", fieldRefillPeriod), "l_my_limit_rp"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestSchemaConstants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"currentSchemaVersion", currentSchemaVersion, "0.10.0"},
		{"reservedNamespace", reservedNamespace, "_"},
		{"defaultNamespace", defaultNamespace, "default"},
		{"wcuCapacityMilli", wcuCapacityMilli, 1000000},
		{"wcuRefillAmountMilli", wcuRefillAmountMilli, 1000000},
		{"wcuRefillPeriodMs", wcuRefillPeriodMs, 1000},
		{"wcuWriteCostMilli", wcuWriteCostMilli, 1000},
		{"wcuShardWarnThreshold", wcuShardWarnThreshold, 32},
		{"namespace statuses", namespaceActive + "," + namespaceDeleted + "," + namespacePurging, "active,deleted,purging"},
		{"ttlEpochSeconds", ttlEpochSeconds(1767225600999, 420), int64(1767226020)},
		{"ttlEpochSeconds negative ms floors", ttlEpochSeconds(-1, 0), int64(-1)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
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
		ns, rest, err := parseNamespace(tc.key)
		if err != nil || ns != tc.wantNS || rest != tc.wantRest {
			t.Errorf("parseNamespace(%q) = %q, %q, %v; want %q, %q, nil", tc.key, ns, rest, err, tc.wantNS, tc.wantRest)
		}
	}
	_, _, err := parseNamespace("ENTITY#user-123")
	var kerr *keyFormatError
	if !errors.As(err, &kerr) {
		t.Fatalf("parseNamespace(no slash) error = %v, want *keyFormatError", err)
	}
	if got, want := err.Error(), "Key has no namespace separator '/': ENTITY#user-123"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestParseBucketPKRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []parsedBucketPK{
		{"a7x3kq", "user-1", "gpt-4", 0},
		{"ns", "user.name@example.com", "openai/gpt-4", 3},
		{"_", "arn:aws:iam::123456789012:user", "anthropic/claude-3.5/sonnet", 1024},
		{"-AbC_12", "a-b.c:d@e_f", "res_with-dash.and/slash", 7},
		{"1oUM39eGSNc", "C", "api", 0},
	} {
		pk := pkBucket(tc.Namespace, tc.EntityID, tc.Resource, tc.Shard)
		got, err := parseBucketPK(pk)
		if err != nil {
			t.Errorf("parseBucketPK(%q) error: %v", pk, err)
			continue
		}
		if got != tc {
			t.Errorf("parseBucketPK(%q) = %+v, want %+v", pk, got, tc)
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
		_, err := parseBucketPK(tc.pk)
		var kerr *keyFormatError
		if !errors.As(err, &kerr) {
			t.Errorf("parseBucketPK(%q) error = %v, want *keyFormatError", tc.pk, err)
			continue
		}
		if err.Error() != tc.wantMsg {
			t.Errorf("parseBucketPK(%q) error = %q, want %q", tc.pk, err.Error(), tc.wantMsg)
		}
	}
}

func TestParseBucketSKLegacy(t *testing.T) {
	t.Parallel()
	if got, err := parseBucketSKLegacy("#BUCKET#openai/gpt-4"); err != nil || got != "openai/gpt-4" {
		t.Errorf("parseBucketSKLegacy = %q, %v; want openai/gpt-4, nil", got, err)
	}
	for _, sk := range []string{"#BUCKET#", "#STATE", ""} {
		if _, err := parseBucketSKLegacy(sk); err == nil {
			t.Errorf("parseBucketSKLegacy(%q) succeeded, want error", sk)
		}
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
		{"b_rpm_tk", parseBucketAttr, "rpm", "tk", true},
		{"b_tokens_per_min_tc", parseBucketAttr, "tokens_per_min", "tc", true},
		{"b_a_b_c_cp", parseBucketAttr, "a_b_c", "cp", true},
		{"b_wcu_rp", parseBucketAttr, "wcu", "rp", true},
		{"b_my.limit-x_ra", parseBucketAttr, "my.limit-x", "ra", true},
		{"b_rpm_", parseBucketAttr, "rpm", "", true},
		{"b__tk", parseBucketAttr, "", "", false},
		{"b_tk", parseBucketAttr, "", "", false},
		{"b_", parseBucketAttr, "", "", false},
		{"l_rpm_cp", parseBucketAttr, "", "", false},
		{"rf", parseBucketAttr, "", "", false},
		{"l_rpm_cp", parseLimitAttr, "rpm", "cp", true},
		{"l_req_per_day_rp", parseLimitAttr, "req_per_day", "rp", true},
		{"l__cp", parseLimitAttr, "", "", false},
		{"b_rpm_tk", parseLimitAttr, "", "", false},
	} {
		name, field, ok := tc.parse(tc.attr)
		if name != tc.wantName || field != tc.wantF || ok != tc.wantOK {
			t.Errorf("parse(%q) = %q, %q, %v; want %q, %q, %v", tc.attr, name, field, ok, tc.wantName, tc.wantF, tc.wantOK)
		}
	}
}

func TestTableDefinitionGolden(t *testing.T) {
	t.Parallel()
	got, err := json.MarshalIndent(tableDefinition("zae-limiter"), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "table_definition.golden.json")
	if schemaUpdateGolden() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestTableDefinitionGolden -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("tableDefinition mismatch (-golden +got):\n%s", diff)
	}
}

// TestTableDefinitionShape checks the parts of the table definition that the
// compatibility contract fixes, independently of the golden file.
func TestTableDefinitionShape(t *testing.T) {
	t.Parallel()
	in := tableDefinition("t")
	if *in.TableName != "t" || in.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("table name/billing = %q/%q", *in.TableName, in.BillingMode)
	}
	var attrs []string
	for _, d := range in.AttributeDefinitions {
		if d.AttributeType != types.ScalarAttributeTypeS {
			t.Errorf("attribute %s type %s, want S", *d.AttributeName, d.AttributeType)
		}
		attrs = append(attrs, *d.AttributeName)
	}
	wantAttrs := []string{"PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK",
		"GSI4PK", "GSI4SK", "LSI1SK", "LSI2SK", "LSI3SK", "LSI4SK", "LSI5SK"}
	if diff := cmp.Diff(wantAttrs, attrs); diff != "" {
		t.Errorf("attribute definitions (-want +got):\n%s", diff)
	}
	var gsis []string
	for _, g := range in.GlobalSecondaryIndexes {
		gsis = append(gsis, fmt.Sprintf("%s:%s/%s:%s", *g.IndexName, *g.KeySchema[0].AttributeName, *g.KeySchema[1].AttributeName, g.Projection.ProjectionType))
	}
	wantGSIs := []string{"GSI1:GSI1PK/GSI1SK:ALL", "GSI2:GSI2PK/GSI2SK:ALL", "GSI3:GSI3PK/GSI3SK:KEYS_ONLY", "GSI4:GSI4PK/GSI4SK:KEYS_ONLY"}
	if diff := cmp.Diff(wantGSIs, gsis); diff != "" {
		t.Errorf("GSIs (-want +got):\n%s", diff)
	}
	var lsis []string
	for _, l := range in.LocalSecondaryIndexes {
		lsis = append(lsis, fmt.Sprintf("%s:%s/%s:%s", *l.IndexName, *l.KeySchema[0].AttributeName, *l.KeySchema[1].AttributeName, l.Projection.ProjectionType))
	}
	wantLSIs := []string{"LSI1:PK/LSI1SK:ALL", "LSI2:PK/LSI2SK:KEYS_ONLY", "LSI3:PK/LSI3SK:ALL", "LSI4:PK/LSI4SK:KEYS_ONLY", "LSI5:PK/LSI5SK:ALL"}
	if diff := cmp.Diff(wantLSIs, lsis); diff != "" {
		t.Errorf("LSIs (-want +got):\n%s", diff)
	}
	if s := in.StreamSpecification; !*s.StreamEnabled || s.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Errorf("stream = %v/%s", *s.StreamEnabled, s.StreamViewType)
	}
}

func TestTTLSpecification(t *testing.T) {
	t.Parallel()
	in := ttlSpecification("zae-limiter")
	if *in.TableName != "zae-limiter" || *in.TimeToLiveSpecification.AttributeName != "ttl" || !*in.TimeToLiveSpecification.Enabled {
		t.Errorf("ttlSpecification = %+v / %+v", in, in.TimeToLiveSpecification)
	}
}

// Appendix C1: the child bucket created by the first cascade acquire.
const (
	c1NS = "1oUM39eGSNc"
	c1T  = int64(1767225600123) // commit ms
)

func c1States() []BucketState {
	return []BucketState{{
		EntityID: "C", Resource: "api", LimitName: "rpm",
		TokensMilli: 9000, LastRefillMs: c1T, CapacityMilli: 10000, RefillAmountMilli: 10000,
		RefillPeriodMs: 60000, TotalConsumedMilli: 1000,
	}}
}

func TestBucketItemAppendixC1(t *testing.T) {
	t.Parallel()
	child := bucketItem(c1NS, bucketItemSpec{
		EntityID: "C", Resource: "api", Shard: 0, ShardCount: 1, RefillMs: c1T,
		Cascade: true, ParentID: "P", TTL: ttlEpochSeconds(c1T, 420), States: c1States(),
	})
	schemaCheckItem(t, "child bucket", child, map[string]string{
		"PK":          `S:"1oUM39eGSNc/BUCKET#C#api#0"`,
		"SK":          `S:"#STATE"`,
		"entity_id":   `S:"C"`,
		"resource":    `S:"api"`,
		"rf":          `N:1767225600123`,
		"shard_count": `N:1`,
		"cascade":     `BOOL:true`,
		"parent_id":   `S:"P"`,
		"ttl":         `N:1767226020`,
		"GSI2PK":      `S:"1oUM39eGSNc/RESOURCE#api"`,
		"GSI2SK":      `S:"BUCKET#C#0"`,
		"GSI3PK":      `S:"1oUM39eGSNc/ENTITY#C"`,
		"GSI3SK":      `S:"BUCKET#api#0"`,
		"GSI4PK":      `S:"1oUM39eGSNc"`,
		"GSI4SK":      `S:"BUCKET#C#api#0"`,
		"b_wcu_tk":    `N:1000000`,
		"b_wcu_cp":    `N:1000000`,
		"b_wcu_ra":    `N:1000000`,
		"b_wcu_rp":    `N:1000`,
		"b_wcu_tc":    `N:0`,
		"b_rpm_tk":    `N:9000`,
		"b_rpm_cp":    `N:10000`,
		"b_rpm_ra":    `N:10000`,
		"b_rpm_rp":    `N:60000`,
		"b_rpm_tc":    `N:1000`,
	})

	// The parent item: same shape, cascade false, no parent_id.
	parentStates := c1States()
	parentStates[0].EntityID = "P"
	parent := bucketItem(c1NS, bucketItemSpec{
		EntityID: "P", Resource: "api", RefillMs: c1T, TTL: ttlEpochSeconds(c1T, 420), States: parentStates,
	})
	schemaCheckItem(t, "parent bucket", parent, map[string]string{
		"PK":          `S:"1oUM39eGSNc/BUCKET#P#api#0"`,
		"SK":          `S:"#STATE"`,
		"entity_id":   `S:"P"`,
		"resource":    `S:"api"`,
		"rf":          `N:1767225600123`,
		"shard_count": `N:1`,
		"cascade":     `BOOL:false`,
		"ttl":         `N:1767226020`,
		"GSI2PK":      `S:"1oUM39eGSNc/RESOURCE#api"`,
		"GSI2SK":      `S:"BUCKET#P#0"`,
		"GSI3PK":      `S:"1oUM39eGSNc/ENTITY#P"`,
		"GSI3SK":      `S:"BUCKET#api#0"`,
		"GSI4PK":      `S:"1oUM39eGSNc"`,
		"GSI4SK":      `S:"BUCKET#P#api#0"`,
		"b_wcu_tk":    `N:1000000`,
		"b_wcu_cp":    `N:1000000`,
		"b_wcu_ra":    `N:1000000`,
		"b_wcu_rp":    `N:1000`,
		"b_wcu_tc":    `N:0`,
		"b_rpm_tk":    `N:9000`,
		"b_rpm_cp":    `N:10000`,
		"b_rpm_ra":    `N:10000`,
		"b_rpm_rp":    `N:60000`,
		"b_rpm_tc":    `N:1000`,
	})
}

func TestBucketItemRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec bucketItemSpec
		// wantWCU is the wcu state expected back (LastRefillMs and
		// identity fields are filled in by the test).
		wantWCU BucketState
	}{
		{
			name:    "appendix C1 child",
			spec:    bucketItemSpec{EntityID: "C", Resource: "api", ShardCount: 1, RefillMs: c1T, Cascade: true, ParentID: "P", TTL: 1767226020, States: c1States()},
			wantWCU: wcuInitialState(),
		},
		{
			name: "shard, slash resource, no ttl, no parent, wcu given, negative tokens",
			spec: bucketItemSpec{
				EntityID: "user.name@example.com", Resource: "openai/gpt-4", Shard: 3, ShardCount: 4, RefillMs: 1700000000000,
				States: []BucketState{
					{LimitName: "tpm", TokensMilli: -5000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 15_000},
					{LimitName: "my_limit", TokensMilli: 1, CapacityMilli: 2, RefillAmountMilli: 3, RefillPeriodMs: 4000},
					{LimitName: wcuLimitName, TokensMilli: 998000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, TotalConsumedMilli: 2000},
				},
			},
			wantWCU: BucketState{LimitName: wcuLimitName, TokensMilli: 998000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, TotalConsumedMilli: 2000},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const ns = "vG58F-ORDeU"
			item := bucketItem(ns, tc.spec)
			got, err := bucketFromItem(item)
			if err != nil {
				t.Fatalf("bucketFromItem: %v", err)
			}
			fill := func(s BucketState) BucketState {
				s.EntityID, s.Resource, s.ShardID, s.LastRefillMs = tc.spec.EntityID, tc.spec.Resource, tc.spec.Shard, tc.spec.RefillMs
				return s
			}
			want := bucketItemData{Namespace: ns, bucketItemSpec: tc.spec}
			want.States = []BucketState{fill(tc.wantWCU)}
			for _, s := range tc.spec.States {
				if s.LimitName != wcuLimitName {
					want.States = append(want.States, fill(s))
				}
			}
			sort.Slice(want.States, func(i, j int) bool { return want.States[i].LimitName < want.States[j].LimitName })
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(bucketItemData{})); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			for _, s := range withoutWCU(got.States) {
				if s.LimitName == wcuLimitName {
					t.Errorf("withoutWCU kept wcu")
				}
			}
			if n := len(withoutWCU(got.States)); n != len(got.States)-1 {
				t.Errorf("withoutWCU dropped %d states, want 1", len(got.States)-n)
			}
		})
	}
}

func TestBucketFromItemLenient(t *testing.T) {
	t.Parallel()
	// A stub created by an ADD on a missing item: keys and tk/tc only.
	stub := map[string]types.AttributeValue{
		"PK":       schemaS("ns/BUCKET#e-1#openai/gpt-4#2"),
		"SK":       schemaS("#STATE"),
		"b_rpm_tk": schemaN(-3000),
		"b_rpm_tc": schemaN(3000),
		"b_rpm_cp": schemaS("not a number type"), // wrong type reads as absent
		"b__tk":    schemaN(1),                   // empty limit name is ignored
		"b_tpm_cp": schemaN(5),                   // no tk: invisible
		"parent_id": &types.AttributeValueMemberNULL{
			Value: true,
		},
	}
	got, err := bucketFromItem(stub)
	if err != nil {
		t.Fatalf("bucketFromItem(stub): %v", err)
	}
	want := bucketItemData{Namespace: "ns", bucketItemSpec: bucketItemSpec{
		EntityID: "e-1", Resource: "openai/gpt-4", Shard: 2, ShardCount: 1,
		States: []BucketState{{EntityID: "e-1", Resource: "openai/gpt-4", LimitName: "rpm", ShardID: 2, TokensMilli: -3000, TotalConsumedMilli: 3000}},
	}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(bucketItemData{})); diff != "" {
		t.Errorf("stub (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{"no PK", map[string]types.AttributeValue{"SK": schemaS("#STATE")}},
		{"not a bucket PK", map[string]types.AttributeValue{"PK": schemaS("ns/ENTITY#e")}},
		{"bad rf", map[string]types.AttributeValue{"PK": schemaS("ns/BUCKET#e#r#0"), "rf": &types.AttributeValueMemberN{Value: "1.5"}}},
		{"bad tk", map[string]types.AttributeValue{"PK": schemaS("ns/BUCKET#e#r#0"), "b_rpm_tk": &types.AttributeValueMemberN{Value: "1e3"}}},
		{"huge shard_count", map[string]types.AttributeValue{"PK": schemaS("ns/BUCKET#e#r#0"), "shard_count": schemaN(math.MaxInt64)}},
	} {
		if _, err := bucketFromItem(tc.item); err == nil {
			t.Errorf("bucketFromItem(%s) succeeded, want error", tc.name)
		}
	}
}

func TestEntityItem(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 999_000_000, time.FixedZone("X", 3600))
	child := Entity{ID: "C", ParentID: "P", Cascade: true, Metadata: map[string]string{"tier": "gold"}, CreatedAt: created}
	schemaCheckItem(t, "child entity", entityItem("ns1", child), map[string]string{
		"PK":         `S:"ns1/ENTITY#C"`,
		"SK":         `S:"#META"`,
		"entity_id":  `S:"C"`,
		"name":       `S:"C"`,
		"parent_id":  `S:"P"`,
		"cascade":    `BOOL:true`,
		"metadata":   `M:{tier=S:"gold"}`,
		"created_at": `S:"2026-01-02T02:04:05Z"`,
		"GSI1PK":     `S:"ns1/PARENT#P"`,
		"GSI1SK":     `S:"CHILD#C"`,
		"GSI4PK":     `S:"ns1"`,
		"GSI4SK":     `S:"ns1/ENTITY#C"`,
	})
	root := Entity{ID: "P", Name: "Parent Org", CreatedAt: created}
	schemaCheckItem(t, "root entity", entityItem("ns1", root), map[string]string{
		"PK":         `S:"ns1/ENTITY#P"`,
		"SK":         `S:"#META"`,
		"entity_id":  `S:"P"`,
		"name":       `S:"Parent Org"`,
		"parent_id":  `NULL:true`,
		"cascade":    `BOOL:false`,
		"metadata":   `M:{}`,
		"created_at": `S:"2026-01-02T02:04:05Z"`,
		"GSI4PK":     `S:"ns1"`,
		"GSI4SK":     `S:"ns1/ENTITY#P"`,
	})

	for _, e := range []Entity{child, root} {
		got := entityFromItem(entityItem("ns1", e))
		want := e
		if want.Name == "" {
			want.Name = want.ID
		}
		if want.Metadata == nil {
			want.Metadata = map[string]string{}
		}
		want.CreatedAt = time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("entity round trip (-want +got):\n%s", diff)
		}
	}
}

func TestEntityFromItemForeignValues(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"entity_id":  schemaS("e"),
		"created_at": schemaS("garbage"),
		"metadata": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"s": schemaS("x"), "n": &types.AttributeValueMemberN{Value: "12.5"}, "b": schemaBool(true),
			"null": schemaNull(), "list": &types.AttributeValueMemberL{},
		}},
	}
	got := entityFromItem(item)
	want := Entity{ID: "e", Metadata: map[string]string{"s": "x", "n": "12.5", "b": "true"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entityFromItem (-want +got):\n%s", diff)
	}
}

func TestConfigItems(t *testing.T) {
	t.Parallel()
	limits := []Limit{PerMinute("tpm", 10000), PerSecond("rps", 10).WithBurst(20), PerDay("req_per_day", 5)}
	schemaCheckItem(t, "entity config", entityConfigItem("ns", "e-1", "openai/gpt-4", limits), map[string]string{
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
	schemaCheckItem(t, "resource config", resourceConfigItem("ns", "gpt-4", limits[:1]), map[string]string{
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
	schemaCheckItem(t, "system config", systemConfigItem("ns", limits[:1], OnUnavailableAllow), map[string]string{
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
	if _, ok := systemConfigItem("ns", nil, "")[attrOnUnavailable]; ok {
		t.Error("systemConfigItem without on_unavailable wrote the attribute")
	}

	sorted := []Limit{limits[2], limits[1], limits[0]} // req_per_day, rps, tpm
	for name, item := range map[string]map[string]types.AttributeValue{
		"entity":   entityConfigItem("ns", "e-1", DefaultResource, limits),
		"resource": resourceConfigItem("ns", "r", limits),
		"system":   systemConfigItem("ns", limits, OnUnavailableBlock),
	} {
		got, err := limitsFromItem(item)
		if err != nil {
			t.Fatalf("%s: limitsFromItem: %v", name, err)
		}
		if diff := cmp.Diff(sorted, got); diff != "" {
			t.Errorf("%s limits round trip (-want +got):\n%s", name, diff)
		}
	}
	if got := onUnavailableFromItem(systemConfigItem("ns", nil, OnUnavailableBlock)); got != OnUnavailableBlock {
		t.Errorf("onUnavailableFromItem = %q, want block", got)
	}
	if got := onUnavailableFromItem(systemConfigItem("ns", nil, "")); got != "" {
		t.Errorf("onUnavailableFromItem(unset) = %q, want empty", got)
	}
	if got, err := limitsFromItem(systemConfigItem("ns", nil, "")); err != nil || len(got) != 0 {
		t.Errorf("limitsFromItem(no limits) = %v, %v; want empty, nil", got, err)
	}

	// Incomplete or invalid stored limits fail like the original's Limit().
	incomplete := map[string]types.AttributeValue{"l_rpm_cp": schemaN(10), "l_rpm_ra": schemaN(10)}
	if _, err := limitsFromItem(incomplete); !errors.Is(err, ErrValidation) {
		t.Errorf("limitsFromItem(missing rp) error = %v, want ErrValidation", err)
	}
	badNumber := map[string]types.AttributeValue{"l_rpm_cp": &types.AttributeValueMemberN{Value: "ten"}}
	if _, err := limitsFromItem(badNumber); err == nil {
		t.Error("limitsFromItem(bad number) succeeded, want error")
	}
	hugePeriod := map[string]types.AttributeValue{"l_rpm_cp": schemaN(1), "l_rpm_ra": schemaN(1), "l_rpm_rp": schemaN(math.MaxInt64)}
	if _, err := limitsFromItem(hugePeriod); err == nil {
		t.Error("limitsFromItem(huge period) succeeded, want error")
	}

	sys := map[string]types.AttributeValue{"audit_retention_days": schemaN(30)}
	if days, ok, err := auditRetentionDaysFromItem(sys); days != 30 || !ok || err != nil {
		t.Errorf("auditRetentionDaysFromItem = %d, %v, %v; want 30, true, nil", days, ok, err)
	}
}

func TestRegistries(t *testing.T) {
	t.Parallel()
	res := map[string]types.AttributeValue{
		"PK":        schemaS("ns/SYSTEM#"),
		"SK":        schemaS(skResources),
		"resources": &types.AttributeValueMemberSS{Value: []string{"gpt-4", "claude", "openai/gpt-4o"}},
	}
	if diff := cmp.Diff([]string{"claude", "gpt-4", "openai/gpt-4o"}, resourceRegistryFromItem(res)); diff != "" {
		t.Errorf("resourceRegistryFromItem (-want +got):\n%s", diff)
	}
	if got := resourceRegistryFromItem(nil); len(got) != 0 {
		t.Errorf("resourceRegistryFromItem(nil) = %v", got)
	}
	ec := map[string]types.AttributeValue{
		"PK":        schemaS("ns/SYSTEM#"),
		"SK":        schemaS(skEntityConfigResources),
		"GSI4PK":    schemaS("ns"),
		"GSI4SK":    schemaS("ns/SYSTEM#"),
		"gpt-4":     schemaN(2),
		"_default_": schemaN(1),
		"claude":    schemaN(0),
		"old":       schemaN(-1),
		"openai/o1": schemaN(5),
	}
	got, err := entityConfigRegistryFromItem(ec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"_default_", "gpt-4", "openai/o1"}, got); diff != "" {
		t.Errorf("entityConfigRegistryFromItem (-want +got):\n%s", diff)
	}
}

func TestVersionRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 25, 12, 0, 1, 0, time.UTC)
	v := versionRecord{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", UpdatedBy: "client:0.1.0", UpdatedAt: at}
	item := versionItem(v)
	schemaCheckItem(t, "version record", item, map[string]string{
		"PK":                 `S:"_/SYSTEM#"`,
		"SK":                 `S:"#VERSION"`,
		"schema_version":     `S:"0.10.0"`,
		"client_min_version": `S:"0.0.0"`,
		"updated_at":         `S:"2026-06-25T12:00:01Z"`,
		"lambda_version":     `NULL:true`,
		"updated_by":         `S:"client:0.1.0"`,
		"GSI4PK":             `S:"_"`,
		"GSI4SK":             `S:"_/SYSTEM#"`,
	})
	if diff := cmp.Diff(v, versionFromItem(item)); diff != "" {
		t.Errorf("version round trip (-want +got):\n%s", diff)
	}
	item[attrTemplateVersion] = schemaS("0.9.0")
	item[attrLambdaVersion] = schemaS("0.10.3")
	got := versionFromItem(item)
	if got.TemplateVersion != "0.9.0" || got.LambdaVersion != "0.10.3" {
		t.Errorf("versionFromItem = %+v", got)
	}
}

func TestNamespaceRecords(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	r := namespaceRecord{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: namespaceActive, CreatedAt: created}
	fwd := namespaceForwardItem(r)
	schemaCheckItem(t, "forward", fwd, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NAMESPACE#tenant-a"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"active"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	deleted := r
	deleted.Status = namespaceDeleted
	deleted.DeletedAt = created.Add(time.Hour)
	rev := namespaceReverseItem(deleted)
	schemaCheckItem(t, "reverse", rev, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NSID#E9P6iV0e9iQ"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"deleted"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"deleted_at":     `S:"2026-03-01T09:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	if _, ok := namespaceReverseItem(r)[attrDeletedAt]; ok {
		t.Error("active reverse record has deleted_at")
	}
	if diff := cmp.Diff(r, namespaceFromItem(fwd)); diff != "" {
		t.Errorf("forward round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(deleted, namespaceFromItem(rev)); diff != "" {
		t.Errorf("reverse round trip (-want +got):\n%s", diff)
	}
}

func TestAuditItem(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := AuditEvent{
		EventID:   "01M812K98TDJXJ05Q7ZQETE6EN",
		Timestamp: ts,
		Action:    AuditEntityCreated,
		EntityID:  "C",
		Principal: "arn:aws:iam::123456789012:user/alice",
		Details: map[string]any{
			"name":      "C",
			"parent_id": nil,
			"cascade":   true,
			"metadata":  map[string]string{"tier": "gold"},
			"count":     3,
			"ratio":     1.5,
			"whole":     2.0,
			"mode":      OnUnavailableAllow,
			"limits":    []Limit{PerMinute("rpm", 100)},
			"names":     []string{"rpm", "tpm"},
			"when":      ts,                        // unsupported in a map: dropped
			"mixed":     []any{"a", int64(-7), ts}, // unsupported in a list: stringified
		},
	}
	ttl := ttlEpochSeconds(ts.UnixMilli(), 90*86400)
	item, err := auditItem("ns", e, ttl)
	if err != nil {
		t.Fatal(err)
	}
	schemaCheckItem(t, "audit", item, map[string]string{
		"PK":        `S:"ns/AUDIT#C"`,
		"SK":        `S:"#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"`,
		"entity_id": `S:"C"`,
		"event_id":  `S:"01M812K98TDJXJ05Q7ZQETE6EN"`,
		"timestamp": `S:"2026-01-02T03:04:05Z"`,
		"action":    `S:"entity_created"`,
		"principal": `S:"arn:aws:iam::123456789012:user/alice"`,
		"resource":  `NULL:true`,
		"details": `M:{cascade=BOOL:true, count=N:3, limits=L:[M:{capacity=N:100, name=S:"rpm", refill_amount=N:100, refill_period_seconds=N:60}], ` +
			`metadata=M:{tier=S:"gold"}, mixed=L:[S:"a", N:-7, S:"2026-01-02 03:04:05 +0000 UTC"], mode=S:"allow", name=S:"C", ` +
			`names=L:[S:"rpm", S:"tpm"], parent_id=NULL:true, ratio=N:1.5, whole=N:2.0}`,
		"ttl":    `N:1775099045`,
		"GSI4PK": `S:"ns"`,
		"GSI4SK": `S:"ns/AUDIT#C"`,
	})

	got, ok, err := auditEventFromItem(item)
	if err != nil || !ok {
		t.Fatalf("auditEventFromItem = %v, %v", ok, err)
	}
	want := e
	want.Details = map[string]any{
		"name":      "C",
		"parent_id": nil,
		"cascade":   true,
		"metadata":  map[string]any{"tier": "gold"},
		"count":     int64(3),
		"ratio":     1.5,
		"whole":     2.0,
		"mode":      "allow",
		"limits":    []any{map[string]any{"name": "rpm", "capacity": int64(100), "refill_amount": int64(100), "refill_period_seconds": int64(60)}},
		"names":     []any{"rpm", "tpm"},
		"mixed":     []any{"a", int64(-7), "2026-01-02 03:04:05 +0000 UTC"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit round trip (-want +got):\n%s", diff)
	}

	// Minimal event: no principal, resource-scoped, nil details.
	minimal := AuditEvent{EventID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Timestamp: ts, Action: AuditLimitsDeleted, EntityID: auditEntityResource("gpt-4"), Resource: "gpt-4"}
	item, err = auditItem("ns", minimal, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := schemaAVText(item[attrPrincipal]) + " " + schemaAVText(item[attrDetails]); got != "NULL:true M:{}" {
		t.Errorf("principal/details = %s", got)
	}
	got, ok, err = auditEventFromItem(item)
	minimal.Details = map[string]any{}
	if diff := cmp.Diff(minimal, got); err != nil || !ok || diff != "" {
		t.Errorf("minimal audit round trip (ok=%v err=%v) (-want +got):\n%s", ok, err, diff)
	}

	if _, err := auditItem("ns", AuditEvent{Details: map[string]any{"x": math.NaN()}}, 0); err == nil {
		t.Error("auditItem(NaN) succeeded, want error")
	}
	if _, ok, err := auditEventFromItem(map[string]types.AttributeValue{"event_id": schemaS("x")}); ok || err != nil {
		t.Errorf("auditEventFromItem(no action) = %v, %v; want skipped", ok, err)
	}
	bad := map[string]types.AttributeValue{"action": schemaS("a"), "details": &types.AttributeValueMemberM{
		Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "x"}}}}
	if _, _, err := auditEventFromItem(bad); err == nil {
		t.Error("auditEventFromItem(bad number) succeeded, want error")
	}
}

func TestUsageSnapshotItems(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"PK":           schemaS("ns/ENTITY#e-1"),
		"SK":           schemaS("#USAGE#openai/gpt-4#2024-02-01T00:00:00Z"),
		"entity_id":    schemaS("e-1"),
		"resource":     schemaS("openai/gpt-4"),
		"window":       schemaS("monthly"),
		"window_start": schemaS("2024-02-01T00:00:00Z"),
		"GSI2PK":       schemaS("ns/RESOURCE#openai/gpt-4"),
		"GSI2SK":       schemaS("USAGE#2024-02-01T00:00:00Z#e-1"),
		"GSI4PK":       schemaS("ns"),
		"GSI4SK":       schemaS("ns/ENTITY#e-1"),
		"ttl":          schemaN(1714521600),
		"rpm":          schemaN(12),
		"tpm":          schemaN(-3),
		"total_events": schemaN(7),
	}
	got, ok, err := usageSnapshotFromItem(item)
	if err != nil || !ok {
		t.Fatalf("usageSnapshotFromItem = %v, %v", ok, err)
	}
	want := UsageSnapshot{
		EntityID: "e-1", Resource: "openai/gpt-4", WindowType: WindowMonthly,
		WindowStart: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowEnd:   time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		Counters:    map[string]int64{"rpm": 12, "tpm": -3},
		TotalEvents: 7,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usageSnapshotFromItem (-want +got):\n%s", diff)
	}
	schemaCheckItem(t, "usage snapshot", usageSnapshotItem("ns", want, 1714521600), schemaItemText(item))

	for _, tc := range []struct {
		name string
		drop string
		set  types.AttributeValue
	}{
		{name: "no entity_id", drop: "entity_id"},
		{name: "no resource", drop: "resource"},
		{name: "no window_start", drop: "window_start"},
		{name: "unparsable window_start", drop: "window_start", set: schemaS("yesterday")},
	} {
		it := make(map[string]types.AttributeValue, len(item))
		for k, v := range item {
			it[k] = v
		}
		delete(it, tc.drop)
		if tc.set != nil {
			it[tc.drop] = tc.set
		}
		if _, ok, err := usageSnapshotFromItem(it); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want skipped", tc.name, ok, err)
		}
	}
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	if _, _, err := usageSnapshotFromItem(item); err == nil {
		t.Error("usageSnapshotFromItem(fractional counter) succeeded, want error")
	}
}

func TestWindowKey(t *testing.T) {
	t.Parallel()
	ms := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, tc := range []struct {
		at                     string
		hourly, daily, monthly string
	}{
		{"2024-03-10T14:35:12.345Z", "2024-03-10T14:00:00Z", "2024-03-10T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-10T23:59:59.999Z", "2024-03-10T23:00:00Z", "2024-03-10T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-11T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2023-12-31T23:59:59.999Z", "2023-12-31T23:00:00Z", "2023-12-31T00:00:00Z", "2023-12-01T00:00:00Z"},
		{"2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"},
		{"2024-02-29T12:00:00Z", "2024-02-29T12:00:00Z", "2024-02-29T00:00:00Z", "2024-02-01T00:00:00Z"},
		// Local times are converted to UTC first.
		{"2024-01-01T03:30:00+05:00", "2023-12-31T22:00:00Z", "2023-12-31T00:00:00Z", "2023-12-01T00:00:00Z"},
	} {
		at := ms(tc.at)
		for _, w := range []struct{ window, want string }{
			{WindowHourly, tc.hourly}, {WindowDaily, tc.daily}, {WindowMonthly, tc.monthly},
		} {
			got, err := windowKey(w.window, at)
			if err != nil || got != w.want {
				t.Errorf("windowKey(%s, %s) = %q, %v; want %q", w.window, tc.at, got, err, w.want)
			}
		}
	}
	if _, err := windowKey("weekly", time.Unix(0, 0)); err == nil || err.Error() != "unknown window type: weekly" {
		t.Errorf("windowKey(weekly) error = %v", err)
	}
	if got, _ := windowKey(WindowHourly, time.UnixMilli(1767225600123)); got != "2026-01-01T00:00:00Z" {
		t.Errorf("windowKey from epoch ms = %q", got)
	}
}

func TestWindowEnd(t *testing.T) {
	t.Parallel()
	d := func(y int, m time.Month, day, h, mi, s int) time.Time {
		return time.Date(y, m, day, h, mi, s, 0, time.UTC)
	}
	for _, tc := range []struct {
		window string
		start  time.Time
		want   time.Time
	}{
		{WindowHourly, d(2024, 3, 10, 14, 0, 0), d(2024, 3, 10, 14, 59, 59)},
		{WindowHourly, d(2023, 12, 31, 23, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowDaily, d(2024, 3, 10, 0, 0, 0), d(2024, 3, 10, 23, 59, 59)},
		{WindowDaily, d(2023, 12, 31, 0, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowMonthly, d(2023, 12, 1, 0, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowMonthly, d(2024, 2, 1, 0, 0, 0), d(2024, 2, 29, 23, 59, 59)},
		{WindowMonthly, d(2023, 2, 1, 0, 0, 0), d(2023, 2, 28, 23, 59, 59)},
		{WindowMonthly, d(2024, 4, 1, 0, 0, 0), d(2024, 4, 30, 23, 59, 59)},
		// The original keeps the start's time of day before subtracting 1 s.
		{WindowMonthly, d(2024, 1, 1, 10, 0, 0), d(2024, 2, 1, 9, 59, 59)},
		{"weekly", d(2024, 3, 10, 14, 0, 0), d(2024, 3, 10, 14, 0, 0)},
	} {
		if got := windowEnd(tc.window, tc.start); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("windowEnd(%s, %s) = %s, want %s", tc.window, tc.start, got, tc.want)
		}
	}
}

func TestISOSeconds(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", -5*3600))
	if got := formatISOSeconds(local); got != "2026-01-02T08:04:05Z" {
		t.Errorf("formatISOSeconds = %q", got)
	}
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T08:04:05Z", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T09:04:05+01:00", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T08:04:05.25Z", time.Date(2026, 1, 2, 8, 4, 5, 250_000_000, time.UTC)},
	} {
		got, err := parseISOSeconds(tc.in)
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("parseISOSeconds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseISOSeconds("2026-01-02"); err == nil {
		t.Error("parseISOSeconds(date only) succeeded, want error")
	}
}

// schemaRepeatReader returns b forever.
type schemaRepeatReader struct{ b byte }

func (r schemaRepeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.b
	}
	return len(p), nil
}

func TestNewNamespaceID(t *testing.T) {
	t.Parallel()
	alphabet := regexp.MustCompile(`\A[A-Za-z0-9_-]{11}\z`)
	seen := map[string]bool{}
	for range 200 {
		id, err := newNamespaceID(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(id) || id[0] == '-' {
			t.Fatalf("newNamespaceID() = %q, want 11 chars of [A-Za-z0-9_-] not starting with '-'", id)
		}
		seen[id] = true
	}
	if len(seen) < 200 {
		t.Errorf("newNamespaceID produced duplicates: %d distinct of 200", len(seen))
	}

	// The first 8 bytes encode to "-AAAAAAAAAA" and must be rejected.
	src := bytes.NewReader([]byte{0xF8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	id, err := newNamespaceID(src)
	if err != nil || id != "AAECAwQFBgc" {
		t.Errorf("newNamespaceID(leading '-' first) = %q, %v; want AAECAwQFBgc", id, err)
	}
	// Ids may start with '_'.
	if id, err := newNamespaceID(schemaRepeatReader{0xFC}); err != nil || id[0] != '_' {
		t.Errorf("newNamespaceID(0xFC...) = %q, %v; want leading '_'", id, err)
	}
	if _, err := newNamespaceID(schemaRepeatReader{0xF8}); err == nil {
		t.Error("newNamespaceID(always '-') succeeded, want error")
	}
	if _, err := newNamespaceID(bytes.NewReader([]byte{1, 2, 3})); err == nil {
		t.Error("newNamespaceID(short reader) succeeded, want error")
	}
}

func TestPrimaryKeys(t *testing.T) {
	t.Parallel()
	schemaCheckItem(t, "bucketPrimaryKey", bucketPrimaryKey("ns", "e", "openai/gpt-4", 1), map[string]string{
		"PK": `S:"ns/BUCKET#e#openai/gpt-4#1"`,
		"SK": `S:"#STATE"`,
	})
	names := discoverLimitNames(map[string]types.AttributeValue{
		"b_rpm_tc": schemaN(1), "b_a_b_tc": schemaN(1), "b_x_tk": schemaN(1), "b__tc": schemaN(1),
	}, bucketAttrPrefix, fieldTotalConsumed)
	if diff := cmp.Diff([]string{"a_b", "rpm"}, names); diff != "" {
		t.Errorf("discoverLimitNames (-want +got):\n%s", diff)
	}
}
