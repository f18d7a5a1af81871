// Package main is the floor benchmark of the DynamoDB acquire: the
// limiter's speculative acquire against the cost of its one write.
//
// A speculative Acquire sends one conditional UpdateItem. Its floor is that
// same UpdateItem sent by the raw SDK on the same table: the program
// captures the exact input the limiter sends (an SDK middleware on a
// capturing client) and replays it through a plain dynamodb.Client. The
// input captured is the take from the stored balances (captured with the
// clock stopped at the bucket's creation, when it is not full), which a
// replay can send again and again (each time with a new write identifier,
// as the limiter's writes carry one; see ddbschema.WriteID); the benchmark's buckets (a billion
// tokens a minute) are full again a millisecond after each acquire, so in
// the rounds the limiter sends the other form of its one write, the
// refilled state conditioned on the item it last saw: the same item, one
// conditional UpdateItem returning the item, its values set rather than
// added. It then runs, in alternating rounds in one process (so that
// DynamoDB Local's JIT warm-up and the machine's other load favour no
// one), the replay and the limiter's operations:
//
//   - replay: the captured UpdateItem, nothing else;
//   - acquire+commit: Acquire + Commit with nothing to adjust (one write);
//   - acquire+adjust+commit: Acquire, Adjust, Commit (two writes);
//   - acquire+adjust+commit/bg: the same with Options.BackgroundCommit, whose
//     Commit queues the adjustment: it goes out with the next acquire's
//     write of the item (one write for both);
//   - replay-pair: the two UpdateItems of a cascade acquire (child and
//     parent), captured likewise and sent in parallel;
//   - cascade: Acquire + Commit of an entity that cascades to its parent;
//   - cascade-hot, cascade-150 (only when -only names them): two limiters
//     × 32 goroutines on two keys cascading to one parent, with group
//     commit against their floors without it (hotContenders);
//   - entity-wide, replay-wide (only when -only names them): Acquire +
//     Commit of rpm and tpm on the resource and a usd budget on the
//     entity's entity-wide bucket (two UpdateItems in parallel, one per
//     item), against those writes captured and replayed (wide.go);
//   - in-flight, replay-in-flight (only when -only names them): Acquire +
//     Commit of rpm, tpm and one call in flight (one UpdateItem each),
//     against those two writes captured and replayed (inflight.go).
//
// Each runs at c=1 (one goroutine, one entity) and at c=N (N goroutines,
// an entity each: no group commit, N independent items), except the hot
// cascades, which run with their own 64 goroutines in the rounds of c=N; the program
// prints per contender the medians over rounds of p50, ops/s, allocations
// and CPU time (user+system of the whole process) per operation, and the
// medians and ranges of the per-round ratios against the replay (against
// replay-pair for the cascade).
//
// With -cpuprofile, -memprofile or -trace it writes the profiles of the
// whole run; every phase carries the pprof label contender=<name> (use
// -tagfocus) and, under -trace, every operation is a runtime/trace region
// named after its contender.
//
// DynamoDB Local comes from $ZAEL_DYNAMODB_ENDPOINT or is started (see
// internal/ddblocal), one per run, and with -contender one per program and
// round (see freshServer); `make bench-floor` runs the program.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// config is one run of the benchmark.
type config struct {
	endpoint string
	table    string
	rounds   int
	ops      int // per contender and round at c=1
	opsConc  int // per contender and round at c=conc, in all
	conc     int
	warmup   int // operations per contender before the first round
	deadline bool
	only     map[string]bool // contenders to run; nil: all
}

// resource, consume and adjust are the request of every operation: an LLM
// call estimated at 500 tokens that used 400.
const resource = "gpt-4"

// storeTimeout is the store timeout of the benchmark's limiters
// (limiter.Options.StoreTimeout): long enough that DynamoDB Local on a loaded
// machine never fails an operation, which would end the run. What the
// bound costs an operation does not depend on its length.
var storeTimeout = func(o *limiter.Options) { o.StoreTimeout = time.Minute }

