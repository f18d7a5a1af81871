package limiter

// The table layout's public facts: the schema version, the table
// definition and the version record. The layout itself (attribute names,
// key formats, item codecs and expressions) lives in internal/ddbschema;
// schema_keys.go, schema_items.go, schema_records.go and schema_writes.go
// adapt it to this package's types.

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// SchemaVersion is the table schema this library reads and writes: schema
// 0.10.0 of the Python zae-limiter library, whose tables and items it shares.
// It is recorded in the table's version record.
const SchemaVersion = currentSchemaVersion

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
//     "#USAGE#{resource}#{window start}";
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

// VersionRecord reads the table's version record. ok is false when the table
// has none (a table that no client has opened yet).
func (r *DynamoDBRepository) VersionRecord(ctx context.Context) (rec VersionRecord, ok bool, err error) {
	v, ok, err := r.readVersion(ctx, true)
	return VersionRecord(v), ok, err
}

// readVersion reads the version record, strongly consistent or not.
func (r *DynamoDBRepository) readVersion(ctx context.Context, consistent bool) (versionRecord, bool, error) {
	out, err := r.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(r.opts.Table),
		Key:            primaryKey(pkSystem(reservedNamespace), skVersion),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return versionRecord{}, false, wrapErr("read version record", err)
	}
	if len(out.Item) == 0 {
		return versionRecord{}, false, nil
	}
	return versionFromItem(out.Item), true, nil
}

// SetVersionRecord writes the table's version record (UpdatedAt defaults to
// now). Deploy tools call it after creating or upgrading a stack.
func (r *DynamoDBRepository) SetVersionRecord(ctx context.Context, rec VersionRecord) error {
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = r.opts.Now()
	}
	_, err := r.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.opts.Table),
		Item:      versionItem(versionRecord(rec)),
	})
	return wrapErr("write version record", err)
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
