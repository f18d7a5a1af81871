package limiter

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
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
	assert.Equal(t, want, schemaItemText(got), "%s mismatch", name)
}

// TestSchemaAliases checks the names this package keeps for the layout
// against internal/ddbschema, where the layout and its tests live.
func TestSchemaAliases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"SchemaVersion", SchemaVersion, "0.10.0"},
		{"currentSchemaVersion", currentSchemaVersion, ddbschema.SchemaVersion},
		{"wcuLimitName", wcuLimitName, ddbschema.WCULimitName},
		{"wcuWriteCostMilli", wcuWriteCostMilli, 1000},
		{"WindowHourly", store.WindowHourly, ddbschema.WindowHourly},
		{"WindowDaily", store.WindowDaily, ddbschema.WindowDaily},
		{"WindowMonthly", store.WindowMonthly, ddbschema.WindowMonthly},
		{"DefaultNamespace", DefaultNamespace, ddbschema.DefaultNamespace},
		{"reservedNamespace", reservedNamespace, "_"},
		{"auditEntitySystem", auditEntitySystem, "$SYSTEM"},
		{"auditEntityResource", auditEntityResource("gpt-4"), "$RESOURCE:gpt-4"},
		{"pkBucket", pkBucket("ns", "e", "openai/gpt-4", 2), "ns/BUCKET#e#openai/gpt-4#2"},
		{"skConfig", skConfig(DefaultResource), "#CONFIG#_default_"},
		{"bucketAttr", bucketAttr("tpm-x", fieldTotalConsumed), "b_tpm-x_tc"},
		{"ttlEpochSeconds", ttlEpochSeconds(1767225600999, 420), int64(1767226020)},
		{"namespace statuses", namespaceActive + "," + namespaceDeleted + "," + namespacePurging, "active,deleted,purging"},
	} {
		assert.Equal(t, tc.want, tc.got, tc.name)
	}
}

func TestTableDefinitionGolden(t *testing.T) {
	t.Parallel()
	got, err := json.MarshalIndent(tableDefinition("zae-limiter"), "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "table_definition.golden.json")
	if schemaUpdateGolden() {
		err := os.MkdirAll("testdata", 0o755)
		require.NoError(t, err)
		err = os.WriteFile(path, got, 0o644)
		require.NoError(t, err)
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "%v (run go test -run TestTableDefinitionGolden -update)", err)
	assert.Equal(t, string(want), string(got), "tableDefinition mismatch with the golden file")
}

// TestTableDefinitionShape checks the parts of the table definition that the
// compatibility contract fixes, independently of the golden file.
func TestTableDefinitionShape(t *testing.T) {
	t.Parallel()
	in := TableDefinition("t")
	assert.Equal(t, "t", *in.TableName, "table name")
	assert.Equal(t, types.BillingModePayPerRequest, in.BillingMode, "billing mode")
	assert.Len(t, in.GlobalSecondaryIndexes, 4, "GSIs")
	assert.Len(t, in.LocalSecondaryIndexes, 5, "LSIs")
	ttl := ttlSpecification("t")
	assert.Equal(t, "t", *ttl.TableName, "ttlSpecification table")
	assert.Equal(t, "ttl", *ttl.TimeToLiveSpecification.AttributeName, "ttlSpecification attribute")
	assert.True(t, *ttl.TimeToLiveSpecification.Enabled, "ttlSpecification = %+v, want enabled", ttl.TimeToLiveSpecification)
}
