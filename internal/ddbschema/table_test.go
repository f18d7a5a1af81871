package ddbschema

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableDefinitionShape checks the parts of the table definition that the
// compatibility contract fixes, independently of the golden file.
func TestTableDefinitionShape(t *testing.T) {
	t.Parallel()
	in := TableDefinition("t")
	assert.Equal(t, "t", *in.TableName, "table name/billing = %q/%q", *in.TableName, in.BillingMode)
	assert.Equal(t, types.BillingModePayPerRequest, in.BillingMode, "table name/billing = %q/%q", *in.TableName, in.BillingMode)
	var attrs []string
	for _, d := range in.AttributeDefinitions {
		assert.Equal(t, types.ScalarAttributeTypeS, d.AttributeType, "attribute %s type %s, want S", *d.AttributeName, d.AttributeType)
		attrs = append(attrs, *d.AttributeName)
	}
	wantAttrs := []string{"PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK",
		"GSI4PK", "GSI4SK", "LSI1SK", "LSI2SK", "LSI3SK", "LSI4SK", "LSI5SK"}
	assert.Equal(t, wantAttrs, attrs, "attribute definitions")
	var gsis []string
	for _, g := range in.GlobalSecondaryIndexes {
		gsis = append(gsis, fmt.Sprintf("%s:%s/%s:%s", *g.IndexName, *g.KeySchema[0].AttributeName, *g.KeySchema[1].AttributeName, g.Projection.ProjectionType))
	}
	wantGSIs := []string{"GSI1:GSI1PK/GSI1SK:ALL", "GSI2:GSI2PK/GSI2SK:ALL", "GSI3:GSI3PK/GSI3SK:KEYS_ONLY", "GSI4:GSI4PK/GSI4SK:KEYS_ONLY"}
	assert.Equal(t, wantGSIs, gsis, "GSIs")
	var lsis []string
	for _, l := range in.LocalSecondaryIndexes {
		lsis = append(lsis, fmt.Sprintf("%s:%s/%s:%s", *l.IndexName, *l.KeySchema[0].AttributeName, *l.KeySchema[1].AttributeName, l.Projection.ProjectionType))
	}
	wantLSIs := []string{"LSI1:PK/LSI1SK:ALL", "LSI2:PK/LSI2SK:KEYS_ONLY", "LSI3:PK/LSI3SK:ALL", "LSI4:PK/LSI4SK:KEYS_ONLY", "LSI5:PK/LSI5SK:ALL"}
	assert.Equal(t, wantLSIs, lsis, "LSIs")
	s := in.StreamSpecification
	require.True(t, *s.StreamEnabled, "stream = %v/%s", *s.StreamEnabled, s.StreamViewType)
	assert.Equal(t, types.StreamViewTypeNewAndOldImages, s.StreamViewType, "stream = %v/%s", *s.StreamEnabled, s.StreamViewType)
}

func TestTTLSpecification(t *testing.T) {
	t.Parallel()
	in := TTLSpecification("zae-limiter")
	assert.Equal(t, "zae-limiter", *in.TableName, "TTLSpecification = %+v / %+v", in, in.TimeToLiveSpecification)
	assert.Equal(t, "ttl", *in.TimeToLiveSpecification.AttributeName, "TTLSpecification = %+v / %+v", in, in.TimeToLiveSpecification)
	assert.True(t, *in.TimeToLiveSpecification.Enabled, "TTLSpecification = %+v / %+v", in, in.TimeToLiveSpecification)
}
