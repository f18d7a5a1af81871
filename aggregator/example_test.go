package aggregator_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/aggregator"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// The examples that need AWS compile but do not run (they have no Output
// comment); the package's end-to-end tests run the same calls against
// DynamoDB Local.

// A Lambda main: configuration from the original's environment variables,
// failed records returned as BatchItemFailures. cmd/aggregator is this.
func ExampleProcessor_Handle() {
	ctx := context.Background()
	cfg, err := aggregator.LoadConfig(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	proc, err := aggregator.NewProcessor(dynamodb.NewFromConfig(awsCfg), cfg.Table, cfg.Options(),
		func(o *aggregator.Options) {
			if cfg.ArchiveEnabled {
				o.S3 = s3.NewFromConfig(awsCfg)
			}
		})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(proc.Handle)
}

// Running the aggregator without Lambda: a Runner polls the table's stream
// and feeds the processor, here once, then reads the usage it wrote.
func ExampleNewRunner() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	proc, err := aggregator.NewProcessor(dynamodb.NewFromConfig(awsCfg), "zae-limiter", func(o *aggregator.Options) {
		o.Windows = []string{store.WindowHourly, store.WindowDaily}
		o.SnapshotTTL = 30 * 24 * time.Hour
	})
	if err != nil {
		log.Fatal(err)
	}
	runner := aggregator.NewRunner(dynamodbstreams.NewFromConfig(awsCfg), "zae-limiter", proc)
	res, err := runner.Poll(ctx) // or runner.Run(ctx) until ctx ends
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Processed, "records,", res.SnapshotsUpdated, "snapshot writes,", res.RefillsWritten, "refills")

	repo, err := limiter.OpenDynamoDB(ctx, dynamodb.NewFromConfig(awsCfg))
	if err != nil {
		log.Fatal(err)
	}
	snaps, err := iterx.Collect(limiter.New(repo).Admin().UsageSnapshots(ctx, limiter.UsageQuery{EntityID: "api-key-1", WindowType: store.WindowHourly}))
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range snaps {
		fmt.Println(s.WindowStart.Format(time.RFC3339), s.Resource, s.Counters)
	}
}

// The S3 key of an archive object: partitioned by the date of the batch's
// earliest audit event.
func ExampleArchiveKey() {
	earliest := time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)
	fmt.Println(aggregator.ArchiveKey("8f2c-req", earliest, time.Now()))
	// Output: audit/year=2026/month=11/day=22/audit-8f2c-req-2026-11-22T09-30-00Z.jsonl.gz
}
