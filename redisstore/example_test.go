package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// ExampleNew runs the limiter on Redis: the same program as on DynamoDB,
// with another constructor.
func ExampleNew() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	repo, err := redisstore.New(client, func(o *redisstore.Options) { o.Namespace = "prod" })
	if err != nil {
		log.Fatal(err)
	}
	rl := limiter.New(repo)
	lease, err := rl.Acquire(ctx, "api-key-1", "gpt-4", limiter.Consume{"rpm": 1, "tpm": 500},
		limiter.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)))
	var rle *limiter.RateLimitExceededError
	if errors.As(err, &rle) {
		fmt.Println("retry in", rle.RetryAfter)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Rollback(ctx)
	// ... call the model, then reconcile the estimate:
	lease.Adjust(limiter.Consume{"tpm": 742 - 500})
	if err := lease.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// ExampleStore_Allow throttles login attempts per user with GCRA: one
// integer per key, no leases.
func ExampleStore_Allow() {
	ctx := context.Background()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"}})
	repo, err := redisstore.New(client, func(o *redisstore.Options) { o.Algorithm = redisstore.GCRA })
	if err != nil {
		log.Fatal(err)
	}
	res, err := repo.Allow(ctx, "login:alice", store.Limit(limiter.PerMinute("attempts", 5)), 1)
	if err != nil {
		log.Fatal(err)
	}
	if !res.Allowed {
		fmt.Println("too many attempts; retry in", res.RetryAfter)
	}
}
