package limiter

// This file owns the DynamoDB table layout of schema 0.10.0 (reference §4):
// attribute names, key formats and their parsers, the table definition,
// namespace ids, timestamps and usage-window keys. It is pure: nothing here
// calls AWS. Item (de)serialisation lives in schema_items.go.

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// currentSchemaVersion is the infrastructure schema version this port reads
// and writes (the original's CURRENT_SCHEMA_VERSION). Tables created by
// schema 0.9.0 (no LSIs) are compatible.
const currentSchemaVersion = "0.10.0"

// Index names. The LSIs are reserved: nothing writes their sort keys yet.
const (
	indexGSI1 = "GSI1" // parent → children (GSI1PK/GSI1SK, projection ALL)
	indexGSI2 = "GSI2" // resource → buckets and usage (GSI2PK/GSI2SK, ALL)
	indexGSI3 = "GSI3" // entity configs by resource, buckets by entity (KEYS_ONLY)
	indexGSI4 = "GSI4" // namespace-scoped discovery for purge (KEYS_ONLY)
	indexLSI1 = "LSI1" // reserved, ALL
	indexLSI2 = "LSI2" // reserved, KEYS_ONLY
	indexLSI3 = "LSI3" // reserved, ALL
	indexLSI4 = "LSI4" // reserved, KEYS_ONLY
	indexLSI5 = "LSI5" // reserved, ALL
)

// Namespaces.
const (
	// reservedNamespace prefixes the namespace registry and the version
	// record (`_/SYSTEM#`). It cannot be registered as a namespace name.
	reservedNamespace = "_"
	// defaultNamespace is the default namespace *name*. The original also
	// uses it as a literal namespace id before resolution.
	defaultNamespace = "default"
)

// Key attribute names and the other top-level attribute names of every item
// layout (reference §4.4).
const (
	attrPK     = "PK"
	attrSK     = "SK"
	attrGSI1PK = "GSI1PK"
	attrGSI1SK = "GSI1SK"
	attrGSI2PK = "GSI2PK"
	attrGSI2SK = "GSI2SK"
	attrGSI3PK = "GSI3PK"
	attrGSI3SK = "GSI3SK"
	attrGSI4PK = "GSI4PK"
	attrGSI4SK = "GSI4SK"
	attrLSI1SK = "LSI1SK"
	attrLSI2SK = "LSI2SK"
	attrLSI3SK = "LSI3SK"
	attrLSI4SK = "LSI4SK"
	attrLSI5SK = "LSI5SK"

	// Shared by several layouts.
	attrEntityID  = "entity_id"
	attrResource  = "resource"
	attrTTL       = "ttl" // N, epoch seconds; the table's TTL attribute
	attrCreatedAt = "created_at"

	// Bucket items.
	attrRefill     = "rf" // N, ms: the shared refill timestamp and optimistic lock
	attrShardCount = "shard_count"
	attrCascade    = "cascade"
	attrParentID   = "parent_id"

	// Entity metadata items.
	attrName     = "name"
	attrMetadata = "metadata"

	// Config items.
	attrConfigVersion      = "config_version"
	attrOnUnavailable      = "on_unavailable"
	attrAuditRetentionDays = "audit_retention_days"
	attrResources          = "resources" // SS of the resource registry

	// Audit events.
	attrEventID   = "event_id"
	attrTimestamp = "timestamp"
	attrAction    = "action"
	attrPrincipal = "principal"
	attrDetails   = "details"

	// Usage snapshots.
	attrWindow      = "window"
	attrWindowStart = "window_start"
	attrTotalEvents = "total_events"

	// Version record.
	attrSchemaVersion    = "schema_version"
	attrClientMinVersion = "client_min_version"
	attrUpdatedAt        = "updated_at"
	attrLambdaVersion    = "lambda_version"
	attrUpdatedBy        = "updated_by"
	attrTemplateVersion  = "template_version" // read if present, never written

	// Namespace registry records.
	attrNamespaceID   = "namespace_id"
	attrNamespaceName = "namespace_name"
	attrStatus        = "status"
	attrDeletedAt     = "deleted_at"
)

