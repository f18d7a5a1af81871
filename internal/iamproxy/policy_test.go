package iamproxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/infra"
)

func TestWildcardMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"abc/*", "abc/ENTITY#x", true},
		{"abc/*", "abc/", true},
		{"abc/*", "abcd/ENTITY#x", false},
		{"abc/*", "ab/c", false},
		{"_/*", "_/SYSTEM#", true},
		{"_/*", "x_/SYSTEM#", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"arn:aws:dynamodb:*:table/t/index/*", "arn:aws:dynamodb:us-east-1:1:table/t/index/GSI1", true},
		{"arn:aws:dynamodb:us-east-1:1:table/t", "arn:aws:dynamodb:us-east-1:1:table/t/index/GSI1", false},
		{"[a]", "[a]", true},
	} {
		assert.Equal(t, c.want, wildcardMatch(c.pattern, c.s), "%q ~ %q", c.pattern, c.s)
	}
}

func TestForAllValuesOnEmptySet(t *testing.T) {
	// ForAllValues over no values holds: an operation that names no key
	// (Scan, DescribeTable) passes the condition and is decided by its
	// action alone.
	assert.True(t, condition("ForAllValues:StringLike", []string{"a/*"}, nil))
	assert.False(t, condition("ForAllValues:StringLike", []string{"a/*"}, []string{"a/x", "b/x"}))
	assert.True(t, condition("ForAllValues:StringLike", []string{"a/*", "_/*"}, []string{"a/x", "_/x"}))
	assert.False(t, condition("StringLike", []string{"a/*"}, nil))
	assert.False(t, condition("ForAnyValue:StringLike", []string{"a/*"}, []string{"a/x"}), "unknown operators never hold")
}

func TestTemplatePolicies(t *testing.T) {
	st := Stack{Name: "my-app"}
	tpl, err := ParseTemplate(infra.Template(), st)
	require.NoError(t, err)
	arn := st.TableARN()
	require.Equal(t, "arn:aws:dynamodb:us-east-1:123456789012:table/my-app", arn)

	acq, err := tpl.Policy("NamespaceAcquirePolicy")
	require.NoError(t, err)
	pr := Principal{Tags: map[string]string{"zael_namespace_id": "nsA"}, Policies: []Policy{acq}}
	untagged := Principal{Policies: []Policy{acq}}
	for _, c := range []struct {
		r    Request
		want bool
	}{
		{Request{"dynamodb:UpdateItem", arn, []string{"nsA/BUCKET#k#gpt#0"}}, true},
		{Request{"dynamodb:PutItem", arn, []string{"nsA/BUCKET#k#gpt#0"}}, true},
		{Request{"dynamodb:UpdateItem", arn, []string{"nsB/BUCKET#k#gpt#0"}}, false},
		{Request{"dynamodb:GetItem", arn, []string{"_/SYSTEM#"}}, true},
		{Request{"dynamodb:UpdateItem", arn, []string{"_/SYSTEM#"}}, false},
		{Request{"dynamodb:BatchGetItem", arn, []string{"nsA/x", "nsB/x"}}, false},
		{Request{"dynamodb:Query", arn + "/index/GSI2", []string{"nsA/RESOURCE#gpt"}}, true},
		{Request{"dynamodb:Query", arn + "/index/GSI4", []string{"nsA"}}, false},
		{Request{"dynamodb:DeleteItem", arn, []string{"nsA/x"}}, false},
		{Request{"dynamodb:Scan", arn, nil}, false},
		{Request{"dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/other", []string{"nsA/x"}}, false},
	} {
		assert.Equal(t, c.want, pr.Allowed(c.r), "%+v", c.r)
	}
	assert.False(t, untagged.Allowed(Request{"dynamodb:UpdateItem", arn, []string{"/x"}}), "an untagged principal reaches nothing of a namespace")

	hk, err := tpl.IndexHashKeys("RateLimitsTable")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"": "PK", "GSI1": "GSI1PK", "GSI2": "GSI2PK", "GSI3": "GSI3PK", "GSI4": "GSI4PK",
		"LSI1": "PK", "LSI2": "PK", "LSI3": "PK", "LSI4": "PK", "LSI5": "PK"}, hk)
}

func TestQueryKey(t *testing.T) {
	p := &Proxy{hashKeys: map[string]string{"": "PK", "GSI2": "GSI2PK"}}
	s := func(v string) attributeValue { return attributeValue{S: &v} }
	in := request{IndexName: "GSI2", KeyConditionExpression: "#p = :p AND begins_with(#s, :s)",
		ExpressionAttributeNames:  map[string]string{"#p": "GSI2PK", "#s": "GSI2SK"},
		ExpressionAttributeValues: item{":p": s("ns/RESOURCE#r"), ":s": s("USAGE#")}}
	k, err := p.queryKey(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/RESOURCE#r"}, k)
	in = request{KeyConditionExpression: "(:v = PK)", ExpressionAttributeValues: item{":v": s("ns/AUDIT#e")}}
	k, err = p.queryKey(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/AUDIT#e"}, k)
	_, err = p.queryKey(request{IndexName: "GSI9"})
	assert.Error(t, err)
}
