package ddbschema

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Entity is an entity metadata item: PK {ns}/ENTITY#{id}, SK #META.
type Entity struct {
	ID       string
	Name     string
	ParentID string // "" for a root entity
	Cascade  bool
	Metadata map[string]string
	// CreatedAt is stored at second precision in UTC.
	CreatedAt time.Time
}

// entityRecord is the layout of an entity metadata item.
type entityRecord struct {
	tableKey
	EntityID  string            `dynamodbav:"entity_id"`
	Name      string            `dynamodbav:"name"`
	ParentID  string            `dynamodbav:"parent_id,nullempty"`
	Cascade   bool              `dynamodbav:"cascade"`
	Metadata  map[string]string `dynamodbav:"metadata"`
	CreatedAt timeAttr          `dynamodbav:"created_at"`
	// GSI1 lists a child under its parent; root entities have no GSI1 keys.
	GSI1PK string `dynamodbav:"GSI1PK,omitempty"`
	GSI1SK string `dynamodbav:"GSI1SK,omitempty"`
	gsi4Key
}

// EntityItem returns the entity metadata item. Name "" is written as the
// id; ParentID "" as NULL (and then no GSI1 keys); Metadata as a map of
// strings; CreatedAt at second precision in UTC.
func EntityItem(ns string, e Entity) map[string]types.AttributeValue {
	rec := entityRecord{
		tableKey:  tableKey{PK: PKEntity(ns, e.ID), SK: SKMeta},
		EntityID:  e.ID,
		Name:      e.Name,
		ParentID:  e.ParentID,
		Cascade:   e.Cascade,
		Metadata:  e.Metadata,
		CreatedAt: timeAttr(e.CreatedAt),
		gsi4Key:   gsi4Key{GSI4PK: ns, GSI4SK: PKEntity(ns, e.ID)},
	}
	if rec.Name == "" {
		rec.Name = e.ID
	}
	if rec.Metadata == nil {
		rec.Metadata = map[string]string{} // an empty M, never NULL
	}
	if e.ParentID != "" {
		rec.GSI1PK = GSI1PKParent(ns, e.ParentID)
		rec.GSI1SK = GSI1SKChild(e.ID)
	}
	return marshalItem(&rec)
}

// EntityFromItem reads an entity metadata item. Absent or NULL attributes
// read as zero values (name "" when absent, as stored; Metadata nil when
// absent). Metadata values that are not strings are converted: numbers to
// their decimal text, booleans to "true"/"false"; other types are skipped.
// An unparsable created_at reads as the zero time.
//
// It is written by hand, not decoded with attributevalue like the other
// items of fixed shape: every acquire that reads its buckets reads the
// META records of the entity and of its parent in the same BatchGetItem,
// and attributevalue.UnmarshalMap took four to five times as long here,
// with 9 allocations against 2 (BenchmarkItemEntity, decode against
// decode-attributevalue).
func EntityFromItem(item map[string]types.AttributeValue) Entity {
	var e Entity
	e.ID, _ = GetS(item, AttrEntityID)
	e.Name, _ = GetS(item, AttrName)
	e.ParentID, _ = GetS(item, AttrParentID)
	e.Cascade, _ = GetBool(item, AttrCascade)
	e.CreatedAt = GetTime(item, AttrCreatedAt)
	if m, ok := item[AttrMetadata].(*types.AttributeValueMemberM); ok {
		e.Metadata = make(map[string]string, len(m.Value))
		for k, v := range m.Value {
			switch v := v.(type) {
			case *types.AttributeValueMemberS:
				e.Metadata[k] = v.Value
			case *types.AttributeValueMemberN:
				e.Metadata[k] = v.Value
			case *types.AttributeValueMemberBOOL:
				e.Metadata[k] = strconv.FormatBool(v.Value)
			}
		}
	}
	return e
}