// Partition-key prefixes. A data item's PK is `{ns}/` followed by one of
// these.
const (
	prefixEntity       = "ENTITY#"
	prefixParent       = "PARENT#"
	prefixChild        = "CHILD#"
	prefixResource     = "RESOURCE#"
	prefixSystem       = "SYSTEM#"
	prefixEntityConfig = "ENTITY_CONFIG#"
	prefixBucket       = "BUCKET#"
	prefixAudit        = "AUDIT#"
	prefixUsage        = "USAGE#"  // GSI2SK of usage snapshots
	prefixAccess       = "ACCESS#" // GSI2SK of access records (unused)
)

// Sort keys and sort-key prefixes.
const (
	skMeta                  = "#META"
	skState                 = "#STATE"
	skVersion               = "#VERSION"
	skConfigPrefix          = "#CONFIG" // system/resource config SK; entity configs append "#{res}"
	skResources             = "#RESOURCES"
	skEntityConfigResources = "#ENTITY_CONFIG_RESOURCES"
	skProvisioner           = "#PROVISIONER"
	skUsagePrefix           = "#USAGE#"
	skAuditPrefix           = "#AUDIT#"
	skNamespacePrefix       = "#NAMESPACE#"
	skNSIDPrefix            = "#NSID#"

	// Legacy sort keys, read only by migrations and the aggregator.
	skBucketLegacyPrefix   = "#BUCKET#"
	skLimitLegacyPrefix    = "#LIMIT#"
	skResourceLegacyPrefix = "#RESOURCE#"
)

// Composite attribute names: bucket limits are stored as b_{limit}_{field},
// config limits as l_{limit}_{field}.
const (
	bucketAttrPrefix = "b_"
	limitAttrPrefix  = "l_"

	fieldTokens        = "tk" // bucket: tokens, millitokens
	fieldCapacity      = "cp" // bucket: millitokens; config: tokens
	fieldRefillAmount  = "ra" // bucket: millitokens; config: tokens
	fieldRefillPeriod  = "rp" // bucket: milliseconds; config: SECONDS
	fieldTotalConsumed = "tc" // bucket: net consumption counter, millitokens
)

// configVersion is the constant written to config_version (never read or
// incremented by the original).
const configVersion = 1

// The hidden infrastructure limit wcu (named by wcuLimitName in models.go):
// DynamoDB's per-partition write ceiling, injected into every bucket item.
const (
	wcuCapacity            = 1000 // tokens
	wcuRefillAmount        = 1000 // tokens per period
	wcuRefillPeriodSeconds = 1

	wcuCapacityMilli     = wcuCapacity * 1000            // stored b_wcu_cp (and initial b_wcu_tk)
	wcuRefillAmountMilli = wcuRefillAmount * 1000        // stored b_wcu_ra
	wcuRefillPeriodMs    = wcuRefillPeriodSeconds * 1000 // stored b_wcu_rp

	// wcuWriteCostMilli is what one speculative write consumes from wcu.
	wcuWriteCostMilli = 1000
	// wcuShardWarnThreshold is the shard count above which doubling is
	// logged as a warning.
	wcuShardWarnThreshold = 32
)

// Pseudo entity ids of config-level audit events.
const auditEntitySystem = "$SYSTEM"

// auditEntityResource returns the pseudo entity id `$RESOURCE:{res}` under
// which resource-default changes are audited.
func auditEntityResource(resource string) string { return "$RESOURCE:" + resource }

// ---------------------------------------------------------------------------
// Key builders (reference §4.2). Shards are written in decimal.

// pkEntity returns `{ns}/ENTITY#{id}`: entity metadata, entity configs and
// usage snapshots. GSI3PK for bucket discovery and GSI4SK of entity items use
// the same string.
func pkEntity(ns, entityID string) string { return ns + "/" + prefixEntity + entityID }

