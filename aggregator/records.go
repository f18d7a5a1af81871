package aggregator

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// Stream event names.
const (
	eventInsert = "INSERT"
	eventModify = "MODIFY"
	eventRemove = "REMOVE"
)

// Key attribute names of the table. Everything else about the layout is
// read through package ddbschema.
const (
	keyPK = ddbschema.AttrPK
	keySK = ddbschema.AttrSK
)

// ErrMalformedRecord is matched (errors.Is) by the error of a stream record
// that looks like one the aggregator handles but cannot be decoded: an
// unknown event name, a missing or non-string key, a missing image, an
// attribute of the wrong type, a bucket PK that does not parse.
var ErrMalformedRecord = errors.New("aggregator: malformed stream record")

// ErrNotApplied is matched by the error reported for a record that came
// after a failed record of the same batch: its effects were not applied, or
// will be applied again when the stream redelivers it (see the package
// documentation).
var ErrNotApplied = errors.New("aggregator: not applied after an earlier failure in the batch")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedRecord, fmt.Sprintf(format, args...))
}

// recordKind says what a decoded record is to the aggregator.
type recordKind int

const (
	kindIgnored recordKind = iota // not ours, or nothing to do
	kindBucket                    // INSERT or MODIFY of a bucket item
	kindAudit                     // REMOVE of an audit event
)

// record is one decoded stream record.
type record struct {
	index int
	kind  recordKind
	event string    // INSERT, MODIFY or REMOVE
	at    time.Time // the record's event time (fallback: the processor's clock)

	// kindBucket: the new image, and the old one for MODIFY.
	newItem ddbschema.Bucket
	oldItem *ddbschema.Bucket

	// kindAudit: the expired event.
	audit ddbschema.AuditEvent
}

// decodeRecord turns one stream record into a [record]. It is the one place
// that reads events.DynamoDBAttributeValue: every value's type is checked
// before its accessor is called (the accessors panic on a mismatch).
func decodeRecord(i int, rec events.DynamoDBEventRecord, now time.Time) (record, error) {
	r := record{index: i, event: rec.EventName, at: rec.Change.ApproximateCreationDateTime.Time}
	if r.at.IsZero() {
		r.at = now
	}
	switch rec.EventName {
	case eventInsert, eventModify, eventRemove:
	default:
		return r, malformed("event %q: unknown event name %q", rec.EventID, rec.EventName)
	}
	pk, err := keyString(rec.Change.Keys, keyPK)
	if err != nil {
		return r, malformed("event %q: %v", rec.EventID, err)
	}
	sk, err := keyString(rec.Change.Keys, keySK)
	if err != nil {
		return r, malformed("event %q: %v", rec.EventID, err)
	}
	if !strings.Contains(pk, "/") {
		return r, nil // items without a namespace are not ours
	}
	switch {
	case ddbschema.IsBucketKey(pk, sk):
		return decodeBucket(r, rec)
	case ddbschema.IsAuditKey(pk) && rec.EventName == eventRemove:
		return decodeAudit(r, rec)
	}
	return r, nil
}

func decodeBucket(r record, rec events.DynamoDBEventRecord) (record, error) {
	if r.event == eventRemove {
		return r, nil // an expired or deleted bucket: nothing to aggregate
	}
	if len(rec.Change.NewImage) == 0 {
		return r, malformed("event %q: %s of a bucket without NewImage", rec.EventID, r.event)
	}
	item, err := parseBucketImage(rec.Change.NewImage)
	if err != nil {
		return r, malformed("event %q: NewImage: %v", rec.EventID, err)
	}
	r.kind, r.newItem = kindBucket, item
	if r.event == eventModify {
		if len(rec.Change.OldImage) == 0 {
			return r, malformed("event %q: MODIFY of a bucket without OldImage", rec.EventID)
		}
		old, err := parseBucketImage(rec.Change.OldImage)
		if err != nil {
			return r, malformed("event %q: OldImage: %v", rec.EventID, err)
		}
		r.oldItem = &old
	}
	return r, nil
}

func parseBucketImage(img map[string]events.DynamoDBAttributeValue) (ddbschema.Bucket, error) {
	item, err := convertImage(img)
	if err != nil {
		return ddbschema.Bucket{}, err
	}
	return parseBucket(item)
}

// parseBucket reads a bucket item strictly: a PK that is not a bucket PK, a
// layout attribute of the wrong type and a malformed number are errors.
func parseBucket(item map[string]types.AttributeValue) (ddbschema.Bucket, error) {
	if err := ddbschema.CheckBucketTypes(item); err != nil {
		return ddbschema.Bucket{}, err
	}
	return ddbschema.BucketFromItem(item)
}

func decodeAudit(r record, rec events.DynamoDBEventRecord) (record, error) {
	if len(rec.Change.OldImage) == 0 {
		return r, malformed("event %q: REMOVE of an audit event without OldImage", rec.EventID)
	}
	item, err := convertImage(rec.Change.OldImage)
	if err != nil {
		return r, malformed("event %q: OldImage: %v", rec.EventID, err)
	}
	ev, ok, err := ddbschema.AuditEventFromItem(item)
	if err != nil {
		return r, malformed("event %q: %v", rec.EventID, err)
	}
	if !ok {
		return r, nil // no action: not an audit event
	}
	r.kind, r.audit = kindAudit, ev
	return r, nil
}

// keyString returns the string key attribute name of keys.
func keyString(keys map[string]events.DynamoDBAttributeValue, name string) (string, error) {
	v, ok := keys[name]
	if !ok {
		return "", fmt.Errorf("no %s key", name)
	}
	if v.DataType() != events.DataTypeString {
		return "", fmt.Errorf("key %s is not a string", name)
	}
	return v.String(), nil
}

// convertImage converts a stream image to SDK attribute values, checking
// each value's type before reading it.
func convertImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := convertValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func convertValue(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := v.List()
		out := make([]types.AttributeValue, len(l))
		for i, e := range l {
			av, err := convertValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = av
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case events.DataTypeMap:
		m, err := convertImage(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute type %d", v.DataType())
}
