package ddbschema

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