var (
	consume = limiter.Consume{"rpm": 1, "tpm": 500}
	adjust  = limiter.Consume{"tpm": -100}
	limits  = limiter.WithLimits(limiter.PerMinute("rpm", 1_000_000_000), limiter.PerMinute("tpm", 1_000_000_000))
)

// op is one operation of a contender on worker w's items.
type op func(ctx context.Context, w int) error

// contender is one line of the report.
type contender struct {
	name  string
	floor string // the contender its ratios are against
	run   op
	// before runs ahead of each of its phases, untimed.
	before func(ctx context.Context, workers int) error
	// after runs at the end of each of its phases, timed (it waits for
	// what the phase left in the background).
	after func() error
	// goroutines, when set, is the contender's own concurrency: it runs
	// only in the rounds of the second concurrency, with this many
	// goroutines instead (see hotContenders).
	goroutines int
}

// sample is one phase of one contender: n operations by some goroutines.
type sample struct {
	n       int
	elapsed time.Duration
	p50     time.Duration
	mallocs uint64
	cpu     time.Duration
	errs    int
}

func (s sample) opsPerSec() float64      { return float64(s.n) / s.elapsed.Seconds() }
func (s sample) allocsPerOp() float64    { return float64(s.mallocs) / float64(s.n) }
func (s sample) cpuPerOp() time.Duration { return s.cpu / time.Duration(s.n) }

// result holds every sample of a run: [concurrency][contender][round].
type result struct {
	cfg     config
	names   []string
	floors  map[string]string
	samples map[int]map[string][]sample
	// captured is the replayed input of worker 0, for the record.
	captured *dynamodb.UpdateItemInput
}

// capture records the UpdateItem inputs of the calls made while it is
// armed.
type capture struct {
	mu     sync.Mutex
	armed  bool
	inputs []*dynamodb.UpdateItemInput
	txs    []*dynamodb.TransactWriteItemsInput
}

