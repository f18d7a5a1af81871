package limiter

import (
	"errors"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
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
