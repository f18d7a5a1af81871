package llmhttp_test

// The fleet test of provider feedback: four OS processes (this test binary,
// re-executed) × 16 goroutines send LLM calls through a Transport each, one
// entity, one shared bucket in DynamoDB Local, against one fake provider
// served by the parent process. The configured tpm is twice the provider's
// real limit, and a hidden consumer takes 30 % of the provider's quota.
// After a warm-up, once every process had a provider response (and so
// learned the provider's limit from its headers) and began its goroutines'
// calls after it, the parent measures from
// the provider's own counters:
// the share of requests the provider refused with 429, and the tokens it
// admitted against what it allowed the fleet (the part of its refill the
// hidden consumer left, plus what its bucket held when the window opened).
//
// Sizes: `make test` runs 4 s of warm-up and 6 s of measurement, the
// provider's buckets starting empty so that its one-minute burst does not
// fill the short window, and checks looser bounds (see fleetSize);
// ZAEL_LLM_FLEET=1 (`make llm-fleet`) runs the full size: 10 s of warm-up
// from full buckets, then 30 s, and checks the bounds.
// ZAEL_LLM_FLEET_WINDOW overrides the measured time; ZAEL_LLM_FLEET_TRACE
// logs each helper's counters every second, the provider's, and the
// helpers' warnings.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/store"
)

// Environment of the fleet test and of its helper processes.
const (
	envFleet       = "ZAEL_LLM_FLEET"        // 1: full size
	envFleetWindow = "ZAEL_LLM_FLEET_WINDOW" // the measured time, a Go duration
	envFleetChild  = "ZAEL_LLM_FLEET_CHILD"  // the helper's JSON parameters
	envFleetTrace  = "ZAEL_LLM_FLEET_TRACE"  // non-empty: log timelines and the helpers' warnings
)

const (
	fleetProcesses  = 4
	fleetGoroutines = 16
	fleetEntity     = "org-key"
	fleetResource   = "gpt-4o"
	fleetHidden     = 0.3
	fleetReady      = "zael-fleet: ready"
	// fleetSettled: each of the helper's goroutines began a call after
	// the helper's first provider response, so that no acquire of it
	// carries the limits it had before it learned the provider's.
	fleetSettled = "zael-fleet: settled"
	fleetResult  = "zael-fleet: result"
	// fleetSettleBound bounds how long the parent waits, beyond the
	// warm-up, for every helper to settle.
	fleetSettleBound = time.Minute
)

// fleetParams is what the parent tells each helper.
type fleetParams struct {
	Endpoint, Table, Namespace string
	ProviderURL                string
	Anthropic, Stream          bool
	Feedback                   bool
	Goroutines                 int
}

// fleetCounts is what a helper reports.
type fleetCounts struct {
	Sent, Denied, Provider429, Errors int64
	FirstError                        string
	Stats                             llmhttp.Stats
	Spec                              store.SpeculativeStats
	SpecWindow                        store.SpeculativeStats // during the measured window
	Series                            []fleetSample
}

// fleetSample is a helper's counters at one moment, for the timeline.
type fleetSample struct {
	Ms                                  int64
	Sent, Denied, Provider429           int64
	Corrections, Cooldowns              int64
	SpecAttempts, SpecSuccess, Fallback int64
	LimitsChanged, RefillWouldHelp      int64
}

// fleetRun is one measured run.
type fleetRun struct {
	name                      string
	requests, limited         int64
	admitted, allowed         float64
	denied, corrections       int64
	cooldowns, learned, sent  int64
	rate429, admittedFraction float64
	// specAttempts sums the helpers' acquires on the speculative path that
	// ended in the measured window, specDecided those it settled without the
	// read-then-write path (an admission or a refusal), limitsChanged
	// those that fell back because the item stored other limit parameters
	// than the acquire's.
	specAttempts, specDecided, limitsChanged int64
}

func (r fleetRun) String() string {
	spec := 0.0
	if r.specAttempts > 0 {
		spec = 100 * float64(r.specDecided) / float64(r.specAttempts)
	}
	return fmt.Sprintf("%-28s provider requests %6d, 429 %5.2f %%, admitted tokens %5.1f %% of allowed (%0.f of %.0f); "+
		"limiter denials %d, corrections %d, cooldowns %d; speculative path decided %.0f %% of %d acquires, "+
		"%d fell back for other limit parameters",
		r.name, r.requests, 100*r.rate429, 100*r.admittedFraction, r.admitted, r.allowed, r.denied, r.corrections, r.cooldowns,
		spec, r.specAttempts, r.limitsChanged)
}

