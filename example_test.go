package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/zaelimiter/limiter"
)

// The examples that need DynamoDB compile but do not run (they have no
// Output comment); examples/quickstart runs the same calls against DynamoDB
// Local.

var (
	ctx = context.Background()
	rl  *limiter.RateLimiter // as built by ExampleNew
)

// callLLM stands for a call to a language model; it returns the tokens the
// call really used.
func callLLM(context.Context, string) (tokens int64, err error) { return 0, nil }

func ExampleOpenDynamoDB() {
	cfg, err := config.LoadDefaultConfig(ctx) // region and credentials as usual
	if err != nil {
		log.Fatal(err)
	}
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
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	repo, err := limiter.OpenDynamoDB(ctx, dynamodb.NewFromConfig(cfg))
	if err != nil {
		log.Fatal(err)
	}
	// One RateLimiter per process; it is safe for concurrent use.
	rl := limiter.New(repo,
		limiter.WithSpeculativeWrites(true),     // on by default
		limiter.WithConfigCacheTTL(time.Minute)) // stored limits are re-read after this

	// Stored limits: every API key under "acme" gets these on gpt-4o.
	err = rl.SetLimits(ctx, "acme", limiter.DefaultResource, []limiter.Limit{
		limiter.PerMinute(limiter.LimitRPM, 1_000),
		limiter.PerMinute(limiter.LimitTPM, 200_000),
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = rl.CreateEntity(ctx, limiter.Entity{ID: "key-1", ParentID: "acme", Cascade: true})
	if err != nil && !errors.Is(err, limiter.ErrEntityExists) {
		log.Fatal(err)
	}
}

// Estimate, call, reconcile: Acquire takes the estimate before the call,
// Adjust records the real token count, Commit writes the difference. The
// deferred Rollback gives everything back when the call fails before Commit.
func ExampleRateLimiter_Acquire() {
	const estimate = 500
	lease, err := rl.Acquire(ctx, "key-1", "gpt-4o",
		limiter.Consume{"rpm": 1, "tpm": estimate},
		limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)))
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
}

// Do runs the function inside a lease: it commits when the function returns
// nil and rolls back when it returns an error or panics. Without
// WithLimits, the limits come from the stored config.
func ExampleRateLimiter_Do() {
	err := rl.Do(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 500},
		func(ctx context.Context, lease *limiter.Lease) error {
			actual, err := callLLM(ctx, "Hello!")
			if err != nil {
				return err // rolled back
			}
			return lease.Adjust(limiter.Consume{"tpm": actual - 500})
		})
	switch {
	case errors.Is(err, limiter.ErrRateLimited):
		fmt.Println("rate limited:", err)
	case errors.Is(err, limiter.ErrUnavailable):
		fmt.Println("DynamoDB unavailable (on_unavailable = block):", err)
	case err != nil:
		log.Fatal(err)
	}
}

// A denial is a *RateLimitExceededError that matches ErrRateLimited, also
// when wrapped. It says which limit refused, how many tokens it had, and how
// long to wait.
func ExampleRateLimitExceededError() {
	_, err := rl.Acquire(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 500})
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
	}
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
		fmt.Printf("%s: capacity %d, +%d every %v (%.2f/s)\n", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod, l.RefillRate())
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

	_, err := limiter.NewLimit("rpm", 0, 100, time.Minute)
	fmt.Println(errors.Is(err, limiter.ErrValidation), err)
	// Output:
	// rpm: capacity 300, +100 every 1m0s
	// valid: true
	// true limiter: invalid capacity: capacity must be positive
}

// The middleware charges each request to the API key in a header: one
// request plus the tpm estimate before the handler, the real count after.
func ExampleHTTPMiddleware() {
	key := func(r *http.Request) (string, string, limiter.Consume, error) {
		apiKey := r.Header.Get("X-API-Key")
		if apiKey == "" {
			return "", "", nil, errors.New("missing X-API-Key") // 400
		}
		return apiKey, "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 500}, nil
	}
	chat := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actual, err := callLLM(r.Context(), "Hello!")
		lease := limiter.LeaseFromContext(r.Context())
		if err != nil {
			lease.Rollback(r.Context()) // the middleware's Commit is then a no-op
			http.Error(w, "upstream failed", http.StatusBadGateway)
			return
		}
		lease.Adjust(limiter.Consume{"tpm": actual - 500})
		w.Header().Set("X-Tokens-Used", strconv.FormatInt(actual, 10))
	})
	mw := limiter.HTTPMiddleware(rl, key, func(o *limiter.HTTPOptions) {
		o.AcquireOptions = []limiter.AcquireOption{limiter.WithOnUnavailable(limiter.OnUnavailableAllow)}
		o.OnCommitError = func(r *http.Request, err error) { log.Printf("%s: commit: %v", r.URL.Path, err) }
	})
	http.Handle("/v1/chat", mw(chat)) // 429 + Retry-After when a limit refuses
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
