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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bucketConsumption sums the consumption counters (b_L_tc, millitokens) of
// the bucket items of entities whose ids start with prefix.
func (e *env) bucketConsumption(prefix string) map[string]int64 {
	e.t.Helper()
	sums := map[string]int64{}
	p := dynamodb.NewScanPaginator(e.client, &dynamodb.ScanInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(e.t, err)
		for _, item := range page.Items {
			id, ok := item["entity_id"].(*types.AttributeValueMemberS)
			if _, bucket := item["rf"]; !ok || !bucket || !strings.HasPrefix(id.Value, prefix) {
				continue
			}
			for attr, v := range item {
				if name, ok := strings.CutPrefix(attr, "b_"); ok && strings.HasSuffix(name, "_tc") {
					n, err := strconv.ParseInt(v.(*types.AttributeValueMemberN).Value, 10, 64)
					require.NoError(e.t, err)
					sums[strings.TrimSuffix(name, "_tc")] += n
				}
			}
		}
	}
	return sums
}

// checkCounters checks the buckets' consumption counters (millitokens)
// against the whole tokens the admitted leases report. rpm is never
// refunded by a load: exact. A tpm refund is cut by the refill while the
// lease was held, in millitokens, and a lease reports whole tokens rounded
// down: the counter is at least the report and less than one token more
// per lease.
func checkCounters(t *testing.T, what string, reported, counters map[string]int64, leases int64) {
	t.Helper()
	assert.Equal(t, reported["rpm"]*1000, counters["rpm"], "rpm: bucket counters (millitokens) against %s", what)
	assert.GreaterOrEqual(t, counters["tpm"], reported["tpm"]*1000, "tpm: bucket counters (millitokens) against %s", what)
	assert.Less(t, counters["tpm"]-reported["tpm"]*1000, leases*1000, "tpm: kept beyond the whole tokens of %s, %d leases", what, leases)
}

// checkLoadSummary checks a `load -o json` summary against the table.
func (e *env) checkLoadSummary(sum loadSummaryJSON, prefix string) {
	t := e.t
	t.Helper()
	require.Zero(t, sum.Failed, "summary %+v: failures", sum)
	require.NotZero(t, sum.Admitted, "summary %+v: want admitted acquires", sum)
	require.NotZero(t, sum.Denied, "summary %+v: want denied acquires", sum)
	require.Equal(t, sum.Admitted+sum.Denied, sum.Acquires, "summary %+v", sum)
	assert.Equal(t, int64(sum.Admitted), sum.Consumed["rpm"], "consumed rpm against admitted")
	table := e.bucketConsumption(prefix)
	checkCounters(t, "the load's admitted leases", sum.Consumed, table, int64(sum.Admitted))
	assert.True(t, sum.CapacityReported, "capacity reported")
	assert.Positive(t, sum.WCUPerAcquire, "WCU per acquire")
	assert.Positive(t, sum.CallsPerAcquire, "calls per acquire")
	assert.Positive(t, sum.CostPerMillion, "cost per million")
	assert.Positive(t, sum.AcquireLatencyMS["p50"], "latency p50")
	assert.GreaterOrEqual(t, sum.AcquireLatencyMS["p99"], sum.AcquireLatencyMS["p50"], "latency p99 against p50")
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
	require.Equal(t, exitOK, code, "load: stderr %s", errs)
	var sum loadSummaryJSON
	require.NoError(t, json.Unmarshal([]byte(out), &sum), "load -o json: %q", out)
	assert.Equal(t, int64(1), sum.Scenario.RPM, "scenario from file and flags")
	assert.Equal(t, 2, sum.Scenario.Entities, "scenario from file and flags")
	assert.Equal(t, [2]int64{100, 700}, sum.Scenario.TokensActual, "scenario from file and flags")
	assert.LessOrEqual(t, sum.DurationSeconds, 10.0, "duration from the flag")
	e.checkLoadSummary(sum, "cli-key-")
	contains(t, errs, "setup: nothing to prepare", "load: 2 entities (1 hot: 50% of traffic)", "acquires/s  p50 ", "report: "+report)
	assert.NotContains(t, errs, "\r", "progress rewrote its line on a non-terminal")
	for _, p := range []string{report, result} {
		fi, err := os.Stat(p)
		if assert.NoError(t, err) {
			assert.NotZero(t, fi.Size(), p)
		}
	}
	code, out, errs = runCLI("load", "--merge", result, result)
	require.Equal(t, exitOK, code, "load --merge: stderr %s", errs)
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
	require.Equal(t, exitOK, code, "load --procs 2: stderr %s", errs)
	var sum loadSummaryJSON
	require.NoError(t, json.Unmarshal([]byte(out), &sum), "load -o json: %q", out)
	assert.Equal(t, 2, sum.Procs, "procs")
	assert.Equal(t, 4, sum.Scenario.Concurrency, "concurrency")
	contains(t, errs, "setup: resource defaults for gpt-4o, 2 parents with their limits, 6 cascading entities")
	e.checkLoadSummary(sum, "procs-key-")
	parents := e.bucketConsumption("procs-project-")
	checkCounters(t, "the admitted leases, on the parents", sum.ParentConsumed, parents, int64(sum.Admitted))
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
		require.Equal(t, exitOK, code, "load %s: stderr %s", strings.Join(args, " "), errs)
		return out, errs
	}

	out, _ := load("--setup-only")
	contains(t, out, "Setup done: resource defaults for gpt-4o, 2 parents with their limits, 4 cascading entities")
	require.Empty(t, e.bucketConsumption("hosts-"), "--setup-only consumed")

	startAt := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
	var sums [2]loadSummaryJSON
	for i, host := range []string{"host-a", "host-b"} {
		out, errs := load("--no-setup", "--start-at", startAt.Format(time.RFC3339), "--result", filepath.Join(dir, host+".json"), "-o", "json")
		assert.NotContains(t, errs, "setup:", "%s: --no-setup ran the setup", host)
		require.NoError(t, json.Unmarshal([]byte(out), &sums[i]), "%s: load -o json: %q", host, out)
		require.Zero(t, sums[i].Failed, "%s: %+v: failures", host, sums[i])
		require.NotZero(t, sums[i].Admitted, "%s: %+v: want admitted acquires", host, sums[i])
	}
	assert.False(t, time.Now().Before(startAt), "the runs ended before --start-at %s", startAt)

	report := filepath.Join(dir, "all.html")
	code, out, errs := runCLI("load", "--merge", filepath.Join(dir, "host-a.json"), filepath.Join(dir, "host-b.json"), "--report", report, "-o", "json")
	require.Equal(t, exitOK, code, "load --merge: stderr %s", errs)
	var merged loadSummaryJSON
	require.NoError(t, json.Unmarshal([]byte(out), &merged), "load --merge -o json: %q", out)
	assert.Equal(t, sums[0].Admitted+sums[1].Admitted, merged.Admitted, "merged admitted")
	assert.Equal(t, sums[0].Acquires+sums[1].Acquires, merged.Acquires, "merged acquires")
	fi, err := os.Stat(report)
	if assert.NoError(t, err) {
		assert.NotZero(t, fi.Size(), "report %s", report)
	}
	table := e.bucketConsumption("hosts-key-")
	both := map[string]int64{"rpm": sums[0].Consumed["rpm"] + sums[1].Consumed["rpm"], "tpm": sums[0].Consumed["tpm"] + sums[1].Consumed["tpm"]}
	checkCounters(t, "the two runs' admitted leases", both, table, int64(sums[0].Admitted+sums[1].Admitted))
}
