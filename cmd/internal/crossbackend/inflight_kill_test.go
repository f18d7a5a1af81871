package crossbackend_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/redisserver"
)

// Environment and slot TTL of the child of TestInFlightKill9.
const (
	envHoldChild  = "ZAEL_INFLIGHT_HOLD"
	killSlotTTL   = 2 * time.Second
	killSlotCount = 8
)

var killLimits = limiter.WithLimits(limiter.InFlight("calls", killSlotCount))

// TestInFlightKill9 starts, on redis-server and on DynamoDB Local, a copy
// of the test binary that takes all 8 slots of a key and keeps them (its
// renewals); while it lives, through several slot TTLs, every acquire of
// this process is refused; once it is killed with SIGKILL, the 8 slots
// are free again within the slot TTL + 1 s, and no more than 8.
func TestInFlightKill9(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		addr, prefix := redisserver.Addr(t), redisserver.Prefix(t)
		repo := openRedisPrefix(t, redis.NewClient(redisserver.ClientOptions(addr)), prefix)
		killAndRecover(t, repo, envChildBackend+"=redis", envChildRedisAddr+"="+addr, envChildPrefix+"="+prefix)
	})
	t.Run("dynamodb", func(t *testing.T) {
		endpoint := ddblocal.Endpoint(t)
		repo, _, table := openDynamoDBTable(t)
		killAndRecover(t, repo, envChildBackend+"=dynamodb", envChildEndpoint+"="+endpoint, envChildTable+"="+table)
	})
}

// killAndRecover is TestInFlightKill9 on repo, whose child opens the same
// store from env.
func killAndRecover(t *testing.T, repo limiter.Repository, env ...string) {
	rl := limiter.New(repo, func(o *limiter.Options) { o.SlotTTL = killSlotTTL })
	defer rl.Close()
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightKill9Child$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), envHoldChild+"=1"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(out)
	held := false
	for !held && lines.Scan() {
		held = strings.Contains(lines.Text(), "HELD 8")
	}
	require.True(t, held, "the child never took its slots")
	go func() { // drain the child's output
		for lines.Scan() {
		}
	}()

	for end := time.Now().Add(3 * killSlotTTL); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killLimits)
		require.ErrorIs(t, err, limiter.ErrRateLimited, "a slot of the live child was taken")
	}

	require.NoError(t, cmd.Process.Signal(os.Kill))
	killed = true
	_ = cmd.Wait()
	start := time.Now()
	var leases []*limiter.Lease
	for len(leases) < killSlotCount {
		lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killLimits)
		if err == nil {
			leases = append(leases, lease)
			continue
		}
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		require.Less(t, time.Since(start), killSlotTTL+time.Second, "slots of the killed process: %d of 8 back", len(leases))
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("8 slots back %v after kill -9 (slot TTL %v)", time.Since(start).Round(time.Millisecond), killSlotTTL)
	_, err = rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killLimits)
	require.ErrorIs(t, err, limiter.ErrRateLimited, "never more than 8")
	for _, l := range leases {
		require.NoError(t, l.Commit(ctx))
	}
	free, err := rl.Available(ctx, "k", "gpt", killLimits)
	require.NoError(t, err)
	require.Equal(t, int64(killSlotCount), free["calls"])
}

// TestInFlightKill9Child is the child of TestInFlightKill9: it takes 8
// slots of the store its environment names, says so, and holds them
// until it is killed.
func TestInFlightKill9Child(t *testing.T) {
	if os.Getenv(envHoldChild) == "" {
		t.Skip("run by TestInFlightKill9")
	}
	repo := openChildRepo(t, 8)
	require.NotNil(t, repo)
	rl := limiter.New(repo, func(o *limiter.Options) { o.SlotTTL = killSlotTTL })
	for range killSlotCount {
		_, err := rl.Acquire(context.Background(), "k", "gpt", limiter.Consume{"calls": 1}, killLimits)
		require.NoError(t, err)
	}
	os.Stdout.WriteString("HELD 8\n")
	time.Sleep(time.Minute) // bounded, should the parent die without killing it
}
