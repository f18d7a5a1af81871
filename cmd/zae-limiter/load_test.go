package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// bucketConsumption sums the consumption counters (b_L_tc, millitokens) of
// the bucket items of entities whose ids start with prefix.
func (e *env) bucketConsumption(prefix string) map[string]int64 {
	e.t.Helper()
	sums := map[string]int64{}
	p := dynamodb.NewScanPaginator(e.client, &dynamodb.ScanInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		for _, item := range page.Items {
			id, ok := item["entity_id"].(*types.AttributeValueMemberS)
			if _, bucket := item["rf"]; !ok || !bucket || !strings.HasPrefix(id.Value, prefix) {
				continue
			}
			for attr, v := range item {
				if name, ok := strings.CutPrefix(attr, "b_"); ok && strings.HasSuffix(name, "_tc") {
					n, _ := strconv.ParseInt(v.(*types.AttributeValueMemberN).Value, 10, 64)
					sums[strings.TrimSuffix(name, "_tc")] += n
				}
			}
		}
	}
	return sums
}

// checkLoadSummary checks a `load -o json` summary against the table.
func (e *env) checkLoadSummary(sum loadSummaryJSON, prefix string) {
	e.t.Helper()
	if sum.Failed != 0 || sum.Admitted == 0 || sum.Denied == 0 || sum.Acquires != sum.Admitted+sum.Denied {
		e.t.Fatalf("summary = %+v: want admitted and denied acquires, no failures", sum)
	}
	if sum.Consumed["rpm"] != int64(sum.Admitted) {
		e.t.Errorf("consumed rpm %d, admitted %d", sum.Consumed["rpm"], sum.Admitted)
	}
	table := e.bucketConsumption(prefix)
	for _, name := range []string{"rpm", "tpm"} {
		if table[name] != sum.Consumed[name]*1000 {
			e.t.Errorf("%s: bucket counters %d millitokens, the load's admitted leases %d tokens", name, table[name], sum.Consumed[name])
		}
	}
	if !sum.CapacityReported || sum.WCUPerAcquire <= 0 || sum.CallsPerAcquire <= 0 || sum.CostPerMillion <= 0 {
		e.t.Errorf("capacity and cost: %+v", sum)
	}
	if sum.AcquireLatencyMS["p50"] <= 0 || sum.AcquireLatencyMS["p99"] < sum.AcquireLatencyMS["p50"] {
		e.t.Errorf("latency %v", sum.AcquireLatencyMS)
	}
}

// TestLoad runs `load` in-process for two seconds from a YAML scenario with
// flags laid over it: its numbers match the table's consumption counters,
// progress lines are plain (stderr is no terminal), and it writes the HTML
// report and the mergeable result.
func TestLoad(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	// Two entities at 1 rpm: any third acquire is denied, however slow
	// the machine.
	scenario := writeFile(t, "scenario.yaml", `
entities: 2
hot_keys: 1
hot_share: 0.5
rpm: 999
tokens_estimate: 300
tokens_actual: [100, 700]
concurrency: 3
duration: 1m
prefix: cli
`)
	report, result := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json")
	code, out, errs := runCLI("load", "-f", scenario, "--rpm", "1", "-d", "2s", "--progress", "500ms",
		"--report", report, "--result", result, "-o", "json", "--endpoint-url", e.endpoint, "-n", e.table)
	if code != 0 {
		t.Fatalf("load: exit %d, stderr %s", code, errs)
	}
	var sum loadSummaryJSON
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("load -o json: %v in %q", err, out)
	}
	if sum.Scenario.RPM != 1 || sum.Scenario.Entities != 2 || sum.Scenario.TokensActual != [2]int64{100, 700} || sum.DurationSeconds > 10 {
		t.Errorf("scenario from file and flags = %+v (%.1fs)", sum.Scenario, sum.DurationSeconds)
	}
	e.checkLoadSummary(sum, "cli-key-")
	contains(t, errs, "setup: nothing to prepare", "load: 2 entities (1 hot: 50% of traffic)", "acquires/s  p50 ", "report: "+report)
	if strings.Contains(errs, "\r") {
		t.Errorf("progress rewrote its line on a non-terminal: %q", errs)
	}
	for _, p := range []string{report, result} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	code, out, errs = runCLI("load", "--merge", result, result)
	if code != 0 {
		t.Fatalf("load --merge: exit %d: %s", code, errs)
	}
	contains(t, out, "acquires  ", "admitted", "per million acquires", strconv.FormatUint(2*sum.Admitted, 10))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"load", "--hot-share", "0.5"}, "a hot share needs hot keys"},
		{[]string{"load", "--actual", "9-x"}, `invalid --actual "9-x"`},
		{[]string{"load", "--procs", "9", "-c", "2"}, "--procs must be between 1 and --concurrency (2)"},
		{[]string{"load", "--merge"}, "give the result files"},
		{[]string{"load", "stray"}, `unexpected argument "stray"`},
	} {
		code, out, errs := runCLI(tc.args...)
		contains(t, checkFailure(t, tc.args, code, out, errs, exitError), tc.want)
	}
}

