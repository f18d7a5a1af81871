// Command aggregator-local runs the zae-limiter stream processor against a
// table in DynamoDB Local (or any endpoint), polling the table's stream
// through the DynamoDB Streams API instead of being invoked by Lambda:
//
//	go run ./aggregator/cmd/aggregator-local -endpoint http://localhost:8000 -table zae-limiter
//
// `make aggregator-local` runs it. It reads SNAPSHOT_WINDOWS and
// SNAPSHOT_TTL_DAYS like the Lambda; audit archival to S3 is not available
// here. It stops on SIGINT or SIGTERM, or after one poll with -once.
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

	"github.com/zaelimiter/limiter/aggregator"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

func main() {
	endpoint := flag.String("endpoint", envOr(ddblocal.EnvEndpoint, "http://localhost:8000"), "DynamoDB endpoint (default $"+ddblocal.EnvEndpoint+")")
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
	proc, err := aggregator.NewProcessor(ddblocal.NewClient(*endpoint), *table, cfg.Options(), func(o *aggregator.Options) {
		o.Logger = logger
		o.ArchiveBucket = ""
	})
	if err != nil {
		log.Fatal(err)
	}
	runner := aggregator.NewRunner(ddblocal.NewStreamsClient(*endpoint), *table, proc, func(o *aggregator.RunnerOptions) {
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
	logger.Info("aggregator-local polling", "endpoint", *endpoint, "table", *table, "interval", interval.String())
	if err := runner.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
