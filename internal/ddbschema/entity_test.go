package ddbschema

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
)

func TestEntityItem(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 999_000_000, time.FixedZone("X", 3600))
	child := Entity{ID: "C", ParentID: "P", Cascade: true, Metadata: map[string]string{"tier": "gold"}, CreatedAt: created}
	checkItem(t, "child entity", EntityItem("ns1", child), map[string]string{
		"PK":         `S:"ns1/ENTITY#C"`,
		"SK":         `S:"#META"`,
		"entity_id":  `S:"C"`,
		"name":       `S:"C"`,
		"parent_id":  `S:"P"`,
		"cascade":    `BOOL:true`,
		"metadata":   `M:{tier=S:"gold"}`,
		"created_at": `S:"2026-01-02T02:04:05Z"`,
		"GSI1PK":     `S:"ns1/PARENT#P"`,
		"GSI1SK":     `S:"CHILD#C"`,
		"GSI4PK":     `S:"ns1"`,
		"GSI4SK":     `S:"ns1/ENTITY#C"`,
	})
	root := Entity{ID: "P", Name: "Parent Org", CreatedAt: created}
	checkItem(t, "root entity", EntityItem("ns1", root), map[string]string{
		"PK":         `S:"ns1/ENTITY#P"`,
		"SK":         `S:"#META"`,
		"entity_id":  `S:"P"`,
		"name":       `S:"Parent Org"`,
		"parent_id":  `NULL:true`,
		"cascade":    `BOOL:false`,
		"metadata":   `M:{}`,
		"created_at": `S:"2026-01-02T02:04:05Z"`,
		"GSI4PK":     `S:"ns1"`,
		"GSI4SK":     `S:"ns1/ENTITY#P"`,
	})

	for _, e := range []Entity{child, root} {
		got := EntityFromItem(EntityItem("ns1", e))
		want := e
		if want.Name == "" {
			want.Name = want.ID
		}
		if want.Metadata == nil {
			want.Metadata = map[string]string{}
		}
		want.CreatedAt = time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)
		assert.Equal(t, want, got, "entity round trip")
	}
}

func TestEntityFromItemForeignValues(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"entity_id":  S("e"),
		"created_at": S("garbage"),
		"metadata": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"s": S("x"), "n": &types.AttributeValueMemberN{Value: "12.5"}, "b": Bool(true),
			"null": Null(), "list": &types.AttributeValueMemberL{},
		}},
	}
	got := EntityFromItem(item)
	want := Entity{ID: "e", Metadata: map[string]string{"s": "x", "n": "12.5", "b": "true"}}
	assert.Equal(t, want, got, "EntityFromItem")
}
