package limiter

// The contention test of the issue "no over-admission under contention":
// two OS processes (this test and a re-executed copy of the test binary)
// hammer one child entity C, which cascades to its parent P, with real
// clocks against one DynamoDB Local, then prove from the bucket items and the
// processes' own counts that no limit admitted more than its capacity plus
// the refill earned over the run.
//
// Sizes: `make test` runs it for 3 s with 2 processes × 8 goroutines (with
// -race); `make stress` sets STRESS=1 for 20 s with 2 processes × 32
// goroutines (without -race, which would slow DynamoDB's clients and so
// lower the contention). ZAEL_STRESS_DURATION and ZAEL_STRESS_GOROUTINES
// override either size. Every goroutine makes at least stressMinAttempts
// attempts, so a slow machine lengthens the run rather than failing it; the
// checks use the measured span.
//
// Synchronisation: the helper says it is ready on stdout and starts when the
// parent writes the common deadline on its stdin; the parent waits for its
// exit. Nothing sleeps.
//
// Paths: in each process the even goroutines use the speculative path and
// the odd ones the read-then-write path, each with Commit synchronous for
// half of them and in the background (Options.BackgroundCommit) for the other
// half (four RateLimiters on one repository), so every pair of paths and
// commit modes contends within a process and across processes; a
// background commit that fails is an error of the run.
//
// Cancellation: a quarter of the acquires run on a context that ends after
// a random 0–15 ms, so that many give up while their write is in flight.
// Those that gave up are counted apart; whatever their writes applied is
// given back by the limiter (Close waits for it), so the counters must still
// equal exactly what the committed leases consumed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// Environment variables of the contention test.
const (
	// envStress=1 selects the full size (what `make stress` runs).
	envStress = "STRESS"
	// envStressDuration overrides the run time (a Go duration, e.g. 45s).
	envStressDuration = "ZAEL_STRESS_DURATION"
	// envStressGoroutines overrides the goroutines per process.
	envStressGoroutines = "ZAEL_STRESS_GOROUTINES"

	// The parent passes these to the helper process (with
	// ddblocal.EnvEndpoint); envStressChild=1 is what makes
	// TestContentionHelperProcess do anything.
	envStressChild     = "ZAEL_STRESS_CHILD"
	envStressTable     = "ZAEL_STRESS_TABLE"
	envStressNamespace = "ZAEL_STRESS_NAMESPACE"
)

// Lines of the parent ↔ helper protocol. The helper writes stressReady on
// stdout when set up, waits for "stressGo <deadline unix ms>" on stdin, runs
// until the deadline and writes "stressResult <json>" on stdout.
const (
	stressReady  = "zael-stress: ready"
	stressGo     = "zael-stress: go"
	stressResult = "zael-stress: result"
)

// The workload: C cascades to P; every acquire takes rpm 1 and tpm k, k
// uniform in [1, stressMaxTPM]. Both limits refill about 2 requests' worth a
// second (tpm at the mean k of 50.5), far below what even a slow machine
// attempts, so most attempts are denied.
const (
	stressChild    = "stress-child"
	stressParent   = "stress-parent"
	stressResource = "gpt-4"
	stressMaxTPM   = 100
	// stressMinAttempts is the fewest attempts a goroutine makes: a slow
	// machine stretches the run instead of failing its contention check.
	stressMinAttempts = 10
	// stressOpTimeout bounds one DynamoDB-backed call of the workload.
	stressOpTimeout = 30 * time.Second
	// stressMaxErrors is how many error messages a process reports in
	// full (all are counted).
	stressMaxErrors = 20
)

// stressLimits are passed to every acquire with WithLimits, so C and P
// have the same limits.
var stressLimits = []Limit{
	PerMinute("rpm", 120).WithBurst(10),
	PerMinute("tpm", 6_000).WithBurst(500),
}

// stressSize is the size of one contention run.
type stressSize struct {
	duration   time.Duration
	goroutines int // per process
}

