package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// The examples run on the memory backend (memorystore) with a frozen clock,
// so that their output is stable; a program switches to DynamoDB by
// changing only the repository (see ExampleOpenDynamoDB, and
// examples/quickstart, which runs against DynamoDB Local).

var ctx = context.Background()

// callLLM stands for a call to a language model; it returns the tokens the
// call really used.
func callLLM(context.Context, string) (tokens int64, err error) { return 320, nil }

// frozen is a clock that does not move: no tokens refill in the examples.
func frozen() time.Time { return time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) }

// newLimiter returns a limiter on a new memory store with stored limits:
// every key under "acme" gets 100 rpm and 1,000 tpm on gpt-4o, and key-1
// cascades to acme.
func newLimiter() *limiter.RateLimiter {
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = frozen })
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{
		limiter.PerMinute("rpm", 100),
		limiter.PerMinute("tpm", 1_000),
	}); err != nil {
		log.Fatal(err)
	}
	for _, e := range []limiter.Entity{{ID: "acme"}, {ID: "key-1", ParentID: "acme", Cascade: true}} {
		if _, err := rl.Admin().CreateEntity(ctx, e); err != nil {
			log.Fatal(err)
		}
	}
	return rl
}

func ExampleOpenDynamoDB() {
	// Region and credentials as usual: cfg, err := config.LoadDefaultConfig(ctx),
	// with package config of github.com/aws/aws-sdk-go-v2/config.
	var cfg aws.Config
	repo, err := limiter.OpenDynamoDB(ctx, dynamodb.NewFromConfig(cfg), func(o *limiter.DynamoDBOptions) {
		o.Table = "zae-limiter" // default: $ZAEL_STACK, else "zae-limiter"
		o.Namespace = "default" // default: $ZAEL_NAMESPACE, else "default"
		o.CreateTable = true    // development only; production tables come from the template
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("namespace", repo.NamespaceName(), "in table", repo.Table())
}

func ExampleNew() {
	// One RateLimiter per process; it is safe for concurrent use. Any
	// repository: limiter.OpenDynamoDB in production.
	rl := limiter.New(memorystore.New(),
		func(o *limiter.Options) { o.ConfigCacheTTL = time.Minute },
		func(o *limiter.Options) { o.Clock = frozen })

	// Stored limits: every API key gets these on gpt-4o unless it has its own.
	err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{
		limiter.PerMinute("rpm", 1_000),
		limiter.PerMinute("tpm", 200_000),
	})
	if err != nil {
		log.Fatal(err)
	}
	limits, source, err := rl.Admin().ResolveLimits(ctx, "key-1", "gpt-4o")
	fmt.Println(len(limits), "limits from the", source, "level", err)
	// Output:
	// 2 limits from the resource level <nil>
}

// Estimate, call, reconcile: Acquire takes the estimate before the call,
// Adjust records the real token count, Commit writes the difference. The
// deferred Rollback gives everything back when the call fails before Commit.
func ExampleRateLimiter_Acquire() {
	rl := newLimiter()
	const estimate = 500
	lease, err := rl.Acquire(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": estimate})
	var rle *limiter.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println("denied; retry in", rle.RetryAfter)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Rollback(ctx) // no-op once committed

	actual, err := callLLM(ctx, "Hello!")
	if err != nil {
		log.Print(err) // the deferred Rollback refunds rpm and tpm
		return
	}
	if err := lease.Adjust(limiter.Consume{"tpm": actual - estimate}); err != nil {
		log.Fatal(err)
	}
	if err := lease.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	left, _ := rl.Available(ctx, "acme", "gpt-4o") // the parent was charged too
	fmt.Println("used", actual, "tokens; acme has", left["tpm"], "tpm left")
	// Output:
	// used 320 tokens; acme has 680 tpm left
}

// Do runs the function inside a lease: it commits when the function returns
// nil and rolls back when it returns an error or panics. Without
// WithLimits, the limits come from the stored config.
func ExampleRateLimiter_Do() {
	rl := newLimiter()
	for range 3 {
		err := rl.Do(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 400},
			func(ctx context.Context, lease *limiter.Lease) error {
				actual, err := callLLM(ctx, "Hello!")
				if err != nil {
					return err // rolled back
				}
				return lease.Adjust(limiter.Consume{"tpm": actual - 400})
			})
		switch {
		case errors.Is(err, limiter.ErrRateLimited):
			fmt.Println("rate limited:", err)
		case errors.Is(err, limiter.ErrUnavailable):
			fmt.Println("store unavailable (on_unavailable = block):", err)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println("done")
		}
	}
	// Output:
	// done
	// done
	// rate limited: limiter: rate limit exceeded for key-1 on gpt-4o: tpm; retry in 2.5s
}

// A denial is a *RateLimitExceededError that matches ErrRateLimited, also
// when wrapped. It says which limit refused, how many tokens it had, and how
// long to wait.
func ExampleRateLimitExceededError() {
	rl := newLimiter()
	_, err := rl.Acquire(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 1500})
	err = fmt.Errorf("chat completion: %w", err)

	var rle *limiter.RateLimitExceededError
	if errors.As(err, &rle) {
		p := rle.Primary // the violation with the longest wait
		fmt.Printf("%s/%s %s: %d of %d available, need %d\n",
			p.EntityID, p.Resource, p.LimitName, p.Available, p.Limit.Capacity, p.Requested)
		fmt.Println("Retry-After:", rle.RetryAfterHeader(), "exact:", rle.RetryAfter)
		for _, v := range rle.Violations { // every limit that refused, child before parent
			fmt.Println("exceeded:", v.EntityID, v.LimitName)
		}
		fmt.Println("never fits:", rle.NeverFits())
	}
	// Output:
	// key-1/gpt-4o tpm: 1000 of 1000 available, need 1500
	// Retry-After: 31 exact: 30.001s
	// exceeded: key-1 tpm
	// exceeded: acme tpm
	// never fits: true
}

