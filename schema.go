// Layer 5, the DynamoDB repository: the table layout: schema version, table
// definition, keys and attribute names.

package limiter

// The table layout's public facts: the schema version, the table
// definition and the version record. The layout itself (attribute names,
// key formats, item codecs and expressions) lives in internal/ddbschema;
// this file (keys and attribute names) and schema_items.go (items and
// update expressions) adapt it to this package's types.

import (
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// The versions recorded in the table's version record.
const (
	// SchemaVersion is the table schema this library reads and writes. The
	// table's layout is shared with every other client of that schema:
	// they read and write the same tables and items.
	SchemaVersion = currentSchemaVersion
	// ClientVersion is this library's version, recorded in the version
	// record's updated_by as "client:go-{version}".
	ClientVersion = "0.1.0"
)

// TableDefinition returns the CreateTable request of a table for this schema:
// PK/SK string keys, on-demand billing, GSI1–GSI4, LSI1–LSI5 and a
// NEW_AND_OLD_IMAGES stream. It is the one source of truth for the table:
// [OpenDynamoDB] with CreateTable and the CloudFormation template in package
// infra both follow it (a test compares them). TTL on the "ttl" attribute is
// enabled separately (UpdateTimeToLive).
//
// One table holds every namespace. The partition key of each of a
// namespace's items starts with the namespace's opaque id and a '/':
//
//   - entity metadata: PK "{ns}/ENTITY#{entity}", SK "#META";
//   - an entity's stored limits: PK "{ns}/ENTITY#{entity}", SK
//     "#CONFIG#{resource}" ("_default_" for its default limits);
//   - resource defaults: PK "{ns}/RESOURCE#{resource}", SK "#CONFIG";
//   - system defaults: PK "{ns}/SYSTEM#", SK "#CONFIG";
//   - buckets: PK "{ns}/BUCKET#{entity}#{resource}#{shard}", SK "#STATE",
//     one item per (entity, resource) and shard, holding every limit as
//     the attributes b_{limit}_tk (balance), _cp (capacity), _ra (refill
//     amount), _rp (refill period) and _tc (total consumed) in millitokens
//     and milliseconds, with one shared refill timestamp "rf";
//   - usage snapshots: PK "{ns}/ENTITY#{entity}", SK
//     "#USAGE#{resource}#{window start}#{window type}" (the Python
//     library's aggregator writes "#USAGE#{resource}#{window start}", one
//     item for every window type starting then; both are read);
//   - audit events: PK "{ns}/AUDIT#{entity}", SK "#AUDIT#{event id}".
//
// The namespace registry and the version record live under PK "_/SYSTEM#"
// (SKs "#NAMESPACE#{name}", "#NSID#{id}" and "#VERSION"). GSI1 finds an
// entity's children, GSI2 a resource's buckets and usage snapshots, GSI3 an
// entity's buckets and the entities with limits for a resource, GSI4 every
// item of a namespace. Items that expire carry their epoch-second expiry in
// "ttl".
func TableDefinition(table string) *dynamodb.CreateTableInput { return tableDefinition(table) }

// VersionRecord is the table-level version record (PK "_/SYSTEM#",
// SK "#VERSION"). LambdaVersion and UpdatedBy are "" when stored as NULL.
type VersionRecord struct {
	SchemaVersion    string
	ClientMinVersion string
	LambdaVersion    string
	UpdatedBy        string
	UpdatedAt        time.Time
	TemplateVersion  string // read when present, never written
}

// tableDefinition returns the CreateTable request of the table (see
// [TableDefinition]).
func tableDefinition(table string) *dynamodb.CreateTableInput {
	return ddbschema.TableDefinition(table)
}

// ttlSpecification returns the UpdateTimeToLive request that enables TTL on
// the "ttl" attribute, as the CloudFormation template does.
func ttlSpecification(table string) *dynamodb.UpdateTimeToLiveInput {
	return ddbschema.TTLSpecification(table)
}

// Short names for the parts of the table layout (internal/ddbschema) that
// the DynamoDB repository uses: index and attribute names, key formats and
// attribute-value helpers. They are aliases, so the layout has one
// definition.

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
	fieldFullAt        = ddbschema.FieldFullAt        // ms: when the limit may be full, at the earliest
	fieldShadow        = ddbschema.FieldShadow        // millitokens: a copy of tk
	fieldParams        = ddbschema.FieldParams        // the parameters fa holds for
)

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
func skConfig(resource string) string { return ddbschema.SKConfig(resource) }
func skUsage(resource, windowKey, window string) string {
	return ddbschema.SKUsage(resource, windowKey, window)
}
func skUsageResourcePrefix(resource string) string { return ddbschema.SKUsageResourcePrefix(resource) }
func skAudit(eventID string) string                { return ddbschema.SKAudit(eventID) }
func skNamespace(name string) string               { return ddbschema.SKNamespace(name) }
func skNSID(namespaceID string) string             { return ddbschema.SKNSID(namespaceID) }
func gsi1PKParent(ns, parentID string) string      { return ddbschema.GSI1PKParent(ns, parentID) }
func gsi2PKResource(ns, resource string) string    { return ddbschema.GSI2PKResource(ns, resource) }
func gsi2SKUsage(windowKey, entityID, window string) string {
	return ddbschema.GSI2SKUsage(windowKey, entityID, window)
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
