package aggregator

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// newS3 serves an in-memory S3 (gofakes3) on loopback and returns a real
// SDK client for it, with bucket created.
func newS3(t *testing.T, bucket string) *s3.Client {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	if bucket != "" {
		_, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		require.NoError(t, err, "CreateBucket")
	}
	return client
}

// archived is one object of the archive bucket, decompressed.
type archived struct {
	key                          string
	contentType, contentEncoding string
	lines                        []map[string]any
	raw                          string
}

// readArchive returns every object of bucket, decompressed and split into
// JSON lines.
func readArchive(t *testing.T, client *s3.Client, bucket string) []archived {
	t.Helper()
	ctx := context.Background()
	list, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	require.NoError(t, err, "ListObjectsV2")
	var out []archived
	for _, o := range list.Contents {
		obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		require.NoError(t, err, "GetObject %s", aws.ToString(o.Key))
		body, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(body), 2, "object %s is not gzip: % x", aws.ToString(o.Key), body[:min(len(body), 8)])
		require.EqualValues(t, 0x1f, body[0], "object %s is not gzip: % x", aws.ToString(o.Key), body[:min(len(body), 8)])
		require.EqualValues(t, 0x8b, body[1], "object %s is not gzip: % x", aws.ToString(o.Key), body[:min(len(body), 8)])
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		plain, err := io.ReadAll(zr)
		require.NoError(t, err)
		a := archived{key: aws.ToString(o.Key), contentType: aws.ToString(obj.ContentType), contentEncoding: aws.ToString(obj.ContentEncoding), raw: string(plain)}
		sc := bufio.NewScanner(bytes.NewReader(plain))
		for sc.Scan() {
			var m map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line")
			a.lines = append(a.lines, m)
		}
		out = append(out, a)
	}
	return out
}

// archiveFixture is a fixture whose processor archives to bucket through
// client.
func archiveFixture(t *testing.T, now time.Time, client *s3.Client, bucket string) *fixture {
	t.Helper()
	f := newFixture(t, now)
	var err error
	f.proc, err = NewProcessor(ddblocal.Client(t, f.rec.Option()), f.table, func(o *Options) {
		o.Now = func() time.Time { return now }
		o.S3, o.ArchiveBucket = client, bucket
	})
	require.NoError(t, err)
	return f
}