// stressSizeFromEnv returns the size: 3 s × 8 goroutines, or 20 s × 32 with
// STRESS=1, each overridden by its environment variable.
func stressSizeFromEnv() (stressSize, error) {
	s := stressSize{duration: 3 * time.Second, goroutines: 8}
	if os.Getenv(envStress) == "1" {
		s = stressSize{duration: 20 * time.Second, goroutines: 32}
	}
	if v := os.Getenv(envStressDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive duration", envStressDuration, v)
		}
		s.duration = d
	}
	if v := os.Getenv(envStressGoroutines); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive integer", envStressGoroutines, v)
		}
		s.goroutines = n
	}
	return s, nil
}

// stressLimitCounts is what one process did to one limit, in millitokens.
// Each amount was applied to both C and P (cascade).
type stressLimitCounts struct {
	// Admitted sums the enter-time amounts of successful acquires.
	Admitted int64
	// Released sums what was given back with Release before a Commit:
	// what the lease gave back, after the refund rule's cut.
	Released int64
	// RolledBack sums what rolled-back leases gave back, after the cut.
	RolledBack int64
}

// net is the consumption the limit must hold when all is written.
func (c stressLimitCounts) net() int64 { return c.Admitted - c.Released - c.RolledBack }

// stressGivenBack returns, per limit of consume, the millitokens lease
// gave back on its first bucket (the child's; the parent's gets the same
// cut): what its acquire took less what it holds now.
func stressGivenBack(lease *Lease, consume Consume) Consume {
	out := make(Consume, len(consume))
	for name, n := range consume {
		for _, e := range lease.entries {
			if e.limit.Name == name {
				out[name] = n*1000 - e.held()
				break
			}
		}
	}
	return out
}

// stressCounts is one process's (or one goroutine's) account of a run. It is
// what the helper process reports as JSON.
type stressCounts struct {
	Goroutines int
	Attempts   int64 // Acquire calls
	Admitted   int64 // successful Acquires
	Denied     int64 // Acquires refused with ErrRateLimited
	Cancelled  int64 // Acquires whose context ended first
	Commits    int64 // leases committed as acquired
	Released   int64 // leases committed after a Release
	RolledBack int64 // leases rolled back (after a Release or not)
	Limits     map[string]stressLimitCounts
	// Errors counts every other error, a failed Commit or Rollback included
	// (its effect on the buckets is then unknown); ErrorMessages holds the
	// first few.
	Errors        int64
	ErrorMessages []string
	// Speculative sums the speculative-path outcomes of the process.
	Speculative store.SpeculativeStats
}

func newStressCounts() stressCounts {
	return stressCounts{Limits: map[string]stressLimitCounts{}}
}

func (c *stressCounts) fail(format string, args ...any) {
	c.Errors++
	if len(c.ErrorMessages) < stressMaxErrors {
		c.ErrorMessages = append(c.ErrorMessages, fmt.Sprintf(format, args...))
	}
}

// add merges o into c.
func (c *stressCounts) add(o stressCounts) {
	c.Goroutines += o.Goroutines
	c.Attempts += o.Attempts
	c.Admitted += o.Admitted
	c.Denied += o.Denied
	c.Cancelled += o.Cancelled
	c.Commits += o.Commits
	c.Released += o.Released
	c.RolledBack += o.RolledBack
	for name, l := range o.Limits {
		s := c.Limits[name]
		s.Admitted += l.Admitted
		s.Released += l.Released
		s.RolledBack += l.RolledBack
		c.Limits[name] = s
	}
	c.Errors += o.Errors
	for _, m := range o.ErrorMessages {
		if len(c.ErrorMessages) < stressMaxErrors {
			c.ErrorMessages = append(c.ErrorMessages, m)
		}
	}
	c.Speculative.Attempts += o.Speculative.Attempts
	for i, n := range o.Speculative.Counts {
		c.Speculative.Counts[i] += n
	}
}

func (c stressCounts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d goroutines: %d attempts, %d admitted, %d denied (%.1f%%), %d cancelled, %d errors; "+
		"leases: %d committed, %d released+committed, %d rolled back",
		c.Goroutines, c.Attempts, c.Admitted, c.Denied, 100*float64(c.Denied)/float64(max(c.Attempts, 1)), c.Cancelled, c.Errors,
		c.Commits, c.Released, c.RolledBack)
	for _, l := range stressLimits {
		s := c.Limits[l.Name]
		fmt.Fprintf(&b, "; %s (millitokens): admitted %d, released %d, rolled back %d, net %d", l.Name, s.Admitted, s.Released, s.RolledBack, s.net())
	}
	fmt.Fprintf(&b, "; speculative attempts %d", c.Speculative.Attempts)
	for o, n := range c.Speculative.Counts {
		if n > 0 {
			fmt.Fprintf(&b, ", %s %d", store.SpeculativeOutcome(o), n)
		}
	}
	return b.String()
}

