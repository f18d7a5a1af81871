package ddbschema

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AuditEvent is an audit event item: PK {ns}/AUDIT#{entity}, SK
// #AUDIT#{event id}.
type AuditEvent struct {
	EventID   string
	Timestamp time.Time
	Action    string
	EntityID  string
	Principal string // "" is stored as NULL
	Resource  string // "" is stored as NULL
	Details   map[string]any
}

// DetailConverter replaces a struct value of audit details by a value that
// can be stored (typically a map); ok is false for structs it does not
// know, which are then treated as unsupported.
type DetailConverter func(v any) (replacement any, ok bool)

// AuditItem returns the audit event item with the given ttl (epoch
// seconds). Empty Principal and Resource are written as NULL. Details are
// stored as a map, serialised as the table's audit format has it: strings
// (including named string types) → S, bools → BOOL, integers and floats →
// N, maps with string keys → M, slices and arrays → L, nil → NULL, structs
// that convert (may be nil) replaces → their replacement. Other values are
// dropped inside a map and written as S of their fmt.Sprint text inside a
// list. NaN and infinities are errors (DynamoDB rejects them).
func AuditItem(ns string, e AuditEvent, ttl int64, convert DetailConverter) (map[string]types.AttributeValue, error) {
	d := detailEncoder{convert: convert}
	details, _, err := d.value(reflect.ValueOf(e.Details)) // a map is always supported
	if err != nil {
		return nil, fmt.Errorf("audit event %s details: %w", e.EventID, err)
	}
	item := marshalItem(&auditRecord{
		tableKey: tableKey{PK: PKAudit(ns, e.EntityID), SK: SKAudit(e.EventID)},
		auditAttrs: auditAttrs{
			EntityID:  sAttr(e.EntityID),
			EventID:   sAttr(e.EventID),
			Timestamp: timeAttr(e.Timestamp),
			Action:    sAttr(e.Action),
			Principal: sAttr(e.Principal),
			Resource:  sAttr(e.Resource),
		},
		TTL:     ttl,
		gsi4Key: gsi4Key{GSI4PK: ns, GSI4SK: PKAudit(ns, e.EntityID)},
	})
	item[AttrDetails] = details
	return item, nil
}

// auditAttrs are the attributes of an audit event item that are read, but
// for its details. The details keep a codec of their own: they follow the
// table's audit serialisation (floats written with ".0", structs
// through a DetailConverter, unsupported values dropped, integral numbers
// read back as int64), which attributevalue's rules do not.
type auditAttrs struct {
	EntityID  sAttr    `dynamodbav:"entity_id"`
	EventID   sAttr    `dynamodbav:"event_id"`
	Timestamp timeAttr `dynamodbav:"timestamp"`
	Action    sAttr    `dynamodbav:"action"`
	Principal sAttr    `dynamodbav:"principal,nullempty"`
	Resource  sAttr    `dynamodbav:"resource,nullempty"`
}

// auditRecord is the layout of an audit event item without its details.
type auditRecord struct {
	tableKey
	auditAttrs
	TTL int64 `dynamodbav:"ttl"`
	gsi4Key
}

// AuditEventFromItem reads an audit event item. ok is false for items
// without a string action, which are not audit events. Details numbers
// read as int64 (or float64 when they have a fraction or exponent, or do
// not fit), string sets and binary values as nil; a malformed number is an
// error. An unparsable timestamp reads as the zero time.
func AuditEventFromItem(item map[string]types.AttributeValue) (e AuditEvent, ok bool, err error) {
	if _, ok = GetS(item, AttrAction); !ok {
		return AuditEvent{}, false, nil
	}
	var a auditAttrs
	unmarshalItem(item, &a)
	e = AuditEvent{
		EventID:   string(a.EventID),
		Timestamp: time.Time(a.Timestamp),
		Action:    string(a.Action),
		EntityID:  string(a.EntityID),
		Principal: string(a.Principal),
		Resource:  string(a.Resource),
		Details:   map[string]any{},
	}
	if m, isM := item[AttrDetails].(*types.AttributeValueMemberM); isM {
		for k, v := range m.Value {
			if e.Details[k], err = detailFromAV(v); err != nil {
				return AuditEvent{}, false, fmt.Errorf("audit event %s details %s: %w", e.EventID, k, err)
			}
		}
	}
	return e, true, nil
}

// detailEncoder serialises details values.
type detailEncoder struct {
	convert DetailConverter
}

// value serialises one details value; ok is false for unsupported values.
func (d detailEncoder) value(v reflect.Value) (av types.AttributeValue, ok bool, err error) {
	if !v.IsValid() {
		return Null(), true, nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return Null(), true, nil
		}
		return d.value(v.Elem())
	case reflect.String:
		return S(v.String()), true, nil
	case reflect.Bool:
		return Bool(v.Bool()), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return N(v.Int()), true, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &types.AttributeValueMemberN{Value: strconv.FormatUint(v.Uint(), 10)}, true, nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false, fmt.Errorf("number %v cannot be stored", f)
		}
		return &types.AttributeValueMemberN{Value: formatDetailFloat(f, v.Type().Bits())}, true, nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return nil, false, nil
		}
		m := make(map[string]types.AttributeValue, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			av, ok, err := d.value(iter.Value())
			if err != nil {
				return nil, false, err
			}
			if ok {
				m[iter.Key().String()] = av
			}
		}
		return &types.AttributeValueMemberM{Value: m}, true, nil
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil, false, nil // bytes: not a details value
		}
		l := make([]types.AttributeValue, v.Len())
		for i := range v.Len() {
			av, ok, err := d.value(v.Index(i))
			if err != nil {
				return nil, false, err
			}
			if !ok {
				av = S(fmt.Sprint(v.Index(i).Interface()))
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, true, nil
	case reflect.Struct:
		if d.convert != nil && v.CanInterface() {
			if r, ok := d.convert(v.Interface()); ok {
				return d.value(reflect.ValueOf(r))
			}
		}
	}
	return nil, false, nil
}

// formatDetailFloat formats f as audit details store floats: for ordinary
// values the shortest representation, with ".0" when it has no fraction.
func formatDetailFloat(f float64, bits int) string {
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// detailFromAV deserialises one details value.
func detailFromAV(av types.AttributeValue) (any, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return v.Value, nil
	case *types.AttributeValueMemberN:
		if !strings.ContainsAny(v.Value, ".eE") {
			if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(v.Value, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", v.Value)
		}
		return f, nil
	case *types.AttributeValueMemberBOOL:
		return v.Value, nil
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			x, err := detailFromAV(e)
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return m, nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			x, err := detailFromAV(e)
			if err != nil {
				return nil, err
			}
			l[i] = x
		}
		return l, nil
	}
	return nil, nil // NULL, sets, binary
}
