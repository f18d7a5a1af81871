package main

// `zae-limiter load`: a load test for sizing a deployment. The engine is
// cmd/internal/loadtest; this file reads the scenario, opens the table, shows
// progress and writes the reports; runProcs runs several worker
// processes and merges them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/cmd/internal/loadtest"
)

// loadFlags are the flags of `load` besides the scenario's.
type loadFlags struct {
	scenarioFile string
	procs        int
	report       string
	resultFile   string
	merge        bool
	noSetup      bool
	setupOnly    bool
	startAt      string
	createTable  bool
	progress     time.Duration
	prices       loadtest.Prices
	worker       string // a worker process's scenario file (set by the parent)
	actual       string
	speculative  bool
	contender    string // a commit whose zae-limiter runs the scenario beside this one
	rounds       int    // alternating rounds of --contender
	freshLocal   bool   // with --contender, each run on a DynamoDB Local of its own
}

// registerScenario registers the scenario flags on f, writing into s.
func registerScenario(f *command, s *loadtest.Scenario, lf *loadFlags) {
	f.str(&s.Resource, "resource", "r", loadtest.DefaultResource, "resource every acquire is for")
	f.integer(&s.Entities, "entities", "e", loadtest.DefaultEntities, "API keys (entities) the traffic is spread over")
	f.integer(&s.HotKeys, "hot-keys", "", 0, "number of hot entities")
	f.float(&s.HotShare, "hot-share", "", 0, "share of the traffic on the hot entities, 0..1")
	f.boolean(&s.Cascade, "cascade", "", false, "make every entity a cascading child of one of --parents parents")
	f.integer(&s.Parents, "parents", "", loadtest.DefaultParents, "parents with --cascade")
	var rpm, tpm, prpm, ptpm int
	f.integer(&rpm, "rpm", "", loadtest.DefaultRPM, "each entity's requests-per-minute limit")
	f.integer(&tpm, "tpm", "", loadtest.DefaultTPM, "each entity's tokens-per-minute limit")
	f.boolean(&s.StoredLimits, "stored-limits", "", false, "store the limits as the resource's defaults instead of passing them on each acquire (implied by --cascade)")
	f.integer(&prpm, "parent-rpm", "", 0, "each parent's rpm limit (default: rpm times the children per parent)")
	f.integer(&ptpm, "parent-tpm", "", 0, "each parent's tpm limit (default: tpm times the children per parent)")
	var est int
	f.integer(&est, "tokens", "", loadtest.DefaultTokensEstimate, "tokens each acquire reserves (the estimate)")
	f.str(&lf.actual, "actual", "", "", "real tokens per call, MIN-MAX drawn uniformly or one number (default: the estimate); the lease is adjusted by real - estimate")
	f.integer(&s.Concurrency, "concurrency", "c", loadtest.DefaultConcurrency, "workers (over all --procs)")
	var d time.Duration
	f.duration(&d, "duration", "d", loadtest.DefaultDuration, "how long the workers run")
	f.float(&s.Rate, "rate", "", 0, "target acquires per second over all workers (0: as fast as they go)")
	f.pair(&lf.speculative, "speculative", "no-speculative", true, "use the speculative fast path")
	f.str(&s.Prefix, "prefix", "", loadtest.DefaultPrefix, "entity id prefix")
	var seed int
	f.integer(&seed, "seed", "", 0, "random seed of entity and token choices (0: random)")
	// The int flags above are copied into the scenario after parsing.
	f.post = append(f.post, func() {
		s.RPM, s.TPM, s.ParentRPM, s.ParentTPM = int64(rpm), int64(tpm), int64(prpm), int64(ptpm)
		s.TokensEstimate, s.Duration, s.Seed = int64(est), loadtest.Duration(d), uint64(seed)
	})
}

// scenarioFlagNames maps the scenario's flags to what they set, to lay
// flags given on the command line over a scenario file.
var scenarioFlagNames = []string{"resource", "entities", "hot-keys", "hot-share", "cascade", "parents", "rpm", "tpm",
	"stored-limits", "parent-rpm", "parent-tpm", "tokens", "actual", "concurrency", "duration", "rate", "speculative", "prefix", "seed"}