// pkSystem returns `{ns}/SYSTEM#`: system config and registries; with the
// reserved namespace, the namespace registry and the version record.
func pkSystem(ns string) string { return ns + "/" + prefixSystem }

// pkResource returns `{ns}/RESOURCE#{res}`: resource config.
func pkResource(ns, resource string) string { return ns + "/" + prefixResource + resource }

// pkAudit returns `{ns}/AUDIT#{id}`: audit events of an entity (or of a
// pseudo entity such as [auditEntitySystem]).
func pkAudit(ns, entityID string) string { return ns + "/" + prefixAudit + entityID }

// pkBucket returns `{ns}/BUCKET#{id}#{res}#{shard}`.
func pkBucket(ns, entityID, resource string, shard int) string {
	return ns + "/" + prefixBucket + entityID + "#" + resource + "#" + strconv.Itoa(shard)
}

// skConfig returns the config sort key: `#CONFIG#{res}` for entity configs,
// or `#CONFIG` when res is "" (system and resource configs; the original's
// None — an empty resource is never valid).
func skConfig(resource string) string {
	if resource == "" {
		return skConfigPrefix
	}
	return skConfigPrefix + "#" + resource
}

// skUsage returns `#USAGE#{res}#{windowKey}`.
func skUsage(resource, windowKey string) string {
	return skUsagePrefix + resource + "#" + windowKey
}

// skUsageResourcePrefix returns `#USAGE#{res}#`, the begins_with prefix of
// one resource's snapshots under an entity.
func skUsageResourcePrefix(resource string) string { return skUsagePrefix + resource + "#" }

// skAudit returns `#AUDIT#{eventID}`.
func skAudit(eventID string) string { return skAuditPrefix + eventID }

// skNamespace returns `#NAMESPACE#{name}`, the forward registry record.
func skNamespace(name string) string { return skNamespacePrefix + name }

// skNSID returns `#NSID#{id}`, the reverse registry record.
func skNSID(namespaceID string) string { return skNSIDPrefix + namespaceID }

// skBucketLegacy returns the pre-0.9.0 bucket SK `#BUCKET#{res}`.
func skBucketLegacy(resource string) string { return skBucketLegacyPrefix + resource }

// skLimitLegacy returns the pre-0.8.0 entity limit SK `#LIMIT#{res}#{name}`.
func skLimitLegacy(resource, limitName string) string {
	return skLimitLegacyPrefix + resource + "#" + limitName
}

// skLimitLegacyResourcePrefix returns the pre-0.8.0 prefix `#LIMIT#{res}#`.
func skLimitLegacyResourcePrefix(resource string) string {
	return skLimitLegacyPrefix + resource + "#"
}

// skSystemLimitLegacy returns the pre-0.8.0 system/resource limit SK
// `#LIMIT#{name}`.
func skSystemLimitLegacy(limitName string) string { return skLimitLegacyPrefix + limitName }

// skResourceLegacy returns the legacy access-tracking SK `#RESOURCE#{res}`.
func skResourceLegacy(resource string) string { return skResourceLegacyPrefix + resource }

// gsi1PKParent returns `{ns}/PARENT#{parent}`, GSI1PK of child entities.
func gsi1PKParent(ns, parentID string) string { return ns + "/" + prefixParent + parentID }

// gsi1SKChild returns `CHILD#{id}`, GSI1SK of child entities.
func gsi1SKChild(entityID string) string { return prefixChild + entityID }

// gsi2PKResource returns `{ns}/RESOURCE#{res}` (the same string as
// [pkResource]), GSI2PK of buckets and usage snapshots.
func gsi2PKResource(ns, resource string) string { return pkResource(ns, resource) }

// gsi2SKBucket returns `BUCKET#{id}#{shard}`.
func gsi2SKBucket(entityID string, shard int) string {
	return prefixBucket + entityID + "#" + strconv.Itoa(shard)
}

