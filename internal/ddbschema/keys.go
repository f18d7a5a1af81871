package ddbschema

import (
	"strconv"
	"strings"
)

// SchemaVersion is the infrastructure schema version of this layout. Tables
// created by schema 0.9.0 (no LSIs) are compatible.
const SchemaVersion = "0.10.0"

// Index names. The LSIs are reserved: nothing writes their sort keys yet.
const (
	IndexGSI1 = "GSI1" // parent → children (GSI1PK/GSI1SK, projection ALL)
	IndexGSI2 = "GSI2" // resource → buckets and usage (GSI2PK/GSI2SK, ALL)
	IndexGSI3 = "GSI3" // entity configs by resource, buckets by entity (KEYS_ONLY)
	IndexGSI4 = "GSI4" // namespace-scoped discovery for purge (KEYS_ONLY)
	IndexLSI1 = "LSI1" // reserved, ALL
	IndexLSI2 = "LSI2" // reserved, KEYS_ONLY
	IndexLSI3 = "LSI3" // reserved, ALL
	IndexLSI4 = "LSI4" // reserved, KEYS_ONLY
	IndexLSI5 = "LSI5" // reserved, ALL
)

// Namespaces.
const (
	// ReservedNamespace prefixes the namespace registry and the version
	// record (`_/SYSTEM#`). It cannot be registered as a namespace name.
	ReservedNamespace = "_"
	// DefaultNamespace is the default namespace name.
	DefaultNamespace = "default"
)

// Key attribute names and the other top-level attribute names of every item
// layout.
const (
	AttrPK     = "PK"
	AttrSK     = "SK"
	AttrGSI1PK = "GSI1PK"
	AttrGSI1SK = "GSI1SK"
	AttrGSI2PK = "GSI2PK"
	AttrGSI2SK = "GSI2SK"
	AttrGSI3PK = "GSI3PK"
	AttrGSI3SK = "GSI3SK"
	AttrGSI4PK = "GSI4PK"
	AttrGSI4SK = "GSI4SK"
	AttrLSI1SK = "LSI1SK"
	AttrLSI2SK = "LSI2SK"
	AttrLSI3SK = "LSI3SK"
	AttrLSI4SK = "LSI4SK"
	AttrLSI5SK = "LSI5SK"

	// Shared by several layouts.
	AttrEntityID  = "entity_id"
	AttrResource  = "resource"
	AttrTTL       = "ttl" // N, epoch seconds; the table's TTL attribute
	AttrCreatedAt = "created_at"

	// Bucket items.
	AttrRefill     = "rf" // N, ms: the shared refill timestamp and optimistic lock
	AttrShardCount = "shard_count"
	AttrCascade    = "cascade"
	AttrParentID   = "parent_id"
	// AttrIncarnation (N) is the random id a bucket item was created with
	// (store.Bucket.Incarnation); items the Python original writes have
	// none, and it ignores it.
	AttrIncarnation = "inc"

	// Entity metadata items.
	AttrName     = "name"
	AttrMetadata = "metadata"

	// Config items.
	AttrConfigVersion      = "config_version"
	AttrOnUnavailable      = "on_unavailable"
	AttrAuditRetentionDays = "audit_retention_days"
	AttrResources          = "resources" // SS of the resource registry

	// Audit events.
	AttrEventID   = "event_id"
	AttrTimestamp = "timestamp"
	AttrAction    = "action"
	AttrPrincipal = "principal"
	AttrDetails   = "details"

	// Usage snapshots.
	AttrWindow      = "window"
	AttrWindowStart = "window_start"
	AttrTotalEvents = "total_events"

	// Version record.
	AttrSchemaVersion    = "schema_version"
	AttrClientMinVersion = "client_min_version"
	AttrUpdatedAt        = "updated_at"
	AttrLambdaVersion    = "lambda_version"
	AttrUpdatedBy        = "updated_by"
	AttrTemplateVersion  = "template_version" // read if present, never written

	// Namespace registry records.
	AttrNamespaceID   = "namespace_id"
	AttrNamespaceName = "namespace_name"
	AttrStatus        = "status"
	AttrDeletedAt     = "deleted_at"
)

// Partition-key prefixes. A data item's PK is `{ns}/` followed by one of
// these.
const (
	PrefixEntity       = "ENTITY#"
	PrefixParent       = "PARENT#"
	PrefixChild        = "CHILD#"
	PrefixResource     = "RESOURCE#"
	PrefixSystem       = "SYSTEM#"
	PrefixEntityConfig = "ENTITY_CONFIG#"
	PrefixBucket       = "BUCKET#"
	PrefixAudit        = "AUDIT#"
	PrefixUsage        = "USAGE#"  // GSI2SK of usage snapshots
	PrefixAccess       = "ACCESS#" // GSI2SK of access records (unused)
)

