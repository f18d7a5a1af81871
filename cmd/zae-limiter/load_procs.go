package main

// `load --procs N` runs N worker processes of this command (`load --worker
// FILE`), each with its share of the workers and of the rate, all on the
// scenario the parent set up. A worker opens the table, says it is ready,
// waits for the start time on its stdin, runs, and writes JSON lines on its
// stdout: a tick with what it measured every second, then its final
// result. The parent sums the ticks for its progress line and merges the
// final results exactly (counts and fixed-bucket histograms add up).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/cmd/internal/loadtest"
)

// workerMsg is one line a worker process writes.
type workerMsg struct {
	Ready bool             `json:"ready,omitempty"`
	Tick  *loadtest.Result `json:"tick,omitempty"`
	Final *loadtest.Result `json:"final,omitempty"`
}

// Worker timing.
const (
	workerReadyTimeout = 2 * time.Minute
	workerStartDelay   = 200 * time.Millisecond // between the start signal and the start
	workerStopTimeout  = 30 * time.Second
)

// loadWorker is a worker process: it runs the scenario in file.
func (c *cli) loadWorker(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("load --worker: %w", err)
	}
	var s loadtest.Scenario
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("load --worker: %w", err)
	}
	res := loadtest.NewResult()
	res.Scenario = s
	rec := loadtest.NewRecorder(res)
	meter := loadtest.NewCallMeter(rec)
	rl, err := c.openLoadLimiter(s, meter, false)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(c.stdout)
	if err := enc.Encode(workerMsg{Ready: true}); err != nil {
		return err
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("load --worker: no start time from the parent: %w", err)
	}
	start, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("load --worker: start time: %w", err)
	}
	var encErr error
	tick := func(_ time.Duration, since *loadtest.Result) {
		if encErr == nil {
			encErr = enc.Encode(workerMsg{Tick: since})
		}
	}
	if err := loadtest.Run(c.ctx, rl, meter, rec, s, loadtest.RunOptions{StartAt: start, Tick: tick}); err != nil && c.ctx.Err() == nil {
		return err
	}
	return errors.Join(encErr, enc.Encode(workerMsg{Final: res}))
}

// splitScenario returns worker i's share of s over n processes.
func splitScenario(s loadtest.Scenario, i, n int) loadtest.Scenario {
	w := s
	w.Concurrency = s.Concurrency / n
	if i < s.Concurrency%n {
		w.Concurrency++
	}
	w.Rate = s.Rate / float64(n)
	if s.Seed != 0 {
		w.Seed = s.Seed + uint64(i)*1_000_003
	}
	return w
}

// procEvent is what the parent learns from a worker's output.
type procEvent struct {
	i   int
	msg workerMsg
	end bool // the worker's output ended
	err error
}

