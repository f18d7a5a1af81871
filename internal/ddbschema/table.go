package ddbschema

import (
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/store"
)

// TableDefinition returns the CreateTable request of a schema 0.10.0 table:
// PK/SK string keys, on-demand billing, GSI1–GSI4, the reserved LSI1–LSI5 and
// a NEW_AND_OLD_IMAGES stream. CreateTable does not enable TTL; follow it
// with [TTLSpecification] to match deployed tables.
func TableDefinition(table string) *dynamodb.CreateTableInput {
	attrs := []string{
		AttrPK, AttrSK,
		AttrGSI1PK, AttrGSI1SK, AttrGSI2PK, AttrGSI2SK, AttrGSI3PK, AttrGSI3SK, AttrGSI4PK, AttrGSI4SK,
		AttrLSI1SK, AttrLSI2SK, AttrLSI3SK, AttrLSI4SK, AttrLSI5SK,
	}
	defs := make([]types.AttributeDefinition, len(attrs))
	for i, a := range attrs {
		defs[i] = types.AttributeDefinition{AttributeName: aws.String(a), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string, p types.ProjectionType) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName: aws.String(name), KeySchema: keys(hash, rng), Projection: &types.Projection{ProjectionType: p},
		}
	}
	lsi := func(name, rng string, p types.ProjectionType) types.LocalSecondaryIndex {
		return types.LocalSecondaryIndex{
			IndexName: aws.String(name), KeySchema: keys(AttrPK, rng), Projection: &types.Projection{ProjectionType: p},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            keys(AttrPK, AttrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(IndexGSI1, AttrGSI1PK, AttrGSI1SK, types.ProjectionTypeAll),
			gsi(IndexGSI2, AttrGSI2PK, AttrGSI2SK, types.ProjectionTypeAll),
			gsi(IndexGSI3, AttrGSI3PK, AttrGSI3SK, types.ProjectionTypeKeysOnly),
			gsi(IndexGSI4, AttrGSI4PK, AttrGSI4SK, types.ProjectionTypeKeysOnly),
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{
			lsi(IndexLSI1, AttrLSI1SK, types.ProjectionTypeAll),
			lsi(IndexLSI2, AttrLSI2SK, types.ProjectionTypeKeysOnly),
			lsi(IndexLSI3, AttrLSI3SK, types.ProjectionTypeAll),
			lsi(IndexLSI4, AttrLSI4SK, types.ProjectionTypeKeysOnly),
			lsi(IndexLSI5, AttrLSI5SK, types.ProjectionTypeAll),
		},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
}

// TTLSpecification returns the UpdateTimeToLive request that enables TTL on
// the `ttl` attribute, as the CloudFormation template does.
func TTLSpecification(table string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrTTL),
			Enabled:       aws.Bool(true),
		},
	}
}

// EnvStack and EnvNamespace name the environment variables that choose
// the table (the stack's name) and the namespace when none is given.
const (
	EnvStack     = "ZAEL_STACK"
	EnvNamespace = "ZAEL_NAMESPACE"
)

var stackNamePattern = regexp.MustCompile(`\A[A-Za-z][A-Za-z0-9-]*\z`)

// ValidateStackName checks a table/stack name: letters, digits and
// hyphens, starting with a letter, at most 55 characters. The error is a
// *store.ValidationError.
func ValidateStackName(name string) error {
	reason := ""
	switch {
	case name == "":
		reason = "cannot be empty"
	case strings.Contains(name, "_"):
		reason = "contains an underscore; use hyphens instead ('rate-limits', not 'rate_limits')"
	case strings.Contains(name, "."):
		reason = "contains a period; only letters, digits and hyphens are allowed"
	case strings.Contains(name, " "):
		reason = "contains spaces; use hyphens instead ('my-app', not 'my app')"
	case !stackNamePattern.MatchString(name):
		reason = "must start with a letter and contain only letters, digits and hyphens"
	case len(name) > 55:
		reason = "too long: longer than 55 characters (the limit of IAM role names)"
	default:
		return nil
	}
	return store.NewValidationError(store.ErrValidation, "name", name, reason)
}

// The defaults of the limiter's DynamoDB Local configuration
// (LocalConfig), which the command-line tool's local
// database shares.
const (
	// LocalEndpoint is DynamoDB Local's default address.
	LocalEndpoint = "http://localhost:8000"
	// LocalRegion is the region used when neither $AWS_REGION nor
	// $AWS_DEFAULT_REGION is set.
	LocalRegion = "us-east-1"
	// LocalAccessKey is the access key id (and secret key) used when
	// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are not both set.
	LocalAccessKey = "test"
)