// overlay copies into base the fields of flagged set by explicit flags.
func overlay(base *loadtest.Scenario, flagged loadtest.Scenario, explicit map[string]bool) {
	set := map[string]func(){
		"resource": func() { base.Resource = flagged.Resource }, "entities": func() { base.Entities = flagged.Entities },
		"hot-keys": func() { base.HotKeys = flagged.HotKeys }, "hot-share": func() { base.HotShare = flagged.HotShare },
		"cascade": func() { base.Cascade = flagged.Cascade }, "parents": func() { base.Parents = flagged.Parents },
		"rpm": func() { base.RPM = flagged.RPM }, "tpm": func() { base.TPM = flagged.TPM },
		"stored-limits": func() { base.StoredLimits = flagged.StoredLimits }, "parent-rpm": func() { base.ParentRPM = flagged.ParentRPM },
		"parent-tpm": func() { base.ParentTPM = flagged.ParentTPM }, "tokens": func() { base.TokensEstimate = flagged.TokensEstimate },
		"actual": func() { base.TokensActual = flagged.TokensActual }, "concurrency": func() { base.Concurrency = flagged.Concurrency },
		"duration": func() { base.Duration = flagged.Duration }, "rate": func() { base.Rate = flagged.Rate },
		"speculative": func() { base.NoSpeculative = flagged.NoSpeculative }, "prefix": func() { base.Prefix = flagged.Prefix },
		"seed": func() { base.Seed = flagged.Seed },
	}
	for _, name := range scenarioFlagNames {
		if explicit[name] || (name == "speculative" && explicit["no-speculative"]) {
			set[name]()
		}
	}
}

// parseActual parses --actual: "MIN-MAX" or one number.
func parseActual(s string) ([2]int64, error) {
	lo, hi, found := strings.Cut(s, "-")
	a, err1 := strconv.ParseInt(strings.TrimSpace(lo), 10, 64)
	b, err2 := a, error(nil)
	if found {
		b, err2 = strconv.ParseInt(strings.TrimSpace(hi), 10, 64)
	}
	if err1 != nil || err2 != nil {
		return [2]int64{}, fmt.Errorf("invalid --actual %q: use MIN-MAX or a number", s)
	}
	return [2]int64{a, b}, nil
}

func cmdLoad(c *cli) *command {
	f := c.newFlags("load", "Load-test the table: workers acquire, adjust and commit in a loop over a scenario (flags, or a YAML file with -f), with live progress; then report latency, outcomes, DynamoDB calls, capacity units and the on-demand cost per million acquires. --merge FILE... merges the --result files of several runs.", 0, -1, true)
	var s loadtest.Scenario
	var lf loadFlags
	registerScenario(f, &s, &lf)
	f.str(&lf.scenarioFile, "scenario", "f", "", "YAML scenario file; flags given too override its values")
	f.integer(&lf.procs, "procs", "", 1, "worker processes of this command on this machine; their measurements merge exactly")
	f.str(&lf.report, "report", "", "", "write a self-contained HTML report (charts as inline SVG) to this file")
	f.str(&lf.resultFile, "result", "", "", "write the raw, mergeable result as JSON to this file (for --merge)")
	f.boolean(&lf.merge, "merge", "", false, "merge the result files given as arguments instead of running")
	f.boolean(&lf.noSetup, "no-setup", "", false, "skip creating the entities and storing limits (another run did it)")
	f.boolean(&lf.setupOnly, "setup-only", "", false, "create the entities and store the limits, then stop")
	f.str(&lf.startAt, "start-at", "", "", "start the workers at this time (RFC 3339), so that runs on several hosts start together")
	f.boolean(&lf.createTable, "create-table", "", false, "create the table when it does not exist (development)")
	f.duration(&lf.progress, "progress", "", 0, "progress interval (default 1s on a terminal, else 5s; negative, e.g. -1s: none)")
	f.float(&lf.prices.WriteUnit, "price-write", "", loadtest.DefaultPrices.WriteUnit, "on-demand price in USD per million write request units")
	f.float(&lf.prices.ReadUnit, "price-read", "", loadtest.DefaultPrices.ReadUnit, "on-demand price in USD per million read request units")
	f.str(&lf.worker, "worker", "", "", "internal: run as a worker process of --procs with this scenario file")
	f.str(&lf.contender, "contender", "", "", "a commit (hash, tag, branch) of this clone whose zae-limiter runs the same scenario in alternating rounds with this one, each run on a fresh table of its own, and the report compares them (needs git, go and the clone's history)")
	f.integer(&lf.rounds, "rounds", "", 3, "alternating rounds of each program with --contender")
	f.boolean(&lf.freshLocal, "fresh-local", "", false, "with --contender: start a DynamoDB Local (its container, or the jar of `make dynamodb-local`) for each run and stop it after, instead of --endpoint-url: one DynamoDB Local slows from run to run, which favours the program that runs first")
	f.run = func(pos []string) error {
		if lf.merge {
			return c.loadMerge(pos, &lf)
		}
		if len(pos) > 0 {
			return fmt.Errorf("load: unexpected argument %q (result files go with --merge)", pos[0])
		}
		if lf.worker != "" {
			return c.loadWorker(lf.worker)
		}
		if lf.contender != "" {
			return c.loadContender(f, &lf)
		}
		if lf.freshLocal {
			return errors.New("load: --fresh-local starts a DynamoDB Local for each run of --contender: give --contender")
		}
		var err error
		if lf.actual != "" {
			if s.TokensActual, err = parseActual(lf.actual); err != nil {
				return err
			}
		}
		s.NoSpeculative = !lf.speculative
		if lf.scenarioFile != "" {
			base, err := loadtest.LoadScenario(lf.scenarioFile)
			if err != nil {
				return err
			}
			overlay(&base, s, c.common.explicit)
			s = base
		}
		if err := s.Resolve(); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		if lf.procs < 1 || lf.procs > s.Concurrency {
			return fmt.Errorf("load: --procs must be between 1 and --concurrency (%d)", s.Concurrency)
		}
		var start time.Time
		if lf.startAt != "" {
			if start, err = time.Parse(time.RFC3339, lf.startAt); err != nil {
				return fmt.Errorf("invalid --start-at %q: use RFC 3339", lf.startAt)
			}
		}
		res := loadtest.NewResult()
		res.Scenario = s
		res.Endpoint = c.endpointName()
		rec := loadtest.NewRecorder(res)
		meter := loadtest.NewCallMeter(rec)
		rl, err := c.openLoadLimiter(s, meter, lf.createTable)
		if err != nil {
			return err
		}
		if !lf.noSetup {
			fmt.Fprintf(c.stderr, "setup: %s\n", setupWhat(s))
			if err := loadtest.Setup(c.ctx, rl, s); err != nil {
				return err
			}
		}
		if lf.setupOnly {
			c.printf("Setup done: %s\n", setupWhat(s))
			return nil
		}
		fmt.Fprintf(c.stderr, "load: %s\n", s.Describe())
		prog := newProgress(c, lf.progress, time.Duration(s.Duration))
		if lf.procs > 1 {
			if res, err = c.runProcs(s, lf.procs, start, prog); err != nil {
				return err
			}
			res.Endpoint = c.endpointName()
		} else {
			err = loadtest.Run(c.ctx, rl, meter, rec, s, loadtest.RunOptions{StartAt: start, Tick: prog.tick, TickInterval: prog.interval})
			prog.done()
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		}
		if c.ctx.Err() != nil {
			fmt.Fprintln(c.stderr, "load: interrupted; reporting what was measured")
		}
		return c.loadReport(res, &lf)
	}
	return f
}

