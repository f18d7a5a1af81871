package crossbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// The cascade contention case: two limiters (two processes' worth of
// RateLimiters on one store) × 32 goroutines, two keys cascading to one
// parent, every limit 150 per hour. Each goroutine acquires 1 and commits
// until a refusal that reports a real shortage; the parent then admitted
// exactly its 150 (plus the refill of the run, a token per 24 s), and no
// refusal came while tokens remained. A package that runs it declares
// TestCPUBurnerProcess (see CPUBurnerProcess).
const (
	cascadeParent     = "cc-parent"
	cascadeResource   = "gpt-4"
	cascadeLimiters   = 2
	cascadeGoroutines = 32
	cascadeCapacity   = 150
	// cascadeMaxAttempts bounds one goroutine's attempts: far above what a
	// fair share of 150 tokens needs, so that a run where refusals never
	// report a shortage ends.
	cascadeMaxAttempts = 400
	// cascadeOpTimeout bounds one call, as a request's deadline would.
	cascadeOpTimeout = 30 * time.Second
	// The Retry-After of a contended refusal: the limiter's read-then-write
	// acquire whose writes lost the race for its items eight times in a
	// row (or whose deadline came before the next read) is refused with
	// the next jittered backoff as its Retry-After, between half the
	// backoff's base (5 ms) and its ceiling (160 ms), every limit it asked
	// for marked exceeded though its last read showed tokens enough: the
	// items are too contended to serve it now. A refusal no shortage
	// explains gets 1 ms (and counts in the limiter's broken refusals).
	contendedRetryMin = 2500 * time.Microsecond
	contendedRetryMax = 160 * time.Millisecond
	// cascadeMaxContended is the share of a slow run's attempts that may
	// end in a contended refusal (1 in 20); a run is slow when its p90
	// acquire latency is at least cascadeSlowP90, as when DynamoDB Local
	// shares a busy machine (p90 of 5 to 22 s was seen, against tens of
	// milliseconds on a quiet one).
	cascadeMaxContended = 20
	cascadeSlowP90      = time.Second
)

var cascadeKeys = []string{"cc-k1", "cc-k2"}

// cascadeLimits are every acquire's limits: the keys and the parent alike.
var cascadeLimits = limiter.WithLimits(limiter.PerHour("rpm", cascadeCapacity))

// cascadeCounts is what one run did.
type cascadeCounts struct {
	attempts, admitted, refused atomic.Int64
	// falseRefusals counts refusals whose error says tokens remained (a
	// violation with Available ≥ Requested) and that are not contended;
	// contended those that are (every violation with tokens remaining, a
	// Retry-After of the lost-race backoff); zeroRetry those with
	// RetryAfter ≤ 0.
	falseRefusals, contended, zeroRetry atomic.Int64
	errors                              atomic.Int64

	mu       sync.Mutex
	messages []string // the first few unexpected errors and false refusals
	lat      []time.Duration
	p90      time.Duration // of lat, once the run ended
}

func (c *cascadeCounts) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.messages) < 10 {
		c.messages = append(c.messages, fmt.Sprintf(format, args...))
	}
}

func (c *cascadeCounts) String() string {
	return fmt.Sprintf("%d attempts, %d admitted, %d refused (%d while tokens remained, %d contended, %d with RetryAfter ≤ 0), %d other errors",
		c.attempts.Load(), c.admitted.Load(), c.refused.Load(), c.falseRefusals.Load(), c.contended.Load(), c.zeroRetry.Load(), c.errors.Load())
}

