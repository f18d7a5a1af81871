package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/aggregator"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/skiplog"
)

// cfnValue converts a YAML node of a CloudFormation template into plain Go
// values, short-form intrinsics (!Ref X, !Sub s, !GetAtt A.B, !If [...])
// becoming their long form ({"Ref": X}, {"Fn::Sub": s}, ...).
func cfnValue(t *testing.T, n *yaml.Node) any {
	t.Helper()
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return cfnValue(t, n.Content[0])
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			m[n.Content[i].Value] = cfnValue(t, n.Content[i+1])
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = cfnValue(t, c)
		}
		v = s
	case yaml.ScalarNode:
		if custom := strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"); custom || n.Decode(&v) != nil {
			v = n.Value
		}
	case yaml.AliasNode:
		return cfnValue(t, n.Alias)
	}
	if tag := n.Tag; strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		switch tag {
		case "!Ref":
			return map[string]any{"Ref": v}
		case "!GetAtt":
			if s, ok := v.(string); ok {
				a, b, _ := strings.Cut(s, ".")
				v = []any{a, b}
			}
			return map[string]any{"Fn::GetAtt": v}
		default:
			return map[string]any{"Fn::" + tag[1:]: v}
		}
	}
	return v
}

func parseTemplate(t *testing.T) map[string]any {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(Template(), &doc), "parse template")
	m, ok := cfnValue(t, &doc).(map[string]any)
	require.True(t, ok, "template is not a mapping")
	return m
}

// path walks maps by key; it fails the test when a key is missing.
func path[T any](t *testing.T, v any, keys ...string) T {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "at %q: not a mapping: %#v", k, v)
		v, ok = m[k]
		require.True(t, ok, "no %q in %v", k, slices.Sorted(maps.Keys(m)))
	}
	r, ok := v.(T)
	require.True(t, ok, "%v: %T, want %T", keys, v, r)
	return r
}

// tableShape is what the template, the schema and DescribeTable must agree
// on.
type tableShape struct {
	Attributes    map[string]string // name → type
	Keys          []string          // "NAME HASH", "NAME RANGE"
	GSIs, LSIs    map[string]index
	StreamEnabled bool
	StreamView    string
	BillingMode   string
}

type index struct {
	Keys       []string
	Projection string
}

func keyList(ks []ddbtypes.KeySchemaElement) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = aws.ToString(k.AttributeName) + " " + string(k.KeyType)
	}
	return out
}