// setupWhat says what Setup does for s.
func setupWhat(s loadtest.Scenario) string {
	switch {
	case s.Cascade:
		return fmt.Sprintf("resource defaults for %s, %d parents with their limits, %d cascading entities", s.Resource, s.Parents, s.Entities)
	case s.StoredLimits:
		return "resource defaults for " + s.Resource
	}
	return "nothing to prepare (limits are passed on each acquire)"
}

// endpointName names where the table is, for the reports.
func (c *cli) endpointName() string {
	if ep := c.dynamoDBEndpoint(); ep != "" {
		return ep + " table " + c.common.name
	}
	region := c.common.region
	if region == "" {
		region = firstNonEmpty(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "the SDK's default region")
	}
	return "AWS " + region + " table " + c.common.name
}

// openLoadLimiter opens the table with a client that meters its calls and
// keeps a connection per worker.
func (c *cli) openLoadLimiter(s loadtest.Scenario, meter *loadtest.CallMeter, create bool) (*limiter.RateLimiter, error) {
	pool := s.Concurrency * 2
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = pool
		tr.MaxIdleConnsPerHost = pool
	})
	client, _, err := c.dynamoDBClient(meter.Option(), func(o *dynamodb.Options) { o.HTTPClient = httpClient })
	if err != nil {
		return nil, err
	}
	repo, err := limiter.OpenDynamoDB(c.ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = c.common.name
		o.Namespace = c.common.namespace
		o.CreateTable = create
	})
	if err != nil {
		return nil, c.tableErr(err)
	}
	return limiter.New(repo, func(o *limiter.Options) { o.SpeculativeWrites = !s.NoSpeculative }), nil
}

