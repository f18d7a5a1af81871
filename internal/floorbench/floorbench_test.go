package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
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

	want := []string{"replay", "acquire+commit", "acquire+adjust+commit", "replay-pair", "cascade"}
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
}

// TestMakeBenchFloor: `make bench-floor` runs this program with FLOORFLAGS.
func TestMakeBenchFloor(t *testing.T) {
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command(makeTool, "-n", "--no-print-directory", "bench-floor", "FLOORFLAGS=-rounds 1")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "go run ./internal/floorbench -rounds 1\n")
}

// TestOnlyKeepsFloors: -only keeps the contenders named and their floors.
func TestOnlyKeepsFloors(t *testing.T) {
	b := &bench{cfg: config{only: map[string]bool{"cascade": true}}}
	var names []string
	for _, c := range b.contenders() {
		names = append(names, c.name)
	}
	assert.Equal(t, []string{"replay-pair", "cascade"}, names)
}

func TestMedian(t *testing.T) {
	med, lo, hi := median([]float64{3, 1, 2})
	assert.Equal(t, []float64{2, 1, 3}, []float64{med, lo, hi})
	med, lo, hi = median([]float64{4, 1, 2, 3})
	assert.Equal(t, []float64{2.5, 1, 4}, []float64{med, lo, hi})
}
