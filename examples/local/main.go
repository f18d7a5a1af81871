// Command local is the program of the local walkthrough (docs/cli.md). After
//
//	eval "$(zae-limiter local up)"
//
// it opens the table that `local up` created — endpoint, table and
// namespace come from the variables it printed — and sends LLM-style calls
// for one API key: each acquires rpm 1 and an estimate of 500 tpm, "calls
// the model", adjusts by the tokens really used and commits.
//
//	go run ./examples/local -calls 5
//
// The aggregator that `local up` started turns the writes into usage
// snapshots within a second: `zae-limiter usage list -e api-key-1`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/zaelimiter/limiter"
)

func main() {
	calls := flag.Int("calls", 5, "number of calls")
	key := flag.String("key", "api-key-1", "API key (entity) to charge")
	flag.Parse()
	ctx := context.Background()
	// "" reads the endpoint from $AWS_ENDPOINT_URL_DYNAMODB; the table and
	// namespace default to $ZAEL_STACK and $ZAEL_NAMESPACE.
	repo, err := limiter.OpenDynamoDB(ctx, limiter.NewDynamoDBLocalClient(""))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("table %s, namespace %s\n", repo.Table(), repo.NamespaceName())
	if err := run(ctx, os.Stdout, limiter.New(repo), *key, *calls); err != nil {
		log.Fatal(err)
	}
}

// run sends calls LLM-style calls for key on gpt-4o and reports each.
func run(ctx context.Context, out io.Writer, rl *limiter.RateLimiter, key string, calls int) error {
	limits := limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 20_000))
	admitted := 0
	for i := range calls {
		lease, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 500}, limits)
		var rle *limiter.RateLimitExceededError
		if errors.As(err, &rle) {
			fmt.Fprintf(out, "call %d: denied, retry after %v\n", i+1, rle.RetryAfter)
			continue
		}
		if err != nil {
			return err
		}
		used := int64(300 + 100*i) // the model's real token count
		lease.Adjust(limiter.Consume{"tpm": used - 500})
		if err := lease.Commit(ctx); err != nil {
			return err
		}
		admitted++
		fmt.Fprintf(out, "call %d: admitted, %d tokens\n", i+1, used)
	}
	fmt.Fprintf(out, "%d of %d calls admitted\n", admitted, calls)
	return nil
}
