package limiter

import (
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// TestTableDefinitionOnDynamoDBLocal creates the table from tableDefinition,
// writes and reads back a composite bucket item, and checks that each GSI
// answers its access pattern: children via GSI1, resource buckets
// via GSI2, buckets of an entity via GSI3, namespace items via GSI4.
func TestTableDefinitionOnDynamoDBLocal(t *testing.T) {
	env := newTestEnvStreams(t, true) // CreateTable from tableDefinition, TTL enabled
	ctx, client, table := env.ctx, env.client, env.repo.Table()

	desc, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	n, m := len(desc.Table.GlobalSecondaryIndexes), len(desc.Table.LocalSecondaryIndexes)
	require.Equal(t, [2]int{4, 5}, [2]int{n, m}, "GSIs and LSIs of the table")
	s := desc.Table.StreamSpecification
	require.NotNil(t, s, "stream, want NEW_AND_OLD_IMAGES")
	require.True(t, aws.ToBool(s.StreamEnabled), "stream = %+v, want enabled", s)
	require.Equal(t, types.StreamViewTypeNewAndOldImages, s.StreamViewType, "stream view")
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	require.NoError(t, err, "DescribeTimeToLive")
	require.NotNil(t, ttl.TimeToLiveDescription, "TTL")
	require.Equal(t, "ttl", aws.ToString(ttl.TimeToLiveDescription.AttributeName), "TTL attribute")

	ns := "nsTEST00001"
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		require.NoError(t, err)
	}
	states := []store.BucketState{
		{LimitName: "rpm", TokensMilli: 9000, CapacityMilli: 10_000, RefillAmountMilli: 10_000, RefillPeriodMs: 60_000, TotalConsumedMilli: 1000},
		{LimitName: "tpm-x", TokensMilli: -1500, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 60_000},
	}
	spec := store.Bucket{Key: store.BucketKey{EntityID: "key-1", Resource: "openai/gpt-4"}, RefillMs: 1_700_000_000_123, Cascade: true, ParentID: "proj", TTL: 1_700_000_420, States: states}
	put(bucketItem(ns, &spec))
	spec2 := spec
	spec2.Key.Resource, spec2.Key.Shard, spec2.ShardCount = "claude", 1, 2
	put(bucketItem(ns, &spec2))
	other := spec
	other.Key.EntityID, other.Cascade, other.ParentID = "key-2", false, ""
	put(bucketItem(ns, &other))
	put(entityItem(ns, Entity{ID: "proj", Name: "proj"}))
	put(entityItem(ns, Entity{ID: "key-1", Name: "k1", ParentID: "proj", Cascade: true}))
	put(entityItem(ns, Entity{ID: "key-2", Name: "k2", ParentID: "proj"}))
	put(entityItem("otherNS0001", Entity{ID: "key-3", Name: "k3", ParentID: "proj"}))

	// Read back the composite item: every state round-trips.
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: bucketPrimaryKey(ns, "key-1", "openai/gpt-4", 0), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	gotNS, got, err := bucketFromItem(out.Item)
	require.NoError(t, err)
	require.Equal(t, ns, gotNS, "read back namespace")
	require.Equal(t, "key-1", got.Key.EntityID, "read back %+v", got)
	require.Equal(t, "openai/gpt-4", got.Key.Resource, "read back %+v", got)
	require.Equal(t, "proj", got.ParentID, "read back %+v", got)
	require.True(t, got.Cascade, "read back %+v, want cascade", got)
	require.Equal(t, spec.TTL, got.TTL, "read back %+v", got)
	var names []string
	for _, s := range got.States {
		names = append(names, s.LimitName)
		if s.LimitName == "tpm-x" {
			assert.EqualValues(t, -1500, s.TokensMilli, "tpm-x state %+v", s)
			assert.Equal(t, spec.RefillMs, s.LastRefillMs, "tpm-x state %+v", s)
		}
	}
	if wcu := wcuOf(got); assert.NotNil(t, wcu, "wcu state") {
		assert.Equal(t, wcu.CapacityMilli, wcu.TokensMilli, "wcu state %+v, want a full bucket", wcu)
	}
	assert.Equal(t, []string{"rpm", "tpm-x"}, names, "limits")

	query := func(index, pkAttr, pk, skAttr, skPrefix string) []string {
		t.Helper()
		cond := pkAttr + " = :pk"
		values := map[string]types.AttributeValue{":pk": schemaS(pk)}
		if skPrefix != "" {
			cond += " AND begins_with(" + skAttr + ", :sk)"
			values[":sk"] = schemaS(skPrefix)
		}
		items, err := env.repo.queryAll(ctx, &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String(index),
			KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: values})
		require.NoError(t, err, "query %s: %v", index, err)
		var keys []string
		for _, item := range items {
			pk, _ := schemaGetS(item, attrPK)
			sk, _ := schemaGetS(item, attrSK)
			keys = append(keys, pk+"|"+sk)
		}
		sort.Strings(keys)
		return keys
	}
	for _, tc := range []struct {
		name string
		got  []string
		want []string
	}{
		{"GSI1 children of proj", query(indexGSI1, ddbschema.AttrGSI1PK, gsi1PKParent(ns, "proj"), "", ""),
			[]string{ns + "/ENTITY#key-1|#META", ns + "/ENTITY#key-2|#META"}},
		{"GSI2 buckets of a resource", query(indexGSI2, attrGSI2PK, gsi2PKResource(ns, "openai/gpt-4"), attrGSI2SK, "BUCKET#"),
			[]string{ns + "/BUCKET#key-1#openai/gpt-4#0|#STATE", ns + "/BUCKET#key-2#openai/gpt-4#0|#STATE"}},
		{"GSI3 buckets of an entity", query(indexGSI3, ddbschema.AttrGSI3PK, ddbschema.GSI3PKEntity(ns, "key-1"), attrGSI3SK, "BUCKET#"),
			[]string{ns + "/BUCKET#key-1#claude#1|#STATE", ns + "/BUCKET#key-1#openai/gpt-4#0|#STATE"}},
		{"GSI4 items of a namespace", query(indexGSI4, ddbschema.AttrGSI4PK, ns, "", ""),
			[]string{
				ns + "/BUCKET#key-1#claude#1|#STATE", ns + "/BUCKET#key-1#openai/gpt-4#0|#STATE", ns + "/BUCKET#key-2#openai/gpt-4#0|#STATE",
				ns + "/ENTITY#key-1|#META", ns + "/ENTITY#key-2|#META", ns + "/ENTITY#proj|#META",
			}},
	} {
		assert.Equal(t, tc.want, tc.got, tc.name)
	}
}