func (c *capture) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("floorbench.capture",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				switch u := in.Parameters.(type) {
				case *dynamodb.UpdateItemInput:
					c.mu.Lock()
					if c.armed {
						c.inputs = append(c.inputs, u)
					}
					c.mu.Unlock()
				case *dynamodb.TransactWriteItemsInput:
					c.mu.Lock()
					if c.armed {
						c.txs = append(c.txs, u)
					}
					c.mu.Unlock()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// take runs fn armed and returns the inputs captured meanwhile.
func (c *capture) take(fn func() error) ([]*dynamodb.UpdateItemInput, error) {
	in, _, err := c.takeAll(fn)
	return in, err
}

// takeAll is take that also returns the transactions captured.
func (c *capture) takeAll(fn func() error) ([]*dynamodb.UpdateItemInput, []*dynamodb.TransactWriteItemsInput, error) {
	c.mu.Lock()
	c.armed, c.inputs, c.txs = true, nil, nil
	c.mu.Unlock()
	err := fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	return c.inputs, c.txs, err
}

// bench is the state of a run: clients, limiters and captured inputs.
type bench struct {
	cfg    config
	client *dynamodb.Client // the plain client of the replay and of the limiters
	repo   *limiter.DynamoDBRepository
	// replay[w] is worker w's captured speculative write; pair[w] the two
	// writes (child, parent) of worker w's cascade acquire.
	replay []*dynamodb.UpdateItemInput
	pair   [][2]*dynamodb.UpdateItemInput
	// wide[w] is the two writes of worker w's entity-wide acquire
	// (captured only when -only names its contenders, see wide.go).
	wide [][2]*dynamodb.UpdateItemInput
	// inFlight[w] is the acquire's and the commit's writes of worker w's
	// in-flight lease (captured only when -only names its contenders, see
	// inflight.go).
	inFlight [][2]*dynamodb.UpdateItemInput
}

func entity(kind string, w int) string { return fmt.Sprintf("fb-%s-%d", kind, w) }

// setup opens the table, creates the entities and captures the inputs of
// every worker.
func setup(ctx context.Context, cfg config) (*bench, error) {
	b := &bench{cfg: cfg, client: ddblocal.NewClient(cfg.endpoint)}
	open := func(client *dynamodb.Client) (*limiter.DynamoDBRepository, error) {
		return limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
			o.Table, o.CreateTable = cfg.table, true
			o.OpenTimeout = time.Minute // a loaded machine; the benchmark times acquires, not the open
		})
	}
	var err error
	if b.repo, err = open(b.client); err != nil {
		return nil, err
	}
	var cp capture
	crepo, err := open(ddblocal.NewClient(cfg.endpoint, cp.option))
	if err != nil {
		return nil, err
	}
	// The clock of the captures stands still: the second acquire of each
	// item finds it as the first left it, not full, and takes from its
	// balance, a write that can be replayed (a refilled state is
	// conditioned on the item it was computed from).
	frozen := time.Now()
	crl := limiter.New(crepo, storeTimeout, func(o *limiter.Options) { o.Clock = func() time.Time { return frozen } })
	defer crl.Close()
	workers := max(cfg.conc, 1)
	acquire := func(id string) error {
		l, err := crl.Acquire(ctx, id, resource, consume, limits)
		if err != nil {
			return err
		}
		return l.Commit(ctx)
	}
	for w := range workers {
		for _, kind := range []string{"pair-parent", "cascade-parent"} {
			if _, err := crl.Admin().CreateEntity(ctx, limiter.Entity{ID: entity(kind, w)}); err != nil {
				return nil, err
			}
		}
		for _, kind := range []string{"pair", "cascade"} {
			if _, err := crl.Admin().CreateEntity(ctx, limiter.Entity{ID: entity(kind, w), ParentID: entity(kind+"-parent", w), Cascade: true}); err != nil {
				return nil, err
			}
		}
		// The first acquire creates the buckets (read-then-write); the
		// second is the speculative write captured.
		for _, id := range []string{entity("replay", w), entity("pair", w)} {
			if err := acquire(id); err != nil {
				return nil, fmt.Errorf("create the buckets of %s: %w", id, err)
			}
		}
		in, err := cp.take(func() error { return acquire(entity("replay", w)) })
		if err != nil || len(in) != 1 {
			return nil, fmt.Errorf("capture the write of %s: %d inputs, %v", entity("replay", w), len(in), err)
		}
		b.replay = append(b.replay, in[0])
		in, err = cp.take(func() error { return acquire(entity("pair", w)) })
		if err != nil || len(in) != 2 {
			return nil, fmt.Errorf("capture the writes of %s: %d inputs, %v", entity("pair", w), len(in), err)
		}
		b.pair = append(b.pair, [2]*dynamodb.UpdateItemInput{in[0], in[1]})
	}
	if err := b.setupHot(ctx, crl); err != nil {
		return nil, err
	}
	if err := b.setupWide(ctx, crl, &cp, workers); err != nil {
		return nil, err
	}
	if err := b.setupInFlight(ctx, crl, &cp, workers); err != nil {
		return nil, err
	}
	return b, nil
}

// refillWCU gives the replayed items their hidden write-capacity tokens
// back. The replay takes one per write and, unlike the limiter, never
// refills them (the limiter's read-then-write path does, once in about
// 1000 writes); without this the replay would be refused after 1000
// writes of an item.
// replayPair sends the two captured writes p in parallel, each as a new
// write (as the limiter's).
func (b *bench) replayPair(ctx context.Context, p [2]*dynamodb.UpdateItemInput) error {
	var wg sync.WaitGroup
	var perr error
	ddbschema.RenewWriteID(p[0].ExpressionAttributeValues)
	ddbschema.RenewWriteID(p[1].ExpressionAttributeValues)
	wg.Go(func() { _, perr = b.client.UpdateItem(ctx, p[1]) })
	_, err := b.client.UpdateItem(ctx, p[0])
	wg.Wait()
	return errors.Join(err, perr)
}

