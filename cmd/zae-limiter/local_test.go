package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

func TestFormatEnv(t *testing.T) {
	st := localState{Endpoint: "http://127.0.0.1:8000", Region: "us-east-1", Table: "zae-limiter", Namespace: "team a's"}
	out, err := formatEnv(localEnv(st), "eval")
	require.NoError(t, err)
	for _, want := range []string{
		"export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000\n",
		"export AWS_ENDPOINT_URL_DYNAMODB_STREAMS=http://127.0.0.1:8000\n",
		"export AWS_ACCESS_KEY_ID=test\n", "export AWS_REGION=us-east-1\n", "export ZAEL_STACK=zae-limiter\n",
		`export ZAEL_NAMESPACE='team a'\''s'` + "\n",
	} {
		assert.Contains(t, out, want, "eval output")
	}
	out, err = formatEnv(localEnv(st), "direnv")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000\n"), "direnv output:\n%s", out)
	out, err = formatEnv(localEnv(st), "powershell")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, `$env:AWS_ENDPOINT_URL_DYNAMODB = "http://127.0.0.1:8000"`+"\n"), "powershell output:\n%s", out)
	_, err = formatEnv(nil, "fish")
	assert.Error(t, err, "format fish accepted")
}

func TestIsLoopback(t *testing.T) {
	for ep, want := range map[string]bool{
		"http://localhost:8000": true, "http://127.0.0.1:8000": true, "http://127.9.9.9": true, "http://[::1]:8000": true,
		"localhost:8000": true, "http://dynamodb.localhost:8000": true,
		"https://dynamodb.us-east-1.amazonaws.com": false, "http://10.0.0.5:8000": false, "": false, "http://localhost.example.com": false,
	} {
		assert.Equal(t, want, isLoopback(ep), "isLoopback(%q)", ep)
	}
}

// buildCLI builds the command into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	bin := filepath.Join(t.TempDir(), "zae-limiter")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build\n%s", out)
	return bin
}

// freeLocalPort returns a loopback port that was free a moment ago.
func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// localRun runs the built CLI with the extra environment and returns its
// exit code and output streams.
func localRun(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err, "run %s", bin)
	}
	return code, out.String(), errb.String()
}

// parseExports turns `export K=V` lines into K=V environment entries.
func parseExports(t *testing.T, out string) []string {
	t.Helper()
	var env []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		require.True(t, ok, "not an export line: %q in\n%s", line, out)
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+strings.Trim(v, "'"))
	}
	return env
}

// localInstance is a `local up` of a test: its binary, port, state
// directory and the environment it printed. Cleanup runs `local down`
// and, should that fail, kills what the pid files name.
type localInstance struct {
	t     *testing.T
	bin   string
	port  int
	dir   string
	env   []string // printed by the last up
	extra []string // more environment of every command
}

func newLocalInstance(t *testing.T, bin string) *localInstance {
	t.Helper()
	ddblocal.Endpoint(t) // skip or fail like every DynamoDB test when there is no DynamoDB Local
	if _, err := ddblocal.FindJar(mustLocalDir(t)); err != nil {
		t.Skipf("local up needs the DynamoDB Local jar: %v", err)
	}
	li := &localInstance{t: t, bin: bin, port: freeLocalPort(t), dir: t.TempDir()}
	t.Cleanup(func() {
		code, _, errs := li.run("local", "down")
		if assert.Equal(t, exitOK, code, "local down: stderr %s", errs) {
			return
		}
		pids, _ := filepath.Glob(filepath.Join(li.dir, strconv.Itoa(li.port), "*.pid"))
		for _, p := range pids {
			if pid, err := readPID(p); err == nil && pid > 0 {
				_ = kill(pid)
			}
		}
	})
	return li
}

func mustLocalDir(t *testing.T) string {
	t.Helper()
	d, err := ddblocal.LocalDir()
	require.NoError(t, err)
	return d
}

// run runs a `local` subcommand of the instance (its --port and --dir are
// added) with the instance's environment.
func (li *localInstance) run(args ...string) (int, string, string) {
	li.t.Helper()
	args = append(args, "--port", strconv.Itoa(li.port), "--dir", li.dir)
	return localRun(li.t, li.bin, append(append([]string{"ZAEL_DYNAMODB_LOCAL_DIR=" + mustLocalDir(li.t)}, li.extra...), li.env...), args...)
}

// up runs `local up` and keeps the environment it printed.
func (li *localInstance) up(args ...string) string {
	li.t.Helper()
	code, out, errs := li.run(append([]string{"local", "up"}, args...)...)
	require.Equal(li.t, exitOK, code, "local up %s\nstderr: %s", strings.Join(args, " "), errs)
	li.env = parseExports(li.t, out)
	return errs
}

// cli runs any command of the built CLI in the instance's environment.
func (li *localInstance) cli(args ...string) string {
	li.t.Helper()
	code, out, errs := localRun(li.t, li.bin, append(append([]string{}, li.extra...), li.env...), args...)
	require.Equal(li.t, exitOK, code, "zae-limiter %s: stderr %q", strings.Join(args, " "), errs)
	return out
}

func (li *localInstance) status() localStatusJSON {
	li.t.Helper()
	code, out, errs := li.run("local", "status", "-o", "json")
	require.Equal(li.t, exitOK, code, "local status: stderr %s", errs)
	var st localStatusJSON
	require.NoError(li.t, json.Unmarshal([]byte(out), &st), "local status -o json: %q", out)
	return st
}

