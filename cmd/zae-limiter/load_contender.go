package main

// `zae-limiter load --contender COMMIT`: the scenario run by this program
// and by the zae-limiter of an earlier commit in alternating rounds, so
// that a regression in calls, refused writes or throughput per acquire
// shows in one run on one machine.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/zaelimiter/limiter/cmd/internal/contender"
	"github.com/zaelimiter/limiter/cmd/internal/loadtest"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// contenderOwnFlags are the flags of `load` that the contender run sets
// itself for each program and round, or that belong to it alone.
var contenderOwnFlags = map[string]bool{
	"contender": true, "rounds": true, "name": true, "result": true, "report": true,
	"create-table": true, "progress": true, "output": true, "merge": true, "worker": true,
	"fresh-local": true,
}

// loadContender runs the scenario of the flags given (f's, less
// contenderOwnFlags) lf.rounds times with each program, alternating which
// goes first, each run on a fresh table of its own (<name>-<stamp>-r<i>-now
// or -then, created), and reports per program the medians of acquires per
// second, latency, calls, refused writes and write units per acquire, and
// the medians and ranges of the per-round ratios of this program's over
// the commit's.
func (c *cli) loadContender(f *command, lf *loadFlags) error {
	if lf.rounds < 1 {
		return errors.New("load: --rounds must be at least 1")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := contender.New(c.ctx)
	if err != nil {
		return fmt.Errorf("load --contender: %w", err)
	}
	defer b.Close()
	if strings.HasSuffix(exe, ".test") {
		// a test binary is not the command: build this tree's
		if exe, err = b.Current(c.ctx, "./cmd/zae-limiter"); err != nil {
			return fmt.Errorf("load --contender: %w", err)
		}
	}
	fmt.Fprintf(c.stderr, "load: building zae-limiter of %s\n", lf.contender)
	old, hash, err := b.Commit(c.ctx, lf.contender, "./cmd/zae-limiter")
	if err != nil {
		return fmt.Errorf("load --contender: %w", err)
	}
	var pass []string
	f.cmd.Flags().Visit(func(fl *pflag.Flag) {
		if !contenderOwnFlags[fl.Name] && !(lf.freshLocal && fl.Name == "endpoint-url") {
			pass = append(pass, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	dir, err := os.MkdirTemp("", "zae-limiter-contender-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins, sides := [2]string{exe, old}, [2]string{"now", "then"}
	var runs [2][]contenderRun
	cpuKnown := lf.freshLocal
	stamp := time.Now().Unix()
	for r := range lf.rounds {
		first, second := contender.First(r)
		for _, i := range []int{first, second} {
			table := fmt.Sprintf("%s-%d-r%d-%s", c.common.name, stamp, r, sides[i])
			file := filepath.Join(dir, table+".json")
			args := append([]string{"load"}, pass...)
			args = append(args, "--name="+table, "--create-table", "--result="+file, "--progress=-1s")
			where := "table " + table
			var srv *ddblocal.Server
			if lf.freshLocal {
				if srv, err = startFreshLocal(c.ctx); err != nil {
					return fmt.Errorf("load --contender: %w", err)
				}
				args = append(args, "--endpoint-url="+srv.Endpoint())
				where += fmt.Sprintf(" of a fresh DynamoDB Local (%s) at %s", srv.Source(), srv.Endpoint())
			}
			fmt.Fprintf(c.stderr, "load: round %d of %d: %s on %s\n", r+1, lf.rounds, map[int]string{0: "this program", 1: hash[:12]}[i], where)
			cmd := exec.CommandContext(c.ctx, bins[i], args...)
			cmd.Stdout, cmd.Stderr = nil, c.stderr
			// DynamoDB Local's CPU over the run (its table's creation
			// included); the report has it when every run's was read.
			var cpu0 time.Duration
			measured := false
			if srv != nil {
				cpu0, measured = srv.CPUTime()
			}
			err := cmd.Run()
			var localCPU time.Duration
			if srv != nil {
				cpu1, ok := srv.CPUTime()
				localCPU, cpuKnown = cpu1-cpu0, cpuKnown && measured && ok
				err = errors.Join(err, srv.Close())
			}
			if err != nil {
				return fmt.Errorf("load --contender: %s: %w", sides[i], err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("load --contender: %s: %w", sides[i], err)
			}
			res := loadtest.NewResult()
			if err := json.Unmarshal(data, res); err != nil {
				return fmt.Errorf("load --contender: %s: %w", sides[i], err)
			}
			runs[i] = append(runs[i], contenderRun{res: res, localCPU: localCPU})
		}
	}
	local := lf.freshLocal || c.localEndpoint()
	each := "a fresh table each"
	if lf.freshLocal {
		each = "each on a DynamoDB Local of its own"
	}
	c.printf("load: this program (now) against %s (then, %s), %d alternating rounds, %s\n", lf.contender, hash[:12], lf.rounds, each)
	c.printf("medians of the rounds; now/then: median [min–max] of the per-round ratios\n\n")
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "median of the runs\tnow\tthen\tnow/then\t")
	for _, m := range contenderMetrics(local, cpuKnown) {
		var now, then, ratio []float64
		for j := range runs[0] {
			a, b := m.f(runs[0][j]), m.f(runs[1][j])
			now, then = append(now, a), append(then, b)
			if b != 0 {
				ratio = append(ratio, a/b)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", m.name, m.format(medianOf(now)), m.format(medianOf(then)), spreadOf(ratio))
	}
	return tw.Flush()
}

// contenderRun is one run of the contender report: its result, and the
// CPU time its DynamoDB Local used over it (--fresh-local).
type contenderRun struct {
	res      *loadtest.Result
	localCPU time.Duration
}

// contenderMetric is a line of the contender report.
type contenderMetric struct {
	name   string
	f      func(contenderRun) float64
	format func(float64) string
}

// contenderMetrics are the lines of the contender report; with cpu, the
// lines of DynamoDB Local's CPU too: on one machine its JVM, not the
// client, bounds the writes of a hot item, so the CPU a call costs it is
// what a heavier write shows as.
func contenderMetrics(local, cpu bool) []contenderMetric {
	per := func(v float64, n uint64) float64 {
		if n == 0 {
			return 0
		}
		return v / float64(n)
	}
	perAcquire := func(v func(*loadtest.Result) float64) func(contenderRun) float64 {
		return func(run contenderRun) float64 { return per(v(run.res), run.res.Acquires()) }
	}
	f3 := func(v float64) string { return fmt.Sprintf("%.3f", v) }
	f0 := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	ms := func(v float64) string { return loadtest.FormatDuration(time.Duration(v)) }
	q := func(p float64) func(contenderRun) float64 {
		return func(run contenderRun) float64 { return float64(run.res.Acquire.Quantile(p)) }
	}
	metrics := []contenderMetric{
		{"acquires/s", func(run contenderRun) float64 {
			if d := run.res.Duration().Seconds(); d > 0 {
				return float64(run.res.Acquires()) / d
			}
			return 0
		}, f0},
		{"acquire p50", q(0.5), ms},
		{"acquire p99", q(0.99), ms},
		{"calls per acquire", perAcquire(func(r *loadtest.Result) float64 { return float64(r.Capacity(local).Calls) }), f3},
		{"refused writes per acquire", perAcquire(func(r *loadtest.Result) float64 { return float64(r.RefusedWrites()) }), f3},
		{"charged WCU per acquire", perAcquire(func(r *loadtest.Result) float64 { return r.Capacity(local).EstWCU }), f3},
		{"admitted share", perAcquire(func(r *loadtest.Result) float64 { return float64(r.Admitted) }), f3},
	}
	if !cpu {
		return metrics
	}
	cpuMs := func(run contenderRun) float64 { return float64(run.localCPU) / float64(time.Millisecond) }
	ms2 := func(v float64) string { return fmt.Sprintf("%.2fms", v) }
	return append(metrics,
		contenderMetric{"DynamoDB Local CPU per acquire", func(run contenderRun) float64 {
			return per(cpuMs(run), run.res.Acquires())
		}, ms2},
		contenderMetric{"DynamoDB Local CPU per call", func(run contenderRun) float64 {
			return per(cpuMs(run), run.res.Capacity(local).Calls)
		}, ms2})
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spreadOf formats the median and range of ratios.
func spreadOf(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Sorted(slices.Values(v))
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", medianOf(s), s[0], s[len(s)-1])
}

// startFreshLocal starts a DynamoDB Local for one run of --fresh-local
// (see ddblocal.Start): its container, or the jar that `make
// dynamodb-local` put in the clone's cache ($ZAEL_DYNAMODB_LOCAL_DIR).
// A single DynamoDB Local slows from run to run even with each run's
// table deleted after it (the scenario of
// cmd/zae-limiter/testdata/scenario.yaml: 101, 41 and 28 acquires/s in
// three 15 s runs), so alternating rounds on one favour whichever program
// runs first in the rounds. An endpoint from $ZAEL_DYNAMODB_ENDPOINT is
// shared, not fresh: refused.
func startFreshLocal(ctx context.Context) (*ddblocal.Server, error) {
	if ep := strings.TrimSpace(os.Getenv(ddblocal.EnvEndpoint)); ep != "" {
		return nil, fmt.Errorf("--fresh-local: $%s (%s) names a shared DynamoDB Local: unset it", ddblocal.EnvEndpoint, ep)
	}
	ctx, cancel := context.WithTimeout(ctx, ddblocal.StartTimeout)
	defer cancel()
	srv, err := ddblocal.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("--fresh-local: %w", err)
	}
	return srv, nil
}
