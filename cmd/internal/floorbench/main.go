package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

func main() {
	if err := mainErr(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "floorbench:", err)
		os.Exit(1)
	}
}

func mainErr(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("floorbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{}
	fs.IntVar(&cfg.rounds, "rounds", 5, "alternating rounds")
	fs.IntVar(&cfg.ops, "ops", 600, "operations per contender and round at c=1")
	fs.IntVar(&cfg.conc, "c", 32, "the second concurrency (goroutines, an entity each); 1 or less: c=1 only")
	fs.IntVar(&cfg.opsConc, "ops-c", 1920, "operations per contender and round at the second concurrency, in all")
	fs.IntVar(&cfg.warmup, "warmup", 300, "operations per contender before the first round")
	fs.BoolVar(&cfg.deadline, "deadline", true, "give every operation a context with a 10 s timeout (as a request's context has); false: context.Background()")
	only := fs.String("only", "", "comma-separated contenders to run (their floors run too); cascade-hot, cascade-150 and entity-wide run only when named")
	fs.StringVar(&cfg.table, "table", "", "table name (default: floorbench-<unix time>)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memprofile := fs.String("memprofile", "", "write an allocation profile of the run to this file")
	tracefile := fs.String("trace", "", "write an execution trace of the run to this file (a region per operation)")
	commit := fs.String("contender", "", "a commit (hash, tag, branch) whose benchmark runs beside this tree's in alternating rounds, a round each per turn (needs git and the clone's history)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The flags both programs of -contender get: the ones given, less
	// those of this program alone.
	var pass []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "contender", "rounds", "table", "cpuprofile", "memprofile", "trace":
		default:
			pass = append(pass, "-"+f.Name+"="+f.Value.String())
		}
	})
	if cfg.rounds < 1 || cfg.ops < 1 || cfg.opsConc < cfg.conc {
		return fmt.Errorf("-rounds and -ops must be positive and -ops-c at least -c")
	}
	if *only != "" {
		cfg.only = map[string]bool{}
		for _, name := range strings.Split(*only, ",") {
			cfg.only[strings.TrimSpace(name)] = true
		}
	}
	if cfg.table == "" {
		cfg.table = fmt.Sprintf("floorbench-%d", time.Now().Unix())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ddblocal.LongLived = true // the server compiler, as a long run wants
	if *commit != "" {
		return runContender(ctx, stdout, stderr, *commit, cfg.rounds, pass)
	}
	start, cancel := context.WithTimeout(ctx, ddblocal.StartTimeout)
	srv, err := ddblocal.Start(start)
	cancel()
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.endpoint = srv.Endpoint()

	if *memprofile != "" {
		runtime.MemProfileRate = 4096
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *tracefile != "" {
		f, err := os.Create(*tracefile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}

	fmt.Fprintf(stderr, "floorbench: DynamoDB Local at %s, table %s, GOMAXPROCS %d\n", cfg.endpoint, cfg.table, runtime.GOMAXPROCS(0))
	res, err := run(ctx, cfg, func(s string) { fmt.Fprintln(stderr, "floorbench:", s) })
	if err != nil {
		return err
	}
	report(stdout, res)
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return nil
}

// report prints one table per concurrency.
func report(w io.Writer, r *result) {
	in := r.captured
	fmt.Fprintf(w, "Replayed: UpdateItem, %d names, %d values, condition %q\n\n",
		len(in.ExpressionAttributeNames), len(in.ExpressionAttributeValues), deref(in.ConditionExpression))
	for _, conc := range r.concurrencies() {
		n := r.cfg.ops
		if conc > 1 {
			n = r.cfg.opsConc
		}
		fmt.Fprintf(w, "c=%d: %d alternating rounds of %d operations per contender; medians over the rounds, ratio [min–max] of the round's value to its floor's in the same round\n",
			conc, r.cfg.rounds, n)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "contender\tfloor\tp50\tp50 ratio\tops/s\tops/s ratio\tallocs/op\t− floor\tCPU/op\tCPU ratio\t")
		for _, name := range r.names {
			if len(r.samples[conc][name]) == 0 {
				continue // a contender of its own concurrency (hotContenders)
			}
			p50 := r.stat(conc, name, func(s sample) float64 { return float64(s.p50) })
			ops := r.stat(conc, name, sample.opsPerSec)
			allocs := r.stat(conc, name, sample.allocsPerOp)
			floorAllocs := r.stat(conc, r.floors[name], sample.allocsPerOp)
			cpu := r.stat(conc, name, func(s sample) float64 { return float64(s.cpuPerOp()) })
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%.0f\t%s\t%.0f\t%+.0f\t%v\t%s\t\n",
				name, r.floors[name],
				time.Duration(p50.med).Round(time.Microsecond), ratio(p50),
				ops.med, ratio(ops),
				allocs.med, allocs.med-floorAllocs.med,
				time.Duration(cpu.med).Round(time.Microsecond), ratio(cpu))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

func ratio(s stat) string {
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.ratio, s.ratioLo, s.ratioHi)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
