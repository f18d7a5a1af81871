package limiter

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// The item layouts are tested in internal/ddbschema; these tests check the
// conversions to and from this package's types.

func TestBucketItemRoundTrip(t *testing.T) {
	t.Parallel()
	wcuFull := store.BucketState{LimitName: wcuLimitName, TokensMilli: 1_000_000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000}
	wcuUsed := store.BucketState{LimitName: wcuLimitName, TokensMilli: 998000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000, TotalConsumedMilli: 2000}
	for _, tc := range []struct {
		name string
		b    store.Bucket
		// wantWCU is the wcu state expected back (LastRefillMs and
		// identity fields are filled in by the test).
		wantWCU store.BucketState
		// wantExact is the exact state of each limit in name order: the
		// item's fa, the time it is full (written by bucketItem).
		wantExact []exactState
	}{
		{
			name: "cascade child, wcu injected",
			b: store.Bucket{Key: store.BucketKey{EntityID: "C", Resource: "api"}, ShardCount: 1, RefillMs: 1767225600123, Cascade: true, ParentID: "P", TTL: 1767226020, States: []store.BucketState{
				{EntityID: "C", Resource: "api", LimitName: "rpm", TokensMilli: 9000, LastRefillMs: 1767225600123, CapacityMilli: 10000, RefillAmountMilli: 10000, RefillPeriodMs: 60000, TotalConsumedMilli: 1000},
			}},
			wantWCU:   wcuFull,
			wantExact: []exactState{{valid: true, fullAtMs: 1767225600123 + 6000}}, // 1 token at 10/min
		},
		{
			name: "shard, slash resource, no ttl, no parent, wcu given, negative tokens",
			b: store.Bucket{
				Key: store.BucketKey{EntityID: "user.name@example.com", Resource: "openai/gpt-4", Shard: 3}, ShardCount: 4, RefillMs: 1700000000000,
				States: []store.BucketState{
					{LimitName: "tpm", TokensMilli: -5000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 15_000},
					{LimitName: "my_limit", TokensMilli: 1, CapacityMilli: 2, RefillAmountMilli: 3, RefillPeriodMs: 4000},
				},
				Private: &itemExtras{wcu: &wcuUsed},
			},
			wantWCU: wcuUsed,
			wantExact: []exactState{
				{valid: true, fullAtMs: 1700000000000 + 1334},  // my_limit: 1 of 2 at 3 per 4 s
				{valid: true, fullAtMs: 1700000000000 + 60030}, // tpm: 10,005 tokens at 10,000/min
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const ns = "vG58F-ORDeU"
			item := bucketItem(ns, &tc.b)
			pk := schemaAVText(item[attrPK])
			assert.Equal(t, `S:"`+pkBucket(ns, tc.b.Key.EntityID, tc.b.Key.Resource, tc.b.Key.Shard)+`"`, pk, "PK = %s", pk)
			gotNS, got, err := bucketFromItem(item)
			require.NoError(t, err, "bucketFromItem: %v", err)
			assert.EqualValues(t, ns, gotNS, "namespace %q, want %q", gotNS, ns)
			fill := func(s store.BucketState) store.BucketState {
				s.EntityID, s.Resource, s.ShardID, s.LastRefillMs = tc.b.Key.EntityID, tc.b.Key.Resource, tc.b.Key.Shard, tc.b.RefillMs
				return s
			}
			want := tc.b
			wcu := fill(tc.wantWCU)
			want.Private = &itemExtras{wcu: &wcu, exact: tc.wantExact}
			want.States = nil
			for _, s := range tc.b.States {
				want.States = append(want.States, fill(s))
			}
			sort.Slice(want.States, func(i, j int) bool { return want.States[i].LimitName < want.States[j].LimitName })
			assert.Equal(t, &want, got, "round trip")
		})
	}

	// Read errors pass through.
	_, _, err := bucketFromItem(map[string]types.AttributeValue{"PK": schemaS("ns/ENTITY#e")})
	assert.Error(t, err, "bucketFromItem(entity PK) succeeded")
}

func TestEntityItemRoundTrip(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 999_000_000, time.FixedZone("X", 3600))
	for _, e := range []Entity{
		{ID: "C", ParentID: "P", Cascade: true, Metadata: map[string]string{"tier": "gold"}, CreatedAt: created},
		{ID: "P", Name: "Parent Org", CreatedAt: created},
	} {
		item := entityItem("ns1", e)
		pk, gsi1 := schemaAVText(item[attrPK]), item["GSI1PK"]
		assert.Equal(t, `S:"ns1/ENTITY#`+e.ID+`"`, pk, "%s: PK", e.ID)
		if e.ParentID != "" {
			assert.NotNil(t, gsi1, "%s: GSI1PK, want one for a child", e.ID)
		} else {
			assert.Nil(t, gsi1, "%s: GSI1PK, want none without a parent", e.ID)
		}
		got := entityFromItem(item)
		want := e
		if want.Name == "" {
			want.Name = want.ID
		}
		if want.Metadata == nil {
			want.Metadata = map[string]string{}
		}
		want.CreatedAt = time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)
		assert.Equal(t, want, got, "entity round trip")
	}
}