// runCascade sets up the entities on repo and runs the workload
// with opts on every limiter.
func runCascade(t *testing.T, repo limiter.Repository, opts ...func(*limiter.Options)) *cascadeCounts {
	t.Helper()
	ctx := context.Background()
	admin := limiter.New(repo)
	_, err := admin.Admin().CreateEntity(ctx, limiter.Entity{ID: cascadeParent})
	require.NoError(t, err)
	for _, k := range cascadeKeys {
		_, err := admin.Admin().CreateEntity(ctx, limiter.Entity{ID: k, ParentID: cascadeParent, Cascade: true})
		require.NoError(t, err)
	}
	require.NoError(t, admin.Close())

	var c cascadeCounts
	var wg sync.WaitGroup
	var limiters []*limiter.RateLimiter
	start := make(chan struct{})
	for range cascadeLimiters {
		rl := limiter.New(repo, opts...)
		limiters = append(limiters, rl)
		for g := range cascadeGoroutines {
			key := cascadeKeys[g%len(cascadeKeys)]
			wg.Go(func() {
				<-start
				for range cascadeMaxAttempts {
					if c.attempt(rl, key) {
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for _, rl := range limiters {
		require.NoError(t, rl.Close())
		t.Logf("speculative: %+v", rl.Stats().Speculative)
	}
	c.mu.Lock()
	slices.Sort(c.lat)
	if n := len(c.lat); n > 0 {
		c.p90 = c.lat[n*9/10]
		t.Logf("acquire latency p50 %v p90 %v max %v", c.lat[n/2], c.lat[n*9/10], c.lat[n-1])
	}
	c.mu.Unlock()
	return &c
}

// attempt acquires 1 on key and commits; it reports true when the
// acquire was refused for a real shortage.
func (c *cascadeCounts) attempt(rl *limiter.RateLimiter, key string) (stop bool) {
	ctx, cancel := context.WithTimeout(context.Background(), cascadeOpTimeout)
	defer cancel()
	c.attempts.Add(1)
	t0 := time.Now()
	lease, err := rl.Acquire(ctx, key, cascadeResource, limiter.Consume{"rpm": 1}, cascadeLimits)
	c.mu.Lock()
	c.lat = append(c.lat, time.Since(t0))
	c.mu.Unlock()
	var rle *limiter.RateLimitExceededError
	switch {
	case errors.As(err, &rle):
		c.refused.Add(1)
		real := true
		if rle.RetryAfter <= 0 {
			c.zeroRetry.Add(1)
			real = false
		}
		remained := 0
		for _, v := range rle.Violations {
			if v.Available >= v.Requested {
				remained++
			}
		}
		switch {
		case remained == 0:
		case remained == len(rle.Violations) && rle.RetryAfter >= contendedRetryMin && rle.RetryAfter <= contendedRetryMax:
			c.contended.Add(1)
			real = false
			c.note("contended (lost every race): %v (violations %+v)", err, rle.Violations)
		default:
			c.falseRefusals.Add(1)
			real = false
			c.note("refused while tokens remained: %v (violations %+v)", err, rle.Violations)
		}
		return real
	case err != nil:
		c.errors.Add(1)
		c.note("acquire: %v", err)
		return true
	}
	if err := lease.Commit(ctx); err != nil {
		c.errors.Add(1)
		c.note("commit: %v", err)
		return true
	}
	c.admitted.Add(1)
	return false
}

// checkCascade asserts the counts of a run that took span. In a slow run
// (p90 latency at least cascadeSlowP90), a few acquires may be refused as
// contended: with writes taking seconds, an acquire can lose its race
// eight times in a row, and the limiter then refuses it with a short
// Retry-After rather than reading again without end. In a run that is not
// slow, and for any other refusal while tokens remain, that fails the run.
func checkCascade(t *testing.T, c *cascadeCounts, span time.Duration) {
	t.Helper()
	t.Logf("%v in %v", c, span.Round(time.Millisecond))
	earned := int64(span / (time.Hour / cascadeCapacity)) // the refill of the run
	assert.Equal(t, int64(0), c.errors.Load(), "errors: %v", c.messages)
	assert.Equal(t, int64(0), c.falseRefusals.Load(), "refusals while tokens remained: %v", c.messages)
	if c.p90 >= cascadeSlowP90 {
		assert.LessOrEqual(t, c.contended.Load(), c.attempts.Load()/cascadeMaxContended, "contended refusals in a slow run (p90 %v), want at most 1 in %d attempts: %v", c.p90, cascadeMaxContended, c.messages)
	} else {
		assert.Equal(t, int64(0), c.contended.Load(), "contended refusals (lost every race) in a run with p90 latency %v: %v", c.p90, c.messages)
	}
	assert.Equal(t, int64(0), c.zeroRetry.Load(), "refusals with RetryAfter ≤ 0: %v", c.messages)
	admitted := c.admitted.Load()
	assert.GreaterOrEqual(t, admitted, int64(cascadeCapacity), "admitted %d, want the parent's %d", admitted, cascadeCapacity)
	assert.LessOrEqual(t, admitted, cascadeCapacity+earned, "admitted %d, want at most %d + %d earned", admitted, cascadeCapacity, earned)
}

// Backend names a backend and opens a repository on it for one test.
type Backend struct {
	Name string
	Open func(t *testing.T) limiter.Repository
}

// CascadeContention runs the cascade contention case on each backend, with
// group commit on (the default) and off, on a quiet machine and with two
// CPU-bound processes beside the test (see startCPUBurners), and checks
// each run with checkCascade. On "dynamodb", group commit off runs only
// on a quiet machine: without group commit the 64 writers of the parent's
// item queue on its lock in DynamoDB Local, and beside the burners some
// outwait its lock timeout or the write's (errors, not refusals). watch,
// when not nil, is called before each run and the function it returns
// after it, for checks of the caller's own.
func CascadeContention(t *testing.T, backends []Backend, watch func(t *testing.T) func()) {
	if testing.Short() {
		t.Skip("contention test: skipped with -short")
	}
	for _, load := range []string{"quiet", "loaded"} {
		for _, b := range backends {
			for _, gc := range []bool{true, false} {
				if b.Name == "dynamodb" && load == "loaded" && !gc {
					continue
				}
				name := fmt.Sprintf("%s/%s/group-commit=%v", load, b.Name, gc)
				t.Run(name, func(t *testing.T) {
					repo := b.Open(t)
					if load == "loaded" {
						startCPUBurners(t, 2)
					}
					if watch != nil {
						defer watch(t)()
					}
					start := time.Now()
					c := runCascade(t, repo, func(o *limiter.Options) { o.GroupCommit = gc })
					checkCascade(t, c, time.Since(start))
				})
			}
		}
	}
}

// envCPUBurner=1 makes TestCPUBurnerProcess spin.
const envCPUBurner = "ZAEL_CPU_BURNER"

// cpuBurnerMax bounds a burner's life if its parent never stops it.
const cpuBurnerMax = 2 * time.Minute

// startCPUBurners starts n CPU-bound processes (re-executions of the test
// binary) that spin until the test ends (a cleanup kills them and waits),
// and at most cpuBurnerMax.
func startCPUBurners(t *testing.T, n int) {
	t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), cpuBurnerMax)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCPUBurnerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCPUBurner+"=1", "GOMAXPROCS=1")
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start CPU burner: %v", err)
		}
		t.Cleanup(func() {
			cancel()
			_ = cmd.Wait()
		})
	}
}

// CPUBurnerProcess is the CPU-bound process of startCPUBurners: a test
// package that starts burners declares
//
//	func TestCPUBurnerProcess(t *testing.T) { crossbackend.CPUBurnerProcess(t) }
//
// It does nothing unless ZAEL_CPU_BURNER=1; then it spins for cpuBurnerMax.
func CPUBurnerProcess(t *testing.T) {
	if os.Getenv(envCPUBurner) != "1" {
		return
	}
	deadline := time.Now().Add(cpuBurnerMax)
	x := uint64(1)
	for time.Now().Before(deadline) {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	// Used, so that the arithmetic is not optimised away.
	t.Logf("burned to %#x", x)
}