// gsi2SKUsage returns `USAGE#{windowKey}#{id}`.
func gsi2SKUsage(windowKey, entityID string) string {
	return prefixUsage + windowKey + "#" + entityID
}

// gsi2SKAccess returns `ACCESS#{id}` (defined by the original, unused).
func gsi2SKAccess(entityID string) string { return prefixAccess + entityID }

// gsi3PKEntityConfig returns `{ns}/ENTITY_CONFIG#{res}`, GSI3PK of entity
// configs.
func gsi3PKEntityConfig(ns, resource string) string {
	return ns + "/" + prefixEntityConfig + resource
}

// gsi3SKEntity returns the GSI3SK of entity configs: the bare entity id.
func gsi3SKEntity(entityID string) string { return entityID }

// gsi3PKEntity returns `{ns}/ENTITY#{id}` (the same string as [pkEntity]),
// GSI3PK of buckets.
func gsi3PKEntity(ns, entityID string) string { return pkEntity(ns, entityID) }

// gsi3SKBucket returns `BUCKET#{res}#{shard}`.
func gsi3SKBucket(resource string, shard int) string {
	return prefixBucket + resource + "#" + strconv.Itoa(shard)
}

// gsi4SKBucket returns `BUCKET#{id}#{res}#{shard}` — unlike every other
// GSI4SK it has no `{ns}/` prefix.
func gsi4SKBucket(entityID, resource string, shard int) string {
	return prefixBucket + entityID + "#" + resource + "#" + strconv.Itoa(shard)
}

// bucketAttr returns the bucket attribute name `b_{limit}_{field}`.
func bucketAttr(limitName, field string) string {
	return bucketAttrPrefix + limitName + "_" + field
}

// limitAttr returns the config attribute name `l_{limit}_{field}`.
func limitAttr(limitName, field string) string {
	return limitAttrPrefix + limitName + "_" + field
}

// ttlEpochSeconds returns the TTL attribute value for an item that expires
// seconds after nowMs: nowMs//1000 + seconds (the original's calculate_ttl).
func ttlEpochSeconds(nowMs, seconds int64) int64 { return floorDiv(nowMs, 1000) + seconds }

// ---------------------------------------------------------------------------
// Parsers.

// keyFormatError reports a key that does not have the expected format. The
// messages follow the original's ValueErrors.
type keyFormatError struct {
	Key    string
	Reason string // e.g. "Not a bucket PK"
}

// Error returns "{reason}: {key}".
func (e *keyFormatError) Error() string { return e.Reason + ": " + e.Key }

// parseNamespace splits key at the first '/' into the namespace id and the
// remainder. A key without '/' is a *keyFormatError ("Key has no namespace
// separator '/'").
func parseNamespace(key string) (ns, rest string, err error) {
	ns, rest, ok := strings.Cut(key, "/")
	if !ok {
		return "", "", &keyFormatError{Key: key, Reason: "Key has no namespace separator '/'"}
	}
	return ns, rest, nil
}

// parsedBucketPK is a parsed bucket partition key.
type parsedBucketPK struct {
	Namespace string
	EntityID  string
	Resource  string
	Shard     int
}

