package main

// A provisioner Lambda that applies the same manifest format (another
// client's; `limits apply` does its work here) writes raw config items: PK, SK, GSI4PK and the l_* limit attributes, but no
// GSI3 keys and no registry entries, so the list queries that find stored
// limits (ListResourcesWithDefaults, ListEntitiesWithCustomLimits) miss
// them. What it manages is recorded in its state record, PK
// "{namespace id}/SYSTEM#", SK "#PROVISIONER": managed_system (BOOL),
// managed_resources (L of S) and managed_entities (M: entity id → L of S
// resources). `--prune` reads that record too, so that a namespace the
// provisioner managed is pruned like any other.

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Provisioner state record keys and attributes.
const (
	provisionerSK              = "#PROVISIONER"
	provisionerManagedResource = "managed_resources"
	provisionerManagedEntities = "managed_entities"
)

// provisionerState is what the provisioner's state record says it
// manages.
type provisionerState struct {
	resources []string
	entities  []entityTarget
}

// readProvisionerState reads the provisioner's state record of repo's
// namespace; the zero state when there is none.
func (c *cli) readProvisionerState(repo *table) (provisionerState, error) {
	var st provisionerState
	client, _, err := c.dynamoDBClient()
	if err != nil {
		return st, err
	}
	out, err := client.GetItem(c.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(repo.repo.Table()),
		Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: repo.repo.NamespaceID() + "/SYSTEM#"},
			"SK": &types.AttributeValueMemberS{Value: provisionerSK},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return st, fmt.Errorf("read provisioner state: %w", err)
	}
	if l, ok := out.Item[provisionerManagedResource].(*types.AttributeValueMemberL); ok {
		st.resources = stringsOf(l.Value)
	}
	if m, ok := out.Item[provisionerManagedEntities].(*types.AttributeValueMemberM); ok {
		for id, v := range m.Value {
			if l, ok := v.(*types.AttributeValueMemberL); ok {
				for _, res := range stringsOf(l.Value) {
					st.entities = append(st.entities, entityTarget{id, res})
				}
			}
		}
	}
	return st, nil
}

// stringsOf returns the string elements of a DynamoDB list.
func stringsOf(l []types.AttributeValue) []string {
	var out []string
	for _, v := range l {
		if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value != "" {
			out = append(out, s.Value)
		}
	}
	return out
}