// TestFleetHelperProcess is the helper process; it does nothing unless
// envFleetChild is set.
func TestFleetHelperProcess(t *testing.T) {
	js := os.Getenv(envFleetChild)
	if js == "" {
		return
	}
	var p fleetParams
	require.NoError(t, json.Unmarshal([]byte(js), &p))
	ctx := context.Background()
	repo, err := limiter.OpenDynamoDB(ctx, ddblocal.NewClient(p.Endpoint), func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace = p.Table, p.Namespace
	})
	require.NoError(t, err)
	rl := limiter.New(repo)
	defer rl.Close()
	opts := []func(*llmhttp.Options){func(o *llmhttp.Options) { o.NoFeedback = !p.Feedback }}
	if os.Getenv(envFleetTrace) != "" {
		opts = append(opts, func(o *llmhttp.Options) {
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
	}
	tr := llmhttp.NewTransport(rl, http.DefaultTransport, opts...)
	fmt.Println(fleetReady)
	// The first line starts the workload with a bound; the second, sent
	// once every helper settled (fleetSettled) and the warm-up is over,
	// opens the measured window and sets the deadline.
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	require.NoError(t, err, "waiting for the start on stdin")
	var boundMs int64
	_, err = fmt.Sscan(line, &boundMs)
	require.NoError(t, err)
	var deadline atomic.Int64
	deadline.Store(boundMs)
	// The speculative path's counters as the measured window opens.
	atWindow := make(chan store.SpeculativeStats, 1)
	windowErr := make(chan error, 1)
	go func() {
		line, err := in.ReadString('\n')
		if err != nil {
			windowErr <- fmt.Errorf("waiting for the window on stdin: %w", err)
			return
		}
		var windowMs, deadlineMs int64
		if _, err := fmt.Sscan(line, &windowMs, &deadlineMs); err != nil {
			windowErr <- err
			return
		}
		deadline.Store(deadlineMs)
		time.Sleep(time.Until(time.UnixMilli(windowMs)))
		atWindow <- rl.Stats().Speculative
	}()
	counts := runFleetWorkload(rl, tr, p, func() time.Time { return time.UnixMilli(deadline.Load()) },
		func() { fmt.Println(fleetSettled) })
	var window store.SpeculativeStats
	select {
	case window = <-atWindow:
	case err := <-windowErr:
		require.NoError(t, err)
	}
	counts.Stats = tr.Stats()
	counts.Spec = rl.Stats().Speculative
	counts.SpecWindow.Attempts = counts.Spec.Attempts - window.Attempts
	for i := range counts.SpecWindow.Counts {
		counts.SpecWindow.Counts[i] = counts.Spec.Counts[i] - window.Counts[i]
	}
	out, err := json.Marshal(counts)
	require.NoError(t, err)
	fmt.Println(fleetResult, string(out))
}

// runFleetWorkload runs p.Goroutines callers until the deadline, which
// may move; it calls settled once every goroutine began a call after the
// first provider response.
func runFleetWorkload(rl *limiter.RateLimiter, tr *llmhttp.Transport, p fleetParams, deadline func() time.Time,
	settled func()) fleetCounts {
	client := &http.Client{Transport: tr}
	var sent, denied, limited, errs atomic.Int64
	var firstErr atomic.Value
	path := "/v1/chat/completions"
	body := `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"Summarise the token bucket algorithm in one paragraph."}]`
	if p.Anthropic {
		path = "/v1/messages"
	}
	if p.Stream {
		body += `,"stream":true`
		if !p.Anthropic {
			body += `,"stream_options":{"include_usage":true}`
		}
	}
	body += "}"
	var series []fleetSample
	start := time.Now()
	sample := func() {
		st, sp := tr.Stats(), rl.Stats().Speculative
		series = append(series, fleetSample{Ms: time.Since(start).Milliseconds(),
			Sent: sent.Load(), Denied: denied.Load(), Provider429: limited.Load(),
			Corrections: st.Corrections, Cooldowns: st.Cooldowns,
			SpecAttempts: sp.Attempts, SpecSuccess: sp.Counts[store.SpecSuccess], Fallback: sp.Fallbacks(),
			LimitsChanged: sp.Counts[store.SpecFallbackLimitsChanged], RefillWouldHelp: sp.Counts[store.SpecFallbackRefillWouldHelp]})
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				sample()
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	var wg sync.WaitGroup
	var answered atomic.Bool // a provider response came
	var unsettled atomic.Int64
	unsettled.Store(int64(p.Goroutines))
	for range p.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := false // this goroutine began a call after answered
			for time.Now().Before(deadline()) {
				if !mine && answered.Load() {
					mine = true
					if unsettled.Add(-1) == 0 {
						settled()
					}
				}
				ctx, cancel := context.WithDeadline(context.Background(), deadline())
				wait, err := fleetCall(ctx, client, p.ProviderURL+path, body)
				cancel()
				var rle *limiter.RateLimitExceededError
				switch {
				case errors.As(err, &rle):
					denied.Add(1)
					wait = rle.RetryAfter
				case err != nil && ctx.Err() == nil && time.Now().Before(deadline()):
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					wait = 10 * time.Millisecond
				case err == nil && wait > 0:
					sent.Add(1)
					limited.Add(1)
					answered.Store(true)
				case err == nil:
					sent.Add(1)
					answered.Store(true)
				}
				if wait > 0 {
					time.Sleep(min(wait, time.Until(deadline()), time.Second))
				}
			}
		}()
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	c := fleetCounts{Sent: sent.Load(), Denied: denied.Load(), Provider429: limited.Load(), Errors: errs.Load(), Series: series}
	if s, ok := firstErr.Load().(string); ok {
		c.FirstError = s
	}
	return c
}

// fleetCall makes one call; for a provider 429 it returns the provider's
// retry time.
func fleetCall(ctx context.Context, client *http.Client, url, body string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, fleetEntity, fleetResource, nil),
		http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer sk-fleet")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		ms, _ := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && ms == 0 {
			ms = s * 1000
		}
		return max(time.Duration(ms)*time.Millisecond, time.Millisecond), nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("provider answered %d", resp.StatusCode)
	}
	return 0, nil
}

