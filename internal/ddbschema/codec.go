package ddbschema

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Items of fixed shape (entity, audit event, version record, namespace
// records, usage snapshot, and config items without their limits) are
// described by structs with dynamodbav tags and converted by the SDK's
// attributevalue package. Where an item is read back, a struct of the
// attributes that are read (auditAttrs, …) is embedded in the record struct
// with the attributes that are only written: keys, GSI keys, ttl. The
// struct tags give the attribute names, and the field types the attribute
// types:
//
//   - string and sAttr → S, "" included; tagged nullempty → NULL when "";
//     tagged omitempty → absent when "".
//   - int64 → N in decimal, bool → BOOL, map[string]string → M of S.
//   - timeAttr → S at second precision (see [FormatISOSeconds]); *timeAttr
//     tagged omitempty → absent when nil.
//
// The types of read structs (sAttr, timeAttr) read a wrongly typed
// attribute as absent, as the table's other readers do, so decoding never
// fails.
//
// What stays written by hand, each with its reason where it is: attributes
// named after limits (the l_* limits of configs, b_* limits of buckets,
// usage counters), the bucket item and the entity reader (both read or
// written on every acquire), audit details (a serialisation of their own),
// and single attributes read from items otherwise
// discovered by name (on_unavailable, audit_retention_days, registries).

// marshalItem encodes the record struct rec (a pointer) as an item.
func marshalItem(rec any) map[string]types.AttributeValue {
	item, err := attributevalue.MarshalMap(rec)
	if err != nil {
		// Unreachable: the record structs hold only the types above,
		// which always encode (every record has a layout test).
		panic(fmt.Sprintf("ddbschema: encode %T: %v", rec, err))
	}
	return item
}

// unmarshalItem decodes item into the read struct attrs (a pointer).
func unmarshalItem(item map[string]types.AttributeValue, attrs any) {
	if err := attributevalue.UnmarshalMap(item, attrs); err != nil {
		// Unreachable: the read structs hold only types that read any
		// attribute value (every item has a test with wrongly typed
		// attributes).
		panic(fmt.Sprintf("ddbschema: decode %T: %v", attrs, err))
	}
}

// tableKey is the primary key of every item.
type tableKey struct {
	PK string `dynamodbav:"PK"`
	SK string `dynamodbav:"SK"`
}

// gsi4Key files an item under its namespace in GSI4.
type gsi4Key struct {
	GSI4PK string `dynamodbav:"GSI4PK"`
	GSI4SK string `dynamodbav:"GSI4SK"`
}

// sAttr is a string attribute as read: S gives its value, any other type
// (NULL included) reads as "".
type sAttr string

// UnmarshalDynamoDBAttributeValue implements attributevalue.Unmarshaler.
func (t *sAttr) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	*t = ""
	if v, ok := av.(*types.AttributeValueMemberS); ok {
		*t = sAttr(v.Value)
	}
	return nil
}

// timeAttr is a timestamp attribute: written as S in `%Y-%m-%dT%H:%M:%SZ`
// (see [FormatISOSeconds]); read with [ParseISOSeconds], where any other
// type or an unparsable string reads as the zero time.
type timeAttr time.Time

// MarshalDynamoDBAttributeValue implements attributevalue.Marshaler.
func (s timeAttr) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return S(FormatISOSeconds(time.Time(s))), nil
}

// UnmarshalDynamoDBAttributeValue implements attributevalue.Unmarshaler.
func (s *timeAttr) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	*s = timeAttr{}
	if v, ok := av.(*types.AttributeValueMemberS); ok {
		if t, err := ParseISOSeconds(v.Value); err == nil {
			*s = timeAttr(t)
		}
	}
	return nil
}

// optTime returns a timeAttr of t, or nil when t is zero (for omitempty).
func optTime(t time.Time) *timeAttr {
	if t.IsZero() {
		return nil
	}
	s := timeAttr(t)
	return &s
}

// timeOf returns the time of s, the zero time when s is nil.
func timeOf(s *timeAttr) time.Time {
	if s == nil {
		return time.Time{}
	}
	return time.Time(*s)
}