// Sort keys and sort-key prefixes.
const (
	SKMeta                  = "#META"
	SKState                 = "#STATE"
	SKVersion               = "#VERSION"
	SKConfigPrefix          = "#CONFIG" // system/resource config SK; entity configs append "#{res}"
	SKResources             = "#RESOURCES"
	SKEntityConfigResources = "#ENTITY_CONFIG_RESOURCES"
	SKProvisioner           = "#PROVISIONER"
	SKUsagePrefix           = "#USAGE#"
	SKAuditPrefix           = "#AUDIT#"
	SKNamespacePrefix       = "#NAMESPACE#"
	SKNSIDPrefix            = "#NSID#"

	// Sort keys of layouts before schema 0.9.0, which only migrations
	// read.
	SKBucketLegacyPrefix   = "#BUCKET#"
	SKLimitLegacyPrefix    = "#LIMIT#"
	SKResourceLegacyPrefix = "#RESOURCE#"
)

// Composite attribute names: bucket limits are stored as b_{limit}_{field},
// config limits as l_{limit}_{field}.
const (
	BucketAttrPrefix = "b_"
	LimitAttrPrefix  = "l_"

	FieldTokens        = "tk" // bucket: tokens, millitokens
	FieldCapacity      = "cp" // bucket: millitokens; config: tokens
	FieldRefillAmount  = "ra" // bucket: millitokens; config: tokens
	FieldRefillPeriod  = "rp" // bucket: milliseconds; config: SECONDS
	FieldTotalConsumed = "tc" // bucket: net consumption counter, millitokens
	FieldTimeZone      = "tz" // config: a calendar limit's IANA time zone (absent for UTC)

	// The state of the exact speculative write (see [BucketLimit]), which
	// other clients of the table neither write nor read: they find a
	// bucket's limits by their _tk attributes (their aggregator by _tc and
	// _cp), which these names do not end in.
	FieldFullAt = "fa" // bucket: lower bound of the first ms the limit is full
	FieldShadow = "ts" // bucket: a copy of tk, moved with it by every write of this library
	FieldParams = "fp" // bucket: the parameters fa holds for ([ParamsSig])
)

// ConfigVersion is the constant written to config_version (nothing reads
// or increments it).
const ConfigVersion = 1

// ---------------------------------------------------------------------------
// Key builders. Shards are written in decimal.

// PKEntity returns `{ns}/ENTITY#{id}`: entity metadata, entity configs and
// usage snapshots. GSI3PK for bucket discovery and GSI4SK of entity items use
// the same string.
func PKEntity(ns, entityID string) string { return ns + "/" + PrefixEntity + entityID }

// PKSystem returns `{ns}/SYSTEM#`: system config and registries; with the
// reserved namespace, the namespace registry and the version record.
func PKSystem(ns string) string { return ns + "/" + PrefixSystem }

// PKResource returns `{ns}/RESOURCE#{res}`: resource config.
func PKResource(ns, resource string) string { return ns + "/" + PrefixResource + resource }

// PKAudit returns `{ns}/AUDIT#{id}`: audit events of an entity (or of a
// pseudo entity such as `$SYSTEM`).
func PKAudit(ns, entityID string) string { return ns + "/" + PrefixAudit + entityID }

// PKBucket returns `{ns}/BUCKET#{id}#{res}#{shard}`.
func PKBucket(ns, entityID, resource string, shard int) string {
	return ns + "/" + PrefixBucket + entityID + "#" + resource + "#" + strconv.Itoa(shard)
}

// SKConfig returns the config sort key: `#CONFIG#{res}` for entity configs,
// or `#CONFIG` when res is "" (system and resource configs; an empty
// resource is never valid).
func SKConfig(resource string) string {
	if resource == "" {
		return SKConfigPrefix
	}
	return SKConfigPrefix + "#" + resource
}

// SKUsage returns `#USAGE#{res}#{windowKey}#{window}`, the sort key of
// the usage snapshot of one window type (hourly, daily, monthly) starting
// at windowKey. The window type is part of the key because windows of
// different types start at the same instant (the hour from midnight UTC,
// the day, and on the 1st the month).
func SKUsage(resource, windowKey, window string) string {
	return SKUsagePrefix + resource + "#" + windowKey + "#" + window
}

// SKUsageShared returns `#USAGE#{res}#{windowKey}`, the sort key of the
// usage snapshots of the shared layout, which the Python library's
// aggregator writes: every window type starting at windowKey adds to that
// one item. This library reads such items like the others and never
// writes them.
func SKUsageShared(resource, windowKey string) string {
	return SKUsagePrefix + resource + "#" + windowKey
}

