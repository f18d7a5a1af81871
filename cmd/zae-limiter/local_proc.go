package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Background processes of `local up`: each has a pid file in the state
// directory, and is recognised as ours by its command line before `down`
// signals it, so that a stale pid file never stops somebody else's process.

// procSpec describes a background process of `local up`.
type procSpec struct {
	name    string   // "dynamodb-local" or "aggregator": names the pid and log files
	marks   []string // arguments its command line must contain to be ours
	pidFile string
}

// Timeouts of the background processes.
const (
	localStartTimeout = 2 * time.Minute // JVM start and first answer, on a loaded machine too
	localStopTimeout  = 15 * time.Second
	localPollInterval = 100 * time.Millisecond
)

// errNotOurs marks a live process whose command line is not the one a pid
// file promised.
var errNotOurs = errors.New("not started by zae-limiter local up")

// readPID returns the pid in the pid file, 0 when there is none.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: no pid in %q", path, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// running returns the pid of the spec's process when its pid file names a
// live process with the expected command line; 0 when the pid file is
// missing or names a dead process; errNotOurs (with the pid) when the pid
// is now another program's.
func (p procSpec) running() (int, error) {
	pid, err := readPID(p.pidFile)
	if err != nil || pid == 0 {
		return 0, err
	}
	if !processAlive(pid) {
		return 0, nil
	}
	args, err := processArgs(pid)
	if err != nil {
		if !processAlive(pid) {
			return 0, nil
		}
		return pid, fmt.Errorf("process %d: cannot read its command line: %w", pid, err)
	}
	for _, m := range p.marks {
		if !containsArg(args, m) {
			return pid, fmt.Errorf("process %d (%s) is %w", pid, strings.Join(args, " "), errNotOurs)
		}
	}
	return pid, nil
}

// containsArg reports whether args holds a, or an argument ending in /a
// (the jar's path).
func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a || strings.HasSuffix(x, "/"+a) {
			return true
		}
	}
	return false
}

// startDetached starts cmd in a session of its own (it survives the CLI and
// the terminal), writing its output to logPath, and records its pid.
func (p procSpec) startDetached(cmd *exec.Cmd, logPath string) (*os.Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	detach(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	if err := os.WriteFile(p.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return cmd.Process, nil
}

// stop terminates the spec's process when it is ours (SIGTERM, then SIGKILL
// after localStopTimeout) and removes its pid file. It reports whether a
// process was stopped; a pid file naming another program's process is an
// error and that process is left alone.
func (p procSpec) stop(ctx context.Context) (bool, error) {
	pid, err := p.running()
	if err != nil {
		return false, fmt.Errorf("%s: %w; left running (remove %s if it is stale)", p.name, err, p.pidFile)
	}
	if pid == 0 {
		_ = os.Remove(p.pidFile)
		return false, nil
	}
	if err := terminate(pid); err != nil && processAlive(pid) {
		return false, fmt.Errorf("stop %s (pid %d): %w", p.name, pid, err)
	}
	deadline := time.Now().Add(localStopTimeout)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = kill(pid)
			deadline = time.Now().Add(localStopTimeout)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(localPollInterval):
		}
	}
	_ = os.Remove(p.pidFile)
	return true, nil
}

// logTail returns the last lines of a log file, for error messages.
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitHTTP polls endpoint until it answers HTTP (DynamoDB Local answers a
// bare GET with 400), proc exits, or the timeout passes.
func waitHTTP(ctx context.Context, endpoint string, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		if answers(ctx, hc, endpoint) {
			return nil
		}
		if pid > 0 && !processAlive(pid) {
			return errors.New("exited before answering")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s: %w", endpoint, ctx.Err())
		case <-time.After(localPollInterval):
		}
	}
}

// answers reports whether an HTTP server answers at endpoint.
func answers(ctx context.Context, hc *http.Client, endpoint string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// processArgs returns the command line of a process: /proc/PID/cmdline
// where there is a /proc, else `ps -o args=`.
func processArgs(pid int) ([]string, error) {
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); err == nil {
		return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
	} else if _, statErr := os.Stat("/proc/self"); statErr == nil {
		return nil, err
	}
	out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(bytes.TrimSpace(out))), nil
}
