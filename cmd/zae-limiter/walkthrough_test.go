package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWalkthrough is the local walkthrough of the README and docs/cli.md as
// a newcomer runs it from a fresh clone, and CI with it: `make demo`; then
// `zae-limiter local up`; then, in the environment it printed, a user program
// (examples/local), the CLI, the aggregator runner (`make aggregator-local`,
// and the aggregator `local up` runs in the background) and `usage list`,
// all on the same local table. Cleanup runs `local down`.
//
// Usage snapshots are kept to the hourly window (SNAPSHOT_WINDOWS=hourly):
// in the hour after midnight UTC the hourly and the daily snapshot share one
// item (the original's layout), which would make the counts depend on the
// time of day.
func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the walkthrough builds and runs several programs")
	}
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	li := newLocalInstance(t, buildCLI(t))
	li.extra = []string{"SNAPSHOT_WINDOWS=hourly"}
	localDir := "ZAEL_DYNAMODB_LOCAL_DIR=" + mustLocalDir(t)
	// runIn runs a program in the repository root with the walkthrough's
	// environment.
	runIn := func(name string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), append([]string{localDir, "SNAPSHOT_WINDOWS=hourly", "MAKEFLAGS="}, li.env...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "%s %s\n%s", name, strings.Join(args, " "), out.String())
		return out.String()
	}

	// 1. make demo: its own DynamoDB Local, started and stopped.
	contains(t, runIn(makeTool, "demo"), "admitted", "denied", "rolled back")

	// 2. local up, without the background aggregator for now.
	li.up("-n", "walk", "--no-aggregator")

	// 3. A user program, configured by the environment alone.
	contains(t, runIn("go", "run", "./examples/local", "-calls", "4"), "table walk, namespace default", "4 of 4 calls admitted")

	// 4. The CLI sees the program's buckets; no snapshots yet.
	contains(t, li.cli("usage", "list", "-e", "api-key-1"), "No usage snapshots found")

	// 5. The aggregator runner, once, through make.
	out := runIn(makeTool, "aggregator-local", "AGGREGATOR_ARGS=-once")
	contains(t, out, " snapshot writes", "0 dropped")

	// 6. usage list shows the counts: 4 requests, 300+400+500+600 tokens.
	var list struct {
		Snapshots []usageSnapshotJSON `json:"snapshots"`
	}
	require.NoError(t, json.Unmarshal([]byte(li.cli("usage", "list", "-e", "api-key-1", "-o", "json")), &list))
	require.Len(t, list.Snapshots, 1, "usage list after the aggregator")
	assert.Equal(t, "hourly", list.Snapshots[0].Window)
	assert.Equal(t, int64(4), list.Snapshots[0].Counters["rpm"])
	// The program's calls used 300+400+500+600 tokens against estimates of
	// 500: a lease's refund is cut by what tpm refilled while it was held
	// (a few tokens a millisecond), so the counter lies between what was
	// used and what was estimated.
	assert.GreaterOrEqual(t, list.Snapshots[0].Counters["tpm"], int64(1800))
	assert.LessOrEqual(t, list.Snapshots[0].Counters["tpm"], int64(4*500+100))
	contains(t, li.cli("usage", "summary", "-e", "api-key-1"), "Window:    hourly", "rpm    4 ")

	// 7. local up for a second table, with its background aggregator: the
	// program's calls become snapshots without running anything else.
	li.up("-n", "walk2")
	contains(t, runIn("go", "run", "./examples/local", "-calls", "3"), "table walk2", "3 of 3 calls admitted")
	deadline := time.Now().Add(60 * time.Second)
	for {
		require.NoError(t, json.Unmarshal([]byte(li.cli("usage", "list", "-e", "api-key-1", "-o", "json")), &list))
		if len(list.Snapshots) == 1 && list.Snapshots[0].Counters["rpm"] == 3 {
			break
		}
		require.False(t, time.Now().After(deadline), "no snapshot with rpm 3 from the background aggregator after 60 s: %+v", list.Snapshots)
		time.Sleep(250 * time.Millisecond)
	}
	assert.GreaterOrEqual(t, list.Snapshots[0].Counters["tpm"], int64(300+400+500), "background aggregator")
	assert.LessOrEqual(t, list.Snapshots[0].Counters["tpm"], int64(3*500), "background aggregator")
}
