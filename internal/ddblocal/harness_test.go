package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/go-cmp/cmp"
)

// createTable creates a table with a string hash key "pk", on demand, and
// waits until it is active.
func createTable(t *testing.T, client *dynamodb.Client, name string, stream bool) {
	t.Helper()
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
	if stream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	}
	if _, err := client.CreateTable(t.Context(), in); err != nil {
		t.Fatalf("CreateTable(%s): %v", name, err)
	}
}

func item(pk string, n int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"n":  &types.AttributeValueMemberN{Value: fmt.Sprint(n)},
	}
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}
}

func TestPutGetItem(t *testing.T) {
	t.Parallel()
	client := Client(t)
	table := TableName(t)
	createTable(t, client, table, false)

	want := item("a", 42)
	if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: want}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if diff := cmp.Diff(want, out.Item, cmp.Comparer(func(a, b types.AttributeValue) bool { return fmt.Sprint(a) == fmt.Sprint(b) })); diff != "" {
		t.Errorf("GetItem item mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamsClient(t *testing.T) {
	t.Parallel()
	client := Client(t)
	streams := StreamsClient(t)
	table := TableName(t)
	createTable(t, client, table, true)
	if _, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1)}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}

	ls, err := streams.ListStreams(t.Context(), &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatalf("ListStreams: %v", err)
	}
	if len(ls.Streams) != 1 {
		t.Fatalf("ListStreams(%s) = %d streams, want 1", table, len(ls.Streams))
	}
	ds, err := streams.DescribeStream(t.Context(), &dynamodbstreams.DescribeStreamInput{StreamArn: ls.Streams[0].StreamArn})
	if err != nil {
		t.Fatalf("DescribeStream: %v", err)
	}
	if len(ds.StreamDescription.Shards) == 0 {
		t.Fatal("DescribeStream: no shards")
	}
	it, err := streams.GetShardIterator(t.Context(), &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         ls.Streams[0].StreamArn,
		ShardId:           ds.StreamDescription.Shards[0].ShardId,
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	recs, err := streams.GetRecords(t.Context(), &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	if len(recs.Records) != 1 || recs.Records[0].EventName != streamtypes.OperationTypeInsert {
		t.Errorf("GetRecords = %d records (%v), want 1 INSERT", len(recs.Records), recs.Records)
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"CI": "true"}, want: true},
		{env: map[string]string{"CI": "1"}, want: true},
		{env: map[string]string{"CI": "false"}, want: false},
		{env: map[string]string{"CI": ""}, want: false},
		{env: map[string]string{EnvRequire: "1"}, want: true},
		{env: map[string]string{EnvRequire: "true"}, want: true},
		{env: map[string]string{EnvRequire: "0"}, want: false},
		{env: map[string]string{EnvRequire: "0", "CI": "true"}, want: true},
		{env: map[string]string{EnvRequire: "yes"}, want: false},
	} {
		getenv := func(k string) string { return tc.env[k] }
		if got := required(getenv); got != tc.want {
			t.Errorf("required(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// verdictTB records what unavailable does to a test.
type verdictTB struct {
	testing.TB
	skipped, failed string
}

func (v *verdictTB) Helper()                      {}
func (v *verdictTB) Skip(args ...any)             { v.skipped = fmt.Sprint(args...) }
func (v *verdictTB) Fatalf(f string, args ...any) { v.failed = fmt.Sprintf(f, args...) }

func TestUnavailableSkipsOrFails(t *testing.T) {
	t.Parallel()
	cause := errors.New("no DynamoDBLocal.jar in /x")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantFail bool
	}{
		{name: "developer", env: nil, wantFail: false},
		{name: "CI", env: map[string]string{"CI": "true"}, wantFail: true},
		{name: "required", env: map[string]string{EnvRequire: "1"}, wantFail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &verdictTB{TB: t}
			unavailable(v, cause, func(k string) string { return tc.env[k] })
			got := v.skipped
			if tc.wantFail {
				got = v.failed
				if v.skipped != "" {
					t.Errorf("skipped (%q), want a failure", v.skipped)
				}
			} else if v.failed != "" {
				t.Errorf("failed (%q), want a skip", v.failed)
			}
			for _, want := range []string{SkipMessage, "`make dynamodb-local`", EnvEndpoint, cause.Error()} {
				if !strings.Contains(got, want) {
					t.Errorf("message %q does not contain %q", got, want)
				}
			}
			if !strings.HasPrefix(got, SkipMessage) {
				t.Errorf("message %q does not start with %q", got, SkipMessage)
			}
		})
	}
}

var validTableName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

func TestTableName(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	check := func(t *testing.T) {
		for range 200 {
			name := TableName(t)
			if !validTableName.MatchString(name) || len(name) > MaxTableNameLen || len(name) < 3 {
				t.Fatalf("TableName = %q (%d chars), want [A-Za-z][A-Za-z0-9-]*, 3 to %d chars", name, len(name), MaxTableNameLen)
			}
			if strings.Contains(name, "--") {
				t.Errorf("TableName = %q has a double hyphen", name)
			}
			if seen[name] {
				t.Fatalf("TableName = %q twice", name)
			}
			seen[name] = true
		}
	}
	check(t)
	t.Run("with spaces, Ünïcode & punctuation: a/b#c", check)
	t.Run(strings.Repeat("very_long_subtest_name_", 10), check)
	t.Run("---", check)
	if got := TableName(t); !strings.HasPrefix(got, "t-testtablename-") {
		t.Errorf("TableName = %q, want prefix t-testtablename-", got)
	}
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"TestFoo":            "testfoo",
		"TestFoo/bar_baz#01": "testfoo-bar-baz-01",
		"--a--b--":           "a-b",
		"Ünï":                "n",
		"":                   "",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	nested := filepath.Join(dir, "a", "tools")
	for _, d := range []string{sub, nested} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "go.mod"), "module "+ModulePath+"\n\ngo 1.26\n")
	write(filepath.Join(nested, "go.mod"), "module "+ModulePath+"/tools\n")

	for _, start := range []string{dir, sub, nested} {
		got, err := repoRoot(start)
		if err != nil || got != dir {
			t.Errorf("repoRoot(%s) = %q, %v; want %q", start, got, err, dir)
		}
	}
	other := t.TempDir()
	write(filepath.Join(other, "go.mod"), "module example.com/other\n")
	if got, err := repoRoot(other); err != nil || got != other {
		t.Errorf("repoRoot(%s) = %q, %v; want the nearest go.mod", other, got, err)
	}
}