// fleetSize is the run's timing and what it checks.
type fleetSize struct {
	warmup, window time.Duration
	startEmpty     bool
	tpm            int64
	// max429 and minAdmitted bound, with feedback, the share of provider
	// 429s and the admitted share of the allowed tokens: the 1 %
	// and 85 % at full size, checked by make llm-fleet. The short run of
	// make test (its window holds about 70 requests, with the race
	// detector, beside the other packages' tests) checks 50 % admitted
	// (the per-process pace this replaced admitted 9 to 26 % under load)
	// and, for 429s, at most max429OfOff times the share without feedback
	// (zero: the absolute max429 instead). On a 2-core machine loaded to
	// 8 runnable threads, about half of the short runs met 25 to 52 % of
	// 429s in one configuration (without feedback: 93 to 97 %); with the
	// machine idle, at most 1.3 % (see docs/llm.md).
	max429, minAdmitted, max429OfOff float64
}

func fleetSizeFromEnv(t testing.TB) fleetSize {
	t.Helper()
	s := fleetSize{warmup: 4 * time.Second, window: 6 * time.Second, startEmpty: true, tpm: 120_000,
		minAdmitted: 0.50, max429OfOff: 0.6}
	if os.Getenv(envFleet) == "1" {
		s = fleetSize{warmup: 10 * time.Second, window: 30 * time.Second, tpm: 120_000, max429: 0.01, minAdmitted: 0.85}
	}
	if v := os.Getenv(envFleetWindow); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, envFleetWindow)
		s.window = d
	}
	return s
}

