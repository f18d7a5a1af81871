package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/skiplog"
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
	_, err := client.CreateTable(t.Context(), in)
	require.NoError(t, err, "CreateTable(%s)", name)
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
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: want})
	require.NoError(t, err, "PutItem")
	out, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a"), ConsistentRead: aws.Bool(true)})
	require.NoError(t, err, "GetItem")
	assert.Equal(t, want, out.Item, "GetItem item")
}

func TestStreamsClient(t *testing.T) {
	t.Parallel()
	client := Client(t)
	streams := StreamsClient(t)
	table := TableName(t)
	createTable(t, client, table, true)
	_, err := client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("a", 1)})
	require.NoError(t, err, "PutItem")

	ls, err := streams.ListStreams(t.Context(), &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	require.NoError(t, err, "ListStreams")
	require.Len(t, ls.Streams, 1, "ListStreams(%s) = %d streams, want 1", table, len(ls.Streams))
	ds, err := streams.DescribeStream(t.Context(), &dynamodbstreams.DescribeStreamInput{StreamArn: ls.Streams[0].StreamArn})
	require.NoError(t, err, "DescribeStream")
	require.NotEmpty(t, ds.StreamDescription.Shards, "DescribeStream: no shards")
	it, err := streams.GetShardIterator(t.Context(), &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         ls.Streams[0].StreamArn,
		ShardId:           ds.StreamDescription.Shards[0].ShardId,
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	require.NoError(t, err, "GetShardIterator")
	recs, err := streams.GetRecords(t.Context(), &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	require.NoError(t, err, "GetRecords")
	require.Len(t, recs.Records, 1, "GetRecords = %d records (%v), want 1 INSERT", len(recs.Records), recs.Records)
	assert.Equal(t, streamtypes.OperationTypeInsert, recs.Records[0].EventName, "GetRecords = %d records (%v), want 1 INSERT", len(recs.Records), recs.Records)
}

// TestWithoutStreams: a client with WithoutStreams creates a table asked
// with a stream without one; the caller's input keeps its stream.
func TestWithoutStreams(t *testing.T) {
	t.Parallel()
	client := Client(t, WithoutStreams)
	table := TableName(t)
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	}
	_, err := client.CreateTable(t.Context(), in)
	require.NoError(t, err, "CreateTable(%s)", table)
	require.NotNil(t, in.StreamSpecification, "the caller's input was changed")
	desc, err := Client(t).DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err, "DescribeTable")
	assert.Nil(t, desc.Table.StreamSpecification, "stream of a table created WithoutStreams")
	assert.Empty(t, aws.ToString(desc.Table.LatestStreamArn), "stream ARN of a table created WithoutStreams")
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
		assert.Equal(t, tc.want, required(getenv))
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

// TestUnavailableSkipsOrFails: without DynamoDB Local a test is skipped,
// and recorded in $ZAEL_SKIP_LOG for `make test` to list, or, in CI or
// when DynamoDB is required, failed.
func TestUnavailableSkipsOrFails(t *testing.T) {
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
			skips := filepath.Join(t.TempDir(), "skips")
			t.Setenv(skiplog.EnvFile, skips)
			v := &verdictTB{TB: t}
			unavailable(v, cause, func(k string) string { return tc.env[k] })
			got := v.skipped
			recorded, _ := os.ReadFile(skips)
			if tc.wantFail {
				got = v.failed
				assert.Empty(t, v.skipped, "skipped (%q), want a failure", v.skipped)
				assert.Empty(t, string(recorded), "a failure recorded as a skip")
			} else {
				assert.Empty(t, v.failed, "failed (%q), want a skip", v.failed)
				assert.Regexp(t, "^dynamodb-local\t.*\t"+regexp.QuoteMeta(t.Name())+"\t"+regexp.QuoteMeta(SkipMessage), string(recorded))
			}
			for _, want := range []string{SkipMessage, "`make dynamodb-local`", EnvEndpoint, cause.Error()} {
				assert.Contains(t, got, want, "message %q does not contain %q", got, want)
			}
			assert.Regexp(t, "^"+regexp.QuoteMeta(SkipMessage), got)
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
			require.True(t, validTableName.MatchString(name), "TableName = %q (%d chars), want [A-Za-z][A-Za-z0-9-]*, 3 to %d chars", name, len(name), MaxTableNameLen)
			require.LessOrEqual(t, len(name), MaxTableNameLen, "TableName = %q (%d chars), want [A-Za-z][A-Za-z0-9-]*, 3 to %d chars", name, len(name), MaxTableNameLen)
			require.GreaterOrEqual(t, len(name), 3, "TableName = %q (%d chars), want [A-Za-z][A-Za-z0-9-]*, 3 to %d chars", name, len(name), MaxTableNameLen)
			assert.NotContains(t, name, "--", "TableName = %q has a double hyphen", name)
			require.False(t, seen[name], "TableName = %q twice", name)
			seen[name] = true
		}
	}
	check(t)
	t.Run("with spaces, Ünïcode & punctuation: a/b#c", check)
	t.Run(strings.Repeat("very_long_subtest_name_", 10), check)
	t.Run("---", check)
	assert.True(t, strings.HasPrefix(TableName(t), "t-testtablename-"), "TableName")
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
		assert.Equal(t, want, sanitize(in))
	}
}