func TestConfigItems(t *testing.T) {
	t.Parallel()
	limits := []Limit{PerMinute("tpm", 10000), PerSecond("rps", 10).WithBurst(20), PerDay("req_per_day", 5)}
	schemaCheckItem(t, "resource config", resourceConfigItem("ns", "gpt-4", storeLimits(limits[1:2])), map[string]string{
		"PK":             `S:"ns/RESOURCE#gpt-4"`,
		"SK":             `S:"#CONFIG"`,
		"resource":       `S:"gpt-4"`,
		"config_version": `N:1`,
		"GSI4PK":         `S:"ns"`,
		"GSI4SK":         `S:"ns/RESOURCE#gpt-4"`,
		"l_rps_cp":       `N:20`,
		"l_rps_ra":       `N:10`,
		"l_rps_rp":       `N:1`,
	})

	sorted := []Limit{limits[2], limits[1], limits[0]} // req_per_day, rps, tpm
	for name, item := range map[string]map[string]types.AttributeValue{
		"entity":   entityConfigItem("ns", "e-1", DefaultResource, storeLimits(limits)),
		"resource": resourceConfigItem("ns", "r", storeLimits(limits)),
		"system":   systemConfigItem("ns", storeLimits(limits), OnUnavailableBlock),
	} {
		got, err := limitsFromItem(item)
		require.NoError(t, err, "%s: limitsFromItem: %v", name, err)
		assert.Equal(t, storeLimits(sorted), got, "%s limits round trip", name)
	}
	got := onUnavailableFromItem(systemConfigItem("ns", nil, OnUnavailableBlock))
	assert.EqualValues(t, OnUnavailableBlock, got, "onUnavailableFromItem = %q, want block", got)
	got = onUnavailableFromItem(systemConfigItem("ns", nil, ""))
	assert.EqualValues(t, "", got, "onUnavailableFromItem(unset) = %q, want empty", got)
	none, err := limitsFromItem(systemConfigItem("ns", nil, ""))
	assert.NoError(t, err, "limitsFromItem(no limits)")
	assert.NotNil(t, none, "limitsFromItem(no limits), want an empty slice")
	assert.Empty(t, none, "limitsFromItem(no limits)")

	// Incomplete or invalid stored limits fail like the original's Limit().
	incomplete := map[string]types.AttributeValue{"l_rpm_cp": schemaN(10), "l_rpm_ra": schemaN(10)}
	_, err = limitsFromItem(incomplete)
	assert.ErrorIs(t, err, ErrValidation, "limitsFromItem(missing rp) error = %v, want ErrValidation", err)
	badNumber := map[string]types.AttributeValue{"l_rpm_cp": &types.AttributeValueMemberN{Value: "ten"}}
	_, err = limitsFromItem(badNumber)
	assert.Error(t, err, "limitsFromItem(bad number)")
	assert.NotErrorIs(t, err, ErrValidation, "limitsFromItem(bad number), want a non-validation error")
	hugePeriod := map[string]types.AttributeValue{"l_rpm_cp": schemaN(1), "l_rpm_ra": schemaN(1), "l_rpm_rp": schemaN(math.MaxInt64)}
	_, err = limitsFromItem(hugePeriod)
	assert.EqualError(t, err, "config limit rpm: refill period 9223372036854775807 s out of range", "limitsFromItem(huge period)")
	// Limits are checked in name order: the first broken one is reported.
	two := map[string]types.AttributeValue{
		"l_a_cp": schemaN(0), "l_a_ra": schemaN(1), "l_a_rp": schemaN(1),
		"l_b_cp": &types.AttributeValueMemberN{Value: "x"},
	}
	_, err = limitsFromItem(two)
	assert.ErrorIs(t, err, ErrValidation, "limitsFromItem(a invalid, b malformed) = %v, want a's ErrValidation", err)

	res := map[string]types.AttributeValue{"resources": &types.AttributeValueMemberSS{Value: []string{"gpt-4", "claude"}}}
	assert.Equal(t, []string{"claude", "gpt-4"}, resourceRegistryFromItem(res), "resourceRegistryFromItem")
	ec := map[string]types.AttributeValue{"PK": schemaS("ns/SYSTEM#"), "SK": schemaS(skEntityConfigResources), "gpt-4": schemaN(2), "old": schemaN(0)}
	registry, err := entityConfigRegistryFromItem(ec)
	assert.NoError(t, err, "entityConfigRegistryFromItem")
	assert.Equal(t, []string{"gpt-4"}, registry, "entityConfigRegistryFromItem")
}
