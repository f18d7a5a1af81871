package limiter

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

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
