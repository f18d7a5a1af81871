package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
)

// TestParseCaseReadsRunOutput: parseCase finds every case's ops/s in this
// program's own output (which a contender's follows).
func TestParseCaseReadsRunOutput(t *testing.T) {
	addr := redisserver.Addr(t)
	var out strings.Builder
	require.NoError(t, run(&out, []string{"-addr", addr, "-rounds", "1", "-ops", "20", "-run", "lease, one limit 2\\^30/min, c=1|noise"}))
	for _, name := range []string{"noise floor: redis_rate against itself, c=1", "lease, one limit 2^30/min, c=1"} {
		r, ok := parseCase(out.String(), name)
		require.True(t, ok, "%s not found in\n%s", name, out.String())
		require.Positive(t, r.a)
		require.Positive(t, r.b)
	}
	_, ok := parseCase(out.String(), "lease, one limit 2^30/min, c=32")
	require.False(t, ok, "a case that did not run")
}

// TestContenderRun runs this tree against itself (HEAD) as a contender:
// both programs built, a line per case with both ratios.
func TestContenderRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	addr := redisserver.Addr(t)
	var out strings.Builder
	require.NoError(t, run(&out, []string{"-addr", addr, "-rounds", "2", "-ops", "20", "-run", "^noise", "-contender", "HEAD"}))
	t.Log("\n" + out.String())
	require.Regexp(t, `(?m)^noise floor: redis_rate against itself, c=1 +[0-9.]+× \[[0-9.]+–[0-9.]+\]( +[0-9.]+× \[[0-9.]+–[0-9.]+\]){3}$`, out.String())
}
