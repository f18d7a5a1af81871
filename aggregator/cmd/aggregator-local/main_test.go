package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"

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