// TestLocalUpDown: up starts DynamoDB Local and the aggregator, creates the
// table with its stream and prints an environment in which the CLI needs no
// flags; a second up reuses what runs; down stops both processes and only
// them.
func TestLocalUpDown(t *testing.T) {
	t.Parallel()
	li := newLocalInstance(t, buildCLI(t))
	msgs := li.up("-n", "dev-table", "--in-memory")
	contains(t, msgs, "DynamoDB Local (pid ", "in memory", "table dev-table (with its stream) ready", "aggregator (pid ", "eval \"$(zae-limiter local env --port ")
	contains(t, strings.Join(li.env, "\n"), "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:"+strconv.Itoa(li.port), "ZAEL_STACK=dev-table")

	st := li.status()
	require.True(t, st.Answers, "status after up: %+v", st)
	require.NotNil(t, st.DynamoDBLocal, "status after up: %+v", st)
	require.True(t, st.DynamoDBLocal.Running, "status after up: %+v", st)
	require.Len(t, st.Aggregators, 1, "status after up")
	require.True(t, st.Aggregators[0].Running, "status after up: %+v", st)
	if assert.Len(t, st.Tables, 1, "tables") {
		assert.Equal(t, "dev-table", st.Tables[0].Name, "tables")
		assert.True(t, st.Tables[0].Stream, "tables: with its stream")
		assert.Equal(t, "ACTIVE", st.Tables[0].Status, "tables")
	}
	javaPID, aggPID := st.DynamoDBLocal.PID, st.Aggregators[0].PID

	// The CLI works with the printed environment alone.
	contains(t, li.cli("entity", "create", "key-1"), "Created entity 'key-1'")
	contains(t, li.cli("entity", "show", "key-1", "-o", "json"), `"id": "key-1"`)

	// A second up reuses both processes.
	contains(t, li.up("-n", "dev-table"), "already running", "already polling")
	st2 := li.status()
	assert.Equal(t, javaPID, st2.DynamoDBLocal.PID, "second up replaced DynamoDB Local")
	if assert.Len(t, st2.Aggregators, 1) {
		assert.Equal(t, aggPID, st2.Aggregators[0].PID, "second up replaced the aggregator")
	}

	// local env prints the variables again, here for direnv.
	code, out, errs := li.run("local", "env", "--format", "direnv")
	require.Equal(t, exitOK, code, "local env --format direnv: stderr %s", errs)
	contains(t, out, "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:"+strconv.Itoa(li.port)+"\n", "ZAEL_STACK=dev-table\n")

	// local aggregator --once polls the stream once in the foreground: it
	// sees the bucket-less table's records (none) and drops nothing.
	contains(t, li.cli("local", "aggregator", "--once"), " records, ", " snapshot writes, ", " 0 dropped")

	// down --purge stops both processes and deletes the data directory.
	code, out, errs = li.run("local", "down", "--purge")
	require.Equal(t, exitOK, code, "local down --purge: stderr %q", errs)
	assert.Contains(t, out, "Stopped 2 process(es)", "local down --purge")
	assert.Contains(t, errs, "deleted ", "local down --purge")
	for _, pid := range []int{javaPID, aggPID} {
		assert.False(t, processAlive(pid), "pid %d still alive after down", pid)
	}
	st = li.status()
	assert.False(t, st.Answers, "status after down: %+v", st)
	assert.False(t, st.DynamoDBLocal.Running, "status after down: %+v", st)
	_, out, _ = li.run("local", "down")
	assert.Contains(t, out, "Nothing to stop", "second down")
}

// TestLocalDownLeavesOthersAlone: a pid file that names a process up did
// not start (a reused pid) stops nothing, and a DynamoDB Local that up found
// running is left running by down.
func TestLocalDownLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	li := newLocalInstance(t, buildCLI(t))
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	base := filepath.Join(li.dir, strconv.Itoa(li.port))
	require.NoError(t, os.MkdirAll(base, 0o755))
	pidFile := filepath.Join(base, "dynamodb-local.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o644))
	code, _, errs := li.run("local", "down")
	assert.Equal(t, exitError, code, "down with a foreign pid")
	assert.Contains(t, errs, "not started by zae-limiter local up", "down with a foreign pid")
	require.True(t, processAlive(sleeper.Process.Pid), "down killed a process it did not start")
	code, _, errs = li.run("local", "up", "--no-aggregator")
	assert.Equal(t, exitError, code, "up with a foreign pid")
	assert.Contains(t, errs, "not started by zae-limiter local up", "up with a foreign pid")
	os.Remove(pidFile)

	// DynamoDB Local answering on the port already: up uses it, down leaves it.
	other := &localInstance{t: t, bin: li.bin, port: li.port, dir: t.TempDir()}
	other.up("--no-aggregator", "--in-memory")
	t.Cleanup(func() { other.run("local", "down") })
	otherPID := other.status().DynamoDBLocal.PID
	msgs := li.up("--no-aggregator")
	contains(t, msgs, "something already answers at", "not started here")
	code, _, errs = li.run("local", "down")
	assert.Equal(t, exitOK, code, "down of a used instance: stderr %q", errs)
	assert.Contains(t, errs, "was not started by `local up`: left running", "down of a used instance")
	assert.True(t, processAlive(otherPID), "down stopped a DynamoDB Local that its up did not start")
}
