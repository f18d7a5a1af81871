package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
