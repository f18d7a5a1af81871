// Command quickstart shows the limiter at work against DynamoDB Local: limits
// stored at two levels of the config hierarchy, two API keys cascading to
// their project, a burst of LLM-style calls that estimate their tokens,
// adjust to the real count and commit, denials with Retry-After, one failed
// call rolled back, and the speculative fast-path counters.
//
// Run it with `make demo`. It starts DynamoDB Local through internal/ddblocal
// (or uses $ZAEL_DYNAMODB_ENDPOINT when set) and stops it before exiting.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// The demo's table, entities and resource.
const (
	demoTable = "zae-limiter-demo"
	project   = "proj-acme"
	resource  = "gpt-4o"
	// calls is the length of the burst; failingCall is the call whose
	// "LLM" fails.
	calls       = 12
	failingCall = 3
	// estimate is the tpm every call reserves before the LLM answers.
	estimate = 500
)

// keys are the API keys; calls alternate between them.
var keys = []string{"key-alice", "key-bob"}

// errLLM is the failure of the simulated LLM call.
var errLLM = errors.New("LLM: 503 upstream overloaded")

func main() {
	if err := demo(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// demo starts DynamoDB Local, runs the demo and stops the server. It returns
// its error instead of exiting, so that the deferred Close always runs.
func demo() (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, ddblocal.StartTimeout)
	defer cancel()
	srv, err := ddblocal.Start(startCtx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := srv.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stop DynamoDB Local: %w", cerr)
		}
	}()
	fmt.Printf("DynamoDB Local (%s) at %s, ready in %v\n",
		srv.Source(), srv.Endpoint(), srv.StartDuration().Round(10*time.Millisecond))

	_, err = run(ctx, os.Stdout, ddblocal.NewClient(srv.Endpoint()), demoTable, time.Now)
	return err
}

// tally counts the outcomes of the burst.
type tally struct {
	admitted, denied, rolledBack int
}

// run is the demo proper: it sets up entities and limits in table, runs the
// burst and writes a short report to w. now is the limiter's clock (the
// demo passes time.Now, the test a frozen clock, so that no tokens refill
// while it runs).
func run(ctx context.Context, w io.Writer, client limiter.DynamoDBClient, table string, now func() time.Time) (tally, error) {
	var t tally
	repo, err := limiter.OpenDynamoDB(ctx, client, func(o *limiter.DynamoDBOptions) {
		o.Table = table
		o.CreateTable = true
		o.Now = now
	})
	if err != nil {
		return t, err
	}
	rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = now }) // speculative writes are on by default

	if err := setup(ctx, rl); err != nil {
		return t, err
	}
	fmt.Fprintf(w, "table %s: project %s (entity limits: rpm 100, tpm 5000 per minute)\n", table, project)
	fmt.Fprintf(w, "  api keys %s cascade to it (%s resource defaults: rpm 20, tpm 3000)\n",
		strings.Join(keys, ", "), resource)
	fmt.Fprintf(w, "each call: Acquire rpm 1 + tpm %d (estimate), LLM, Adjust tpm by actual-estimate, Commit\n\n", estimate)
	fmt.Fprintf(w, "%-4s %-9s %6s  %-20s %s\n", "call", "key", "actual", "tpm left key/project", "outcome")

	rng := rand.New(rand.NewPCG(2026, 1)) // deterministic "LLM" token counts
	for i := 1; i <= calls; i++ {
		key := keys[(i-1)%len(keys)]
		actual := 300 + rng.Int64N(1200)
		var llmErr error
		if i == failingCall {
			llmErr = errLLM
		}
		err := llmCall(ctx, rl, key, actual, llmErr)

		var outcome string
		var rle *limiter.RateLimitExceededError
		switch {
		case err == nil:
			t.admitted++
			outcome = fmt.Sprintf("admitted, adjusted %+d, committed", actual-estimate)
		case errors.As(err, &rle):
			t.denied++
			actual = 0
			outcome = fmt.Sprintf("denied by %s %s, Retry-After: %s (%v)", rle.Primary.EntityID,
				rle.Primary.LimitName, rle.RetryAfterHeader(), rle.RetryAfter.Round(10*time.Millisecond))
		case errors.Is(err, errLLM):
			t.rolledBack++
			actual = 0
			outcome = "LLM failed -> rolled back"
		default:
			return t, fmt.Errorf("call %d: %w", i, err)
		}
		keyLeft, err := rl.Available(ctx, key, resource)
		if err != nil {
			return t, err
		}
		projectLeft, err := rl.Available(ctx, project, resource)
		if err != nil {
			return t, err
		}
		shown := "-"
		if actual > 0 {
			shown = fmt.Sprint(actual)
		}
		fmt.Fprintf(w, "%4d %-9s %6s  %8d / %-9d %s\n", i, key, shown, keyLeft["tpm"], projectLeft["tpm"], outcome)
	}

	st := rl.Stats().Speculative
	var counts []string
	for o, n := range st.Counts {
		if n > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", store.SpeculativeOutcome(o), n))
		}
	}
	fmt.Fprintf(w, "\n%d admitted, %d denied, %d rolled back\n", t.admitted, t.denied, t.rolledBack)
	fmt.Fprintf(w, "speculative fast path: %d attempts, %d fell back to read+write\n", st.Attempts, st.Fallbacks())
	fmt.Fprintf(w, "  %s\n", strings.Join(counts, ", "))
	return t, nil
}

// setup stores the limits and creates the entities. It first deletes the
// demo's entities (with their buckets), so that a run against a persistent
// $ZAEL_DYNAMODB_ENDPOINT starts from full buckets too.
func setup(ctx context.Context, rl *limiter.RateLimiter) error {
	for _, id := range append([]string{project}, keys...) {
		if err := rl.Admin().DeleteEntity(ctx, id); err != nil {
			return err
		}
	}
	// Entity level, for every resource of the project: the "_default_" slot.
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: project, Resource: limiter.DefaultResource}, []limiter.Limit{
		limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 5000),
	}); err != nil {
		return err
	}
	// Resource level: every entity without limits of its own gets these on gpt-4o.
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: resource}, []limiter.Limit{
		limiter.PerMinute("rpm", 20), limiter.PerMinute("tpm", 3000),
	}); err != nil {
		return err
	}
	if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: project, Name: "Acme Inc."}); err != nil {
		return err
	}
	for _, key := range keys {
		if _, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: key, ParentID: project, Cascade: true}); err != nil {
			return err
		}
	}
	return nil
}

// llmCall is one rate-limited LLM call: reserve the estimate, call the
// "LLM", reconcile with the real token count and commit. When the LLM fails
// the deferred Rollback gives the reservation back.
func llmCall(ctx context.Context, rl *limiter.RateLimiter, key string, actual int64, llmErr error) error {
	lease, err := rl.Acquire(ctx, key, resource, limiter.Consume{"rpm": 1, "tpm": estimate})
	if err != nil {
		return err // *limiter.RateLimitExceededError when denied
	}
	defer lease.Rollback(ctx) // no-op after Commit

	if llmErr != nil { // the simulated LLM call
		return llmErr
	}
	if err := lease.Adjust(limiter.Consume{"tpm": actual - estimate}); err != nil {
		return err
	}
	return lease.Commit(ctx)
}
