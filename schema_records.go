package limiter

// Item (de)serialisation of the table-level and log records of schema
// 0.10.0 (reference §4.4): the version record, the namespace registry, audit
// events and usage snapshots. Bucket, entity and config items are in
// schema_items.go.

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------------------
// Version record: PK _/SYSTEM#, SK #VERSION.

// versionRecord is the table-level version record.
type versionRecord struct {
	SchemaVersion    string
	ClientMinVersion string
	// LambdaVersion and UpdatedBy are "" when stored as NULL or absent.
	LambdaVersion string
	UpdatedBy     string
	UpdatedAt     time.Time
	// TemplateVersion is read when present; it is never written.
	TemplateVersion string
}

// versionItem returns the version record item. Empty LambdaVersion and
// UpdatedBy are written as NULL; a Go client should leave LambdaVersion
// empty (reference §5.15).
func versionItem(v versionRecord) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:               schemaS(pkSystem(reservedNamespace)),
		attrSK:               schemaS(skVersion),
		attrSchemaVersion:    schemaS(v.SchemaVersion),
		attrClientMinVersion: schemaS(v.ClientMinVersion),
		attrUpdatedAt:        schemaS(formatISOSeconds(v.UpdatedAt)),
		attrLambdaVersion:    schemaSOrNull(v.LambdaVersion),
		attrUpdatedBy:        schemaSOrNull(v.UpdatedBy),
		attrGSI4PK:           schemaS(reservedNamespace),
		attrGSI4SK:           schemaS(pkSystem(reservedNamespace)),
	}
}

// versionFromItem reads the version record; absent attributes read as "".
func versionFromItem(item map[string]types.AttributeValue) versionRecord {
	var v versionRecord
	v.SchemaVersion, _ = schemaGetS(item, attrSchemaVersion)
	v.ClientMinVersion, _ = schemaGetS(item, attrClientMinVersion)
	v.LambdaVersion, _ = schemaGetS(item, attrLambdaVersion)
	v.UpdatedBy, _ = schemaGetS(item, attrUpdatedBy)
	v.TemplateVersion, _ = schemaGetS(item, attrTemplateVersion)
	v.UpdatedAt = schemaGetTime(item, attrUpdatedAt)
	return v
}

// ---------------------------------------------------------------------------
// Namespace registry: PK _/SYSTEM#, forward SK #NAMESPACE#{name}, reverse
// SK #NSID#{id}.

// Namespace record statuses. Forward records are only ever active.
const (
	namespaceActive  = "active"
	namespaceDeleted = "deleted"
	namespacePurging = "purging"
)

// namespaceRecord is a forward or reverse namespace registry record.
type namespaceRecord struct {
	Name      string
	ID        string
	Status    string // namespaceActive, namespaceDeleted, namespacePurging; "" if absent
	CreatedAt time.Time
	// DeletedAt is set on reverse records of deleted namespaces (zero
	// otherwise).
	DeletedAt time.Time
}

// namespaceRecordItem returns a registry record with sort key sk.
func namespaceRecordItem(sk string, r namespaceRecord) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK:            schemaS(pkSystem(reservedNamespace)),
		attrSK:            schemaS(sk),
		attrNamespaceID:   schemaS(r.ID),
		attrNamespaceName: schemaS(r.Name),
		attrStatus:        schemaS(r.Status),
		attrCreatedAt:     schemaS(formatISOSeconds(r.CreatedAt)),
		attrGSI4PK:        schemaS(reservedNamespace),
		attrGSI4SK:        schemaS(pkSystem(reservedNamespace)),
	}
}

// namespaceForwardItem returns the name → id record `#NAMESPACE#{name}`.
// DeletedAt is never written on forward records.
func namespaceForwardItem(r namespaceRecord) map[string]types.AttributeValue {
	return namespaceRecordItem(skNamespace(r.Name), r)
}

// namespaceReverseItem returns the id → name record `#NSID#{id}`, with
// deleted_at when DeletedAt is set.
func namespaceReverseItem(r namespaceRecord) map[string]types.AttributeValue {
	item := namespaceRecordItem(skNSID(r.ID), r)
	if !r.DeletedAt.IsZero() {
		item[attrDeletedAt] = schemaS(formatISOSeconds(r.DeletedAt))
	}
	return item
}

