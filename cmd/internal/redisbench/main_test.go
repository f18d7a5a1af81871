package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
)

func TestMain(m *testing.M) { os.Exit(redisserver.Main(m)) }

// TestRunSmall runs every case at c=1, two rounds of a few operations, on
// the package's redis-server, with functions and with scripts: every case
// prints its line with a ratio, server time (FCALL or EVALSHA counted) and
// allocations.
func TestRunSmall(t *testing.T) {
	addr := redisserver.Addr(t)
	for _, scripts := range []string{"-scripts=false", "-scripts=true"} {
		var out strings.Builder
		require.NoError(t, run(&out, []string{"-addr", addr, "-rounds", "2", "-ops", "30", "-run", "c=1|hot key", scripts}))
		t.Log("\n" + out.String())
		line := regexp.MustCompile(`(?m)^(noise floor|Allow|lease|store consume|hot key).*? [0-9.]+× \[[0-9.]+–[0-9.]+\] +[0-9.]+ / [0-9.]+ +[0-9.]+ / [0-9.]+ +[0-9.]+ / [0-9.]+ +[0-9.]+ / [0-9.]+ +[0-9.]+ / [0-9.]+ *$`)
		assert.Len(t, line.FindAllString(out.String(), -1), 1+8+2+1+1+1+1, "%s: a line per case", scripts)
	}
}

// TestMakeBenchRedis: `make bench-redis` runs this program with
// REDISBENCHFLAGS.
func TestMakeBenchRedis(t *testing.T) {
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command(makeTool, "-n", "--no-print-directory", "bench-redis", "REDISBENCHFLAGS=-rounds 1")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "go run ./cmd/internal/redisbench -rounds 1\n")
}
