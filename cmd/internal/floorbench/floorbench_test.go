package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

func TestMain(m *testing.M) { os.Exit(ddblocal.Main(m)) }

// TestRunSmall runs the benchmark at a tiny size against DynamoDB Local:
// every contender measured at both concurrencies in every round, the
// replayed input the limiter's conditional write, and a report line per
// contender and concurrency.
func TestRunSmall(t *testing.T) {
	cfg := config{
		endpoint: ddblocal.Endpoint(t),
		table:    ddblocal.TableName(t),
		rounds:   2, ops: 6, conc: 3, opsConc: 9, warmup: 3, deadline: true,
	}
	res, err := run(context.Background(), cfg, func(string) {})
	require.NoError(t, err)

	want := []string{"replay", "acquire+commit", "acquire+adjust+commit", "acquire+adjust+commit/bg", "replay-pair", "cascade"}
	assert.Equal(t, want, res.names)
	assert.Equal(t, []int{1, 3}, res.concurrencies())
	for _, conc := range []int{1, 3} {
		for _, name := range want {
			samples := res.samples[conc][name]
			require.Len(t, samples, 2, "c=%d %s", conc, name)
			for _, s := range samples {
				assert.Equal(t, map[int]int{1: 6, 3: 9}[conc], s.n, "c=%d %s", conc, name)
				assert.Positive(t, s.p50, "c=%d %s", conc, name)
				assert.Positive(t, s.mallocs, "c=%d %s", conc, name)
			}
		}
	}

	require.NotNil(t, res.captured.ConditionExpression)
	assert.Contains(t, *res.captured.ConditionExpression, "attribute_exists(")
	assert.NotEmpty(t, res.captured.UpdateExpression)

	var out bytes.Buffer
	report(&out, res)
	for _, head := range []string{"c=1:", "c=3:"} {
		_, table, ok := strings.Cut(out.String(), head)
		require.True(t, ok, "no %q table in\n%s", head, out.String())
		for _, name := range want {
			assert.Contains(t, table, name)
		}
	}
	// A floor against itself is 1.
	assert.Equal(t, 1.0, res.stat(1, "replay", sample.opsPerSec).ratio)

	// -contender reads the same report of each program: a row per
	// contender and concurrency, with its figures.
	rows := parseFloorReport(out.String())
	require.Len(t, rows, 2*len(want), "rows of\n%s", out.String())
	for _, r := range rows {
		assert.Contains(t, []string{"c=1", "c=3"}, r.conc)
		assert.Contains(t, want, r.name)
		assert.Positive(t, r.p50, r.key())
		assert.Positive(t, r.ops, r.key())
		assert.Positive(t, r.allocs, r.key())
		assert.Positive(t, r.cpuRatio, r.key())
		if r.name == "replay" || r.name == "replay-pair" {
			assert.Equal(t, 1.0, r.opsRatio, r.key())
			assert.Equal(t, 1.0, r.cpuRatio, r.key())
		}
	}
}

// TestRunHotSmall runs the hot cascades at a tiny size: named by -only,
// they run only in the rounds of the second concurrency, an operation per
// goroutine of their own, and their table is that concurrency's alone.
func TestRunHotSmall(t *testing.T) {
	cfg := config{
		endpoint: ddblocal.Endpoint(t),
		table:    ddblocal.TableName(t),
		rounds:   2, ops: 6, conc: 3, opsConc: 9, warmup: 3, deadline: true,
		only: map[string]bool{"cascade-hot": true, "cascade-150": true},
	}
	res, err := run(context.Background(), cfg, func(string) {})
	require.NoError(t, err)
	hot := []string{"cascade-hot/gc-off", "cascade-hot", "cascade-150/gc-off", "cascade-150"}
	assert.Equal(t, hot, res.names)
	assert.Equal(t, []int{3}, res.concurrencies())
	for _, name := range hot {
		samples := res.samples[3][name]
		require.Len(t, samples, 2, name)
		for _, s := range samples {
			assert.Equal(t, hotGoroutines, s.n, name)
		}
	}
	var out bytes.Buffer
	report(&out, res)
	assert.NotContains(t, out.String(), "c=1:")
	_, table, ok := strings.Cut(out.String(), "c=3:")
	require.True(t, ok, "no c=3 table in\n%s", out.String())
	for _, name := range hot {
		assert.Contains(t, table, name)
	}
}

// TestMakeBenchFloor: `make bench-floor` runs this program with FLOORFLAGS.
func TestMakeBenchFloor(t *testing.T) {
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command(makeTool, "-n", "--no-print-directory", "bench-floor", "FLOORFLAGS=-rounds 1")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "go run ./cmd/internal/floorbench -rounds 1\n")
}