// RetryAfterHeader rounds up to whole seconds and is never "0"; here on a
// denial built by hand, as a handler test might.
func ExampleRateLimitExceededError_RetryAfterHeader() {
	for _, wait := range []time.Duration{0, 250 * time.Millisecond, 2 * time.Second, 8905 * time.Millisecond} {
		e := &limiter.RateLimitExceededError{RetryAfter: wait}
		fmt.Printf("%v -> Retry-After: %s\n", wait, e.RetryAfterHeader())
	}
	// Output:
	// 0s -> Retry-After: 1
	// 250ms -> Retry-After: 1
	// 2s -> Retry-After: 3
	// 8.905s -> Retry-After: 9
}

func ExamplePerMinute() {
	for _, l := range []limiter.Limit{
		limiter.PerMinute("rpm", 100),
		limiter.PerMinute("tpm", 10_000),
		limiter.PerDay("tpd", 1_000_000),
	} {
		fmt.Printf("%s: capacity %d, +%d every %v (%.2f/s)\n", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod, float64(l.RefillAmount)/l.RefillPeriod.Seconds())
	}
	// Output:
	// rpm: capacity 100, +100 every 1m0s (1.67/s)
	// tpm: capacity 10000, +10000 every 1m0s (166.67/s)
	// tpd: capacity 1000000, +1000000 every 24h0m0s (11.57/s)
}

// WithBurst changes only the capacity: this limit refills 100 tokens a
// minute but lets a quiet client spend up to 300 at once.
func ExampleLimit_WithBurst() {
	l := limiter.PerMinute("rpm", 100).WithBurst(300)
	fmt.Printf("%s: capacity %d, +%d every %v\n", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod)
	fmt.Println("valid:", l.Validate() == nil)

	err := limiter.Limit{Name: "rpm", Capacity: 0, RefillAmount: 100, RefillPeriod: time.Minute}.Validate()
	fmt.Println(errors.Is(err, limiter.ErrValidation), err)
	// Output:
	// rpm: capacity 300, +100 every 1m0s
	// valid: true
	// true limiter: invalid capacity: capacity must be positive
}

func ExampleNewDynamoDBLocalClient() {
	// DynamoDB Local, e.g. started by `zae-limiter local up`; "" would read
	// the endpoint from $AWS_ENDPOINT_URL_DYNAMODB.
	client := limiter.NewDynamoDBLocalClient("http://localhost:8000")
	repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.CreateTable = true // a no-op when the table exists
	})
	if err != nil {
		log.Fatal(err)
	}
	rl := limiter.New(repo)
	lease, err := rl.Acquire(ctx, "api-key-1", "gpt-4", limiter.Consume{"rpm": 1},
		limiter.WithLimits(limiter.PerMinute("rpm", 100)))
	if err != nil {
		log.Fatal(err)
	}
	if err := lease.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