func (b *bench) refillWCU(ctx context.Context, inputs ...*dynamodb.UpdateItemInput) error {
	for _, in := range inputs {
		_, err := b.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 in.TableName,
			Key:                       in.Key,
			UpdateExpression:          aws.String("SET #tk = :cap"),
			ExpressionAttributeNames:  map[string]string{"#tk": ddbschema.BucketAttr(ddbschema.WCULimitName, ddbschema.FieldTokens)},
			ExpressionAttributeValues: map[string]types.AttributeValue{":cap": &types.AttributeValueMemberN{Value: fmt.Sprint(ddbschema.WCUCapacityMilli)}},
		})
		if err != nil {
			return fmt.Errorf("refill the write capacity of the replayed item: %w", err)
		}
	}
	return nil
}

// contenders returns the contenders of the run, the floors first.
func (b *bench) contenders() []contender {
	rl := limiter.New(b.repo, storeTimeout)
	// The background-commit limiter is closed at the end of each phase,
	// which writes what it queued; the next phase gets a new one.
	newBG := func() *limiter.RateLimiter {
		return limiter.New(b.repo, storeTimeout, func(o *limiter.Options) { o.BackgroundCommit = true })
	}
	bg := newBG()
	closeBG := func() error {
		err := bg.Close()
		bg = newBG()
		return err
	}
	acquireCommit := func(pick func() *limiter.RateLimiter, kind string, adj bool) op {
		return func(ctx context.Context, w int) error {
			l, err := pick().Acquire(ctx, entity(kind, w), resource, consume, limits)
			if err != nil {
				return err
			}
			if adj {
				if err := l.Adjust(adjust); err != nil {
					return err
				}
			}
			return l.Commit(ctx)
		}
	}
	out := []contender{
		{name: "replay", floor: "replay", run: func(ctx context.Context, w int) error {
			ddbschema.RenewWriteID(b.replay[w].ExpressionAttributeValues) // a new write, as the limiter's
			_, err := b.client.UpdateItem(ctx, b.replay[w])
			return err
		}, before: func(ctx context.Context, workers int) error {
			return b.refillWCU(ctx, b.replay[:workers]...)
		}},
		{name: "acquire+commit", floor: "replay", run: acquireCommit(func() *limiter.RateLimiter { return rl }, "commit", false)},
		{name: "acquire+adjust+commit", floor: "replay", run: acquireCommit(func() *limiter.RateLimiter { return rl }, "adjust", true)},
		{name: "acquire+adjust+commit/bg", floor: "replay", run: acquireCommit(func() *limiter.RateLimiter { return bg }, "adjust-bg", true), after: closeBG},
		{name: "replay-pair", floor: "replay-pair", run: func(ctx context.Context, w int) error {
			return b.replayPair(ctx, b.pair[w])
		}, before: func(ctx context.Context, workers int) error {
			for _, p := range b.pair[:workers] {
				if err := b.refillWCU(ctx, p[0], p[1]); err != nil {
					return err
				}
			}
			return nil
		}},
		{name: "cascade", floor: "replay-pair", run: acquireCommit(func() *limiter.RateLimiter { return rl }, "cascade", false)},
	}
	if b.cfg.only == nil {
		return out // the hot cascades run only when -only names them
	}
	out = append(out, b.hotContenders()...)
	out = append(out, b.wideContenders(rl)...)
	out = append(out, b.inFlightContenders(rl)...)
	keep := map[string]bool{}
	for _, c := range out {
		if b.cfg.only[c.name] {
			keep[c.name], keep[c.floor] = true, true
		}
	}
	return slices.DeleteFunc(out, func(c contender) bool { return !keep[c.name] })
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// phase runs n operations of c with workers goroutines, worker w on its own
// items, and measures them.
func (b *bench) phase(ctx context.Context, c contender, workers, n int) (sample, error) {
	if c.before != nil {
		if err := c.before(ctx, workers); err != nil {
			return sample{}, err
		}
	}
	lat := make([][]time.Duration, workers)
	errs := make([]int, workers)
	var firstErr error
	var errOnce sync.Once
	one := func(ctx context.Context, w int) {
		octx, cancel := ctx, context.CancelFunc(func() {})
		if b.cfg.deadline {
			octx, cancel = context.WithTimeout(ctx, 10*time.Second)
		}
		start := time.Now()
		var err error
		if trace.IsEnabled() {
			trace.WithRegion(octx, c.name, func() { err = c.run(octx, w) })
		} else {
			err = c.run(octx, w)
		}
		lat[w] = append(lat[w], time.Since(start))
		cancel()
		if err != nil {
			errs[w]++
			errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", c.name, err) })
		}
	}
	per := max(n/workers, 1)
	for w := range workers {
		lat[w] = make([]time.Duration, 0, per)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	start := time.Now()
	pprof.Do(ctx, pprof.Labels("contender", c.name), func(ctx context.Context) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range per {
					one(ctx, w)
				}
			})
		}
		wg.Wait()
		if c.after != nil {
			if err := c.after(); err != nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", c.name, err) })
			}
		}
	})
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&after)
	var all []time.Duration
	s := sample{n: per * workers, elapsed: elapsed, cpu: cpu, mallocs: after.Mallocs - before.Mallocs}
	for w := range workers {
		all = append(all, lat[w]...)
		s.errs += errs[w]
	}
	slices.Sort(all)
	s.p50 = all[len(all)/2]
	if s.errs > 0 {
		return s, fmt.Errorf("%d of %d operations failed, the first: %w", s.errs, s.n, firstErr)
	}
	return s, nil
}