// TestOnlyKeepsFloors: -only keeps the contenders named and their floors.
func TestOnlyKeepsFloors(t *testing.T) {
	// No request is made: a repository that is never opened will do.
	b := &bench{cfg: config{only: map[string]bool{"cascade": true}}, repo: &limiter.DynamoDBRepository{}}
	var names []string
	for _, c := range b.contenders() {
		names = append(names, c.name)
	}
	assert.Equal(t, []string{"replay-pair", "cascade"}, names)
	b.cfg.only = nil
	names = nil
	for _, c := range b.contenders() {
		names = append(names, c.name)
	}
	assert.NotContains(t, names, "cascade-hot", "the hot cascades run only when named")
	b.cfg.only = map[string]bool{"cascade-hot": true}
	names = nil
	for _, c := range b.contenders() {
		names = append(names, c.name)
	}
	assert.Equal(t, []string{"cascade-hot/gc-off", "cascade-hot"}, names)
}

// TestDrainAdmitsCapacity: a cascade-150 phase of 256 acquires by 64
// goroutines on fresh buckets passes its own check: exactly 150 admitted,
// every refusal for a shortage.
func TestDrainAdmitsCapacity(t *testing.T) {
	cfg := config{endpoint: ddblocal.Endpoint(t), table: ddblocal.TableName(t), conc: 2, opsConc: 2}
	b, err := setup(context.Background(), cfg)
	require.NoError(t, err)
	c := b.drainContender("cascade-150", "cascade-150/gc-off", true)
	s, err := b.phase(context.Background(), c, hotGoroutines, 4*hotGoroutines)
	require.NoError(t, err)
	assert.Equal(t, 4*hotGoroutines, s.n)
}

func TestMedian(t *testing.T) {
	med, lo, hi := median([]float64{3, 1, 2})
	assert.Equal(t, []float64{2, 1, 3}, []float64{med, lo, hi})
	med, lo, hi = median([]float64{4, 1, 2, 3})
	assert.Equal(t, []float64{2.5, 1, 4}, []float64{med, lo, hi})
}

// TestRunOnlyContenders runs the entity-wide contender and its replayed
// writes, and the in-flight contender and its replayed writes, named by
// -only, at a tiny size: each measured in every round, without errors
// (a replayed commit that no longer fits its item would fail).
func TestRunOnlyContenders(t *testing.T) {
	for only, want := range map[string][]string{
		"entity-wide": {"replay-wide", "entity-wide"},
		"in-flight":   {"replay-in-flight", "in-flight"},
	} {
		t.Run(only, func(t *testing.T) { runOnly(t, only, want) })
	}
}

// runOnly runs the contender only and its floor at a tiny size and checks
// that the contenders want ran in every round without errors.
func runOnly(t *testing.T, only string, want []string) {
	cfg := config{
		endpoint: ddblocal.Endpoint(t),
		table:    ddblocal.TableName(t),
		rounds:   2, ops: 6, conc: 3, opsConc: 9, warmup: 3, deadline: true,
		only: map[string]bool{only: true},
	}
	res, err := run(context.Background(), cfg, func(string) {})
	require.NoError(t, err)
	assert.Equal(t, want, res.names)
	for _, conc := range []int{1, 3} {
		for _, name := range res.names {
			samples := res.samples[conc][name]
			require.Len(t, samples, 2, "c=%d %s", conc, name)
			for _, s := range samples {
				assert.Zero(t, s.errs, "c=%d %s", conc, name)
				assert.Positive(t, s.p50, "c=%d %s", conc, name)
			}
		}
	}
}

// TestFreshServerPerTurn: each turn of -contender runs on a DynamoDB Local
// of its own, which holds no table (and so no stream record) of an earlier
// turn, and is stopped after its turn.
func TestFreshServerPerTurn(t *testing.T) {
	if os.Getenv(ddblocal.EnvEndpoint) != "" {
		t.Skipf("%s names a server every turn shares", ddblocal.EnvEndpoint)
	}
	ctx := context.Background()
	var endpoints []string
	for turn := range 2 {
		err := freshServer(ctx, func(endpoint string) error {
			endpoints = append(endpoints, endpoint)
			client := ddblocal.NewClient(endpoint)
			tables, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
			require.NoError(t, err)
			require.Empty(t, tables.TableNames, "turn %d found an earlier turn's tables", turn)
			_, err = client.CreateTable(ctx, ddbschema.TableDefinition(fmt.Sprintf("fb-turn-%d", turn)))
			return err
		})
		if errors.Is(err, ddblocal.ErrUnavailable) && os.Getenv("CI") == "" && os.Getenv(ddblocal.EnvRequire) == "" {
			t.Skipf("%s: %v", ddblocal.SkipMessage, err)
		}
		require.NoError(t, err, "turn %d", turn)
	}
	require.Len(t, endpoints, 2)
	_, err := ddblocal.NewClient(endpoints[0]).ListTables(ctx, &dynamodb.ListTablesInput{})
	require.Error(t, err, "the first turn's server still answers after its turn")
}