// SKUsageResourcePrefix returns `#USAGE#{res}#`, the begins_with prefix of
// one resource's snapshots under an entity.
func SKUsageResourcePrefix(resource string) string { return SKUsagePrefix + resource + "#" }

// SKAudit returns `#AUDIT#{eventID}`.
func SKAudit(eventID string) string { return SKAuditPrefix + eventID }

// SKNamespace returns `#NAMESPACE#{name}`, the forward registry record.
func SKNamespace(name string) string { return SKNamespacePrefix + name }

// SKNSID returns `#NSID#{id}`, the reverse registry record.
func SKNSID(namespaceID string) string { return SKNSIDPrefix + namespaceID }

// SKBucketLegacy returns the pre-0.9.0 bucket SK `#BUCKET#{res}`.
func SKBucketLegacy(resource string) string { return SKBucketLegacyPrefix + resource }

// SKLimitLegacy returns the pre-0.8.0 entity limit SK `#LIMIT#{res}#{name}`.
func SKLimitLegacy(resource, limitName string) string {
	return SKLimitLegacyPrefix + resource + "#" + limitName
}

// SKLimitLegacyResourcePrefix returns the pre-0.8.0 prefix `#LIMIT#{res}#`.
func SKLimitLegacyResourcePrefix(resource string) string {
	return SKLimitLegacyPrefix + resource + "#"
}

// SKSystemLimitLegacy returns the pre-0.8.0 system/resource limit SK
// `#LIMIT#{name}`.
func SKSystemLimitLegacy(limitName string) string { return SKLimitLegacyPrefix + limitName }

// SKResourceLegacy returns the legacy access-tracking SK `#RESOURCE#{res}`.
func SKResourceLegacy(resource string) string { return SKResourceLegacyPrefix + resource }

// GSI1PKParent returns `{ns}/PARENT#{parent}`, GSI1PK of child entities.
func GSI1PKParent(ns, parentID string) string { return ns + "/" + PrefixParent + parentID }

// GSI1SKChild returns `CHILD#{id}`, GSI1SK of child entities.
func GSI1SKChild(entityID string) string { return PrefixChild + entityID }

// GSI2PKResource returns `{ns}/RESOURCE#{res}` (the same string as
// [PKResource]), GSI2PK of buckets and usage snapshots.
func GSI2PKResource(ns, resource string) string { return PKResource(ns, resource) }

// GSI2SKBucket returns `BUCKET#{id}#{shard}`.
func GSI2SKBucket(entityID string, shard int) string {
	return PrefixBucket + entityID + "#" + strconv.Itoa(shard)
}

// GSI2SKUsage returns `USAGE#{windowKey}#{id}#{window}`, GSI2SK of the
// usage snapshot of one window type (see [SKUsage]).
func GSI2SKUsage(windowKey, entityID, window string) string {
	return PrefixUsage + windowKey + "#" + entityID + "#" + window
}

// GSI2SKUsageShared returns `USAGE#{windowKey}#{id}`, GSI2SK of a usage
// snapshot item shared by the window types (see [SKUsageShared]).
func GSI2SKUsageShared(windowKey, entityID string) string {
	return PrefixUsage + windowKey + "#" + entityID
}

// GSI2SKAccess returns `ACCESS#{id}` (defined by the layout, unused).
func GSI2SKAccess(entityID string) string { return PrefixAccess + entityID }

// GSI3PKEntityConfig returns `{ns}/ENTITY_CONFIG#{res}`, GSI3PK of entity
// configs.
func GSI3PKEntityConfig(ns, resource string) string {
	return ns + "/" + PrefixEntityConfig + resource
}

// GSI3SKEntity returns the GSI3SK of entity configs: the bare entity id.
func GSI3SKEntity(entityID string) string { return entityID }

// GSI3PKEntity returns `{ns}/ENTITY#{id}` (the same string as [PKEntity]),
// GSI3PK of buckets.
func GSI3PKEntity(ns, entityID string) string { return PKEntity(ns, entityID) }

// GSI3SKBucket returns `BUCKET#{res}#{shard}`.
func GSI3SKBucket(resource string, shard int) string {
	return PrefixBucket + resource + "#" + strconv.Itoa(shard)
}

// GSI4SKBucket returns `BUCKET#{id}#{res}#{shard}`: unlike every other
// GSI4SK it has no `{ns}/` prefix.
func GSI4SKBucket(entityID, resource string, shard int) string {
	return PrefixBucket + entityID + "#" + resource + "#" + strconv.Itoa(shard)
}

// BucketAttr returns the bucket attribute name `b_{limit}_{field}`.
func BucketAttr(limitName, field string) string {
	return BucketAttrPrefix + limitName + "_" + field
}

