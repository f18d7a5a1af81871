package limiter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// SchemaVersion is the table schema this library reads and writes (the
// original's schema 0.10.0). It is recorded in the table's version record.
const SchemaVersion = currentSchemaVersion

// TableDefinition returns the CreateTable request of a table for this schema:
// PK/SK string keys, on-demand billing, GSI1–GSI4, LSI1–LSI5 and a
// NEW_AND_OLD_IMAGES stream. It is the one source of truth for the table:
// [OpenDynamoDB] with CreateTable and the CloudFormation template in package
// infra both follow it (a test compares them). TTL on the "ttl" attribute is
// enabled separately (UpdateTimeToLive).
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