// namespaceFromItem reads a forward or reverse registry record. Absent
// attributes read as zero values.
func namespaceFromItem(item map[string]types.AttributeValue) namespaceRecord {
	var r namespaceRecord
	r.ID, _ = schemaGetS(item, attrNamespaceID)
	r.Name, _ = schemaGetS(item, attrNamespaceName)
	r.Status, _ = schemaGetS(item, attrStatus)
	r.CreatedAt = schemaGetTime(item, attrCreatedAt)
	r.DeletedAt = schemaGetTime(item, attrDeletedAt)
	return r
}

// ---------------------------------------------------------------------------
// Audit events: PK {ns}/AUDIT#{entity}, SK #AUDIT#{event id}.

// auditItem returns the audit event item. Empty Principal and Resource are
// written as NULL; ttl is in epoch seconds (now + retention). Details are
// serialised by [auditDetailValue]; a non-finite float is an error.
func auditItem(ns string, e AuditEvent, ttl int64) (map[string]types.AttributeValue, error) {
	details, err := auditDetailsMap(e.Details)
	if err != nil {
		return nil, fmt.Errorf("audit event %s details: %w", e.EventID, err)
	}
	return map[string]types.AttributeValue{
		attrPK:        schemaS(pkAudit(ns, e.EntityID)),
		attrSK:        schemaS(skAudit(e.EventID)),
		attrEntityID:  schemaS(e.EntityID),
		attrEventID:   schemaS(e.EventID),
		attrTimestamp: schemaS(formatISOSeconds(e.Timestamp)),
		attrAction:    schemaS(e.Action),
		attrPrincipal: schemaSOrNull(e.Principal),
		attrResource:  schemaSOrNull(e.Resource),
		attrDetails:   details,
		attrTTL:       schemaN(ttl),
		attrGSI4PK:    schemaS(ns),
		attrGSI4SK:    schemaS(pkAudit(ns, e.EntityID)),
	}, nil
}

// auditEventFromItem reads an audit event item. ok is false for items
// without a string action, which the original skips. Details numbers read
// as int64 (or float64 when they have a fraction or exponent), string sets
// and binary values as nil.
func auditEventFromItem(item map[string]types.AttributeValue) (e AuditEvent, ok bool, err error) {
	if e.Action, ok = schemaGetS(item, attrAction); !ok {
		return AuditEvent{}, false, nil
	}
	e.EventID, _ = schemaGetS(item, attrEventID)
	e.EntityID, _ = schemaGetS(item, attrEntityID)
	e.Principal, _ = schemaGetS(item, attrPrincipal)
	e.Resource, _ = schemaGetS(item, attrResource)
	e.Timestamp = schemaGetTime(item, attrTimestamp)
	e.Details = map[string]any{}
	if m, isM := item[attrDetails].(*types.AttributeValueMemberM); isM {
		for k, v := range m.Value {
			if e.Details[k], err = auditDetailFromAV(v); err != nil {
				return AuditEvent{}, false, fmt.Errorf("audit event %s details %s: %w", e.EventID, k, err)
			}
		}
	}
	return e, true, nil
}

// auditDetailsMap serialises a details map as an M value (nil → empty M).
func auditDetailsMap(details map[string]any) (types.AttributeValue, error) {
	av, _, err := auditDetailValue(reflect.ValueOf(details)) // a map is always supported
	return av, err
}

// auditDetailValue serialises one details value like the original's
// _serialize_value: strings (including named string types such as
// [OnUnavailable]) → S, bools → BOOL, integers and floats → N, maps with
// string keys → M, slices and arrays → L, nil → NULL, [Limit] → its to_dict
// map. ok is false for other types: inside a map they are dropped, inside a
// list they are written as S of their fmt.Sprint text (as the original does
// with str()). NaN and infinities are errors (DynamoDB rejects them).
func auditDetailValue(v reflect.Value) (av types.AttributeValue, ok bool, err error) {
	if !v.IsValid() {
		return schemaNull(), true, nil
	}
	if v.Type() == reflect.TypeFor[Limit]() {
		return auditDetailValue(reflect.ValueOf(auditLimitDetail(v.Interface().(Limit))))
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return schemaNull(), true, nil
		}
		return auditDetailValue(v.Elem())
	case reflect.String:
		return schemaS(v.String()), true, nil
	case reflect.Bool:
		return schemaBool(v.Bool()), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return schemaN(v.Int()), true, nil
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
			av, ok, err := auditDetailValue(iter.Value())
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
			return nil, false, nil // bytes: not supported by the original either
		}
		l := make([]types.AttributeValue, v.Len())
		for i := range v.Len() {
			av, ok, err := auditDetailValue(v.Index(i))
			if err != nil {
				return nil, false, err
			}
			if !ok {
				av = schemaS(fmt.Sprint(v.Index(i).Interface()))
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, true, nil
	}
	return nil, false, nil
}