// runStressWorkload runs goroutines workers on repo, each until deadline and
// for at least stressMinAttempts attempts, and returns their merged counts.
// Even workers use the speculative path, odd ones the read-then-write path.
func runStressWorkload(repo *dynamoRepository, goroutines int, deadline time.Time) stressCounts {
	// Each path with Commit synchronous and in the background
	// (Options.BackgroundCommit): goroutine i uses limiters[i%4].
	var limiters []*RateLimiter
	for _, bg := range []bool{false, true} {
		limiters = append(limiters,
			New(repo, func(o *Options) { o.SpeculativeWrites = true }, func(o *Options) { o.BackgroundCommit = bg }),
			New(repo, func(o *Options) { o.SpeculativeWrites = false }, func(o *Options) { o.BackgroundCommit = bg }))
	}
	results := make([]stressCounts, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		rl := limiters[i%len(limiters)]
		wg.Go(func() { results[i] = stressWorker(rl, deadline) })
	}
	wg.Wait()
	total := newStressCounts()
	for _, r := range results {
		total.add(r)
	}
	for _, rl := range limiters {
		// Wait for the give-backs of acquires that gave up in flight and
		// for the background commits.
		rl.Close()
		if rl.commits != nil && rl.commits.failed.Load() > 0 {
			total.fail("%d background commits failed", rl.commits.failed.Load())
		}
		s := rl.Stats().Speculative
		total.Speculative.Attempts += s.Attempts
		for o, n := range s.Counts {
			total.Speculative.Counts[o] += n
		}
	}
	return total
}

// stressWorker is one goroutine of the workload: attempts until deadline,
// and at least stressMinAttempts of them.
func stressWorker(rl *RateLimiter, deadline time.Time) stressCounts {
	c := newStressCounts()
	c.Goroutines = 1
	for c.Attempts < stressMinAttempts || time.Now().Before(deadline) {
		c.attempt(rl)
	}
	return c
}

// attempt acquires rpm 1 and tpm k (random) on the child, then at random
// commits (3/8), releases part and commits (3/8), rolls back (1/8), or
// releases part and rolls back (1/8), and counts what it did. Every error
// other than a rate-limit denial is counted as a failure.
func (c *stressCounts) attempt(rl *RateLimiter) {
	ctx, cancel := context.WithTimeout(context.Background(), stressOpTimeout)
	defer cancel()
	k := 1 + rand.Int64N(stressMaxTPM)
	consume := Consume{"rpm": 1, "tpm": k}
	c.Attempts++
	actx := ctx
	if rand.IntN(4) == 0 {
		var stop context.CancelFunc
		actx, stop = context.WithTimeout(ctx, time.Duration(rand.IntN(15_000))*time.Microsecond)
		defer stop()
	}
	lease, err := rl.Acquire(actx, stressChild, stressResource, consume, WithLimits(stressLimits...))
	if errors.Is(err, ErrRateLimited) {
		c.Denied++
		return
	}
	if actx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		c.Cancelled++
		return
	}
	if err != nil {
		c.fail("acquire %v: %v", consume, err)
		return
	}
	c.Admitted++
	c.count(consume, func(l *stressLimitCounts, n int64) { l.Admitted += n * 1000 })
	// The lease must hold the request on C and on P.
	if got := lease.Consumed(); lease.FailedOpen() || got["rpm"] != 2 || got["tpm"] != 2*k {
		c.fail("acquire %v: lease consumed %v (noop %v), want twice the request (child and parent)", consume, got, lease.FailedOpen())
	}

	choice := rand.IntN(8)
	commit, partial := choice < 6, choice >= 3 && choice != 6
	var release Consume
	if partial {
		release = Consume{"tpm": 1 + rand.Int64N(k)}
		if rand.IntN(4) == 0 {
			release["rpm"] = 1
		}
		if err := lease.Release(release); err != nil {
			c.fail("release %v of %v: %v", release, consume, err)
			release = nil
		}
	}
	if !commit {
		if err := lease.Rollback(ctx); err != nil {
			c.fail("rollback %v: %v", consume, err)
			return
		}
		c.RolledBack++
		c.count(stressGivenBack(lease, consume), func(l *stressLimitCounts, n int64) { l.RolledBack += n })
		return
	}
	if err := lease.Commit(ctx); err != nil {
		c.fail("commit %v (released %v): %v", consume, release, err)
		return
	}
	if !partial {
		c.Commits++
		return
	}
	c.Released++
	c.count(stressGivenBack(lease, consume), func(l *stressLimitCounts, n int64) { l.Released += n })
}