// runProcs runs n worker processes and merges their results.
func (c *cli) runProcs(s loadtest.Scenario, n int, start time.Time, prog *progress) (*loadtest.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(exe, ".test") {
		return nil, errors.New("load --procs: cannot start worker processes from a test binary")
	}
	dir, err := os.MkdirTemp("", "zae-limiter-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	events := make(chan procEvent, 16*n)
	var readers sync.WaitGroup
	cmds := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	defer func() {
		for i, cmd := range cmds {
			if cmd != nil && cmd.Process != nil && cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if stdins[i] != nil {
				stdins[i].Close()
			}
		}
		readers.Wait()
	}()
	for i := range n {
		file := filepath.Join(dir, fmt.Sprintf("worker-%d.json", i))
		data, err := json.Marshal(splitScenario(s, i, n))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return nil, err
		}
		args := []string{"load", "--worker", file, "-n", c.common.name, "-N", c.common.namespace}
		if c.common.region != "" {
			args = append(args, "--region", c.common.region)
		}
		if c.common.endpoint != "" {
			args = append(args, "--endpoint-url", c.common.endpoint)
		}
		cmd := exec.Command(exe, args...)
		cmd.Stderr = c.stderr
		if stdins[i], err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start worker %d: %w", i, err)
		}
		cmds[i] = cmd
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 256<<20)
			for sc.Scan() {
				var m workerMsg
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					events <- procEvent{i: i, err: fmt.Errorf("worker %d: %w", i, err)}
					continue
				}
				events <- procEvent{i: i, msg: m}
			}
			events <- procEvent{i: i, end: true, err: sc.Err()}
		}()
	}

	total := loadtest.NewResult()
	total.Scenario = s
	acc := loadtest.NewResult()
	ready, ended, finals := 0, 0, 0
	var errs []error
	began := time.Time{}
	readyBy := time.After(workerReadyTimeout)
	ticker := time.NewTicker(prog.interval)
	defer ticker.Stop()
	interrupted := false
	stop := c.ctx.Done()
	for ended < n {
		select {
		case ev := <-events:
			switch {
			case ev.err != nil:
				errs = append(errs, ev.err)
			case ev.end:
				ended++
				if began.IsZero() && ready < n {
					errs = append(errs, fmt.Errorf("worker %d ended before it was ready", ev.i))
				}
			case ev.msg.Ready:
				ready++
				if ready == n {
					began = time.Now().Add(workerStartDelay)
					if start.After(began) {
						began = start
					}
					for _, w := range stdins {
						fmt.Fprintln(w, began.Format(time.RFC3339Nano))
						w.Close()
					}
				}
			case ev.msg.Tick != nil:
				if err := acc.Merge(ev.msg.Tick); err != nil {
					errs = append(errs, err)
				}
			case ev.msg.Final != nil:
				finals++
				if err := total.Merge(ev.msg.Final); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 && began.IsZero() {
				return nil, errors.Join(errs...)
			}
		case <-ticker.C:
			if !began.IsZero() && time.Now().After(began) {
				prog.tick(time.Since(began), acc)
				acc = loadtest.NewResult()
			}
		case <-readyBy:
			if began.IsZero() {
				return nil, fmt.Errorf("load --procs: %d of %d workers ready after %v", ready, n, workerReadyTimeout)
			}
		case <-stop:
			stop = nil // once
			interrupted = true
			for _, cmd := range cmds {
				_ = cmd.Process.Signal(os.Interrupt)
			}
		}
	}
	prog.tick(time.Since(began), acc)
	prog.done()
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil && !interrupted {
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if finals != n {
		return nil, fmt.Errorf("load --procs: %d of %d workers sent their result", finals, n)
	}
	return total, nil
}

// progress prints the live progress line: on a terminal one refreshing
// line, else a plain line per interval.
type progress struct {
	c        *cli
	interval time.Duration
	total    time.Duration
	tty      bool
	off      bool
	wrote    bool
	last     time.Duration
	admitted uint64
	denied   uint64
	failed   uint64
}

func newProgress(c *cli, interval, total time.Duration) *progress {
	p := &progress{c: c, interval: interval, total: total, tty: isTerminal(c.stderr)}
	switch {
	case interval < 0:
		p.off, p.interval = true, time.Second
	case interval == 0 && p.tty:
		p.interval = time.Second
	case interval == 0:
		p.interval = 5 * time.Second
	}
	return p
}

// tick reports the measurements since the last tick.
func (p *progress) tick(elapsed time.Duration, since *loadtest.Result) {
	p.admitted += since.Admitted
	p.denied += since.Denied
	p.failed += since.Failed
	window := (elapsed - p.last).Seconds()
	if p.off || window < p.interval.Seconds()/2 {
		return // the last moments of the run: too short for a rate
	}
	p.last = elapsed
	rate := 0.0
	if window > 0 {
		rate = float64(since.Acquires()) / window
	}
	line := fmt.Sprintf("%4.0fs/%.0fs  %8.1f acquires/s  p50 %-7s p99 %-7s  admitted %s  denied %s  errors %s",
		elapsed.Seconds(), p.total.Seconds(), rate, loadtest.FormatDuration(since.Acquire.Quantile(0.5)),
		loadtest.FormatDuration(since.Acquire.Quantile(0.99)), thousands(int64(p.admitted)), thousands(int64(p.denied)), thousands(int64(p.failed)))
	if p.tty {
		fmt.Fprintf(p.c.stderr, "\r\x1b[K%s", line)
	} else {
		fmt.Fprintln(p.c.stderr, line)
	}
	p.wrote = true
}

// done ends the refreshing line.
func (p *progress) done() {
	if p.tty && p.wrote {
		fmt.Fprintln(p.c.stderr)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
