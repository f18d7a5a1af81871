package limiter

// Short names for the parts of the table layout (internal/ddbschema) that
// the DynamoDB repository uses: index and attribute names, key formats and
// attribute-value helpers. They are aliases, so the layout has one
// definition.

import (
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// currentSchemaVersion is the infrastructure schema version this package
// reads and writes. Tables created by schema 0.9.0 (no LSIs) are
// compatible.
const currentSchemaVersion = ddbschema.SchemaVersion

// Index names.
const (
	indexGSI1 = ddbschema.IndexGSI1 // parent → children
	indexGSI2 = ddbschema.IndexGSI2 // resource → buckets and usage
	indexGSI3 = ddbschema.IndexGSI3 // entity configs by resource, buckets by entity
	indexGSI4 = ddbschema.IndexGSI4 // namespace-scoped discovery for purge
)

// reservedNamespace prefixes the namespace registry and the version record
// (`_/SYSTEM#`). It cannot be registered as a namespace name.
const reservedNamespace = ddbschema.ReservedNamespace

// Attribute names.
const (
	attrPK          = ddbschema.AttrPK
	attrSK          = ddbschema.AttrSK
	attrGSI2PK      = ddbschema.AttrGSI2PK
	attrGSI2SK      = ddbschema.AttrGSI2SK
	attrGSI3SK      = ddbschema.AttrGSI3SK
	attrEntityID    = ddbschema.AttrEntityID
	attrResource    = ddbschema.AttrResource
	attrTTL         = ddbschema.AttrTTL
	attrCreatedAt   = ddbschema.AttrCreatedAt
	attrShardCount  = ddbschema.AttrShardCount
	attrRefill      = ddbschema.AttrRefill
	attrCascade     = ddbschema.AttrCascade
	attrParentID    = ddbschema.AttrParentID
	attrEventID     = ddbschema.AttrEventID
	attrNamespaceID = ddbschema.AttrNamespaceID
	attrStatus      = ddbschema.AttrStatus
	attrDeletedAt   = ddbschema.AttrDeletedAt
)

// Key prefixes, sort keys and sort-key prefixes.
const (
	prefixBucket            = ddbschema.PrefixBucket
	prefixUsage             = ddbschema.PrefixUsage
	skMeta                  = ddbschema.SKMeta
	skState                 = ddbschema.SKState
	skVersion               = ddbschema.SKVersion
	skConfigPrefix          = ddbschema.SKConfigPrefix
	skResources             = ddbschema.SKResources
	skEntityConfigResources = ddbschema.SKEntityConfigResources
	skUsagePrefix           = ddbschema.SKUsagePrefix
	skAuditPrefix           = ddbschema.SKAuditPrefix
	skNamespacePrefix       = ddbschema.SKNamespacePrefix
	skNSIDPrefix            = ddbschema.SKNSIDPrefix
)

// Fields of the composite bucket attributes b_{limit}_{field}.
const (
	fieldTokens        = ddbschema.FieldTokens        // millitokens
	fieldCapacity      = ddbschema.FieldCapacity      // millitokens
	fieldRefillAmount  = ddbschema.FieldRefillAmount  // millitokens
	fieldRefillPeriod  = ddbschema.FieldRefillPeriod  // milliseconds
	fieldTotalConsumed = ddbschema.FieldTotalConsumed // millitokens
)

// wcuWriteCostMilli is what one speculative write consumes from the hidden
// wcu limit of a bucket item: one write unit.
const wcuWriteCostMilli = 1000

// Pseudo entity ids of config-level audit events.
const auditEntitySystem = "$SYSTEM"

// auditEntityResource returns the pseudo entity id `$RESOURCE:{res}` under
// which resource-default changes are audited.
func auditEntityResource(resource string) string { return "$RESOURCE:" + resource }

// Key builders.

func pkEntity(ns, entityID string) string { return ddbschema.PKEntity(ns, entityID) }
func pkSystem(ns string) string           { return ddbschema.PKSystem(ns) }
func pkResource(ns, resource string) string {
	return ddbschema.PKResource(ns, resource)
}
func pkAudit(ns, entityID string) string { return ddbschema.PKAudit(ns, entityID) }
func pkBucket(ns, entityID, resource string, shard int) string {
	return ddbschema.PKBucket(ns, entityID, resource, shard)
}
func skConfig(resource string) string              { return ddbschema.SKConfig(resource) }
func skUsage(resource, windowKey string) string    { return ddbschema.SKUsage(resource, windowKey) }
func skUsageResourcePrefix(resource string) string { return ddbschema.SKUsageResourcePrefix(resource) }
func skAudit(eventID string) string                { return ddbschema.SKAudit(eventID) }
func skNamespace(name string) string               { return ddbschema.SKNamespace(name) }
func skNSID(namespaceID string) string             { return ddbschema.SKNSID(namespaceID) }
func gsi1PKParent(ns, parentID string) string      { return ddbschema.GSI1PKParent(ns, parentID) }
func gsi2PKResource(ns, resource string) string    { return ddbschema.GSI2PKResource(ns, resource) }
func gsi2SKUsage(windowKey, entityID string) string {
	return ddbschema.GSI2SKUsage(windowKey, entityID)
}
func gsi3PKEntityConfig(ns, resource string) string {
	return ddbschema.GSI3PKEntityConfig(ns, resource)
}
func bucketAttr(limitName, field string) string { return ddbschema.BucketAttr(limitName, field) }

// ttlEpochSeconds returns the TTL attribute value for an item that expires
// seconds after nowMs: nowMs//1000 + seconds.
func ttlEpochSeconds(nowMs, seconds int64) int64 { return ddbschema.TTLEpochSeconds(nowMs, seconds) }

// newNamespaceID returns a fresh opaque namespace id (see
// ddbschema.NewNamespaceID); r nil means crypto/rand.
func newNamespaceID(r io.Reader) (string, error) {
	return ddbschema.NewNamespaceID(r)
}

// formatISOSeconds formats t in UTC as `%Y-%m-%dT%H:%M:%SZ`.
func formatISOSeconds(t time.Time) string { return ddbschema.FormatISOSeconds(t) }

// Attribute values.

func schemaS(s string) types.AttributeValue { return ddbschema.S(s) }
func schemaN(n int64) types.AttributeValue  { return ddbschema.N(n) }
func schemaBool(b bool) types.AttributeValue {
	return ddbschema.Bool(b)
}
func schemaGetS(item map[string]types.AttributeValue, name string) (string, bool) {
	return ddbschema.GetS(item, name)
}
func schemaGetN(item map[string]types.AttributeValue, name string) (int64, bool, error) {
	return ddbschema.GetN(item, name)
}
func schemaGetNOr(item map[string]types.AttributeValue, name string, def int64) (int64, error) {
	return ddbschema.GetNOr(item, name, def)
}
func schemaGetBool(item map[string]types.AttributeValue, name string) (bool, bool) {
	return ddbschema.GetBool(item, name)
}

// primaryKey returns the key map {PK: pk, SK: sk}.
func primaryKey(pk, sk string) map[string]types.AttributeValue { return ddbschema.PrimaryKey(pk, sk) }

// bucketPrimaryKey returns the key of a bucket item.
func bucketPrimaryKey(ns, entityID, resource string, shard int) map[string]types.AttributeValue {
	return ddbschema.BucketPrimaryKey(ns, entityID, resource, shard)
}
