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

// EntityItem returns the entity metadata item. Name "" is written as the
// id; ParentID "" as NULL (and then no GSI1 keys); Metadata as a map of
// strings; CreatedAt at second precision in UTC.
func EntityItem(ns string, e Entity) map[string]types.AttributeValue {
	name := e.Name
	if name == "" {
		name = e.ID
	}
	meta := make(map[string]types.AttributeValue, len(e.Metadata))
	for k, v := range e.Metadata {
		meta[k] = S(v)
	}
	item := map[string]types.AttributeValue{
		AttrPK:        S(PKEntity(ns, e.ID)),
		AttrSK:        S(SKMeta),
		AttrEntityID:  S(e.ID),
		AttrName:      S(name),
		AttrParentID:  SOrNull(e.ParentID),
		AttrCascade:   Bool(e.Cascade),
		AttrMetadata:  &types.AttributeValueMemberM{Value: meta},
		AttrCreatedAt: S(FormatISOSeconds(e.CreatedAt)),
		AttrGSI4PK:    S(ns),
		AttrGSI4SK:    S(PKEntity(ns, e.ID)),
	}
	if e.ParentID != "" {
		item[AttrGSI1PK] = S(GSI1PKParent(ns, e.ParentID))
		item[AttrGSI1SK] = S(GSI1SKChild(e.ID))
	}
	return item
}

// EntityFromItem reads an entity metadata item. Absent or NULL attributes
// read as zero values (name "" when absent, as stored; Metadata nil when
// absent). Metadata values that are not strings are converted: numbers to
// their decimal text, booleans to "true"/"false"; other types are skipped.
// An unparsable created_at reads as the zero time.
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