// parseBucketPK is the inverse of [pkBucket]: `{ns}/BUCKET#{id}#{res}#{shard}`.
// The namespace ends at the first '/', the shard starts after the last '#'
// and the entity id ends at the first '#', so resources may contain '/'.
// Errors are *keyFormatError.
func parseBucketPK(pk string) (parsedBucketPK, error) {
	ns, rest, err := parseNamespace(pk)
	if err != nil {
		return parsedBucketPK{}, err
	}
	rest, ok := strings.CutPrefix(rest, prefixBucket)
	if !ok {
		return parsedBucketPK{}, &keyFormatError{Key: pk, Reason: "Not a bucket PK"}
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return parsedBucketPK{}, &keyFormatError{Key: pk, Reason: "Invalid bucket PK format"}
	}
	shard, ok := parseShard(rest[i+1:])
	if !ok {
		return parsedBucketPK{}, &keyFormatError{Key: pk, Reason: "Invalid bucket PK shard"}
	}
	entityID, resource, ok := strings.Cut(rest[:i], "#")
	if !ok {
		return parsedBucketPK{}, &keyFormatError{Key: pk, Reason: "Invalid bucket PK format"}
	}
	return parsedBucketPK{Namespace: ns, EntityID: entityID, Resource: resource, Shard: shard}, nil
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

// parseBucketSKLegacy returns the resource of a pre-0.9.0 bucket SK
// `#BUCKET#{res}`. Errors are *keyFormatError.
func parseBucketSKLegacy(sk string) (string, error) {
	res, ok := strings.CutPrefix(sk, skBucketLegacyPrefix)
	if !ok {
		return "", &keyFormatError{Key: sk, Reason: "Invalid bucket SK"}
	}
	if res == "" {
		return "", &keyFormatError{Key: sk, Reason: "Invalid bucket SK format"}
	}
	return res, nil
}

// parseBucketAttr splits a bucket attribute `b_{limit}_{field}` at the last
// '_', so limit names may contain '_'. ok is false when attr lacks the
// prefix, has no '_' after it, or the limit part is empty.
func parseBucketAttr(attr string) (limitName, field string, ok bool) {
	return parseCompositeAttr(attr, bucketAttrPrefix)
}

// parseLimitAttr splits a config attribute `l_{limit}_{field}` like
// [parseBucketAttr].
func parseLimitAttr(attr string) (limitName, field string, ok bool) {
	return parseCompositeAttr(attr, limitAttrPrefix)
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

// ---------------------------------------------------------------------------
// Namespace ids (reference §4.6).

// namespaceIDAttempts bounds the rejection loop of newNamespaceID, so a
// broken reader cannot spin forever. With random bytes an id is rejected
// with probability 1/64.
const namespaceIDAttempts = 100

// newNamespaceID returns a fresh opaque namespace id: 8 bytes from r (nil
// means crypto/rand) encoded as unpadded URL-safe base64, 11 characters of
// [A-Za-z0-9_-]. Ids starting with '-' are regenerated (they would read as
// command-line flags).
func newNamespaceID(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [8]byte
	for range namespaceIDAttempts {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("generate namespace id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id, nil
		}
	}
	return "", errors.New("generate namespace id: random source keeps producing ids starting with '-'")
}

// ---------------------------------------------------------------------------
// Timestamps and usage windows.

// isoSecondsLayout is the original's `%Y-%m-%dT%H:%M:%SZ`: UTC, second
// precision, literal Z.
const isoSecondsLayout = "2006-01-02T15:04:05Z"

// formatISOSeconds formats t in UTC as `%Y-%m-%dT%H:%M:%SZ`, dropping
// fractions of a second.
func formatISOSeconds(t time.Time) string { return t.UTC().Format(isoSecondsLayout) }

// parseISOSeconds parses a stored timestamp: `%Y-%m-%dT%H:%M:%SZ`, or any
// RFC 3339 time (with offset or fraction, as other writers produce). The
// result is in UTC.
func parseISOSeconds(s string) (time.Time, error) {
	t, err := time.Parse(isoSecondsLayout, s)
	if err != nil {
		var err2 error
		if t, err2 = time.Parse(time.RFC3339Nano, s); err2 != nil {
			return time.Time{}, err
		}
	}
	return t.UTC(), nil
}

// windowKey returns the start of the usage window containing t, in UTC, as
// stored in window_start and snapshot keys: hourly `YYYY-MM-DDTHH:00:00Z`,
// daily `YYYY-MM-DDT00:00:00Z`, monthly `YYYY-MM-01T00:00:00Z`. Any other
// window is an error ("Unknown window type: …").
func windowKey(window string, t time.Time) (string, error) {
	t = t.UTC()
	switch window {
	case WindowHourly:
		return t.Format("2006-01-02T15") + ":00:00Z", nil
	case WindowDaily:
		return t.Format("2006-01-02") + "T00:00:00Z", nil
	case WindowMonthly:
		return t.Format("2006-01") + "-01T00:00:00Z", nil
	}
	return "", fmt.Errorf("unknown window type: %s", window)
}

// windowEnd returns the last second of the window that starts at start, as
// the original computes it: hourly → same hour :59:59, daily → 23:59:59,
// monthly → one second before the first day of the next month (at start's
// time of day), any other window → start itself. The result is in UTC.
func windowEnd(window string, start time.Time) time.Time {
	s := start.UTC().Truncate(time.Second)
	y, m, d := s.Date()
	switch window {
	case WindowHourly:
		return time.Date(y, m, d, s.Hour(), 59, 59, 0, time.UTC)
	case WindowDaily:
		return time.Date(y, m, d, 23, 59, 59, 0, time.UTC)
	case WindowMonthly:
		next := time.Date(y, m+1, 1, s.Hour(), s.Minute(), s.Second(), 0, time.UTC)
		return next.Add(-time.Second)
	}
	return s
}

// ---------------------------------------------------------------------------
// Table definition (reference §4.7).

// tableDefinition returns the CreateTable request of a schema 0.10.0 table:
// PK/SK string keys, on-demand billing, GSI1–GSI4, the reserved LSI1–LSI5 and
// a NEW_AND_OLD_IMAGES stream. CreateTable does not enable TTL; follow it
// with [ttlSpecification] to match deployed tables.
func tableDefinition(table string) *dynamodb.CreateTableInput {
	attrs := []string{
		attrPK, attrSK,
		attrGSI1PK, attrGSI1SK, attrGSI2PK, attrGSI2SK, attrGSI3PK, attrGSI3SK, attrGSI4PK, attrGSI4SK,
		attrLSI1SK, attrLSI2SK, attrLSI3SK, attrLSI4SK, attrLSI5SK,
	}
	defs := make([]types.AttributeDefinition, len(attrs))
	for i, a := range attrs {
		defs[i] = types.AttributeDefinition{AttributeName: aws.String(a), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange},
		}
	}
	gsi := func(name, hash, rng string, p types.ProjectionType) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName: aws.String(name), KeySchema: keys(hash, rng), Projection: &types.Projection{ProjectionType: p},
		}
	}
	lsi := func(name, rng string, p types.ProjectionType) types.LocalSecondaryIndex {
		return types.LocalSecondaryIndex{
			IndexName: aws.String(name), KeySchema: keys(attrPK, rng), Projection: &types.Projection{ProjectionType: p},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            keys(attrPK, attrSK),
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(indexGSI1, attrGSI1PK, attrGSI1SK, types.ProjectionTypeAll),
			gsi(indexGSI2, attrGSI2PK, attrGSI2SK, types.ProjectionTypeAll),
			gsi(indexGSI3, attrGSI3PK, attrGSI3SK, types.ProjectionTypeKeysOnly),
			gsi(indexGSI4, attrGSI4PK, attrGSI4SK, types.ProjectionTypeKeysOnly),
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{
			lsi(indexLSI1, attrLSI1SK, types.ProjectionTypeAll),
			lsi(indexLSI2, attrLSI2SK, types.ProjectionTypeKeysOnly),
			lsi(indexLSI3, attrLSI3SK, types.ProjectionTypeAll),
			lsi(indexLSI4, attrLSI4SK, types.ProjectionTypeKeysOnly),
			lsi(indexLSI5, attrLSI5SK, types.ProjectionTypeAll),
		},
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
}

// ttlSpecification returns the UpdateTimeToLive request that enables TTL on
// the `ttl` attribute, as the CloudFormation template does.
func ttlSpecification(table string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrTTL),
			Enabled:       aws.Bool(true),
		},
	}
}