// count applies f to the counts of every limit of amounts.
func (c *stressCounts) count(amounts Consume, f func(l *stressLimitCounts, n int64)) {
	for name, n := range amounts {
		l := c.Limits[name]
		f(&l, n)
		c.Limits[name] = l
	}
}

// TestContentionHelperProcess is the second OS process of
// TestContentionNoOverAdmission. It does nothing unless ZAEL_STRESS_CHILD=1.
func TestContentionHelperProcess(t *testing.T) {
	if os.Getenv(envStressChild) != "1" {
		return
	}
	ctx := context.Background()
	goroutines, err := strconv.Atoi(os.Getenv(envStressGoroutines))
	require.NoError(t, err, "%s: want a positive integer", envStressGoroutines)
	require.Positive(t, goroutines, "%s: want a positive integer", envStressGoroutines)
	client := ddblocal.NewClient(os.Getenv(ddblocal.EnvEndpoint))
	repo, err := openDynamo(ctx, client, func(o *DynamoDBOptions) {
		o.Table = os.Getenv(envStressTable)
		o.Namespace = os.Getenv(envStressNamespace)
	})
	require.NoError(t, err, "OpenDynamoDB: %v", err)
	fmt.Println(stressReady)

	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err, "waiting for %q on stdin: %v", stressGo, err)
	ms, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(line), stressGo+" "), 10, 64)
	require.NoError(t, err, "stdin %q: want %q and a deadline in unix ms", line, stressGo)
	counts := runStressWorkload(repo, goroutines, time.UnixMilli(ms))
	out, err := json.Marshal(counts)
	require.NoError(t, err, "marshal counts: %v", err)
	fmt.Println(stressResult, string(out))
}

// stressHelper is the helper process as the parent sees it.
type stressHelper struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc // kills the process
	stdin  io.WriteCloser
	stderr bytes.Buffer

	ready chan struct{} // closed when the helper said stressReady
	done  chan struct{} // closed when its stdout is drained (it exited)
	lines []string      // stdout lines; read only after done

	waitOnce sync.Once
	waitErr  error
}

// startStressHelper re-executes the test binary as the helper process. A
// cleanup kills it (if still running) and waits for it.
func startStressHelper(t *testing.T, env []string, timeout time.Duration) *stressHelper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run=^TestContentionHelperProcess$", "-test.count=1", "-test.timeout="+timeout.String())
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	h := &stressHelper{cmd: cmd, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &h.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		require.NoError(t, err, "helper stdout")
	}
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		require.NoError(t, err, "helper stdin")
	}
	if err := cmd.Start(); err != nil {
		cancel()
		require.NoError(t, err, "start helper process")
	}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			h.lines = append(h.lines, sc.Text())
			if sc.Text() == stressReady {
				close(h.ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // after a too-long line
	}()
	t.Cleanup(func() {
		h.cancel()
		h.wait()
	})
	return h
}

// wait waits for the helper to exit (once) and returns Wait's error.
func (h *stressHelper) wait() error {
	h.waitOnce.Do(func() {
		h.stdin.Close()
		<-h.done
		h.waitErr = h.cmd.Wait()
		h.cancel()
	})
	return h.waitErr
}

// output describes what the helper printed, for failure messages. Call it
// only after wait.
func (h *stressHelper) output() string {
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", strings.Join(h.lines, "\n"), h.stderr.String())
}

