// Command redisbench compares the Redis store with go-redis/redis_rate v10
// on one redis-server, in the same process and run: `make bench-redis`.
//
// Each case runs its two contenders in alternating rounds (five by
// default), so that both see the same machine however its load drifts,
// and prints the median and range of the per-round ratio of their ops/s.
// Within a round the two take turns too, in slices (by default 100 at c=1,
// 100 operations each, and 10 at c=32; the side that goes first
// alternates), and each side's ops/s for the round is its operations over
// its time summed over its slices: on a small virtual machine the speed of
// a request-reply ping-pong changes from one moment to the next (with
// where the scheduler puts the client and the server), and fine turns let
// both sides see the same moments. The first case, redis_rate against
// itself, shows what is left of that noise: the ratio of two identical
// contenders, which a difference between the other cases' contenders must
// exceed to mean anything. For each contender
// it also prints the server time per call (usec_per_call of INFO
// commandstats, over its own rounds: FCALL for the store's functions,
// EVALSHA for scripts), the calls per operation and the server time per
// operation (a batched call serves several), and the client's allocations
// and CPU time per operation (of the whole process during its rounds: the
// benchmark, the limiter and go-redis).
//
// Store.Allow and redis_rate.Allow run with limits users set (100 per
// minute, 2,000,000 tokens per minute taken 500 at a time, 1,000,000 per
// day) and with 2^30 per minute, where every request is admitted; leases
// (Acquire + Commit through a RateLimiter) with 2^30. Every goroutine has
// a key of its own, except in the hot-key case. Both sides share one
// go-redis client whose retries are off (MaxRetries -1), on which the
// store's calls carry no write identifier; one case runs a lease and
// redis_rate on a client that resends (go-redis's default), where they do.
//
// It starts a redis-server of its own (redis-server must be on $PATH), or
// uses the one at -addr.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "redisbench:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	addr    string
	rounds  int
	slices  int
	ops     int
	only    string
	scripts bool
	profile string
	// contender is a commit whose benchmark runs beside this tree's, in
	// alternating rounds (see runContender); "" runs this tree alone.
	contender string
}