// TestArchiveTTLRemoval: the TTL deletion of an audit event (testdata
// remove_ttl.json, which also expires a bucket) becomes one gzip JSON
// Lines object, keyed by the Lambda request id and the event's timestamp.
func TestArchiveTTLRemoval(t *testing.T) {
	client := newS3(t, "archive")
	f := archiveFixture(t, fixtureNow, client, "archive")
	ev := loadEvent(t, "remove_ttl.json")
	ctx := lambdacontext.NewContext(f.ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	resp, err := f.proc.Handle(ctx, ev)
	require.NoError(t, err, "Handle = %+v", resp)
	require.Empty(t, resp.BatchItemFailures, "Handle = %+v", resp)
	objs := readArchive(t, client, "archive")
	require.Len(t, objs, 1, "%d objects, want 1", len(objs))
	o := objs[0]
	assert.Equal(t, "audit/year=2026/month=01/day=02/audit-req-1-2026-01-02T03-04-05Z.jsonl.gz", o.key, "key")
	assert.Equal(t, "application/x-ndjson", o.contentType, "content type %q, encoding %q", o.contentType, o.contentEncoding)
	assert.Equal(t, "gzip", o.contentEncoding, "content type %q, encoding %q", o.contentType, o.contentEncoding)
	require.Len(t, o.lines, 1, "lines = %q", o.raw)
	require.EqualValues(t, '\n', o.raw[len(o.raw)-1], "lines = %q", o.raw)
	want := map[string]any{
		"event_id": "01M812K98TDJXJ05Q7ZQETE6EN", "entity_id": "C", "action": "entity_created",
		"timestamp": "2026-01-02T03:04:05Z", "principal": "admin", "resource": nil,
		"details": map[string]any{"name": "C"},
	}
	got, _ := json.Marshal(o.lines[0])
	exp, _ := json.Marshal(want)
	assert.Equal(t, string(exp), string(got), "line = %s, want %s", got, exp)
}

// auditRemove is the REMOVE of an audit item with PK pk.
func auditRemove(pk, eventID, action, timestamp string, seq int) events.DynamoDBEventRecord {
	s := events.NewStringAttribute
	old := map[string]events.DynamoDBAttributeValue{
		"PK": s(pk), "SK": s("#AUDIT#" + eventID), "event_id": s(eventID), "entity_id": s("e"),
		"timestamp": s(timestamp), "details": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
	}
	if action != "" {
		old["action"] = s(action)
	}
	return events.DynamoDBEventRecord{
		EventID: "ev-" + eventID, EventName: "REMOVE",
		Change: events.DynamoDBStreamRecord{
			Keys:           map[string]events.DynamoDBAttributeValue{"PK": s(pk), "SK": s("#AUDIT#" + eventID)},
			OldImage:       old,
			SequenceNumber: "000000000000000000" + string(rune('0'+seq)),
		},
	}
}

// TestArchiveSelection: only REMOVE events of namespaced audit keys with an
// action are archived (a bare AUDIT# key is not an audit event of this
// schema), in one
// object named after the earliest timestamp; a record with no timestamp
// alone takes the processor's date.
func TestArchiveSelection(t *testing.T) {
	client := newS3(t, "archive")
	f := archiveFixture(t, fixtureNow, client, "archive")
	recs := []events.DynamoDBEventRecord{
		auditRemove(fixtureNS+"/AUDIT#e", "02", "limits_set", "2026-02-03T04:05:06Z", 1),
		auditRemove("AUDIT#e", "03", "limits_set", "2026-01-01T00:00:00Z", 2),  // no namespace
		auditRemove(fixtureNS+"/AUDIT#e", "04", "", "2026-01-01T00:00:00Z", 3), // no action
		auditRemove(fixtureNS+"/AUDIT#e", "01", "entity_created", "2026-02-01T00:00:00Z", 4),
	}
	insert := recs[0]
	insert.EventName, insert.Change.NewImage, insert.Change.OldImage = "INSERT", insert.Change.OldImage, nil
	recs = append(recs, insert) // a new audit event is not archived
	res := f.proc.Process(f.ctx, recs, "req-2")
	require.Empty(t, res.Failures, "result = %+v", res)
	require.EqualValues(t, 2, res.EventsArchived, "result = %+v", res)
	require.EqualValues(t, 1, res.ObjectsCreated, "result = %+v", res)
	objs := readArchive(t, client, "archive")
	require.Len(t, objs, 1, "objects = %+v", objs)
	require.Equal(t, "audit/year=2026/month=02/day=01/audit-req-2-2026-02-01T00-00-00Z.jsonl.gz", objs[0].key, "objects = %+v", objs)
	var ids []string
	for _, l := range objs[0].lines {
		ids = append(ids, l["event_id"].(string))
	}
	require.Equal(t, []string{"02", "01"}, ids, "archived %v, want [02 01] in stream order", ids)

	// No timestamp: the partition is the processor's date.
	client2 := newS3(t, "archive")
	f2 := archiveFixture(t, fixtureNow, client2, "archive")
	require.EqualValues(t, 1, f2.proc.Process(f2.ctx, []events.DynamoDBEventRecord{auditRemove(fixtureNS+"/AUDIT#e", "05", "entity_deleted", "not a time", 1)}, "req-3").EventsArchived, "result")
	objs = readArchive(t, client2, "archive")
	require.Len(t, objs, 1, "objects = %+v", objs)
	require.Equal(t, "audit/year=2026/month=03/day=04/audit-req-3-2026-03-04T05-07-07Z.jsonl.gz", objs[0].key, "objects = %+v", objs)
	assert.Nil(t, objs[0].lines[0]["timestamp"], "line = %v, want a null timestamp", objs[0].lines[0])
}

// TestArchiveFailure: when S3 refuses the object (no such bucket), the
// first audit record and every record after it are reported, nothing
// panics, and the records after it are not counted in snapshots.
func TestArchiveFailure(t *testing.T) {
	client := newS3(t, "") // the bucket does not exist
	f := archiveFixture(t, fixtureNow, client, "missing")
	modify := loadEvent(t, "modify_bucket.json").Records[0]
	audit := auditRemove(fixtureNS+"/AUDIT#e", "01", "entity_created", "2026-02-01T00:00:00Z", 5)
	later := insertRecord("later", 6, 1)
	res := f.proc.Process(f.ctx, []events.DynamoDBEventRecord{modify, audit, later}, "req")
	require.Len(t, res.Failures, 2, "failures = %+v", res.Failures)
	require.Equal(t, audit.EventID, res.Failures[0].EventID, "failures = %+v", res.Failures)
	require.ErrorIs(t, res.Failures[1].Err, ErrNotApplied, "failures = %+v", res.Failures)
	require.EqualValues(t, 0, res.EventsArchived, "result = %+v", res)
	require.EqualValues(t, 0, res.ObjectsCreated, "result = %+v", res)
	f.checkSnapshot("C", "gpt", "2026-03-04T05:00:00Z", store.WindowHourly, map[string]int64{"rpm": 2, "tpm": -100}, 2)
	require.Nil(t, f.get(fixtureNS+"/ENTITY#later", "#USAGE#gpt#2026-03-04T05:00:00Z#hourly"), "a record after the failed archive was counted")
}

// TestE2EArchiveDeletedAuditEvents: audit events the limiter wrote, removed
// from the table (as TTL does), reach S3 through the stream and the runner,
// one line per event, namespaced keys and all (the original's stream
// filter missed namespaced keys).
func TestE2EArchiveDeletedAuditEvents(t *testing.T) {
	client := newS3(t, "archive")
	e := newEnv(t, func(o *Options) { o.S3, o.ArchiveBucket = client, "archive" })
	rl := e.limiter(false)
	for _, id := range []string{"a1", "a2"} {
		_, err := rl.Admin().CreateEntity(e.ctx, limiter.Entity{ID: id, Name: "key " + id})
		require.NoError(t, err)
	}
	var want []string
	for _, id := range []string{"a1", "a2"} {
		evs, err := iterx.Collect(rl.Admin().AuditEvents(e.ctx, id))
		require.NoError(t, err, "AuditEvents(%s) = %v", id, evs)
		require.Len(t, evs, 1, "AuditEvents(%s) = %v", id, evs)
		want = append(want, evs[0].EventID)
		_, err = e.client.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(e.repo.Table()),
			Key: map[string]types.AttributeValue{
				"PK": &types.AttributeValueMemberS{Value: e.repo.NamespaceID() + "/AUDIT#" + id},
				"SK": &types.AttributeValueMemberS{Value: "#AUDIT#" + evs[0].EventID},
			},
		})
		require.NoError(t, err)
	}
	e.drain()
	var got []string
	objs := readArchive(t, client, "archive")
	for _, o := range objs {
		assert.Contains(t, o.key, "/audit-local-", "key %q: want the runner's request id local-{first event id}", o.key)
		for _, l := range o.lines {
			assert.Equal(t, store.AuditEntityCreated, l["action"], "line = %v", l)
			got = append(got, l["event_id"].(string))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, "archived %v, want %v", got, want)
}
