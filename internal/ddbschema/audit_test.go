package ddbschema

import (
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLimit stands for a struct that a DetailConverter knows.
type testLimit struct {
	Name     string
	Capacity int64
}

func convertTestLimit(v any) (any, bool) {
	if l, ok := v.(testLimit); ok {
		return map[string]any{"name": l.Name, "capacity": l.Capacity}, true
	}
	return nil, false
}

type mode string

func TestAuditItem(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := AuditEvent{
		EventID:   "01M812K98TDJXJ05Q7ZQETE6EN",
		Timestamp: ts,
		Action:    "entity_created",
		EntityID:  "C",
		Principal: "arn:aws:iam::123456789012:user/alice",
		Details: map[string]any{
			"name":      "C",
			"parent_id": nil,
			"cascade":   true,
			"metadata":  map[string]string{"tier": "gold"},
			"count":     3,
			"small":     uint8(7),
			"ratio":     1.5,
			"whole":     2.0,
			"tenth":     float32(0.1),
			"mode":      mode("allow"),
			"limits":    []testLimit{{"rpm", 100}},
			"plimit":    &testLimit{"tpm", 5},
			"names":     []string{"rpm", "tpm"},
			"pair":      [2]int{1, 2},
			"when":      ts,                        // unsupported in a map: dropped
			"bytes":     []byte("x"),               // unsupported: dropped
			"intkeys":   map[int]int{1: 2},         // unsupported: dropped
			"mixed":     []any{"a", int64(-7), ts}, // unsupported in a list: stringified
		},
	}
	item, err := AuditItem("ns", e, TTLEpochSeconds(ts.UnixMilli(), 90*86400), convertTestLimit)
	require.NoError(t, err)
	checkItem(t, "audit", item, map[string]string{
		"PK":        `S:"ns/AUDIT#C"`,
		"SK":        `S:"#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"`,
		"entity_id": `S:"C"`,
		"event_id":  `S:"01M812K98TDJXJ05Q7ZQETE6EN"`,
		"timestamp": `S:"2026-01-02T03:04:05Z"`,
		"action":    `S:"entity_created"`,
		"principal": `S:"arn:aws:iam::123456789012:user/alice"`,
		"resource":  `NULL:true`,
		"details": `M:{cascade=BOOL:true, count=N:3, limits=L:[M:{capacity=N:100, name=S:"rpm"}], ` +
			`metadata=M:{tier=S:"gold"}, mixed=L:[S:"a", N:-7, S:"2026-01-02 03:04:05 +0000 UTC"], mode=S:"allow", name=S:"C", ` +
			`names=L:[S:"rpm", S:"tpm"], pair=L:[N:1, N:2], parent_id=NULL:true, plimit=M:{capacity=N:5, name=S:"tpm"}, ` +
			`ratio=N:1.5, small=N:7, tenth=N:0.1, whole=N:2.0}`,
		"ttl":    `N:1775099045`,
		"GSI4PK": `S:"ns"`,
		"GSI4SK": `S:"ns/AUDIT#C"`,
	})

	got, ok, err := AuditEventFromItem(item)
	require.NoError(t, err, "AuditEventFromItem = %v", ok)
	require.True(t, ok, "AuditEventFromItem = %v", ok)
	want := e
	want.Details = map[string]any{
		"name":      "C",
		"parent_id": nil,
		"cascade":   true,
		"metadata":  map[string]any{"tier": "gold"},
		"count":     int64(3),
		"small":     int64(7),
		"ratio":     1.5,
		"whole":     2.0,
		"tenth":     0.1,
		"mode":      "allow",
		"limits":    []any{map[string]any{"name": "rpm", "capacity": int64(100)}},
		"plimit":    map[string]any{"name": "tpm", "capacity": int64(5)},
		"names":     []any{"rpm", "tpm"},
		"pair":      []any{int64(1), int64(2)},
		"mixed":     []any{"a", int64(-7), "2026-01-02 03:04:05 +0000 UTC"},
	}
	assert.Equal(t, want, got, "audit round trip")

	// Without a converter, structs are unsupported.
	item, err = AuditItem("ns", AuditEvent{Details: map[string]any{"l": testLimit{"x", 1}, "ls": []testLimit{{"x", 1}}}}, 1, nil)
	require.NoError(t, err)
	assert.Equal(t, `M:{ls=L:[S:"{x 1}"]}`, avText(item[AttrDetails]), "details without converter")

	// Minimal event: no principal, resource-scoped, nil details.
	minimal := AuditEvent{EventID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Timestamp: ts, Action: "limits_deleted", EntityID: "$RESOURCE:gpt-4", Resource: "gpt-4"}
	item, err = AuditItem("ns", minimal, 1, convertTestLimit)
	require.NoError(t, err)
	assert.Equal(t, `NULL:true M:{} S:"gpt-4"`, avText(item[AttrPrincipal])+" "+avText(item[AttrDetails])+" "+avText(item[AttrResource]), "principal/details/resource")
	got, ok, err = AuditEventFromItem(item)
	minimal.Details = map[string]any{}
	require.NoError(t, err, "minimal audit round trip (ok=%v)", ok)
	require.True(t, ok, "minimal audit round trip (ok=%v)", ok)
	assert.Equal(t, minimal, got, "minimal audit round trip (ok=%v)", ok)

	for _, bad := range []any{math.NaN(), math.Inf(1), []any{1.0, float32(math.Inf(-1))}} {
		_, err := AuditItem("ns", AuditEvent{EventID: "e1", Details: map[string]any{"x": bad}}, 0, nil)
		assert.Error(t, err, "AuditItem(%v) succeeded, want error", bad)
	}
	_, ok, err = AuditEventFromItem(map[string]types.AttributeValue{"event_id": S("x")})
	require.False(t, ok, "AuditEventFromItem(no action) = %v; want skipped", ok)
	require.NoError(t, err, "AuditEventFromItem(no action) = %v; want skipped", ok)
	bad := map[string]types.AttributeValue{"action": S("a"), "event_id": S("E"), "details": &types.AttributeValueMemberM{
		Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "x"}}}}
	_, _, err = AuditEventFromItem(bad)
	assert.EqualError(t, err, `audit event E details n: invalid number "x"`, "AuditEventFromItem(bad number)")
	nums := map[string]types.AttributeValue{"action": S("a"), "timestamp": S("garbage"), "details": &types.AttributeValueMemberM{
		Value: map[string]types.AttributeValue{
			"big": &types.AttributeValueMemberN{Value: "99999999999999999999"}, "exp": &types.AttributeValueMemberN{Value: "1E3"},
			"set": &types.AttributeValueMemberSS{Value: []string{"a"}}, "null": Null(),
		}}}
	got, ok, err = AuditEventFromItem(nums)
	wantNums := AuditEvent{Action: "a", Details: map[string]any{"big": 1e20, "exp": 1000.0, "set": nil, "null": nil}}
	require.NoError(t, err, "numbers (ok=%v)", ok)
	require.True(t, ok, "numbers (ok=%v)", ok)
	assert.Equal(t, wantNums, got, "numbers (ok=%v)", ok)
}