// runFleet runs one configuration and returns its measurements.
func runFleet(t testing.TB, name string, size fleetSize, anthropic, stream, feedback bool) fleetRun {
	t.Helper()
	ctx := context.Background()
	endpoint := ddblocal.Endpoint(t)
	table := ddblocal.TableName(t)
	repo, err := limiter.OpenDynamoDB(ctx, ddblocal.NewClient(endpoint), func(o *limiter.DynamoDBOptions) {
		o.Table, o.Namespace, o.CreateTable = table, "default", true
	})
	require.NoError(t, err)
	admin := limiter.New(repo)
	defer admin.Close()
	// The provider's real limit is size.tpm; the configured one is twice it.
	require.NoError(t, admin.Admin().SetLimits(ctx, limiter.Scope{Entity: fleetEntity, Resource: fleetResource}, []limiter.Limit{
		limiter.PerMinute("rpm", 1_000_000), limiter.PerMinute("tpm", 2*size.tpm),
	}))
	provider := llmtest.NewServer(llmtest.Config{
		RPM: 500_000, TPM: size.tpm, HiddenShare: fleetHidden, OutputTokens: 100, StartEmpty: size.startEmpty,
		StreamChunks: 4,
	})
	defer provider.Close()

	params := fleetParams{Endpoint: endpoint, Table: table, Namespace: "default", ProviderURL: provider.URL,
		Anthropic: anthropic, Stream: stream, Feedback: feedback, Goroutines: fleetGoroutines}
	js, err := json.Marshal(params)
	require.NoError(t, err)
	helpers := make([]*fleetHelper, fleetProcesses)
	for i := range helpers {
		helpers[i] = startFleetHelper(t, envFleetChild+"="+string(js), size.warmup+fleetSettleBound+size.window+5*time.Minute)
	}
	for _, h := range helpers {
		select {
		case <-h.ready:
		case <-h.done:
			_, err := h.result()
			require.NoError(t, err)
			t.Fatal("helper exited before it was ready")
		}
	}
	start := time.Now()
	for _, h := range helpers {
		_, err := fmt.Fprintln(h.stdin, start.Add(size.warmup+fleetSettleBound+size.window).UnixMilli())
		require.NoError(t, err)
	}
	// The window opens after the warm-up, and once every helper settled:
	// a process learns the provider's limit from its first response, and
	// until then its acquires (the slow ones too, begun before and ending
	// after) carry other limit parameters. On a loaded machine that takes
	// longer than the warm-up.
	settleBy := time.NewTimer(size.warmup + fleetSettleBound)
	defer settleBy.Stop()
	for i, h := range helpers {
		select {
		case <-h.settled:
		case <-h.done:
			_, err := h.result()
			require.NoError(t, err)
			t.Fatalf("helper %d exited before it settled", i)
		case <-settleBy.C:
			t.Fatalf("helper %d did not settle within %s", i, size.warmup+fleetSettleBound)
		}
	}
	windowStart := start.Add(size.warmup)
	if settled := time.Now().Add(time.Second); settled.After(windowStart) {
		windowStart = settled
	}
	deadline := windowStart.Add(size.window)
	for _, h := range helpers {
		_, err := fmt.Fprintln(h.stdin, windowStart.UnixMilli(), deadline.UnixMilli())
		require.NoError(t, err)
	}
	traced := make(chan struct{})
	if os.Getenv(envFleetTrace) != "" {
		go func() {
			defer close(traced)
			for time.Until(deadline) > time.Second {
				time.Sleep(time.Second)
				t.Logf("provider %5dms %+v", time.Since(start).Milliseconds(), provider.Stats("sk-fleet"))
			}
		}()
	} else {
		close(traced)
	}
	time.Sleep(time.Until(windowStart))
	before := provider.Stats("sk-fleet")
	time.Sleep(time.Until(deadline))
	after := provider.Stats("sk-fleet")
	<-traced

	run := fleetRun{name: name}
	for _, h := range helpers {
		c, err := h.result()
		require.NoError(t, err)
		assert.Zero(t, c.Errors, "%s: errors other than denials (first: %s)", name, c.FirstError)
		run.denied += c.Denied
		run.sent += c.Sent
		run.corrections += c.Stats.Corrections
		run.cooldowns += c.Stats.Cooldowns
		run.learned += c.Stats.LimitsLearned
		decided := c.SpecWindow.Counts[store.SpecSuccess] + c.SpecWindow.Counts[store.SpecFastRejection]
		run.specAttempts += decided + c.SpecWindow.Fallbacks()
		run.specDecided += decided
		run.limitsChanged += c.SpecWindow.Counts[store.SpecFallbackLimitsChanged]
		if os.Getenv(envFleetTrace) != "" {
			t.Logf("helper spec %+v stats %+v\nwarnings:\n%s", c.Spec, c.Stats, h.stderr.String())
			for _, s := range c.Series {
				t.Logf("  %+v", s)
			}
		}
	}
	run.requests = after.Requests - before.Requests
	run.limited = after.RateLimited - before.RateLimited
	run.admitted = float64(after.Tokens - before.Tokens)
	visible := (1 - fleetHidden) * float64(size.tpm) / 60 * size.window.Seconds()
	run.allowed = visible + max(before.TokensLeft, 0)
	if run.requests > 0 {
		run.rate429 = float64(run.limited) / float64(run.requests)
	}
	run.admittedFraction = run.admitted / run.allowed
	return run
}

