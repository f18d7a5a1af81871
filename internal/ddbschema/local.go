package ddbschema

import (
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// LocalConfig returns the AWS configuration limiter.NewDynamoDBLocalClient
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
func LocalConfig(endpoint string) aws.Config {
	getenv := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	if endpoint == "" {
		endpoint = firstSet(getenv("AWS_ENDPOINT_URL_DYNAMODB"), getenv("AWS_ENDPOINT_URL"), LocalEndpoint)
	}
	key, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	token := getenv("AWS_SESSION_TOKEN")
	if key == "" || secret == "" {
		key, secret, token = LocalAccessKey, LocalAccessKey, ""
	}
	return aws.Config{
		Region:                firstSet(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"), LocalRegion),
		BaseEndpoint:          aws.String(strings.TrimRight(endpoint, "/")),
		Credentials:           credentials.NewStaticCredentialsProvider(key, secret, token),
		Logger:                logging.NewStandardLogger(os.Stderr),
		AccountIDEndpointMode: aws.AccountIDEndpointModeDisabled,
	}
}

// firstSet returns the first of vs that is not empty.
func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
