package limiter

// The version record, the namespace registry, audit events and usage
// snapshots in this package's types: thin conversions over
// internal/ddbschema, which owns the layout.

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// ---------------------------------------------------------------------------
// Version record: PK _/SYSTEM#, SK #VERSION.

// versionRecord is the table-level version record as stored (the same
// fields as [VersionRecord]).
type versionRecord = ddbschema.Version

// versionItem returns the version record item. Empty LambdaVersion and
// UpdatedBy are written as NULL.
func versionItem(v versionRecord) map[string]types.AttributeValue { return ddbschema.VersionItem(v) }

// versionFromItem reads the version record; absent attributes read as "".
func versionFromItem(item map[string]types.AttributeValue) versionRecord {
	return ddbschema.VersionFromItem(item)
}

// ---------------------------------------------------------------------------
// Namespace registry: PK _/SYSTEM#, forward SK #NAMESPACE#{name}, reverse
// SK #NSID#{id}.

// Namespace record statuses. Forward records are only ever active.
const (
	namespaceActive  = ddbschema.NamespaceActive
	namespaceDeleted = ddbschema.NamespaceDeleted
	namespacePurging = ddbschema.NamespacePurging
)

// namespaceRecord is a forward or reverse namespace registry record.
type namespaceRecord = ddbschema.Namespace

// namespaceForwardItem returns the name → id record `#NAMESPACE#{name}`.
func namespaceForwardItem(r namespaceRecord) map[string]types.AttributeValue {
	return ddbschema.NamespaceForwardItem(r)
}

// namespaceReverseItem returns the id → name record `#NSID#{id}`, with
// deleted_at when DeletedAt is set.
func namespaceReverseItem(r namespaceRecord) map[string]types.AttributeValue {
	return ddbschema.NamespaceReverseItem(r)
}

// namespaceFromItem reads a forward or reverse registry record.
func namespaceFromItem(item map[string]types.AttributeValue) namespaceRecord {
	return ddbschema.NamespaceFromItem(item)
}

// ---------------------------------------------------------------------------
// Audit events: PK {ns}/AUDIT#{entity}, SK #AUDIT#{event id}.

// auditItem returns the audit event item (see ddbschema.AuditItem). ttl is
// in epoch seconds (now + retention). A [Limit] in the details is stored as
// the original's Limit.to_dict map (see [auditLimitDetail]); a non-finite
// float is an error.
func auditItem(ns string, e AuditEvent, ttl int64) (map[string]types.AttributeValue, error) {
	return ddbschema.AuditItem(ns, ddbschema.AuditEvent{
		EventID:   e.EventID,
		Timestamp: e.Timestamp,
		Action:    e.Action,
		EntityID:  e.EntityID,
		Principal: e.Principal,
		Resource:  e.Resource,
		Details:   e.Details,
	}, ttl, auditDetailConverter)
}

// auditDetailConverter stores a [Limit] in audit details as its to_dict
// map.
func auditDetailConverter(v any) (any, bool) {
	if l, ok := v.(Limit); ok {
		return auditLimitDetail(l), true
	}
	return nil, false
}

// auditEventFromItem reads an audit event item (see
// ddbschema.AuditEventFromItem). ok is false for items without a string
// action, which the original skips.
func auditEventFromItem(item map[string]types.AttributeValue) (AuditEvent, bool, error) {
	e, ok, err := ddbschema.AuditEventFromItem(item)
	if err != nil || !ok {
		return AuditEvent{}, ok, err
	}
	return AuditEvent{
		EventID:   e.EventID,
		Timestamp: e.Timestamp,
		Action:    e.Action,
		EntityID:  e.EntityID,
		Principal: e.Principal,
		Resource:  e.Resource,
		Details:   e.Details,
	}, true, nil
}

// ---------------------------------------------------------------------------
// Usage snapshots: PK {ns}/ENTITY#{id}, SK #USAGE#{res}#{window key}.

// usageSnapshotItem returns the snapshot item for s with the given ttl
// (epoch seconds), the item the aggregator's update creates (see
// ddbschema.UsageSnapshotItem).
func usageSnapshotItem(ns string, s UsageSnapshot, ttl int64) map[string]types.AttributeValue {
	return ddbschema.UsageSnapshotItem(ns, ddbschema.UsageSnapshot{
		EntityID:    s.EntityID,
		Resource:    s.Resource,
		WindowType:  s.WindowType,
		WindowStart: s.WindowStart,
		WindowEnd:   s.WindowEnd,
		Counters:    s.Counters,
		TotalEvents: s.TotalEvents,
	}, ttl)
}

// usageSnapshotFromItem reads a snapshot item (see
// ddbschema.UsageSnapshotFromItem). ok is false for items the original
// skips.
func usageSnapshotFromItem(item map[string]types.AttributeValue) (UsageSnapshot, bool, error) {
	s, ok, err := ddbschema.UsageSnapshotFromItem(item)
	if err != nil || !ok {
		return UsageSnapshot{}, ok, err
	}
	return UsageSnapshot{
		EntityID:    s.EntityID,
		Resource:    s.Resource,
		WindowType:  s.WindowType,
		WindowStart: s.WindowStart,
		WindowEnd:   s.WindowEnd,
		Counters:    s.Counters,
		TotalEvents: s.TotalEvents,
	}, true, nil
}
