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

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	rl := limiter.New(repo)
	lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1, "tpm": 40}, limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("go", "run", ".", "-table", table, "-once")
	cmd.Env = append(os.Environ(), ddblocal.EnvEndpoint+"="+ddblocal.Endpoint(t), "SNAPSHOT_WINDOWS=hourly")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aggregator-local: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`^(\d+) records, (\d+) snapshot writes, \d+ refills, 0 shard doublings, 0 shard items, 0 dropped\n$`).FindStringSubmatch(string(out))
	if m == nil || m[1] == "0" || m[2] != "1" {
		t.Fatalf("output = %q, want records read and 1 snapshot write", out)
	}
	snaps, _, err := rl.UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Counters["rpm"] != 1 || snaps[0].Counters["tpm"] != 40 {
		t.Fatalf("snapshots = %+v", snaps)
	}
}

// startUnsharedDynamoDBLocal starts a DynamoDB Local of the test's own
// without -sharedDb: one database per access key and region, as `java -jar
// DynamoDBLocal.jar` and the amazon/dynamodb-local image run by default.
func startUnsharedDynamoDBLocal(t *testing.T) string {
	t.Helper()
	ddblocal.Endpoint(t) // skips (or fails in CI) the way every DynamoDB test does without it
	dir, err := ddblocal.LocalDir()
	if err != nil {
		t.Fatal(err)
	}
	jar, err := ddblocal.FindJar(dir)
	if err != nil {
		t.Skipf("no DynamoDB Local jar (the package's endpoint is not a local jar): %v", err)
	}
	java, err := ddblocal.JavaBinary()
	if err != nil {
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(java, "-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		"-jar", jar, "-inMemory", "-disableTelemetry", "-port", strconv.Itoa(port))
	cmd.Dir = filepath.Dir(jar)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
		if time.Now().After(deadline) {
			t.Fatalf("DynamoDB Local on port %d did not answer", port)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	rl := limiter.New(repo)
	for range 3 {
		lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"rpm": 1, "tpm": 40}, limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "aggregator-local")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-once").CombinedOutput() // no flags: everything from the environment
	if err != nil {
		t.Fatalf("aggregator-local -once: %v\n%s", err, out)
	}
	snaps, _, err := rl.UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 1 || snaps[0].Counters["rpm"] != 3 || snaps[0].Counters["tpm"] != 120 {
		t.Fatalf("snapshots = %+v, want one with rpm 3, tpm 120 (output %q)", snaps, out)
	}

	cmd := exec.Command(bin, "-once")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=bob")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `table walk not found at `+endpoint+` for access key "bob" in region eu-west-1`) ||
		!strings.Contains(string(out), "-sharedDb") {
		t.Errorf("aggregator-local with other credentials: %v, output %q; want the table-not-found explanation", err, out)
	}
}