// run sets up and runs every round, c=1 and c=conc, the contenders in a
// rotated order each round.
func run(ctx context.Context, cfg config, progress func(string)) (*result, error) {
	b, err := setup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cs := b.contenders()
	res := &result{cfg: cfg, floors: map[string]string{}, samples: map[int]map[string][]sample{}, captured: b.replay[0]}
	for _, c := range cs {
		res.names = append(res.names, c.name)
		res.floors[c.name] = c.floor
	}
	concs := []int{1}
	if cfg.conc > 1 {
		concs = append(concs, cfg.conc)
	}
	for _, c := range cs {
		if cfg.warmup > 0 {
			progress(fmt.Sprintf("warm-up: %s", c.name))
			workers := max(cfg.conc, 1)
			if c.goroutines > 0 {
				workers = c.goroutines
			}
			if _, err := b.phase(ctx, c, workers, max(cfg.warmup, workers)); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for r := range cfg.rounds {
		for _, conc := range concs {
			n := cfg.ops
			if conc > 1 {
				n = cfg.opsConc
			}
			for i := range cs {
				c := cs[(i+r)%len(cs)]
				workers := conc
				if c.goroutines > 0 {
					if conc == 1 {
						continue
					}
					workers = c.goroutines
				}
				s, err := b.phase(ctx, c, workers, n)
				if err != nil {
					return nil, fmt.Errorf("round %d, c=%d: %w", r+1, conc, err)
				}
				if res.samples[conc] == nil {
					res.samples[conc] = map[string][]sample{}
				}
				res.samples[conc][c.name] = append(res.samples[conc][c.name], s)
			}
			progress(fmt.Sprintf("round %d/%d c=%d done", r+1, cfg.rounds, conc))
		}
	}
	return res, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count), its minimum and its maximum.
func median(xs []float64) (med, lo, hi float64) {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// stat is one metric of one contender over the rounds: its median, and
// the median and range of its per-round ratio to the floor.
type stat struct {
	med, ratio, ratioLo, ratioHi float64
}

func (r *result) stat(conc int, name string, metric func(sample) float64) stat {
	own, floor := r.samples[conc][name], r.samples[conc][r.floors[name]]
	var vals, ratios []float64
	for i, s := range own {
		vals = append(vals, metric(s))
		if i < len(floor) && metric(floor[i]) != 0 {
			ratios = append(ratios, metric(s)/metric(floor[i]))
		}
	}
	var st stat
	st.med, _, _ = median(vals)
	st.ratio, st.ratioLo, st.ratioHi = median(ratios)
	return st
}

// concurrencies returns the concurrencies measured, ascending.
func (r *result) concurrencies() []int {
	return slices.Sorted(maps.Keys(r.samples))
}
