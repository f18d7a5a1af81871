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

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// The benchmarks of docs/performance.md ("Redis against redis_rate"): this store
// under a RateLimiter against github.com/go-redis/redis_rate (GCRA, one
// script per key) on the same redis-server in the same run, with one
// client (pool of 64 connections) shared by both. The limits are high
// enough that every request is admitted: the numbers are the cost of an
// admitted request. Run them with
//
//	make bench BENCHFLAGS='-bench=Redis -benchtime=3s' (or go test -run='^$' -bench=Redis ./redisstore/)
//
// Each runs both contenders in alternating rounds and reports their ops/s,
// their median latency (p50-µs) and the ratio of their ops/s.

// benchClient returns a client of the package's server with a pool large
// enough for 32 goroutines.
func benchClient(b *testing.B) *redis.Client {
	o := redisserver.ClientOptions(redisserver.Addr(b))
	o.PoolSize = 64
	c := redis.NewClient(o)
	b.Cleanup(func() { c.Close() })
	return c
}

// side is one contender of a comparison: op runs one request for
// worker w.
type side struct {
	name    string
	op      func(w int) error
	lat     []time.Duration
	elapsed time.Duration
}

// round runs n requests over c goroutines.
func (s *side) round(c, n int) error {
	lat := make([][]time.Duration, c)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := s.op(w); err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	s.lat = append(s.lat, slices.Concat(lat...)...)
	if err, _ := failed.Load().(error); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

// versus runs b.N requests split between the sides in alternating rounds
// of c goroutines (so that both see the same machine, however its load
// drifts), and reports each side's ops/s and median latency, and the
// ratio of the first side's ops/s to the second's.
func versus(b *testing.B, c int, sides ...*side) {
	b.Helper()
	const rounds = 10
	per := max(b.N/(rounds*len(sides)), c)
	b.ResetTimer()
	for range rounds {
		for _, s := range sides {
			require.NoError(b, s.round(c, per))
		}
	}
	b.StopTimer()
	ops := make([]float64, len(sides))
	for i, s := range sides {
		slices.Sort(s.lat)
		ops[i] = float64(len(s.lat)) / s.elapsed.Seconds()
		b.ReportMetric(ops[i], s.name+"-ops/s")
		b.ReportMetric(float64(s.lat[len(s.lat)/2].Microseconds()), s.name+"-p50-µs")
	}
	if len(sides) == 2 {
		b.ReportMetric(ops[0]/ops[1], "ratio")
	}
}

// zaelLimiter returns a RateLimiter on a fresh namespace of the server.
func zaelLimiter(b *testing.B, c *redis.Client, opts ...func(*limiter.Options)) *limiter.RateLimiter {
	s, err := redisstore.New(c, func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(b) })
	require.NoError(b, err)
	return limiter.New(s, opts...)
}

// bigRate (per second) never refuses in a benchmark, and is low enough that
// redis_rate, which keeps its state in float64 seconds, still writes it.
const bigRate = 1_000_000

// bigTokens is the tokens-per-second limit of the two-limit benchmarks
// (requests take 500 tokens).
const bigTokens = 1000 * bigRate

// zaelSide acquires consume under lims for key prefix+worker (one key per
// goroutine) and commits.
func zaelSide(rl *limiter.RateLimiter, name, prefix string, consume limiter.Consume, lims limiter.AcquireOption) *side {
	ctx := context.Background()
	return &side{name: name, op: func(w int) error {
		lease, err := rl.Acquire(ctx, prefix+strconv.Itoa(w), "api", consume, lims)
		if err != nil {
			return err
		}
		return lease.Commit(ctx)
	}}
}

// rateSide runs redis_rate's AllowN for each limit (cost n) on key
// prefix+worker (one key per goroutine).
func rateSide(rr *redis_rate.Limiter, prefix string, limits []redis_rate.Limit, costs []int) *side {
	ctx := context.Background()
	return &side{name: "redis_rate", op: func(w int) error {
		key := prefix + strconv.Itoa(w)
		for i, l := range limits {
			res, err := rr.AllowN(ctx, key+":"+strconv.Itoa(i), l, costs[i])
			if err != nil {
				return err
			}
			if res.Allowed == 0 {
				return fmt.Errorf("refused: %+v", res)
			}
		}
		return nil
	}}
}

// BenchmarkRedisOneLimit: one limit per key, one key per goroutine: this
// store under a RateLimiter (one script per acquire) against redis_rate
// (one script per Allow).
func BenchmarkRedisOneLimit(b *testing.B) {
	for _, c := range []int{1, 32} {
		b.Run("c="+strconv.Itoa(c), func(b *testing.B) {
			client := benchClient(b)
			prefix := redisserver.Prefix(b)
			versus(b, c,
				zaelSide(zaelLimiter(b, client), "zael", "user-", limiter.Consume{"rps": 1}, limiter.WithLimits(limiter.PerSecond("rps", bigRate))),
				rateSide(redis_rate.NewLimiter(client), prefix+"user-", []redis_rate.Limit{redis_rate.PerSecond(bigRate)}, []int{1}))
		})
	}
}

