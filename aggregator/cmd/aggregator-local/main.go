// Command aggregator-local runs the zae-limiter stream processor against a
// table in DynamoDB Local (or any endpoint), polling the table's stream
// through the DynamoDB Streams API instead of being invoked by Lambda:
//
//	go run ./aggregator/cmd/aggregator-local -endpoint http://localhost:8000 -table zae-limiter
//
// `make aggregator-local` runs it. After `eval "$(zae-limiter local up)"`
// it needs no flags: the endpoint defaults to $ZAEL_DYNAMODB_ENDPOINT, else
// $AWS_ENDPOINT_URL_DYNAMODB, else $AWS_ENDPOINT_URL, else
// http://localhost:8000, and the table to $TABLE_NAME, else $ZAEL_STACK.
// The credentials and region are those of the environment
// ($AWS_ACCESS_KEY_ID, $AWS_REGION, ...; dummy ones when unset), as for
// any SDK program in the same shell: DynamoDB Local started without
// -sharedDb keeps one database per access key and region, and the runner
// must read the database the program writes.
//
// It reads SNAPSHOT_WINDOWS and SNAPSHOT_TTL_DAYS like the Lambda; audit
// archival to S3 is not available here. It stops on SIGINT or SIGTERM, or
// after one poll with -once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/aggregator"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// envEndpoint is the test harness's endpoint variable, read first.
const envEndpoint = "ZAEL_DYNAMODB_ENDPOINT"

func main() {
	endpoint := flag.String("endpoint", os.Getenv(envEndpoint), "DynamoDB endpoint (default $"+envEndpoint+", $AWS_ENDPOINT_URL_DYNAMODB, $AWS_ENDPOINT_URL, else "+ddbschema.LocalEndpoint+")")
	table := flag.String("table", envOr(aggregator.EnvTableName, envOr("ZAEL_STACK", "zae-limiter")), "table whose stream to process (default $TABLE_NAME, $ZAEL_STACK or zae-limiter)")
	interval := flag.Duration("interval", aggregator.DefaultPollInterval, "pause between polls")
	latest := flag.Bool("latest", false, "start at the end of the stream instead of its beginning")
	once := flag.Bool("once", false, "poll once and exit")
	flag.Parse()

	cfg, err := aggregator.LoadConfig(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	awsCfg := ddbschema.LocalConfig(*endpoint)
	proc, err := aggregator.NewProcessor(limiter.NewDynamoDBLocalClient(*endpoint), *table, cfg.Options(), func(o *aggregator.Options) {
		o.Logger = logger
		o.ArchiveBucket = ""
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := checkTable(awsCfg, *table); err != nil {
		log.Fatal(err)
	}
	runner := aggregator.NewRunner(dynamodbstreams.NewFromConfig(awsCfg), *table, proc, func(o *aggregator.RunnerOptions) {
		o.PollInterval = *interval
		o.Logger = logger
		if *latest {
			o.StartingPosition = "LATEST"
		}
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *once {
		res, err := runner.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d records, %d snapshot writes, %d refills, %d shard doublings, %d shard items, %d dropped\n",
			res.Processed, res.SnapshotsUpdated, res.RefillsWritten, res.ShardsDoubled, res.ShardItemsCreated, len(res.Failures))
		return
	}
	logger.Info("aggregator-local polling", "endpoint", aws.ToString(awsCfg.BaseEndpoint), "table", *table, "interval", interval.String())
	if err := runner.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// checkTable fails with an explanation when the table is not in the
// database the credentials see.
func checkTable(cfg aws.Config, table string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }).
		DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		creds, _ := cfg.Credentials.Retrieve(ctx)
		return fmt.Errorf("table %s not found at %s for access key %q in region %s: DynamoDB Local started without -sharedDb keeps one database per access key and region, so run this with the credentials and region of the program that writes the table (or start DynamoDB Local with -sharedDb, as `zae-limiter local up` does)",
			table, aws.ToString(cfg.BaseEndpoint), creds.AccessKeyID, cfg.Region)
	}
	if err != nil {
		return fmt.Errorf("describe table %s: %w", table, err)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
