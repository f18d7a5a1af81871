package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
)

// The benchmarks of the README's "Redis backend" section: this store
// under a RateLimiter against github.com/go-redis/redis_rate (GCRA, one
// script per key) on the same redis-server in the same run, with one
// client (pool of 64 connections) shared by both. The limits are high
// enough that every request is admitted: the numbers are the cost of an
// admitted request. Run them with
//
//	make bench BENCHFLAGS='-bench=Redis -benchtime=3s' (or go test -run='^$' -bench=Redis ./redisstore/)
//
// Each reports ops/s and the median latency (p50-µs) of one acquire.

// benchClient returns a client of the package's server with a pool large
// enough for 32 goroutines.
func benchClient(b *testing.B) *redis.Client {
	o := redisserver.ClientOptions(redisserver.Addr(b))
	o.PoolSize = 64
	c := redis.NewClient(o)
	b.Cleanup(func() { c.Close() })
	return c
}

// runConcurrent runs op b.N times over c goroutines (worker w calls it
// with its own index) and reports ops/s and the median latency.
func runConcurrent(b *testing.B, c int, op func(worker int) error) {
	b.Helper()
	lat := make([][]time.Duration, c)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(w); err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
}

// zaelLimiter returns a RateLimiter on a fresh namespace of the server.
func zaelLimiter(b *testing.B, c *redis.Client, opts ...limiter.Option) *limiter.RateLimiter {
	s, err := redisstore.New(c, func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(b) })
	if err != nil {
		b.Fatal(err)
	}
	return limiter.New(s, opts...)
}

// bigRate (per second) never refuses in a benchmark, and is low enough that
// redis_rate, which keeps its state in float64 seconds, still writes it.
const bigRate = 1_000_000

// bigTokens is the tokens-per-second limit of the two-limit benchmarks
// (requests take 500 tokens).
const bigTokens = 1000 * bigRate

// BenchmarkRedisOneLimit: one limit per key, one key per goroutine.
func BenchmarkRedisOneLimit(b *testing.B) {
	ctx := context.Background()
	for _, c := range []int{1, 32} {
		b.Run("zael/c="+strconv.Itoa(c), func(b *testing.B) {
			rl := zaelLimiter(b, benchClient(b))
			lims := limiter.WithLimits(limiter.PerSecond("rps", bigRate))
			runConcurrent(b, c, func(w int) error {
				lease, err := rl.Acquire(ctx, "user-"+strconv.Itoa(w), "api", limiter.Consume{"rps": 1}, lims)
				if err != nil {
					return err
				}
				return lease.Commit(ctx)
			})
		})
		b.Run("redis_rate/c="+strconv.Itoa(c), func(b *testing.B) {
			rr := redis_rate.NewLimiter(benchClient(b))
			prefix := redisserver.Prefix(b)
			lim := redis_rate.PerSecond(bigRate)
			runConcurrent(b, c, func(w int) error {
				res, err := rr.Allow(ctx, prefix+"user-"+strconv.Itoa(w), lim)
				if err == nil && res.Allowed == 0 {
					err = fmt.Errorf("refused: %+v", res)
				}
				return err
			})
		})
	}
}

// BenchmarkRedisTwoLimits: requests per minute and tokens per minute. This
// store checks and takes both in one script on one hash; redis_rate needs
// one call per limit (two keys).
func BenchmarkRedisTwoLimits(b *testing.B) {
	ctx := context.Background()
	for _, c := range []int{1, 32} {
		b.Run("zael/c="+strconv.Itoa(c), func(b *testing.B) {
			rl := zaelLimiter(b, benchClient(b))
			lims := limiter.WithLimits(limiter.PerSecond("rpm", bigRate), limiter.PerSecond("tpm", bigTokens))
			runConcurrent(b, c, func(w int) error {
				lease, err := rl.Acquire(ctx, "user-"+strconv.Itoa(w), "api", limiter.Consume{"rpm": 1, "tpm": 500}, lims)
				if err != nil {
					return err
				}
				return lease.Commit(ctx)
			})
		})
		b.Run("redis_rate/c="+strconv.Itoa(c), func(b *testing.B) {
			rr := redis_rate.NewLimiter(benchClient(b))
			prefix := redisserver.Prefix(b)
			rpm, tpm := redis_rate.PerSecond(bigRate), redis_rate.PerSecond(bigTokens)
			runConcurrent(b, c, func(w int) error {
				key := prefix + "user-" + strconv.Itoa(w)
				if res, err := rr.AllowN(ctx, key+":rpm", rpm, 1); err != nil || res.Allowed == 0 {
					return fmt.Errorf("rpm: %+v, %v", res, err)
				}
				if res, err := rr.AllowN(ctx, key+":tpm", tpm, 500); err != nil || res.Allowed == 0 {
					return fmt.Errorf("tpm: %+v, %v", res, err)
				}
				return nil
			})
		})
	}
}

// BenchmarkRedisHotKey: 32 goroutines on one key, with and without group
// commit (which sends the acquires queued behind a write as one script).
func BenchmarkRedisHotKey(b *testing.B) {
	ctx := context.Background()
	for _, gc := range []bool{true, false} {
		b.Run(fmt.Sprintf("group_commit=%v", gc), func(b *testing.B) {
			rl := zaelLimiter(b, benchClient(b), limiter.WithGroupCommit(gc))
			lims := limiter.WithLimits(limiter.PerSecond("rpm", bigRate), limiter.PerSecond("tpm", bigTokens))
			runConcurrent(b, 32, func(int) error {
				lease, err := rl.Acquire(ctx, "hot", "api", limiter.Consume{"rpm": 1, "tpm": 500}, lims)
				if err != nil {
					return err
				}
				return lease.Commit(ctx)
			})
		})
	}
	b.Run("redis_rate", func(b *testing.B) {
		rr := redis_rate.NewLimiter(benchClient(b))
		key := redisserver.Prefix(b) + "hot"
		rpm, tpm := redis_rate.PerSecond(bigRate), redis_rate.PerSecond(bigTokens)
		runConcurrent(b, 32, func(int) error {
			if res, err := rr.AllowN(ctx, key+":rpm", rpm, 1); err != nil || res.Allowed == 0 {
				return fmt.Errorf("rpm: %+v, %v", res, err)
			}
			if res, err := rr.AllowN(ctx, key+":tpm", tpm, 500); err != nil || res.Allowed == 0 {
				return fmt.Errorf("tpm: %+v, %v", res, err)
			}
			return nil
		})
	})
}