// result waits for the helper to exit and decodes its counts.
func (h *stressHelper) result() (stressCounts, error) {
	if err := h.wait(); err != nil {
		return stressCounts{}, fmt.Errorf("helper process: %w\n%s", err, h.output())
	}
	for _, l := range h.lines {
		if js, ok := strings.CutPrefix(l, stressResult+" "); ok {
			var c stressCounts
			if err := json.Unmarshal([]byte(js), &c); err != nil {
				return c, fmt.Errorf("helper result %q: %w", js, err)
			}
			return c, nil
		}
	}
	return stressCounts{}, fmt.Errorf("helper process printed no result\n%s", h.output())
}

// TestContentionNoOverAdmission is the contention test of the issue "no
// over-admission under contention". Two processes hammer C (cascading to P);
// for C and P and each limit, amounts in millitokens, span the wall-clock
// time since just before the first acquire:
//
//   - tk ≥ 0: no consumption was written without enough tokens (the
//     workload never adjusts upwards, so nothing may put a bucket in debt);
//   - tk + tc − cp ≤ ra × span / rp: every write keeps tk + tc − cp equal to
//     the refill credited so far (less what a refund capped at the capacity
//     dropped), which may not exceed what the span earns;
//   - hence tc ≤ cp + ra × span / rp: no over-admission.
//
// These hold at every moment: a monitor goroutine checks them on every state
// it reads during the run (a debt that later refills away is invisible at
// the end), and they are checked again at the end, where also
//
//   - tc == admitted − released − rolled back (millitokens, what the
//     leases gave back after the refund rule's cut), summed over both
//     processes' counts: every write was applied exactly once, so the bound
//     on tc bounds what the callers were given;
//
// and no goroutine saw an error other than a rate-limit denial.
func TestContentionNoOverAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("contention test: skipped with -short")
	}
	size, err := stressSizeFromEnv()
	require.NoError(t, err)
	ctx := context.Background()
	endpoint := ddblocal.Endpoint(t)
	client := ddblocal.NewClient(endpoint)
	table := ddblocal.TableName(t)
	const namespace = "stress"
	repo, err := openDynamo(ctx, client, func(o *DynamoDBOptions) {
		o.Table = table
		o.Namespace = namespace
		o.CreateTable = true
	})
	require.NoError(t, err, "OpenDynamoDB: %v", err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	admin := New(repo)
	_, err = admin.Admin().CreateEntity(ctx, Entity{ID: stressParent})
	require.NoError(t, err, "CreateEntity %s", stressParent)
	_, err = admin.Admin().CreateEntity(ctx, Entity{ID: stressChild, ParentID: stressParent, Cascade: true})
	require.NoError(t, err, "CreateEntity %s", stressChild)

	helper := startStressHelper(t, []string{
		envStressChild + "=1",
		ddblocal.EnvEndpoint + "=" + endpoint,
		envStressTable + "=" + table,
		envStressNamespace + "=" + namespace,
		envStressGoroutines + "=" + strconv.Itoa(size.goroutines),
	}, size.duration+3*time.Minute)
	select {
	case <-helper.ready:
	case <-helper.done:
		err := helper.wait()
		require.FailNow(t, "helper process exited before it was ready", "%v\n%s", err, helper.output())
	}

	start := time.Now()
	mon := startStressMonitor(t, client, repo, start)
	deadline := start.Add(size.duration)
	if _, err := fmt.Fprintf(helper.stdin, "%s %d\n", stressGo, deadline.UnixMilli()); err != nil {
		helper.cancel()
		werr := helper.wait()
		require.NoError(t, err, "start helper (exit: %v)\n%s", werr, helper.output())
	}
	own := runStressWorkload(repo, size.goroutines, deadline)
	other, err := helper.result()
	end := time.Now()
	mon.stop()
	require.NoError(t, err)
	t.Logf("run: %v requested, %v measured, 2 processes × %d goroutines", size.duration, end.Sub(start).Round(time.Millisecond), size.goroutines)
	t.Logf("this process:   %v", own)
	t.Logf("helper process: %v", other)
	total := newStressCounts()
	total.add(own)
	total.add(other)

	assert.Zero(t, total.Errors, "errors other than rate limiting (this process %d, helper %d); the first ones:\n%s", own.Errors, other.Errors, strings.Join(total.ErrorMessages, "\n"))
	for _, c := range []stressCounts{own, other} {
		assert.GreaterOrEqual(t, c.Attempts, int64(c.Goroutines), "attempts of a process, want ≥ 1 per goroutine")
		assert.Equal(t, size.goroutines, c.Goroutines, "goroutines of a process")
	}
	// The buckets start full: that many acquires succeed whatever the
	// timing.
	minAdmitted := min(stressLimits[0].Capacity, stressLimits[1].Capacity/stressMaxTPM)
	assert.GreaterOrEqual(t, total.Admitted, minAdmitted, "admitted acquires, want at least a bucket full at the start")
	// Real contention: at least twice as many requests as the rpm limit
	// could grant over the measured span (its capacity and the refill
	// earned meanwhile), and denials. A slow machine stretches the span
	// (stressMinAttempts), and the refill grows with it, so the supply is
	// that of the span measured, not of the span requested.
	spanMs := end.UnixMilli() - start.UnixMilli()
	rpm := stressLimits[0]
	supply := rpm.Capacity + rpm.RefillAmount*spanMs/rpm.RefillPeriod.Milliseconds()
	assert.GreaterOrEqual(t, total.Attempts, 2*supply,
		"acquires against %d rpm tokens the limit could grant in %d ms: want at least twice as many (no real contention)", supply, spanMs)
	assert.NotZero(t, total.Denied, "denials: want some (no real contention)")

	t.Logf("monitor: %d bucket states read during the run, %d violations", mon.samples, mon.violations)
	assert.Zero(t, mon.violations, "monitor: violations during the run; the first ones:\n%s", strings.Join(mon.errs, "\n"))
	assert.Empty(t, mon.errs, "monitor: violations during the run")

	for _, entity := range []string{stressChild, stressParent} {
		b, err := readStressBucket(ctx, client, repo, entity)
		if !assert.NoError(t, err) {
			continue
		}
		// Shards ≥ 1 would hold consumption this check does not read.
		assert.EqualValues(t, 1, b.shardCount, "%s: shard_count", entity)
		for _, l := range stressLimits {
			s := b.limits[l.Name]
			if !assert.Equal(t, [3]int64{l.Capacity * 1000, l.RefillAmount * 1000, l.RefillPeriod.Milliseconds()}, [3]int64{s.cp, s.ra, s.rp},
				"%s %s: stored cp/ra/rp", entity, l.Name) {
				continue
			}
			counts := total.Limits[l.Name]
			netMilli := counts.net()
			allowed := s.cp + s.earned(spanMs)
			t.Logf("%s %s: tc %d = counted net %d (admitted %d − released %d − rolled back %d); "+
				"allowed %d = cp %d + earned %d over %d ms; refill credited %d; tk %d; unused %d (%.1f%%)",
				entity, l.Name, s.tc, netMilli, counts.Admitted, counts.Released, counts.RolledBack,
				allowed, s.cp, s.earned(spanMs), spanMs, s.credited(), s.tk, allowed-s.tc, 100*float64(allowed-s.tc)/float64(allowed))
			assert.Equal(t, netMilli, s.tc, "%s %s: tc = %d millitokens, want the counted net consumption = %d (difference %d; %d errors)", entity, l.Name, s.tc, netMilli, s.tc-netMilli, total.Errors)
			assert.Empty(t, s.violations(spanMs), "%s %s at the end", entity, l.Name)
		}
	}
}