func TestFindJar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := findJar(dir); err == nil || !strings.Contains(err.Error(), FetchCommand) {
		t.Errorf("findJar(empty) error = %v, want one naming %q", err, FetchCommand)
	}
	for _, d := range []string{"dynamodb_local_2025-05-01", "dynamodb_local_2026-01-16"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "DynamoDBLocal.jar"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal.jar")
	if got, err := findJar(dir); err != nil || got != want {
		t.Errorf("findJar = %q, %v; want %q", got, err, want)
	}
	if got, err := findJar(filepath.Dir(want)); err != nil || got != want {
		t.Errorf("findJar(jar dir) = %q, %v; want %q", got, err, want)
	}
}

func TestNormalizeEndpoint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"localhost:8000":         "http://localhost:8000",
		"http://127.0.0.1:8000/": "http://127.0.0.1:8000",
		"https://example:1":      "https://example:1",
	} {
		if got := normalizeEndpoint(in); got != want {
			t.Errorf("normalizeEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStartClose starts a second DynamoDB Local besides the package's and
// checks that Close stops it.
func TestStartClose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	srv, err := Start(ctx)
	if err != nil {
		unavailable(t, err, os.Getenv)
		return
	}
	t.Logf("started %s DynamoDB Local at %s in %v", srv.Source(), srv.Endpoint(), srv.StartDuration())
	client := NewClient(srv.Endpoint())
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("ListTables: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if srv.Source() == SourceEnv {
		return // nothing was started, nothing stopped
	}
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err == nil {
		t.Errorf("ListTables after Close succeeded, want an error")
	}
}
