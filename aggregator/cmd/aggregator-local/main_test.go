package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/iterx"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// TestAggregatorLocalOnce runs the command as `make aggregator-local` does,
// with -once, against a table in the package's DynamoDB Local that saw one
// acquire, and checks what it reports and wrote.
func TestAggregatorLocalOnce(t *testing.T) {
	ctx := context.Background()
	client := ddblocal.Client(t)
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = table
		o.CreateTable = true
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	rl := limiter.New(repo)
	lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1, "tpm": 40}, limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)))
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	cmd := exec.Command("go", "run", ".", "-table", table, "-once")
	cmd.Env = append(os.Environ(), ddblocal.EnvEndpoint+"="+ddblocal.Endpoint(t), "SNAPSHOT_WINDOWS=hourly")
	out, err := cmd.Output()
	require.NoError(t, err, "aggregator-local\n%s", out)
	m := regexp.MustCompile(`^(\d+) records, (\d+) snapshot writes, \d+ refills, 0 shard doublings, 0 shard items, 0 dropped\n$`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "output = %q, want records read and 1 snapshot write", out)
	require.NotEqual(t, "0", m[1], "output = %q, want records read and 1 snapshot write", out)
	require.Equal(t, "1", m[2], "output = %q, want records read and 1 snapshot write", out)
	snaps, err := iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "k"}))
	require.NoError(t, err)
	require.Len(t, snaps, 1, "snapshots = %+v", snaps)
	require.EqualValues(t, 1, snaps[0].Counters["rpm"], "snapshots = %+v", snaps)
	require.EqualValues(t, 40, snaps[0].Counters["tpm"], "snapshots = %+v", snaps)
}

// startUnsharedDynamoDBLocal starts a DynamoDB Local of the test's own
// without -sharedDb: one database per access key and region, as `java -jar
// DynamoDBLocal.jar` and the amazon/dynamodb-local image run by default.
func startUnsharedDynamoDBLocal(t *testing.T) string {
	t.Helper()
	ddblocal.Endpoint(t) // skips (or fails in CI) the way every DynamoDB test does without it
	dir, err := ddblocal.LocalDir()
	require.NoError(t, err)
	jar, err := ddblocal.FindJar(dir)
	if err != nil {
		t.Skipf("no DynamoDB Local jar (the package's endpoint is not a local jar): %v", err)
	}
	java, err := ddblocal.JavaBinary()
	if err != nil {
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(java, "-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		"-jar", jar, "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(port))
	cmd.Dir = filepath.Dir(jar)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(ddblocal.StartTimeout)
	for {
		if resp, err := http.Get(endpoint); err == nil {
			resp.Body.Close()
			return endpoint
		}
		require.False(t, time.Now().After(deadline), "DynamoDB Local on port %d did not answer", port)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAggregatorLocalUsesProgramCredentials: against a DynamoDB Local
// without -sharedDb, a program that writes with the environment's
// credentials and region (as config.LoadDefaultConfig does) and the runner
// started in the same environment see the same database, so the runner
// finds the table's stream and writes the snapshot. Run with other
// credentials, the runner says why it cannot see the table.
func TestAggregatorLocalUsesProgramCredentials(t *testing.T) {
	endpoint := startUnsharedDynamoDBLocal(t)
	env := []string{"AWS_ACCESS_KEY_ID=alice", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=eu-west-1", "SNAPSHOT_WINDOWS=hourly",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "ZAEL_DYNAMODB_ENDPOINT=", "ZAEL_STACK=walk"}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	// The program: the library's client from the environment.
	repo, err := limiter.OpenDynamoDB(ctx, limiter.NewDynamoDBLocalClient(""), func(o *limiter.DynamoDBOptions) { o.CreateTable = true })
	require.NoError(t, err)
	rl := limiter.New(repo)
	for range 3 {
		lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1, "tpm": 40}, limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)))
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
	}
	bin := filepath.Join(t.TempDir(), "aggregator-local")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build\n%s", out)
	out, err = exec.Command(bin, "-once").CombinedOutput() // no flags: everything from the environment
	require.NoError(t, err, "aggregator-local -once\n%s", out)
	snaps, err := iterx.Collect(rl.Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "k"}))
	require.NoError(t, err)
	require.Len(t, snaps, 1, "snapshots = %+v, want one with rpm 3, tpm 120 (output %q)", snaps, out)
	require.EqualValues(t, 3, snaps[0].Counters["rpm"], "snapshots = %+v, want one with rpm 3, tpm 120 (output %q)", snaps, out)
	require.EqualValues(t, 120, snaps[0].Counters["tpm"], "snapshots = %+v, want one with rpm 3, tpm 120 (output %q)", snaps, out)

	cmd := exec.Command(bin, "-once")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=bob")
	out, err = cmd.CombinedOutput()
	assert.Error(t, err, "aggregator-local with other credentials, output %q; want the table-not-found explanation", out)
	assert.Contains(t, string(out), `table walk not found at `+endpoint+` for access key "bob" in region eu-west-1`, "aggregator-local with other credentials, output %q; want the table-not-found explanation", out)
	assert.Contains(t, string(out), "-sharedDb", "aggregator-local with other credentials, output %q; want the table-not-found explanation", out)
}