// stressLimitState is one limit of a bucket item, in millitokens and ms.
type stressLimitState struct{ tk, tc, cp, ra, rp int64 }

// earned is the refill a limit earns in spanMs (floored).
func (s stressLimitState) earned(spanMs int64) int64 { return s.ra * spanMs / s.rp }

// credited is the refill credited to the limit so far, less what refunds
// capped at the capacity dropped: creation sets tk = cp − c and tc = c;
// consumption and refunds move tk and tc in opposite directions (a capped
// refund moves tk less); refills add to tk only.
func (s stressLimitState) credited() int64 { return s.tk + s.tc - s.cp }

// violations lists the invariants s breaks at spanMs after the start; they
// hold at every moment of the run.
func (s stressLimitState) violations(spanMs int64) []string {
	var out []string
	if s.tk < 0 {
		out = append(out, fmt.Sprintf("tk = %d millitokens < 0: consumption written without tokens", s.tk))
	}
	if c, e := s.credited(), s.earned(spanMs); c > e {
		out = append(out, fmt.Sprintf("refill credited tk + tc − cp = %d millitokens, want at most %d (earned in %d ms)", c, e, spanMs))
	}
	if allowed := s.cp + s.earned(spanMs); s.tc > allowed {
		out = append(out, fmt.Sprintf("over-admission: tc = %d millitokens > capacity + refill earned in %d ms = %d", s.tc, spanMs, allowed))
	}
	return out
}