func run(w io.Writer, args []string) error {
	var cfg config
	fs := flag.NewFlagSet("redisbench", flag.ContinueOnError)
	fs.StringVar(&cfg.addr, "addr", "", "redis-server to use (default: start one)")
	fs.IntVar(&cfg.rounds, "rounds", 5, "alternating rounds per case")
	fs.IntVar(&cfg.slices, "slices", 0, "turns of each contender per round (0: 100 at c=1, 10 above)")
	fs.IntVar(&cfg.ops, "ops", 10000, "operations per contender and round at c=1 (10× at c=32)")
	fs.StringVar(&cfg.only, "run", "", "run only the cases whose name matches this regular expression")
	fs.BoolVar(&cfg.scripts, "scripts", false, "run the store's Lua code as scripts (EVALSHA), not functions")
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	fs.StringVar(&cfg.contender, "contender", "", "a commit (hash, tag, branch) whose benchmark runs beside this tree's in alternating rounds, case by case (needs git and the clone's history)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.profile != "" {
		f, err := os.Create(cfg.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	a := cfg.addr
	if a == "" {
		srv, err := redisserver.Start(ctx)
		if err != nil {
			return err
		}
		defer srv.Close()
		a = srv.Addr()
	}
	o := redisserver.ClientOptions(a)
	o.PoolSize = 64
	client := redis.NewClient(o)
	defer client.Close()
	// A client that resends a command whose connection broke (go-redis's
	// default): the store's calls then carry write identifiers.
	ro := *o
	ro.MaxRetries = 3
	resending := redis.NewClient(&ro)
	defer resending.Close()
	filter, err := regexp.Compile(cfg.only)
	if err != nil {
		return err
	}
	if cfg.contender != "" {
		var names []string
		for _, c := range cases(client, resending, cfg.scripts) {
			if filter.MatchString(c.name) {
				names = append(names, c.name)
			}
		}
		return runContender(ctx, w, cfg, a, names)
	}
	info, _ := client.Info(ctx, "server").Result()
	fmt.Fprintf(w, "redis-server %s, GOMAXPROCS %d, %d rounds; ratio = A's ops/s ÷ B's (A: this store, B: redis_rate, unless the case names them), median [min–max] of the rounds\n\n",
		redisserver.InfoField(info, "redis_version"), runtime.GOMAXPROCS(0), cfg.rounds)
	fmt.Fprintf(w, "%-44s %9s %9s %22s %17s %13s %15s %13s %15s\n", "case", "ops/s A", "ops/s B", "ratio A/B", "server µs/call", "calls/op", "server µs/op", "allocs/op", "client µs/op")
	for _, c := range cases(client, resending, cfg.scripts) {
		if !filter.MatchString(c.name) {
			continue
		}
		if err := c.run(ctx, w, client, cfg); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// side is one contender: op runs one request for worker w.
type side struct {
	name string
	op   func(ctx context.Context, w int) error
	// measured over its rounds
	opsPerSec          []float64
	ops                int64
	calls              int64   // script or function calls on the server
	usec               float64 // server time of those calls
	mallocs            uint64
	cpu                time.Duration
	allowedN, refusedN atomic.Int64
}

// comparison is a case: A against B at concurrency c.
type comparison struct {
	name string
	c    int
	a, b *side
}

func (cp *comparison) run(ctx context.Context, w io.Writer, client *redis.Client, cfg config) error {
	n := cfg.ops
	if cp.c > 1 {
		n *= 10
	}
	// Warm up both sides (connections, the function library, first
	// buckets), unmeasured.
	for _, s := range []*side{cp.a, cp.b} {
		if err := s.warmUp(ctx, cp.c); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	var ratios []float64
	turns := cfg.slices
	if turns <= 0 {
		// At c=1 a turn of 100 operations takes about 10 ms: short enough
		// for both sides to see the same moments of the machine. At c=32
		// a turn stays long beside the time its goroutines take to start
		// and finish.
		turns = 10
		if cp.c == 1 {
			turns = 100
		}
		turns = min(turns, n) // at least one operation a turn: -ops holds
	}
	per := max(n/turns, 1)
	sides := [2]*side{cp.a, cp.b}
	for r := range cfg.rounds {
		var took [2]time.Duration
		for k := range turns {
			for j := range 2 {
				i := (r + k + j) % 2 // the side that goes first alternates
				d, err := sides[i].round(ctx, client, cp.c, per)
				if err != nil {
					return fmt.Errorf("%s: %w", sides[i].name, err)
				}
				took[i] += d
			}
		}
		ops := float64(per * turns)
		ra, rb := ops/took[0].Seconds(), ops/took[1].Seconds()
		cp.a.opsPerSec = append(cp.a.opsPerSec, ra)
		cp.b.opsPerSec = append(cp.b.opsPerSec, rb)
		ratios = append(ratios, ra/rb)
	}
	slices.Sort(ratios)
	server := func(s *side) string {
		if s.calls == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", s.usec/float64(s.calls))
	}
	fmt.Fprintf(w, "%-44s %9.0f %9.0f %8.2f× [%.2f–%.2f] %8s / %-6s %5.2f / %-5.2f %6.1f / %-6.1f %5.1f / %-5.1f %6.1f / %-6.1f\n",
		cp.name, median(cp.a.opsPerSec), median(cp.b.opsPerSec), median(ratios), ratios[0], ratios[len(ratios)-1],
		server(cp.a), server(cp.b),
		float64(cp.a.calls)/float64(cp.a.ops), float64(cp.b.calls)/float64(cp.b.ops),
		cp.a.usec/float64(cp.a.ops), cp.b.usec/float64(cp.b.ops),
		float64(cp.a.mallocs)/float64(cp.a.ops), float64(cp.b.mallocs)/float64(cp.b.ops),
		float64(cp.a.cpu.Microseconds())/float64(cp.a.ops), float64(cp.b.cpu.Microseconds())/float64(cp.b.ops))
	if a, r := cp.a.allowedN.Load(), cp.a.refusedN.Load(); a+r > 0 && r > 0 {
		fmt.Fprintf(w, "%-44s   admitted: %s %.0f%%, %s %.0f%%\n", "", cp.a.name, 100*float64(a)/float64(a+r),
			cp.b.name, 100*float64(cp.b.allowedN.Load())/float64(cp.b.allowedN.Load()+cp.b.refusedN.Load()))
	}
	return nil
}

// warmUp runs a few requests on every worker's key.
func (s *side) warmUp(ctx context.Context, c int) error {
	for w := range c {
		for range 20 {
			if err := s.op(ctx, w); err != nil {
				return err
			}
		}
	}
	s.allowedN.Store(0)
	s.refusedN.Store(0)
	return nil
}

// round runs n requests over c goroutines, adds the measurements and
// returns the time they took.
func (s *side) round(ctx context.Context, client *redis.Client, c, n int) (time.Duration, error) {
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		return 0, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	cpu := cpuTime()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := s.op(ctx, w); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	s.cpu += cpuTime() - cpu
	runtime.ReadMemStats(&ms)
	s.mallocs += ms.Mallocs - mallocs
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	s.ops += int64(n)
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, cmd := range []string{"fcall", "evalsha", "eval"} {
		calls, usec := redisserver.CommandStat(stats, cmd)
		s.calls += calls
		s.usec += usec
	}
	return elapsed, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runID keeps the keys of one run apart from an earlier run's on -addr.
var runID = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

// storeTimeout is the store timeout of the benchmark's limiters: long
// enough that a redis-server descheduled for a moment on a loaded machine
// fails no operation, which would end the run. What the bound costs an
// operation does not depend on its length.
var storeTimeout = func(o *limiter.Options) { o.StoreTimeout = time.Minute }

// newStore returns a store of its own namespace.
func newStore(client *redis.Client, alg redisstore.Algorithm, name string, scripts bool) *redisstore.Store {
	s, err := redisstore.New(client, func(o *redisstore.Options) {
		o.Prefix = "bench-" + runID + ":"
		o.Namespace = name
		o.Algorithm = alg
		o.DisableFunctions = scripts
	})
	if err != nil {
		panic(err) // the options are constant
	}
	return s
}

// throttle is a limit of Store.Allow and its redis_rate equivalent, and
// the amount each request takes.
type throttle struct {
	name string
	lim  limiter.Limit
	rr   redis_rate.Limit
	n    int
}

func throttles() []throttle {
	per := func(name string, n int64, period time.Duration, take int) throttle {
		return throttle{name, limiter.Limit{Name: "l", Capacity: n, RefillAmount: n, RefillPeriod: period},
			redis_rate.Limit{Rate: int(n), Burst: int(n), Period: period}, take}
	}
	return []throttle{
		per("100/min", 100, time.Minute, 1),
		per("2,000,000 tokens/min, 500 a request", 2_000_000, time.Minute, 500),
		per("1,000,000/day", 1_000_000, 24*time.Hour, 1),
		per("2^30/min", 1<<30, time.Minute, 1),
	}
}

// allowSide is Store.Allow on key "u<worker>".
func allowSide(s *redisstore.Store, t throttle) *side {
	sd := &side{name: "store"}
	sd.op = func(ctx context.Context, w int) error {
		r, err := s.Allow(ctx, "u"+strconv.Itoa(w), store.Limit(t.lim), int64(t.n))
		if r.Allowed {
			sd.allowedN.Add(1)
		} else {
			sd.refusedN.Add(1)
		}
		return err
	}
	return sd
}

// rateSide is redis_rate's AllowN for each limit on key prefix+worker(+limit).
func rateSide(rr *redis_rate.Limiter, prefix string, limits []redis_rate.Limit, costs []int, mustAllow bool) *side {
	sd := &side{name: "redis_rate"}
	sd.op = func(ctx context.Context, w int) error {
		key := prefix + strconv.Itoa(w)
		for i, l := range limits {
			k := key
			if len(limits) > 1 {
				k += ":" + strconv.Itoa(i)
			}
			res, err := rr.AllowN(ctx, k, l, costs[i])
			if err != nil {
				return err
			}
			if res.Allowed == 0 {
				if mustAllow {
					return fmt.Errorf("refused: %+v", res)
				}
				sd.refusedN.Add(1)
				return nil
			}
		}
		sd.allowedN.Add(1)
		return nil
	}
	return sd
}

// leaseSide acquires consume under lims for key "user-<worker>" (or
// "hot" for every worker) and commits.
func leaseSide(rl *limiter.RateLimiter, name string, consume limiter.Consume, lims limiter.AcquireOption, hot bool) *side {
	return &side{name: name, op: func(ctx context.Context, w int) error {
		key := "user-" + strconv.Itoa(w)
		if hot {
			key = "hot"
		}
		lease, err := rl.Acquire(ctx, key, "api", consume, lims)
		if err != nil {
			return err
		}
		return lease.Commit(ctx)
	}}
}

// consumeSide is the store's SpeculativeConsume of one token under lim
// on key "user-<worker>", what a lease's Acquire sends. A missing item is
// created by an Acquire through a RateLimiter on the same store (the
// warm-up does it).
func consumeSide(s *redisstore.Store, lim limiter.Limit) *side {
	rl := limiter.New(s, storeTimeout)
	consume, limits := limiter.Consume{lim.Name: 1}, []store.Limit{store.Limit(lim)}
	return &side{name: "store consume", op: func(ctx context.Context, w int) error {
		key := store.BucketKey{EntityID: "user-" + strconv.Itoa(w), Resource: "api"}
		res, err := s.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: key, Consume: consume, Limits: limits, NowMs: time.Now().UnixMilli()})
		switch {
		case err != nil || res.Applied:
			return err
		case res.Reason == store.RefusedBucketMissing:
			lease, err := rl.Acquire(ctx, key.EntityID, key.Resource, consume, limiter.WithLimits(lim))
			if err != nil {
				return err
			}
			return lease.Commit(ctx)
		}
		return fmt.Errorf("consume refused: %s", res.Reason)
	}}
}

func cases(client, resending *redis.Client, scripts bool) []*comparison {
	const big = 1 << 30
	var out []*comparison
	// The noise floor: two identical contenders.
	floor := func(side string) *side {
		return rateSide(redis_rate.NewLimiter(client), "rr-"+runID+"-floor-"+side+":", []redis_rate.Limit{redis_rate.PerMinute(big)}, []int{1}, true)
	}
	out = append(out, &comparison{name: "noise floor: redis_rate against itself, c=1", c: 1, a: floor("a"), b: floor("b")})
	for _, alg := range []redisstore.Algorithm{redisstore.TokenBucket, redisstore.GCRA} {
		for _, t := range throttles() {
			for _, c := range []int{1, 32} {
				name := fmt.Sprintf("Allow %s, %s, c=%d", alg, t.name, c)
				prefix := "rr-" + runID + "-" + strconv.Itoa(len(out)) + ":"
				out = append(out, &comparison{name: name, c: c,
					a: allowSide(newStore(client, alg, "allow"+strconv.Itoa(len(out)), scripts), t),
					b: rateSide(redis_rate.NewLimiter(client), prefix, []redis_rate.Limit{t.rr}, []int{t.n}, false)})
			}
		}
	}
	one := limiter.WithLimits(limiter.PerMinute("rpm", big))
	two := limiter.WithLimits(limiter.PerMinute("rpm", big), limiter.PerMinute("tpm", big))
	for _, c := range []int{1, 32} {
		prefix := "rr-" + runID + "-" + strconv.Itoa(len(out)) + ":"
		out = append(out, &comparison{name: fmt.Sprintf("lease, one limit 2^30/min, c=%d", c), c: c,
			a: leaseSide(limiter.New(newStore(client, redisstore.TokenBucket, "lease"+strconv.Itoa(len(out)), scripts), storeTimeout), "store", limiter.Consume{"rpm": 1}, one, false),
			b: rateSide(redis_rate.NewLimiter(client), prefix, []redis_rate.Limit{redis_rate.PerMinute(big)}, []int{1}, true)})
	}
	// The lease on a client that resends (MaxRetries 3, go-redis's
	// default), whose calls record write identifiers, against redis_rate
	// on the same client.
	prefix := "rr-" + runID + "-" + strconv.Itoa(len(out)) + ":"
	out = append(out, &comparison{name: "lease, one limit 2^30/min, c=1, client resends", c: 1,
		a: leaseSide(limiter.New(newStore(resending, redisstore.TokenBucket, "resends"+strconv.Itoa(len(out)), scripts), storeTimeout), "store", limiter.Consume{"rpm": 1}, one, false),
		b: rateSide(redis_rate.NewLimiter(resending), prefix, []redis_rate.Limit{redis_rate.PerMinute(big)}, []int{1}, true)})
	// The store's speculative consume alone, without a RateLimiter: the
	// lease's cost at c=1 less the limiter's own work.
	prefix = "rr-" + runID + "-" + strconv.Itoa(len(out)) + ":"
	out = append(out, &comparison{name: "store consume alone, one limit 2^30/min, c=1", c: 1,
		a: consumeSide(newStore(client, redisstore.TokenBucket, "consume"+strconv.Itoa(len(out)), scripts), limiter.PerMinute("rpm", big)),
		b: rateSide(redis_rate.NewLimiter(client), prefix, []redis_rate.Limit{redis_rate.PerMinute(big)}, []int{1}, true)})
	// The lease against the store's consume alone: what the RateLimiter's
	// own work costs, measured directly.
	out = append(out, &comparison{name: "lease (A) / store consume alone (B), one limit 2^30/min, c=1", c: 1,
		a: leaseSide(limiter.New(newStore(client, redisstore.TokenBucket, "limiter"+strconv.Itoa(len(out)), scripts), storeTimeout), "lease", limiter.Consume{"rpm": 1}, one, false),
		b: consumeSide(newStore(client, redisstore.TokenBucket, "consume"+strconv.Itoa(len(out)), scripts), limiter.PerMinute("rpm", big))})
	for _, c := range []int{1, 32} {
		prefix := "rr-" + runID + "-" + strconv.Itoa(len(out)) + ":"
		out = append(out, &comparison{name: fmt.Sprintf("lease, rpm+tpm 2^30/min, c=%d", c), c: c,
			a: leaseSide(limiter.New(newStore(client, redisstore.TokenBucket, "two"+strconv.Itoa(len(out)), scripts), storeTimeout), "store", limiter.Consume{"rpm": 1, "tpm": 500}, two, false),
			b: rateSide(redis_rate.NewLimiter(client), prefix, []redis_rate.Limit{redis_rate.PerMinute(big), redis_rate.PerMinute(big)}, []int{1, 500}, true)})
	}
	out = append(out, &comparison{name: "hot key × 32, group commit on (A) / off (B)", c: 32,
		a: leaseSide(limiter.New(newStore(client, redisstore.TokenBucket, "hot-on", scripts), func(o *limiter.Options) { o.GroupCommit = true }, storeTimeout), "group commit", limiter.Consume{"rpm": 1, "tpm": 500}, two, true),
		b: leaseSide(limiter.New(newStore(client, redisstore.TokenBucket, "hot-off", scripts), func(o *limiter.Options) { o.GroupCommit = false }, storeTimeout), "no group commit", limiter.Consume{"rpm": 1, "tpm": 500}, two, true)})
	return out
}