func TestRepoRoot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "a", "b")
	nested := filepath.Join(dir, "a", "tools")
	for _, d := range []string{sub, nested} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	write := func(path, content string) {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write(filepath.Join(dir, "go.mod"), "module "+ModulePath+"\n\ngo 1.26\n")
	write(filepath.Join(nested, "go.mod"), "module "+ModulePath+"/tools\n")

	for _, start := range []string{dir, sub, nested} {
		got, err := repoRoot(start)
		require.NoError(t, err, "repoRoot(%s) = %q; want %q", start, got, dir)
		assert.Equal(t, dir, got, "repoRoot(%s) = %q; want %q", start, got, dir)
	}
	other := t.TempDir()
	write(filepath.Join(other, "go.mod"), "module example.com/other\n")
	got, err := repoRoot(other)
	require.NoError(t, err, "repoRoot(%s) = %q; want the nearest go.mod", other, got)
	assert.Equal(t, other, got, "repoRoot(%s) = %q; want the nearest go.mod", other, got)
}

func TestFindJar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := findJar(dir)
	require.Error(t, err, "findJar(empty) error, want one naming %q", FetchCommand)
	assert.Contains(t, err.Error(), FetchCommand, "findJar(empty) error, want one naming %q", FetchCommand)
	for _, d := range []string{"dynamodb_local_2025-05-01", "dynamodb_local_2026-01-16"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, d, "DynamoDBLocal.jar"), nil, 0o644))
	}
	want := filepath.Join(dir, "dynamodb_local_2026-01-16", "DynamoDBLocal.jar")
	got, err := findJar(dir)
	require.NoError(t, err, "findJar = %q; want %q", got, want)
	assert.Equal(t, want, got, "findJar = %q; want %q", got, want)
	got, err = findJar(filepath.Dir(want))
	require.NoError(t, err, "findJar(jar dir) = %q; want %q", got, want)
	assert.Equal(t, want, got, "findJar(jar dir) = %q; want %q", got, want)
}

func TestNormalizeEndpoint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"localhost:8000":         "http://localhost:8000",
		"http://127.0.0.1:8000/": "http://127.0.0.1:8000",
		"https://example:1":      "https://example:1",
	} {
		assert.Equal(t, want, normalizeEndpoint(in))
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
	before, measured := srv.CPUTime()
	require.Equal(t, srv.Source() == SourceJava && runtime.GOOS == "linux", measured, "CPUTime of a %s server", srv.Source())
	_, err = client.ListTables(ctx, &dynamodb.ListTablesInput{})
	require.NoError(t, err, "ListTables")
	if measured {
		// The JVM's start alone takes far more than a clock tick.
		require.Positive(t, before, "CPU of the JVM after its start")
		after, ok := srv.CPUTime()
		require.True(t, ok)
		require.GreaterOrEqual(t, after, before, "CPU time only grows")
	}
	require.NoError(t, srv.Close(), "Close")
	require.NoError(t, srv.Close(), "second Close")
	_, measured = srv.CPUTime()
	require.False(t, measured, "CPUTime of a stopped server")
	if srv.Source() == SourceEnv {
		return // nothing was started, nothing stopped
	}
	_, err = client.ListTables(ctx, &dynamodb.ListTablesInput{})
	assert.Error(t, err, "ListTables after Close succeeded, want an error")
}
