package crossbackend_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// pythonResource is the Python original's validate_resource pattern: it
// refuses "*", so the original never acquires on AllResources.
var pythonResource = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.\-/]*$`)

// TestEntityWideItemsOnSharedTable: on the shared table, the entity-wide
// config is the ordinary entity config item #CONFIG#* (a rolling limit
// in the original's l_{L}_cp/ra/rp layout), the resource defaults of
// AllResources the resource config {ns}/RESOURCE#*, and the entity-wide
// bucket an ordinary bucket item of resource "*". The original reads an
// entity's configs by the exact sort key of the resource it acquires on,
// which its validation never lets be "*": it ignores these items (and so
// does not charge entity-wide limits).
func TestEntityWideItemsOnSharedTable(t *testing.T) {
	require.False(t, pythonResource.MatchString(limiter.AllResources))
	ctx := context.Background()
	repo, client, table := openDynamoDBTable(t)
	rl := limiter.New(repo)
	defer rl.Close()
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("rpm", 600)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("tpm", 10_000)}))
	lease, err := rl.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 100})
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	scan := func(attr, value string) []map[string]types.AttributeValue {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table),
			FilterExpression:         aws.String("#a = :v"),
			ExpressionAttributeNames: map[string]string{"#a": attr},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":v": &types.AttributeValueMemberS{Value: value}}})
		require.NoError(t, err)
		return out.Items
	}
	configs := scan("SK", "#CONFIG#*")
	require.Len(t, configs, 1)
	c := configs[0]
	require.Regexp(t, `/ENTITY#proj$`, c["PK"].(*types.AttributeValueMemberS).Value)
	require.Equal(t, &types.AttributeValueMemberS{Value: "*"}, c["resource"])
	require.Equal(t, &types.AttributeValueMemberN{Value: "600"}, c["l_rpm_cp"])
	require.Equal(t, &types.AttributeValueMemberN{Value: "600"}, c["l_rpm_ra"])
	require.Equal(t, &types.AttributeValueMemberN{Value: "60"}, c["l_rpm_rp"])

	defaults := scan("resource", "*")
	var sawDefaults, sawBucket bool
	for _, it := range defaults {
		pk := it["PK"].(*types.AttributeValueMemberS).Value
		switch {
		case regexp.MustCompile(`/RESOURCE#\*$`).MatchString(pk):
			sawDefaults = true
			require.Equal(t, &types.AttributeValueMemberN{Value: "100"}, it["l_rpm_cp"])
		case it["b_rpm_tk"] != nil:
			sawBucket = true
			require.Equal(t, &types.AttributeValueMemberS{Value: "proj"}, it["entity_id"])
			require.Equal(t, &types.AttributeValueMemberN{Value: "599000"}, it["b_rpm_tk"], "one request taken")
			require.Nil(t, it["b_tpm_tk"], "tpm is charged in the model's bucket only")
		}
	}
	require.True(t, sawDefaults, "the resource defaults of *")
	require.True(t, sawBucket, "the entity-wide bucket")
}