// TestFleetFeedback: with feedback, at most 1 % of the fleet's requests get
// a provider 429 and the admitted tokens reach 85 % of what the provider
// allowed, with OpenAI's headers (JSON bodies and streams) and Anthropic's;
// the same run without feedback is reported beside it.
func TestFleetFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test: skipped with -short")
	}
	size := fleetSizeFromEnv(t)
	full := os.Getenv(envFleet) == "1"
	var runs []fleetRun
	for _, c := range []struct {
		name                        string
		anthropic, stream, feedback bool
		short                       bool // also in the short run of make test
	}{
		{"openai json, feedback", false, false, true, true},
		{"openai json, no feedback", false, false, false, true},
		{"anthropic json, feedback", true, false, true, false},
		{"anthropic json, no feedback", true, false, false, false},
		{"openai stream, feedback", false, true, true, false},
		{"openai stream, no feedback", false, true, false, false},
		{"anthropic stream, feedback", true, true, true, true},
		{"anthropic stream, no feedback", true, true, false, false},
	} {
		if !full && !c.short {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			r := runFleet(t, c.name, size, c.anthropic, c.stream, c.feedback)
			t.Log(r)
			runs = append(runs, r)
			if c.feedback && size.max429OfOff == 0 {
				assert.LessOrEqual(t, r.rate429, size.max429, "%s: provider 429s", c.name)
			}
			if c.feedback {
				assert.GreaterOrEqual(t, r.admittedFraction, size.minAdmitted, "%s: admitted share", c.name)
				// Every process acquires with the same parameters, so
				// that the item's stored ones differ from an acquire's
				// only while the processes learn the provider's limit,
				// each from its first response, before the window opens.
				// With the per-process pace this replaced, 57 to 73 % of
				// the acquires fell back.
				assert.LessOrEqual(t, float64(r.limitsChanged), 0.05*float64(r.specAttempts),
					"%s: acquires that fell back because the item stored other limit parameters", c.name)
			}
		})
	}
	for _, r := range runs {
		t.Log(r)
	}
	byName := make(map[string]fleetRun)
	for _, r := range runs {
		byName[r.name] = r
	}
	off, okOff := byName["openai json, no feedback"]
	for _, r := range runs {
		if !strings.HasSuffix(r.name, ", feedback") || !okOff || r.requests == 0 || off.requests == 0 {
			continue
		}
		assert.Less(t, r.rate429, off.rate429, "%s: fewer provider 429s than OpenAI JSON without feedback", r.name)
		if size.max429OfOff > 0 {
			assert.LessOrEqual(t, r.rate429, size.max429OfOff*off.rate429, "%s: provider 429s against OpenAI JSON without feedback", r.name)
		}
	}
}

// BenchmarkFleetFeedback reports the fleet's provider 429s and admitted
// share, OpenAI JSON calls, with feedback and without, side by side (one
// fleet run per iteration; run it with -benchtime=1x).
func BenchmarkFleetFeedback(b *testing.B) {
	size := fleetSizeFromEnv(b)
	for _, feedback := range []bool{true, false} {
		name := "feedback=" + strconv.FormatBool(feedback)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r := runFleet(b, name, size, false, false, feedback)
				b.ReportMetric(100*r.rate429, "%429")
				b.ReportMetric(100*r.admittedFraction, "%admitted")
				b.ReportMetric(float64(r.requests), "provider-requests")
			}
		})
	}
}

// fleetHelper is a helper process as the parent sees it.
type fleetHelper struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	stdin   io.WriteCloser
	stderr  strings.Builder
	ready   chan struct{} // closed when the helper printed fleetReady
	settled chan struct{} // closed when it printed fleetSettled
	done    chan struct{} // closed when its stdout is drained
	lines   []string      // read only after done
}

func startFleetHelper(t testing.TB, env string, timeout time.Duration) *fleetHelper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFleetHelperProcess$", "-test.count=1",
		"-test.timeout="+timeout.String())
	cmd.Env = append(os.Environ(), env)
	cmd.WaitDelay = 10 * time.Second
	h := &fleetHelper{cmd: cmd, cancel: cancel, ready: make(chan struct{}),
		settled: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &h.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	h.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			h.lines = append(h.lines, sc.Text())
			switch sc.Text() {
			case fleetReady:
				close(h.ready)
			case fleetSettled:
				close(h.settled)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		<-h.done
		_ = cmd.Wait()
	})
	return h
}

// result waits for the helper and decodes its counts.
func (h *fleetHelper) result() (fleetCounts, error) {
	h.stdin.Close()
	<-h.done
	err := h.cmd.Wait()
	out := fmt.Sprintf("stdout:\n%s\nstderr:\n%s", strings.Join(h.lines, "\n"), h.stderr.String())
	if err != nil {
		return fleetCounts{}, fmt.Errorf("helper: %w\n%s", err, out)
	}
	for _, l := range h.lines {
		if js, ok := strings.CutPrefix(l, fleetResult+" "); ok {
			var c fleetCounts
			return c, json.Unmarshal([]byte(js), &c)
		}
	}
	return fleetCounts{}, fmt.Errorf("helper printed no result\n%s", out)
}
