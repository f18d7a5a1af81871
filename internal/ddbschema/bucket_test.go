package ddbschema

import (
	"math"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The child bucket the first cascade acquire of a child "C" of parent "P"
// creates: one rpm limit with 1 of 10 tokens consumed, with its exact state
// (ts, fa, fp), and the hidden wcu limit full.
const (
	childNS = "1oUM39eGSNc"
	childT  = int64(1767225600123) // write time, ms
)

func childLimits() []BucketLimit {
	return []BucketLimit{{Name: "rpm", TokensMilli: 9000, CapacityMilli: 10000, RefillAmountMilli: 10000, RefillPeriodMs: 60000, TotalConsumedMilli: 1000}}
}

func TestBucketItemCascadeChild(t *testing.T) {
	t.Parallel()
	child := BucketItem(Bucket{
		Namespace: childNS, EntityID: "C", Resource: "api", Shard: 0, ShardCount: 1, RefillMs: childT,
		Cascade: true, ParentID: "P", TTL: TTLEpochSeconds(childT, 420), Limits: childLimits(),
	})
	checkItem(t, "child bucket", child, map[string]string{
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
		"b_rpm_ts":    `N:9000`,
		"b_rpm_fa":    `N:1767225606123`, // 1 token at 10/min: 6 s
		"b_rpm_fp":    `N:10000000000000100000000060000`,
	})

	// The parent item: same shape, cascade false, no parent_id, and a
	// zero shard count written as 1.
	parent := BucketItem(Bucket{
		Namespace: childNS, EntityID: "P", Resource: "api", RefillMs: childT, TTL: TTLEpochSeconds(childT, 420), Limits: childLimits(),
	})
	checkItem(t, "parent bucket", parent, map[string]string{
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
		"b_rpm_ts":    `N:9000`,
		"b_rpm_fa":    `N:1767225606123`, // 1 token at 10/min: 6 s
		"b_rpm_fp":    `N:10000000000000100000000060000`,
	})
}

// exact returns l with the exact state BucketItem writes: ts = tk, fa and
// fp as given.
func exact(l BucketLimit, fullAtMs int64, sig string) BucketLimit {
	l.ShadowMilli, l.HasShadow, l.FullAtMs, l.HasFullAt, l.ParamsSig = l.TokensMilli, true, fullAtMs, true, sig
	return l
}

func TestBucketRoundTrip(t *testing.T) {
	t.Parallel()
	givenWCU := BucketLimit{Name: WCULimitName, TokensMilli: 998000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, TotalConsumedMilli: 2000}
	for _, tc := range []struct {
		name string
		b    Bucket
		// want is b.Limits as read back: sorted, wcu included.
		want []BucketLimit
	}{
		{
			name: "cascade child",
			b:    Bucket{Namespace: "vG58F-ORDeU", EntityID: "C", Resource: "api", ShardCount: 1, RefillMs: childT, Cascade: true, ParentID: "P", TTL: 1767226020, Limits: childLimits()},
			want: []BucketLimit{
				exact(childLimits()[0], childT+6000, "10000000000000100000000060000"),
				WCUInitial(),
			},
		},
		{
			name: "shard, slash resource, no ttl, no parent, wcu given, negative tokens",
			b: Bucket{
				Namespace: "-AbC_12", EntityID: "user.name@example.com", Resource: "openai/gpt-4", Shard: 3, ShardCount: 4, RefillMs: 1700000000000,
				Limits: []BucketLimit{
					{Name: "tpm", TokensMilli: -5000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 15_000},
					{Name: "my_limit", TokensMilli: 1, CapacityMilli: 2, RefillAmountMilli: 3, RefillPeriodMs: 4000},
					givenWCU,
				},
			},
			want: []BucketLimit{
				exact(BucketLimit{Name: "my_limit", TokensMilli: 1, CapacityMilli: 2, RefillAmountMilli: 3, RefillPeriodMs: 4000}, 1700000001334, "2000000000000030000004000"),
				exact(BucketLimit{Name: "tpm", TokensMilli: -5000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 15_000},
					1700000060030, "10000000000000100000000000060000"),
				givenWCU,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			item := BucketItem(tc.b)
			require.NoError(t, CheckBucketTypes(item), "CheckBucketTypes")
			got, err := BucketFromItem(item)
			require.NoError(t, err, "BucketFromItem")
			want := tc.b
			want.Limits = tc.want
			assert.Equal(t, want, got, "round trip")
			for _, l := range got.Limits {
				assert.Equal(t, l.Name != WCULimitName, l.ExactValid(), "%s: ExactValid", l.Name)
			}
			l, ok := got.Limit(WCULimitName)
			require.True(t, ok, "Limit(wcu) = %+v, %v", l, ok)
			assert.Equal(t, want.Limits[len(want.Limits)-1], l, "Limit(wcu) = %+v, %v", l, ok)
			_, ok = got.Limit("missing")
			assert.False(t, ok, "Limit(missing) found")
		})
	}
}

func TestBucketFromItemLenient(t *testing.T) {
	t.Parallel()
	// A stub created by an ADD on a missing item: keys and tk/tc only.
	stub := map[string]types.AttributeValue{
		"PK":        S("ns/BUCKET#e-1#openai/gpt-4#2"),
		"SK":        S("#STATE"),
		"b_rpm_tk":  N(-3000),
		"b_rpm_tc":  N(3000),
		"b_rpm_cp":  S("not a number type"), // wrong type reads as absent
		"b__tk":     N(1),                   // empty limit name is ignored
		"b_tpm_cp":  N(5),                   // no tk: invisible
		"parent_id": Null(),
	}
	got, err := BucketFromItem(stub)
	require.NoError(t, err, "BucketFromItem(stub)")
	want := Bucket{
		Namespace: "ns", EntityID: "e-1", Resource: "openai/gpt-4", Shard: 2, ShardCount: 1,
		Limits: []BucketLimit{{Name: "rpm", TokensMilli: -3000, TotalConsumedMilli: 3000}},
	}
	assert.Equal(t, want, got, "stub")
	err = CheckBucketTypes(stub)
	require.Error(t, err, "CheckBucketTypes(stub), want the wrongly typed b_rpm_cp")
	assert.Contains(t, err.Error(), "b_rpm_cp", "CheckBucketTypes(stub), want the wrongly typed b_rpm_cp")

	for _, tc := range []struct {
		name, wantMsg string
		item          map[string]types.AttributeValue
	}{
		{"no PK", "Key has no namespace separator '/': ", map[string]types.AttributeValue{"SK": S("#STATE")}},
		{"not a bucket PK", "Not a bucket PK: ns/ENTITY#e", map[string]types.AttributeValue{"PK": S("ns/ENTITY#e")}},
		{"bad rf", `bucket ns/BUCKET#e#r#0: attribute rf: invalid integer "1.5"`, map[string]types.AttributeValue{"PK": S("ns/BUCKET#e#r#0"), "rf": &types.AttributeValueMemberN{Value: "1.5"}}},
		{"bad ttl", `bucket ns/BUCKET#e#r#0: attribute ttl: invalid integer "x"`, map[string]types.AttributeValue{"PK": S("ns/BUCKET#e#r#0"), "ttl": &types.AttributeValueMemberN{Value: "x"}}},
		{"bad tk", `bucket ns/BUCKET#e#r#0: attribute b_rpm_tk: invalid integer "1e3"`, map[string]types.AttributeValue{"PK": S("ns/BUCKET#e#r#0"), "b_rpm_tk": &types.AttributeValueMemberN{Value: "1e3"}}},
		{"huge shard_count", "bucket ns/BUCKET#e#r#0: shard_count 9223372036854775807 out of range", map[string]types.AttributeValue{"PK": S("ns/BUCKET#e#r#0"), "shard_count": N(math.MaxInt64)}},
	} {
		_, err := BucketFromItem(tc.item)
		assert.EqualError(t, err, tc.wantMsg, "BucketFromItem(%s), want %q", tc.name, tc.wantMsg)
	}
}

func TestCheckBucketTypes(t *testing.T) {
	t.Parallel()
	good := BucketItem(Bucket{Namespace: "ns", EntityID: "e", Resource: "r", ParentID: "p", TTL: 5, Limits: childLimits()})
	good["parent_id"] = Null() // NULL is a valid parent_id
	good["extra"] = &types.AttributeValueMemberSS{Value: []string{"any type"}}
	require.NoError(t, CheckBucketTypes(good), "CheckBucketTypes(good)")
	for attr, v := range map[string]types.AttributeValue{
		"rf":           S("1"),
		"shard_count":  S("1"),
		"ttl":          Bool(true),
		"b_rpm_tk":     S("9000"),
		"b_x_anything": S("x"),
		"PK":           N(1),
		"SK":           Null(),
		"entity_id":    N(1),
		"resource":     N(1),
		"GSI2PK":       N(1),
		"GSI3SK":       N(1),
		"GSI4SK":       N(1),
		"cascade":      S("true"),
		"parent_id":    N(1),
	} {
		item := make(map[string]types.AttributeValue, len(good))
		for k, gv := range good {
			item[k] = gv
		}
		item[attr] = v
		err := CheckBucketTypes(item)
		require.Error(t, err, "CheckBucketTypes with %s of type %T", attr, v)
		assert.True(t, strings.HasPrefix(err.Error(), "bucket attribute "+attr+": unexpected type "), "CheckBucketTypes with %s of type %T", attr, v)
	}
}