// stressBucket is the shard-0 bucket item of an entity, as read.
type stressBucket struct {
	shardCount int64
	limits     map[string]stressLimitState
}

// readStressBucket reads the shard-0 bucket of entity (strongly
// consistent); limits is empty when the item does not exist yet.
func readStressBucket(ctx context.Context, client *dynamodb.Client, repo *dynamoRepository, entity string) (stressBucket, error) {
	b := stressBucket{limits: map[string]stressLimitState{}}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(repo.Table()),
		Key:            bucketPrimaryKey(repo.NamespaceID(), entity, stressResource, 0),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return b, fmt.Errorf("read bucket of %s: %w", entity, err)
	}
	if len(out.Item) == 0 {
		return b, nil
	}
	if b.shardCount, err = schemaGetNOr(out.Item, attrShardCount, 1); err != nil {
		return b, fmt.Errorf("bucket of %s: %s: %w", entity, attrShardCount, err)
	}
	for _, l := range stressLimits {
		var s stressLimitState
		for _, f := range []struct {
			field string
			dst   *int64
		}{{fieldTokens, &s.tk}, {fieldTotalConsumed, &s.tc}, {fieldCapacity, &s.cp}, {fieldRefillAmount, &s.ra}, {fieldRefillPeriod, &s.rp}} {
			v, ok, err := schemaGetN(out.Item, bucketAttr(l.Name, f.field))
			if err != nil || !ok {
				return b, fmt.Errorf("bucket of %s: attribute %s: present %v, error %v", entity, bucketAttr(l.Name, f.field), ok, err)
			}
			*f.dst = v
		}
		if s.rp <= 0 {
			return b, fmt.Errorf("bucket of %s: %s = %d", entity, bucketAttr(l.Name, fieldRefillPeriod), s.rp)
		}
		b.limits[l.Name] = s
	}
	return b, nil
}

// stressMonitor reads the buckets of C and P back to back during the run
// and checks each state read against the invariants of
// stressLimitState.violations.
type stressMonitor struct {
	stop func() // stops the monitor and waits for it; idempotent

	// Written by the monitor goroutine, read after stop.
	samples    int      // bucket states read
	violations int      // violations found
	errs       []string // the first stressMaxErrors violations and read errors
}

// startStressMonitor starts the monitor; a cleanup stops it.
func startStressMonitor(t *testing.T, client *dynamodb.Client, repo *dynamoRepository, start time.Time) *stressMonitor {
	m := &stressMonitor{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	m.stop = sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
	t.Cleanup(m.stop)
	wg.Go(func() {
		report := func(msg string) {
			if len(m.errs) < stressMaxErrors {
				m.errs = append(m.errs, msg)
			}
		}
		for {
			for _, entity := range []string{stressChild, stressParent} {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), stressOpTimeout)
				b, err := readStressBucket(ctx, client, repo, entity)
				cancel()
				// Every write reflected in b happened before now.
				spanMs := time.Now().UnixMilli() - start.UnixMilli()
				if err != nil {
					report(err.Error())
					continue
				}
				for _, l := range stressLimits {
					s, ok := b.limits[l.Name]
					if !ok {
						continue
					}
					m.samples++
					for _, v := range s.violations(spanMs) {
						m.violations++
						report(fmt.Sprintf("%s %s at +%d ms: %s (tk %d, tc %d)", entity, l.Name, spanMs, v, s.tk, s.tc))
					}
				}
			}
		}
	})
	return m
}
