// Layer 5, the DynamoDB repository: clients for DynamoDB Local.

package limiter

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// NewDynamoDBLocalClient returns a DynamoDB client for DynamoDB Local at
// endpoint (e.g. "http://localhost:8000"; "" reads the endpoint from the
// environment: $AWS_ENDPOINT_URL_DYNAMODB, else $AWS_ENDPOINT_URL, else
// http://localhost:8000; the region is $AWS_REGION, else
// $AWS_DEFAULT_REGION, else us-east-1; the credentials are
// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY when both are set, else
// "test", which DynamoDB Local accepts) that needs no AWS configuration
// and stays quiet: it does not validate the CRC32 checksum of responses,
// which DynamoDB Local gets wrong on error responses (every refused
// conditional write, say), so that the SDK does not log a "response did not
// match expected checksum" warning for each. optFns run last and may change
// any setting. Pass the client to [OpenDynamoDB].
//
// It is meant for development and tests; in AWS build the client from
// config.LoadDefaultConfig as usual.
func NewDynamoDBLocalClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(ddbschema.LocalConfig(endpoint), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
	}}, optFns...)...)
}