// LimitAttr returns the config attribute name `l_{limit}_{field}`.
func LimitAttr(limitName, field string) string {
	return LimitAttrPrefix + limitName + "_" + field
}

// ---------------------------------------------------------------------------
// Parsers.

// KeyFormatError reports a key that does not have the expected format,
// with the reason, e.g. "Not a bucket PK".
type KeyFormatError struct {
	Key    string
	Reason string // e.g. "Not a bucket PK"
}

// Error returns "{reason}: {key}".
func (e *KeyFormatError) Error() string { return e.Reason + ": " + e.Key }

// ParseNamespace splits key at the first '/' into the namespace id and the
// remainder. A key without '/' is a *[KeyFormatError] ("Key has no
// namespace separator '/'").
func ParseNamespace(key string) (ns, rest string, err error) {
	ns, rest, ok := strings.Cut(key, "/")
	if !ok {
		return "", "", &KeyFormatError{Key: key, Reason: "Key has no namespace separator '/'"}
	}
	return ns, rest, nil
}

// BucketPK is a parsed bucket partition key.
type BucketPK struct {
	Namespace string
	EntityID  string
	Resource  string
	Shard     int
}

// ParseBucketPK is the inverse of [PKBucket]: `{ns}/BUCKET#{id}#{res}#{shard}`.
// The namespace ends at the first '/', the shard starts after the last '#'
// and the entity id ends at the first '#', so resources may contain '/'.
// Errors are *[KeyFormatError].
func ParseBucketPK(pk string) (BucketPK, error) {
	ns, rest, err := ParseNamespace(pk)
	if err != nil {
		return BucketPK{}, err
	}
	rest, ok := strings.CutPrefix(rest, PrefixBucket)
	if !ok {
		return BucketPK{}, &KeyFormatError{Key: pk, Reason: "Not a bucket PK"}
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return BucketPK{}, &KeyFormatError{Key: pk, Reason: "Invalid bucket PK format"}
	}
	shard, ok := parseShard(rest[i+1:])
	if !ok {
		return BucketPK{}, &KeyFormatError{Key: pk, Reason: "Invalid bucket PK shard"}
	}
	entityID, resource, ok := strings.Cut(rest[:i], "#")
	if !ok {
		return BucketPK{}, &KeyFormatError{Key: pk, Reason: "Invalid bucket PK format"}
	}
	return BucketPK{Namespace: ns, EntityID: entityID, Resource: resource, Shard: shard}, nil
}

// parseShard parses a non-empty run of ASCII digits that fits an int.
func parseShard(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// ParseBucketSKLegacy returns the resource of a pre-0.9.0 bucket SK
// `#BUCKET#{res}`. Errors are *[KeyFormatError].
func ParseBucketSKLegacy(sk string) (string, error) {
	res, ok := strings.CutPrefix(sk, SKBucketLegacyPrefix)
	if !ok {
		return "", &KeyFormatError{Key: sk, Reason: "Invalid bucket SK"}
	}
	if res == "" {
		return "", &KeyFormatError{Key: sk, Reason: "Invalid bucket SK format"}
	}
	return res, nil
}

// ParseBucketAttr splits a bucket attribute `b_{limit}_{field}` at the last
// '_', so limit names may contain '_'. ok is false when attr lacks the
// prefix, has no '_' after it, or the limit part is empty.
func ParseBucketAttr(attr string) (limitName, field string, ok bool) {
	return parseCompositeAttr(attr, BucketAttrPrefix)
}

// ParseLimitAttr splits a config attribute `l_{limit}_{field}` like
// [ParseBucketAttr].
func ParseLimitAttr(attr string) (limitName, field string, ok bool) {
	return parseCompositeAttr(attr, LimitAttrPrefix)
}

func parseCompositeAttr(attr, prefix string) (limitName, field string, ok bool) {
	rest, ok := strings.CutPrefix(attr, prefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// IsBucketKey reports whether pk and sk are the keys of a bucket item: pk
// is `{ns}/BUCKET#…` and sk is `#STATE`. It does not check that pk parses;
// [BucketFromItem] does.
func IsBucketKey(pk, sk string) bool {
	_, rest, err := ParseNamespace(pk)
	return err == nil && sk == SKState && strings.HasPrefix(rest, PrefixBucket)
}

// IsAuditKey reports whether pk is the partition key of audit events,
// `{ns}/AUDIT#{entity}`. Only the namespaced form matches: a bare
// `AUDIT#…` key is not an audit event of this schema.
func IsAuditKey(pk string) bool {
	_, rest, err := ParseNamespace(pk)
	return err == nil && strings.HasPrefix(rest, PrefixAudit)
}
