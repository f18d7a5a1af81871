// Layer 5, the DynamoDB repository: clients for DynamoDB Local.

package limiter

import (
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// DynamoDBLocalConfig returns the AWS configuration [NewDynamoDBLocalClient]
// uses, for building other SDK clients that must talk to the same local
// database, such as the DynamoDB Streams client of the aggregator's local
// runner:
//
//   - the endpoint is endpoint, or when it is "" $AWS_ENDPOINT_URL_DYNAMODB,
//     else $AWS_ENDPOINT_URL, else http://localhost:8000 (DynamoDB Local's default);
//   - the region is $AWS_REGION, else $AWS_DEFAULT_REGION, else
//     us-east-1;
//   - the credentials are $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY
//     (with $AWS_SESSION_TOKEN) when both are set, else
//     "test" for both (DynamoDB Local accepts any credentials).
//
// DynamoDB Local started without -sharedDb keeps one database per access key
// and region, so programs that must see the same tables have to agree on
// them; reading the standard variables makes this configuration agree with
// any other SDK program run in the same shell (`zae-limiter local up`
// prints them, and starts DynamoDB Local with -sharedDb anyway). Shared
// config files and profiles are not read: nothing here ever reaches AWS.
// The logger writes the SDK's warnings to stderr, as the SDK's default
// configuration does.
func DynamoDBLocalConfig(endpoint string) aws.Config {
	getenv := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	if endpoint == "" {
		endpoint = firstNonEmpty(getenv("AWS_ENDPOINT_URL_DYNAMODB"), getenv("AWS_ENDPOINT_URL"), ddbschema.LocalEndpoint)
	}
	key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	token := getenv("AWS_SESSION_TOKEN")
	if key == "" || secret == "" {
		key, secret, token = ddbschema.LocalAccessKey, ddbschema.LocalAccessKey, ""
	}
	return aws.Config{
		Region:                firstNonEmpty(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"), ddbschema.LocalRegion),
		BaseEndpoint:          aws.String(strings.TrimRight(endpoint, "/")),
		Credentials:           credentials.NewStaticCredentialsProvider(key, secret, token),
		Logger:                logging.NewStandardLogger(os.Stderr),
		AccountIDEndpointMode: aws.AccountIDEndpointModeDisabled,
	}
}

// NewDynamoDBLocalClient returns a DynamoDB client for DynamoDB Local at
// endpoint (e.g. "http://localhost:8000"; "" reads the endpoint from the
// environment, see [DynamoDBLocalConfig]) that needs no AWS configuration
// and stays quiet: it does not validate the CRC32 checksum of responses,
// which DynamoDB Local gets wrong on error responses (every refused
// conditional write, say), so that the SDK does not log a "response did not
// match expected checksum" warning for each. optFns run last and may change
// any setting. Pass the client to [OpenDynamoDB].
//
// It is meant for development and tests; in AWS build the client from
// config.LoadDefaultConfig as usual.
func NewDynamoDBLocalClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(DynamoDBLocalConfig(endpoint), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
	}}, optFns...)...)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
