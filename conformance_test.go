package limiter_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/storetest"
)

// TestConformance runs the backend conformance suite on the DynamoDB
// repository, one new table per scenario.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) limiter.Repository {
		ctx := context.Background()
		client := ddblocal.Client(t, ddblocal.WithoutStreams)
		table := ddblocal.TableName(t)
		repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
			o.Table = table
			o.Namespace = "default"
			o.CreateTable = true
		})
		require.NoError(t, err, "OpenDynamoDB: %v", err)
		t.Cleanup(func() {
			client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		})
		return repo
	})
}
