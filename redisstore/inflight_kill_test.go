package redisstore_test

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
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
)

// Environment of the child process of TestInFlightKill9.
const (
	killChildAddr   = "ZAEL_INFLIGHT_CHILD_ADDR"
	killChildPrefix = "ZAEL_INFLIGHT_CHILD_PREFIX"
	killSlotTTL     = 2 * time.Second
)

var killLimits = limiter.WithLimits(limiter.InFlight("calls", 8))

// TestInFlightKill9 starts a copy of the test binary that takes all 8
// slots of a key on redis-server and keeps them; while it lives, through
// several slot TTLs of renewals, every acquire of this process is refused;
// once it is killed with SIGKILL, the 8 slots are free again within the
// slot TTL + 1 s.
func TestInFlightKill9(t *testing.T) {
	addr, prefix := redisserver.Addr(t), redisserver.Prefix(t)
	s, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = prefix })
	require.NoError(t, err)
	rl := limiter.New(s, func(o *limiter.Options) { o.SlotTTL = killSlotTTL })
	defer func() { _ = rl.Close() }()
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildAddr+"="+addr, killChildPrefix+"="+prefix)
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
	for len(leases) < 8 {
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
}

// TestInFlightKill9Child is the child of TestInFlightKill9: it takes 8
// slots, says so, and holds them until it is killed.
func TestInFlightKill9Child(t *testing.T) {
	addr := os.Getenv(killChildAddr)
	if addr == "" {
		t.Skip("run by TestInFlightKill9")
	}
	client := redis.NewClient(redisserver.ClientOptions(addr))
	s, err := redisstore.New(client, func(o *redisstore.Options) { o.Prefix = os.Getenv(killChildPrefix) })
	require.NoError(t, err)
	rl := limiter.New(s, func(o *limiter.Options) { o.SlotTTL = killSlotTTL })
	for range 8 {
		_, err := rl.Acquire(context.Background(), "k", "gpt", limiter.Consume{"calls": 1}, killLimits)
		require.NoError(t, err)
	}
	os.Stdout.WriteString("HELD 8\n")
	time.Sleep(time.Minute) // bounded, should the parent die without killing it
}