// loadReport writes the text (or JSON) report and the --report and
// --result files.
func (c *cli) loadReport(res *loadtest.Result, lf *loadFlags) error {
	local := c.localEndpoint() || strings.HasPrefix(res.Endpoint, "http://127.") || strings.HasPrefix(res.Endpoint, "http://localhost")
	if lf.resultFile != "" {
		data, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if err := os.WriteFile(lf.resultFile, data, 0o644); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	if lf.report != "" {
		out, err := os.Create(lf.report)
		if err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		if err := loadtest.WriteHTML(out, res, local, lf.prices); err != nil {
			out.Close()
			return fmt.Errorf("write report: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		fmt.Fprintf(c.stderr, "report: %s\n", lf.report)
	}
	if c.jsonOutput() {
		return c.writeJSON(loadSummary(res, local, lf.prices))
	}
	return loadtest.WriteText(c.stdout, res, local, lf.prices)
}

// loadSummaryJSON is `load -o json`.
type loadSummaryJSON struct {
	Scenario         loadtest.Scenario  `json:"scenario"`
	Endpoint         string             `json:"endpoint"`
	Procs            int                `json:"procs"`
	DurationSeconds  float64            `json:"duration_seconds"`
	Acquires         uint64             `json:"acquires"`
	Admitted         uint64             `json:"admitted"`
	Denied           uint64             `json:"denied"`
	Failed           uint64             `json:"failed"`
	AcquiresPerSec   float64            `json:"acquires_per_second"`
	AcquireLatencyMS map[string]float64 `json:"acquire_latency_ms"`
	Consumed         map[string]int64   `json:"consumed"`
	ParentConsumed   map[string]int64   `json:"parent_consumed,omitempty"`
	Calls            map[string]uint64  `json:"calls"`
	CallsPerAcquire  float64            `json:"calls_per_acquire"`
	RefusedWrites    float64            `json:"refused_writes_per_acquire"`
	CapacityReported bool               `json:"capacity_reported"`
	RCUPerAcquire    float64            `json:"rcu_per_acquire"`
	WCUPerAcquire    float64            `json:"wcu_per_acquire"`
	EstRCUPerAcquire float64            `json:"charged_rcu_per_acquire"`
	EstWCUPerAcquire float64            `json:"charged_wcu_per_acquire"`
	CostPerMillion   float64            `json:"cost_per_million_acquires"`
	Errors           map[string]uint64  `json:"errors"`
}

func loadSummary(r *loadtest.Result, local bool, p loadtest.Prices) loadSummaryJSON {
	n := r.Acquires()
	c := r.Capacity(local)
	per := func(v float64) float64 {
		if n == 0 {
			return 0
		}
		return v / float64(n)
	}
	out := loadSummaryJSON{Scenario: r.Scenario, Endpoint: r.Endpoint, Procs: r.Procs, DurationSeconds: r.Duration().Seconds(),
		Acquires: n, Admitted: r.Admitted, Denied: r.Denied, Failed: r.Failed,
		AcquireLatencyMS: map[string]float64{}, Consumed: r.Consumed, ParentConsumed: r.ParentConsumed, Calls: map[string]uint64{},
		CallsPerAcquire: per(float64(c.Calls)), RefusedWrites: per(float64(r.RefusedWrites())), CapacityReported: c.Known(),
		RCUPerAcquire: per(c.RCU), WCUPerAcquire: per(c.WCU), EstRCUPerAcquire: per(c.EstRCU), EstWCUPerAcquire: per(c.EstWCU),
		CostPerMillion: c.CostPerMillion(p, n), Errors: r.Errors}
	if d := r.Duration().Seconds(); d > 0 {
		out.AcquiresPerSec = float64(n) / d
	}
	for _, q := range loadtest.Quantiles {
		out.AcquireLatencyMS[q.Name] = float64(r.Acquire.Quantile(q.Q)) / float64(time.Millisecond)
	}
	out.AcquireLatencyMS["max"] = float64(r.Acquire.Max()) / float64(time.Millisecond)
	for op, s := range r.Ops {
		out.Calls[op] = s.Calls
	}
	return out
}

// loadMerge merges result files and reports them.
func (c *cli) loadMerge(files []string, lf *loadFlags) error {
	if len(files) == 0 {
		return errors.New("load --merge: give the result files to merge")
	}
	var total *loadtest.Result
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("load --merge: %w", err)
		}
		r := loadtest.NewResult()
		if err := json.Unmarshal(data, r); err != nil {
			return fmt.Errorf("load --merge: %s: %w", path, err)
		}
		if total == nil {
			total = r
			continue
		}
		// The merged run had the workers and the rate of all the runs.
		total.Scenario.Concurrency += r.Scenario.Concurrency
		total.Scenario.Rate += r.Scenario.Rate
		if err := total.Merge(r); err != nil {
			return fmt.Errorf("load --merge: %s: %w", path, err)
		}
	}
	return c.loadReport(total, lf)
}