// formatDetailFloat formats f like Python's str(float) for ordinary values:
// the shortest representation, with ".0" when it has no fraction.
func formatDetailFloat(f float64, bits int) string {
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// auditDetailFromAV deserialises one details value like the original's
// _deserialize_value.
func auditDetailFromAV(av types.AttributeValue) (any, error) {
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
			x, err := auditDetailFromAV(e)
			if err != nil {
				return nil, err
			}
			m[k] = x
		}
		return m, nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			x, err := auditDetailFromAV(e)
			if err != nil {
				return nil, err
			}
			l[i] = x
		}
		return l, nil
	}
	return nil, nil // NULL, sets, binary
}

// ---------------------------------------------------------------------------
// Usage snapshots: PK {ns}/ENTITY#{id}, SK #USAGE#{res}#{window key}. The
// aggregator writes them with UpdateItem; usageSnapshotItem gives the item
// such an update creates.

// usageSnapshotExcluded lists the attributes of a snapshot item that are not
// counters even when they are numbers.
var usageSnapshotExcluded = map[string]bool{
	attrPK: true, attrSK: true, attrEntityID: true, attrResource: true,
	attrWindow: true, attrWindowStart: true, attrTotalEvents: true,
	attrGSI2PK: true, attrGSI2SK: true, attrTTL: true,
}

// usageSnapshotItem returns the snapshot item for s with the given ttl
// (epoch seconds). The window key is formatISOSeconds(s.WindowStart).
// Counters named like a layout attribute (ttl, window, …) are skipped, as
// they would collide.
func usageSnapshotItem(ns string, s UsageSnapshot, ttl int64) map[string]types.AttributeValue {
	key := formatISOSeconds(s.WindowStart)
	item := map[string]types.AttributeValue{
		attrPK:          schemaS(pkEntity(ns, s.EntityID)),
		attrSK:          schemaS(skUsage(s.Resource, key)),
		attrEntityID:    schemaS(s.EntityID),
		attrResource:    schemaS(s.Resource),
		attrWindow:      schemaS(s.WindowType),
		attrWindowStart: schemaS(key),
		attrGSI2PK:      schemaS(gsi2PKResource(ns, s.Resource)),
		attrGSI2SK:      schemaS(gsi2SKUsage(key, s.EntityID)),
		attrGSI4PK:      schemaS(ns),
		attrGSI4SK:      schemaS(pkEntity(ns, s.EntityID)),
		attrTTL:         schemaN(ttl),
		attrTotalEvents: schemaN(s.TotalEvents),
	}
	for name, n := range s.Counters {
		if _, taken := item[name]; !taken && !usageSnapshotExcluded[name] {
			item[name] = schemaN(n)
		}
	}
	return item
}

// usageSnapshotFromItem reads a snapshot item. ok is false for items the
// original skips (no entity_id, resource or window_start) and for items
// whose window_start is not a timestamp. WindowEnd follows [windowEnd];
// Counters holds every number attribute except the layout's own (PK, SK,
// entity_id, resource, window, window_start, total_events, GSI2PK, GSI2SK,
// ttl). A counter that is not an integer is an error.
func usageSnapshotFromItem(item map[string]types.AttributeValue) (s UsageSnapshot, ok bool, err error) {
	s.EntityID, _ = schemaGetS(item, attrEntityID)
	s.Resource, _ = schemaGetS(item, attrResource)
	start, _ := schemaGetS(item, attrWindowStart)
	if s.EntityID == "" || s.Resource == "" || start == "" {
		return UsageSnapshot{}, false, nil
	}
	if s.WindowStart, err = parseISOSeconds(start); err != nil {
		return UsageSnapshot{}, false, nil
	}
	s.WindowType, _ = schemaGetS(item, attrWindow)
	s.WindowEnd = windowEnd(s.WindowType, s.WindowStart)
	if s.TotalEvents, err = schemaGetNOr(item, attrTotalEvents, 0); err != nil {
		return UsageSnapshot{}, false, fmt.Errorf("usage snapshot %s/%s %s: %w", s.EntityID, s.Resource, start, err)
	}
	s.Counters = map[string]int64{}
	for name := range item {
		if usageSnapshotExcluded[name] {
			continue
		}
		n, isN, err := schemaGetN(item, name)
		if err != nil {
			return UsageSnapshot{}, false, fmt.Errorf("usage snapshot %s/%s %s: %w", s.EntityID, s.Resource, start, err)
		}
		if isN {
			s.Counters[name] = n
		}
	}
	return s, true, nil
}
