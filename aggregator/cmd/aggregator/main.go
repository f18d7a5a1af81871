// Command aggregator is the DynamoDB stream processor of zae-limiter for
// Go, as an AWS Lambda function for the provided.al2023 runtime (build it
// with `make lambda`). It is configured by the environment variables that
// the stack's template sets: TABLE_NAME, SNAPSHOT_WINDOWS, SNAPSHOT_TTL_DAYS,
// ENABLE_ARCHIVAL and ARCHIVE_BUCKET_NAME (see aggregator.LoadConfig), and
// reports failed records as BatchItemFailures, so its event source mapping
// needs FunctionResponseTypes ReportBatchItemFailures.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zaelimiter/limiter/aggregator"
)

func main() {
	ctx := context.Background()
	cfg, err := aggregator.LoadConfig(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	opts := []func(*aggregator.Options){cfg.Options(), func(o *aggregator.Options) { o.Logger = logger }}
	if cfg.ArchiveEnabled {
		if cfg.ArchiveBucket == "" {
			logger.Warn("archival enabled without " + aggregator.EnvArchiveBucket + ": audit events are not archived")
		}
		opts = append(opts, func(o *aggregator.Options) { o.S3 = s3.NewFromConfig(awsCfg) })
	}
	p, err := aggregator.NewProcessor(dynamodb.NewFromConfig(awsCfg), cfg.Table, opts...)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(p.Handle)
}
