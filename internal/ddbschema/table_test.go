package ddbschema

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

// TestTableDefinitionShape checks the parts of the table definition that the
// compatibility contract fixes, independently of the golden file.
func TestTableDefinitionShape(t *testing.T) {
	t.Parallel()
	in := TableDefinition("t")
	if *in.TableName != "t" || in.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("table name/billing = %q/%q", *in.TableName, in.BillingMode)
	}
	var attrs []string
	for _, d := range in.AttributeDefinitions {
		if d.AttributeType != types.ScalarAttributeTypeS {
			t.Errorf("attribute %s type %s, want S", *d.AttributeName, d.AttributeType)
		}
		attrs = append(attrs, *d.AttributeName)
	}
	wantAttrs := []string{"PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK",
		"GSI4PK", "GSI4SK", "LSI1SK", "LSI2SK", "LSI3SK", "LSI4SK", "LSI5SK"}
	if diff := cmp.Diff(wantAttrs, attrs); diff != "" {
		t.Errorf("attribute definitions (-want +got):\n%s", diff)
	}
	var gsis []string
	for _, g := range in.GlobalSecondaryIndexes {
		gsis = append(gsis, fmt.Sprintf("%s:%s/%s:%s", *g.IndexName, *g.KeySchema[0].AttributeName, *g.KeySchema[1].AttributeName, g.Projection.ProjectionType))
	}
	wantGSIs := []string{"GSI1:GSI1PK/GSI1SK:ALL", "GSI2:GSI2PK/GSI2SK:ALL", "GSI3:GSI3PK/GSI3SK:KEYS_ONLY", "GSI4:GSI4PK/GSI4SK:KEYS_ONLY"}
	if diff := cmp.Diff(wantGSIs, gsis); diff != "" {
		t.Errorf("GSIs (-want +got):\n%s", diff)
	}
	var lsis []string
	for _, l := range in.LocalSecondaryIndexes {
		lsis = append(lsis, fmt.Sprintf("%s:%s/%s:%s", *l.IndexName, *l.KeySchema[0].AttributeName, *l.KeySchema[1].AttributeName, l.Projection.ProjectionType))
	}
	wantLSIs := []string{"LSI1:PK/LSI1SK:ALL", "LSI2:PK/LSI2SK:KEYS_ONLY", "LSI3:PK/LSI3SK:ALL", "LSI4:PK/LSI4SK:KEYS_ONLY", "LSI5:PK/LSI5SK:ALL"}
	if diff := cmp.Diff(wantLSIs, lsis); diff != "" {
		t.Errorf("LSIs (-want +got):\n%s", diff)
	}
	if s := in.StreamSpecification; !*s.StreamEnabled || s.StreamViewType != types.StreamViewTypeNewAndOldImages {
		t.Errorf("stream = %v/%s", *s.StreamEnabled, s.StreamViewType)
	}
}

func TestTTLSpecification(t *testing.T) {
	t.Parallel()
	in := TTLSpecification("zae-limiter")
	if *in.TableName != "zae-limiter" || *in.TimeToLiveSpecification.AttributeName != "ttl" || !*in.TimeToLiveSpecification.Enabled {
		t.Errorf("TTLSpecification = %+v / %+v", in, in.TimeToLiveSpecification)
	}
}