// BenchmarkRedisTwoLimits: requests per second and tokens per second. This
// store checks and takes both in one script on one hash; redis_rate needs
// one call per limit (two keys).
func BenchmarkRedisTwoLimits(b *testing.B) {
	for _, c := range []int{1, 32} {
		b.Run("c="+strconv.Itoa(c), func(b *testing.B) {
			client := benchClient(b)
			prefix := redisserver.Prefix(b)
			versus(b, c,
				zaelSide(zaelLimiter(b, client), "zael", "user-", limiter.Consume{"rpm": 1, "tpm": 500},
					limiter.WithLimits(limiter.PerSecond("rpm", bigRate), limiter.PerSecond("tpm", bigTokens))),
				rateSide(redis_rate.NewLimiter(client), prefix+"user-",
					[]redis_rate.Limit{redis_rate.PerSecond(bigRate), redis_rate.PerSecond(bigTokens)}, []int{1, 500}))
		})
	}
}

// BenchmarkRedisHotKey: 32 goroutines on one key (rpm and tpm), with and
// without group commit (which sends the acquires queued behind a write as
// one script); ratio is with / without.
func BenchmarkRedisHotKey(b *testing.B) {
	client := benchClient(b)
	lims := limiter.WithLimits(limiter.PerSecond("rpm", bigRate), limiter.PerSecond("tpm", bigTokens))
	hot := func(rl *limiter.RateLimiter, name string) *side {
		s := zaelSide(rl, name, "hot", limiter.Consume{"rpm": 1, "tpm": 500}, lims)
		op := s.op
		s.op = func(int) error { return op(0) } // every goroutine on key "hot0"
		return s
	}
	versus(b, 32,
		hot(zaelLimiter(b, client, func(o *limiter.Options) { o.GroupCommit = true }), "group_commit"),
		hot(zaelLimiter(b, client, func(o *limiter.Options) { o.GroupCommit = false }), "no_group_commit"))
}

// BenchmarkLeaseOneLimit is one acquire and commit of one limit on one key,
// for profiles of the client's work.
func BenchmarkLeaseOneLimit(b *testing.B) {
	client := benchClient(b)
	rl := zaelLimiter(b, client)
	ctx := context.Background()
	lims := limiter.WithLimits(limiter.PerMinute("rpm", 1<<30))
	b.ReportAllocs()
	for b.Loop() {
		lease, err := rl.Acquire(ctx, "k", "api", limiter.Consume{"rpm": 1}, lims)
		require.NoError(b, err)
		require.NoError(b, lease.Commit(ctx))
	}
}

// BenchmarkAllow is one Store.Allow on one key, for profiles of the
// client's work.
func BenchmarkAllow(b *testing.B) {
	s, err := redisstore.New(benchClient(b), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(b) })
	require.NoError(b, err)
	ctx := context.Background()
	l := limiter.PerMinute("rpm", 1<<30)
	b.ReportAllocs()
	for b.Loop() {
		_, err := s.Allow(ctx, "k", store.Limit(l), 1)
		require.NoError(b, err)
	}
}

// cannedReplies is a go-redis hook that answers every command with a
// fixed reply instead of sending it: an admitted consume of one limit (the
// lease's Acquire), three integers (Store.Allow) and redis_rate's array;
// and in a pipeline (the limiter's first read of an entity it has not
// seen) an empty hash, an entity without a record. The client's own work
// per request is what remains.
type cannedReplies struct{}

func (cannedReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (cannedReplies) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if c, ok := cmd.(*redis.MapStringStringCmd); ok {
				c.SetVal(map[string]string{})
			}
		}
		return nil
	}
}

func (cannedReplies) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		switch c := cmd.(type) {
		case *redis.StringCmd:
			c.SetVal("1\n\n4\nh\n1795635502781|1|0|1795635922|\nl:rpm\n1073741824000|1073741824000|60000|1073741753000|71000")
		case *redis.IntSliceCmd:
			c.SetVal([]int64{1, 100, 0})
		case *redis.Cmd:
			c.SetVal([]any{int64(1), int64(100), "-1", "0.1"})
		}
		return nil
	}
}

// BenchmarkClientCannedReply is the client's work per request, with
// go-redis answered by cannedReplies: a lease (Acquire + Commit), the
// store's consume alone, Store.Allow, and redis_rate's AllowN.
func BenchmarkClientCannedReply(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	client.AddHook(cannedReplies{})
	b.Cleanup(func() { client.Close() })
	s, err := redisstore.New(client)
	require.NoError(b, err)
	ctx := context.Background()
	lim := limiter.PerMinute("rpm", 1<<30)
	lims, consume := limiter.WithLimits(lim), limiter.Consume{"rpm": 1}
	rl := limiter.New(s)
	rr := redis_rate.NewLimiter(client)
	for _, c := range []struct {
		name string
		op   func() error
	}{
		{"lease", func() error {
			lease, err := rl.Acquire(ctx, "k", "api", consume, lims)
			if err != nil {
				return err
			}
			return lease.Commit(ctx)
		}},
		{"consume", func() error {
			res, err := s.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: store.BucketKey{EntityID: "k", Resource: "api"}, Consume: consume, Limits: []store.Limit{store.Limit(lim)}, NowMs: 1795635502796})
			if err == nil && !res.Applied {
				err = fmt.Errorf("refused: %s", res.Reason)
			}
			return err
		}},
		{"allow", func() error { _, err := s.Allow(ctx, "k", store.Limit(lim), 1); return err }},
		{"redis_rate", func() error { _, err := rr.AllowN(ctx, "k", redis_rate.PerMinute(1<<30), 1); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