func shapeOfSchema(in *dynamodb.CreateTableInput) tableShape {
	s := tableShape{
		Attributes: map[string]string{}, Keys: keyList(in.KeySchema),
		GSIs: map[string]index{}, LSIs: map[string]index{},
		StreamEnabled: aws.ToBool(in.StreamSpecification.StreamEnabled),
		StreamView:    string(in.StreamSpecification.StreamViewType),
		BillingMode:   string(in.BillingMode),
	}
	for _, a := range in.AttributeDefinitions {
		s.Attributes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	for _, g := range in.GlobalSecondaryIndexes {
		s.GSIs[aws.ToString(g.IndexName)] = index{keyList(g.KeySchema), string(g.Projection.ProjectionType)}
	}
	for _, l := range in.LocalSecondaryIndexes {
		s.LSIs[aws.ToString(l.IndexName)] = index{keyList(l.KeySchema), string(l.Projection.ProjectionType)}
	}
	return s
}

func shapeOfDescription(td *ddbtypes.TableDescription) tableShape {
	s := tableShape{
		Attributes: map[string]string{}, Keys: keyList(td.KeySchema),
		GSIs: map[string]index{}, LSIs: map[string]index{},
	}
	if td.StreamSpecification != nil {
		s.StreamEnabled = aws.ToBool(td.StreamSpecification.StreamEnabled)
		s.StreamView = string(td.StreamSpecification.StreamViewType)
	}
	if td.BillingModeSummary != nil {
		s.BillingMode = string(td.BillingModeSummary.BillingMode)
	}
	for _, a := range td.AttributeDefinitions {
		s.Attributes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	for _, g := range td.GlobalSecondaryIndexes {
		s.GSIs[aws.ToString(g.IndexName)] = index{keyList(g.KeySchema), string(g.Projection.ProjectionType)}
	}
	for _, l := range td.LocalSecondaryIndexes {
		s.LSIs[aws.ToString(l.IndexName)] = index{keyList(l.KeySchema), string(l.Projection.ProjectionType)}
	}
	return s
}

func shapeOfTemplate(t *testing.T, props map[string]any) tableShape {
	t.Helper()
	keys := func(v []any) []string {
		out := make([]string, len(v))
		for i, k := range v {
			out[i] = path[string](t, k, "AttributeName") + " " + path[string](t, k, "KeyType")
		}
		return out
	}
	indexes := func(name string) map[string]index {
		out := map[string]index{}
		for _, ix := range path[[]any](t, props, name) {
			out[path[string](t, ix, "IndexName")] = index{
				Keys:       keys(path[[]any](t, ix, "KeySchema")),
				Projection: path[string](t, ix, "Projection", "ProjectionType"),
			}
		}
		return out
	}
	s := tableShape{
		Attributes: map[string]string{},
		Keys:       keys(path[[]any](t, props, "KeySchema")),
		GSIs:       indexes("GlobalSecondaryIndexes"),
		LSIs:       indexes("LocalSecondaryIndexes"),
		// CloudFormation enables the stream whenever StreamSpecification
		// is present.
		StreamEnabled: true,
		StreamView:    path[string](t, props, "StreamSpecification", "StreamViewType"),
		BillingMode:   path[string](t, props, "BillingMode"),
	}
	for _, a := range path[[]any](t, props, "AttributeDefinitions") {
		s.Attributes[path[string](t, a, "AttributeName")] = path[string](t, a, "AttributeType")
	}
	return s
}

// TestTemplateTableMatchesSchema keeps the template's table equal to
// limiter.TableDefinition (schema.go).
func TestTemplateTableMatchesSchema(t *testing.T) {
	tpl := parseTemplate(t)
	table := path[map[string]any](t, tpl, "Resources", "RateLimitsTable")
	got := path[string](t, table, "Type")
	require.Equal(t, "AWS::DynamoDB::Table", got, "RateLimitsTable type %q", got)
	props := path[map[string]any](t, table, "Properties")
	want := shapeOfSchema(limiter.TableDefinition("x"))
	assert.Equal(t, want, shapeOfTemplate(t, props), "template table differs from limiter.TableDefinition")
	assert.Equal(t, map[string]any{"Ref": "AWS::StackName"}, path[map[string]any](t, props, "TableName"), "TableName")
	assert.Equal(t, map[string]any{"AttributeName": "ttl", "Enabled": true}, path[map[string]any](t, props, "TimeToLiveSpecification"), "TimeToLiveSpecification")
	assert.True(t, path[bool](t, props, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"), "PITR not enabled")
}

// TestTemplateAggregatorFunction checks what the emulator cannot show:
// runtime, architecture, handler and the environment the aggregator reads.
func TestTemplateAggregatorFunction(t *testing.T) {
	tpl := parseTemplate(t)
	props := path[map[string]any](t, tpl, "Resources", "AggregatorFunction", "Properties")
	assert.Equal(t, "provided.al2023", path[string](t, props, "Runtime"), "Runtime")
	assert.Equal(t, []any{"arm64"}, path[[]any](t, props, "Architectures"), "Architectures")
	assert.Equal(t, "bootstrap", path[string](t, props, "Handler"), "Handler")
	assert.Equal(t, map[string]any{"Fn::Sub": "${AWS::StackName}-aggregator"}, path[map[string]any](t, props, "FunctionName"), "FunctionName")
	assert.NotContains(t, path[map[string]any](t, props, "Code"), "ZipFile", "Code.ZipFile: provided.al2023 takes code from S3 only")
	env := path[map[string]any](t, props, "Environment", "Variables")
	wantEnv := []string{aggregator.EnvArchiveBucket, aggregator.EnvEnableArchival, aggregator.EnvSnapshotTTLDays, aggregator.EnvSnapshotWindows, aggregator.EnvTableName}
	assert.Equal(t, wantEnv, slices.Sorted(maps.Keys(env)), "environment variables: exactly those aggregator.LoadConfig reads")
	esm := path[map[string]any](t, tpl, "Resources", "AggregatorEventSourceMapping", "Properties")
	assert.Equal(t, []any{"ReportBatchItemFailures"}, path[[]any](t, esm, "FunctionResponseTypes"), "FunctionResponseTypes")
}

// matchPattern evaluates the subset of Lambda event filtering the template
// uses: nested objects, lists of exact values and {"prefix": p}.
func matchPattern(pattern, event map[string]any) bool {
	for k, pv := range pattern {
		ev, ok := event[k]
		if !ok {
			return false
		}
		switch p := pv.(type) {
		case map[string]any:
			e, ok := ev.(map[string]any)
			if !ok || !matchPattern(p, e) {
				return false
			}
		case []any:
			s, ok := ev.(string)
			if !ok || !slices.ContainsFunc(p, func(alt any) bool {
				switch a := alt.(type) {
				case string:
					return a == s
				case map[string]any:
					prefix, ok := a["prefix"].(string)
					return ok && len(a) == 1 && strings.HasPrefix(s, prefix)
				}
				panic(fmt.Sprintf("unsupported filter element %#v", alt))
			}) {
				return false
			}
		default:
			panic(fmt.Sprintf("unsupported filter value %#v", pv))
		}
	}
	return true
}

// TestStreamFilterPassesWhatTheAggregatorNeeds checks the event source
// mapping's filter against stream records: it passes exactly the records the
// aggregator acts on — bucket writes, creations included, and removals of
// namespaced audit events (the original's filter matched audit keys starting
// with "AUDIT#", which namespaced keys "{ns}/AUDIT#…" never do, so expired
// audit events were never archived).
func TestStreamFilterPassesWhatTheAggregatorNeeds(t *testing.T) {
	esm := path[map[string]any](t, parseTemplate(t), "Resources", "AggregatorEventSourceMapping", "Properties")
	var patterns []map[string]any
	for _, f := range path[[]any](t, esm, "FilterCriteria", "Filters") {
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(path[string](t, f, "Pattern")), &p), "filter pattern")
		patterns = append(patterns, p)
	}
	record := func(event, image, pk, sk string) map[string]any {
		return map[string]any{"eventName": event, "dynamodb": map[string]any{
			image: map[string]any{"PK": map[string]any{"S": pk}, "SK": map[string]any{"S": sk}},
		}}
	}
	for _, tc := range []struct {
		name             string
		event, pk, sk    string
		image            string
		aggregatorWantIt bool
	}{
		{"bucket modify", "MODIFY", "a1b2/BUCKET#e1#gpt-4#0", "#STATE", "NewImage", true},
		{"bucket insert", "INSERT", "a1b2/BUCKET#e1#gpt-4#1", "#STATE", "NewImage", true},
		{"namespaced audit removed", "REMOVE", "a1b2/AUDIT#e1", "#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN", "OldImage", true},
		{"bucket removed", "REMOVE", "a1b2/BUCKET#e1#gpt-4#0", "#STATE", "OldImage", false},
		{"audit written", "INSERT", "a1b2/AUDIT#e1", "#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN", "NewImage", false},
		{"entity config", "MODIFY", "a1b2/ENTITY#e1", "#CONFIG#gpt-4", "NewImage", false},
		{"usage snapshot", "MODIFY", "a1b2/ENTITY#e1", "#USAGE#gpt-4#2026-01-01T00:00:00Z", "NewImage", false},
		{"legacy bucket", "MODIFY", "a1b2/ENTITY#e1", "#BUCKET#gpt-4", "NewImage", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record(tc.event, tc.image, tc.pk, tc.sk)
			got := slices.ContainsFunc(patterns, func(p map[string]any) bool { return matchPattern(p, rec) })
			// The aggregator's own view of the record, from the layout's key
			// predicates.
			acts := (tc.event != "REMOVE" && ddbschema.IsBucketKey(tc.pk, tc.sk)) ||
				(tc.event == "REMOVE" && ddbschema.IsAuditKey(tc.pk) && strings.HasPrefix(tc.sk, "#AUDIT#"))
			require.Equal(t, tc.aggregatorWantIt, acts, "test case: aggregator acts = %v, case says %v", acts, tc.aggregatorWantIt)
			assert.Equal(t, tc.aggregatorWantIt, got, "filter passes %s %s/%s = %v, want %v", tc.event, tc.pk, tc.sk, got, tc.aggregatorWantIt)
		})
	}
}

// TestTemplateParametersMatchOptions checks that StackOptions.Parameters
// and the deployer's code parameters name exactly the template's
// parameters.
func TestTemplateParametersMatchOptions(t *testing.T) {
	tpl := path[map[string]any](t, parseTemplate(t), "Parameters")
	p, err := DefaultStackOptions().Parameters("zae-limiter")
	require.NoError(t, err)
	got := slices.Sorted(maps.Keys(p))
	got = append(got, ParamCodeS3Bucket, ParamCodeS3Key, ParamProvisionerCodeS3Bucket, ParamProvisionerCodeS3Key)
	slices.Sort(got)
	assert.Equal(t, slices.Sorted(maps.Keys(tpl)), got, "parameters: the template's")
	for name, v := range p {
		def := path[map[string]any](t, tpl, name)
		if allowed, ok := def["AllowedValues"].([]any); ok {
			values := make([]string, len(allowed))
			for i, a := range allowed {
				values[i] = fmt.Sprint(a)
			}
			assert.Contains(t, values, v, "%s: the template's allowed values", name)
		}
	}
}

// TestTemplateCfnLint runs cfn-lint (installed with moto's server extra) on
// the template: no error and no warning but W1030, which flags the empty
// defaults of the code location parameters (empty only when the function
// is not deployed), and W1028, which flags the else-branch of the
// provisioner outputs' !If as unreachable (on CloudFormation it is, the
// outputs having the same condition; on moto, which resolves every output,
// it keeps a stack without the provisioner deployable).
func TestTemplateCfnLint(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("cfn-lint")
	if err != nil {
		msg := "cfn-lint not found (pip install 'moto[server]' installs it)"
		if os.Getenv("CI") == "true" || os.Getenv("ZAEL_REQUIRE_MOTO") == "1" {
			require.FailNow(t, msg)
		}
		skiplog.Skip(t, "cfn-lint", msg)
	}
	ctx := testContext(t)
	out, err := exec.CommandContext(ctx, bin, "--ignore-checks", "W1030", "--ignore-checks", "W1028", "--", "cfn_template.yaml").CombinedOutput()
	assert.NoError(t, err, "cfn-lint cfn_template.yaml:\n%s", out)
}

// TestTemplateNamespacePolicies checks the three namespace-scoped policies:
// named by their parameter (default {stack}-ns-*), condition
// ForAllValues:StringLike on dynamodb:LeadingKeys with the principal's
// zael_namespace_id tag, the shared items ("_/*") read-only in a statement
// of their own, and an exported
// output with each ARN. internal/iamproxy evaluates the same documents
// against DynamoDB Local.
func TestTemplateNamespacePolicies(t *testing.T) {
	tpl := parseTemplate(t)
	const own, shared = "${aws:PrincipalTag/zael_namespace_id}/*", "_/*"
	type stmt struct {
		Actions []string
		Keys    []any
	}
	for _, c := range []struct {
		logical, param, suffix string
		want                   []stmt
	}{
		{"NamespaceAcquirePolicy", "NamespaceAcquirePolicyName", "ns-acq", []stmt{
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem"}, []any{own}},
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, []any{shared}},
		}},
		{"NamespaceFullAccessPolicy", "NamespaceFullAccessPolicyName", "ns-full", []stmt{
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}, []any{own}},
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, []any{shared}},
		}},
		{"NamespaceReadOnlyPolicy", "NamespaceReadOnlyPolicyName", "ns-read", []stmt{
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, []any{own}},
			{[]string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}, []any{shared}},
		}},
	} {
		t.Run(c.logical, func(t *testing.T) {
			res := path[map[string]any](t, tpl, "Resources", c.logical)
			assert.Equal(t, "AWS::IAM::ManagedPolicy", res["Type"])
			assert.Equal(t, "WantIAM", res["Condition"])
			name := path[map[string]any](t, res, "Properties", "ManagedPolicyName")
			assert.Equal(t, []any{"Has" + c.param, map[string]any{"Ref": c.param}, map[string]any{"Fn::Sub": "${AWS::StackName}-" + c.suffix}}, name["Fn::If"])
			path[map[string]any](t, tpl, "Parameters", c.param)

			stmts := path[[]any](t, res, "Properties", "PolicyDocument", "Statement")
			require.Len(t, stmts, len(c.want))
			for i, raw := range stmts {
				s := raw.(map[string]any)
				assert.Equal(t, "Allow", s["Effect"])
				var actions []string
				for _, a := range s["Action"].([]any) {
					actions = append(actions, a.(string))
				}
				assert.Equal(t, c.want[i].Actions, actions, "statement %d", i)
				assert.Equal(t, []any{
					map[string]any{"Fn::GetAtt": []any{"RateLimitsTable", "Arn"}},
					map[string]any{"Fn::Sub": "${RateLimitsTable.Arn}/index/*"},
				}, s["Resource"])
				cond := path[map[string]any](t, s, "Condition")
				require.Len(t, cond, 1, "statement %d: one condition operator", i)
				assert.Equal(t, c.want[i].Keys, path[[]any](t, cond, "ForAllValues:StringLike", "dynamodb:LeadingKeys"), "statement %d", i)
			}

			out := path[map[string]any](t, tpl, "Outputs", c.logical+"Arn")
			assert.Equal(t, map[string]any{"Ref": c.logical}, out["Value"])
			assert.Equal(t, "WantIAM", out["Condition"])
			assert.Equal(t, map[string]any{"Fn::Sub": "${AWS::StackName}-" + c.logical + "Arn"}, path[map[string]any](t, out, "Export", "Name"))
		})
	}
}

// TestTemplateProvisionerTimeout: the provisioner Lambda's timeout is
// provisioner.FunctionTimeout, which `limits cfn-template` sizes manifests
// by.
func TestTemplateProvisionerTimeout(t *testing.T) {
	tpl := parseTemplate(t)
	timeout := path[int](t, tpl, "Resources", "ProvisionerFunction", "Properties", "Timeout")
	assert.Equal(t, provisioner.FunctionTimeout.Seconds(), float64(timeout))
}