// TestLoadProcs runs the built command with --procs 2 and cascade: the
// merged numbers match the table, on the entities and on their parents.
func TestLoadProcs(t *testing.T) {
	e := newEnv(t)
	bin := buildCLI(t)
	// Parents at 1 rpm: at most 2 admitted, the rest (at least the 4
	// workers' first acquires) denied, however slow the machine.
	code, out, errs := localRun(t, bin, nil, "load", "--procs", "2", "-c", "4", "-d", "2s", "--entities", "6", "--cascade", "--parents", "2",
		"--rpm", "10", "--parent-rpm", "1", "--actual", "200-600", "--prefix", "procs", "-o", "json", "--endpoint-url", e.endpoint, "-n", e.table)
	if code != 0 {
		t.Fatalf("load --procs 2: exit %d, stderr %s", code, errs)
	}
	var sum loadSummaryJSON
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("load -o json: %v in %q", err, out)
	}
	if sum.Procs != 2 || sum.Scenario.Concurrency != 4 {
		t.Errorf("procs %d, concurrency %d; want 2 and 4", sum.Procs, sum.Scenario.Concurrency)
	}
	contains(t, errs, "setup: resource defaults for gpt-4o, 2 parents with their limits, 6 cascading entities")
	e.checkLoadSummary(sum, "procs-key-")
	parents := e.bucketConsumption("procs-project-")
	if parents["rpm"] != sum.Consumed["rpm"]*1000 || parents["tpm"] != sum.Consumed["tpm"]*1000 {
		t.Errorf("parent counters %v, want the admitted %v ×1000", parents, sum.Consumed)
	}
}

// TestLoadSeveralHosts runs the several-hosts recipe of docs/cli.md on one
// machine, from the scenario file the docs show (scaled down by flags): the
// table is set up once with --setup-only, two runs with --no-setup start
// together at --start-at and write their results, and --merge adds them up
// into one report. The table's consumption counters equal what the two
// runs' admitted leases consumed.
func TestLoadSeveralHosts(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	small := []string{"-f", "testdata/scenario.yaml", "--entities", "4", "--hot-keys", "1", "--parents", "2",
		"-c", "2", "-d", "1s", "--rate", "40", "--prefix", "hosts", "--endpoint-url", e.endpoint, "-n", e.table}
	load := func(args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCLI(append(append([]string{"load"}, args...), small...)...)
		if code != 0 {
			t.Fatalf("load %s: exit %d, stderr %s", strings.Join(args, " "), code, errs)
		}
		return out, errs
	}

	out, _ := load("--setup-only")
	contains(t, out, "Setup done: resource defaults for gpt-4o, 2 parents with their limits, 4 cascading entities")
	if got := e.bucketConsumption("hosts-"); len(got) != 0 {
		t.Fatalf("--setup-only consumed %v", got)
	}

	startAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
	var sums [2]loadSummaryJSON
	for i, host := range []string{"host-a", "host-b"} {
		out, errs := load("--no-setup", "--start-at", startAt.Format(time.RFC3339), "--result", filepath.Join(dir, host+".json"), "-o", "json")
		if strings.Contains(errs, "setup:") {
			t.Errorf("%s: --no-setup ran the setup: %s", host, errs)
		}
		if err := json.Unmarshal([]byte(out), &sums[i]); err != nil {
			t.Fatalf("%s: load -o json: %v in %q", host, err, out)
		}
		if sums[i].Failed != 0 || sums[i].Admitted == 0 {
			t.Fatalf("%s: %+v, want admitted acquires and no failures", host, sums[i])
		}
	}
	if time.Now().Before(startAt) {
		t.Errorf("the runs ended before --start-at %s", startAt)
	}

	report := filepath.Join(dir, "all.html")
	code, out, errs := runCLI("load", "--merge", filepath.Join(dir, "host-a.json"), filepath.Join(dir, "host-b.json"), "--report", report, "-o", "json")
	if code != 0 {
		t.Fatalf("load --merge: exit %d: %s", code, errs)
	}
	var merged loadSummaryJSON
	if err := json.Unmarshal([]byte(out), &merged); err != nil {
		t.Fatalf("load --merge -o json: %v in %q", err, out)
	}
	if merged.Admitted != sums[0].Admitted+sums[1].Admitted || merged.Acquires != sums[0].Acquires+sums[1].Acquires {
		t.Errorf("merged %d admitted of %d, want the sum of %+v and %+v", merged.Admitted, merged.Acquires, sums[0], sums[1])
	}
	if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
		t.Errorf("report %s: %v", report, err)
	}
	table := e.bucketConsumption("hosts-key-")
	for _, name := range []string{"rpm", "tpm"} {
		if want := (sums[0].Consumed[name] + sums[1].Consumed[name]) * 1000; table[name] != want {
			t.Errorf("%s: bucket counters %d millitokens, the two runs' admitted leases %d", name, table[name], want)
		}
	}
}
