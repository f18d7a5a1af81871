package crossbackend_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// Environment and slot TTL of the child of TestInFlightKill9DynamoDB.
const (
	envHoldChild     = "ZAEL_INFLIGHT_HOLD"
	killDDBSlotTTL   = 2 * time.Second
	killDDBSlotCount = 8
)

var killDDBLimits = limiter.WithLimits(limiter.InFlight("calls", killDDBSlotCount))

// TestInFlightKill9DynamoDB starts a copy of the test binary that takes
// all 8 slots of a key on DynamoDB Local and keeps them (its renewals);
// while it lives, through several slot TTLs, every acquire of this
// process is refused; once it is killed with SIGKILL, the 8 slots are
// free again within the slot TTL + 1 s, and no more than 8.
func TestInFlightKill9DynamoDB(t *testing.T) {
	endpoint := ddblocal.Endpoint(t)
	repo, _, table := openDynamoDBTable(t)
	rl := limiter.New(repo, func(o *limiter.Options) { o.SlotTTL = killDDBSlotTTL })
	defer rl.Close()
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestInFlightKill9DynamoDBChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHoldChild+"=1",
		envChildBackend+"=dynamodb", envChildEndpoint+"="+endpoint, envChildTable+"="+table)
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

	for end := time.Now().Add(3 * killDDBSlotTTL); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		_, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killDDBLimits)
		require.ErrorIs(t, err, limiter.ErrRateLimited, "a slot of the live child was taken")
	}

	require.NoError(t, cmd.Process.Signal(os.Kill))
	killed = true
	_ = cmd.Wait()
	start := time.Now()
	var leases []*limiter.Lease
	for len(leases) < killDDBSlotCount {
		lease, err := rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killDDBLimits)
		if err == nil {
			leases = append(leases, lease)
			continue
		}
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		require.Less(t, time.Since(start), killDDBSlotTTL+time.Second, "slots of the killed process: %d of 8 back", len(leases))
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("8 slots back %v after kill -9 (slot TTL %v)", time.Since(start).Round(time.Millisecond), killDDBSlotTTL)
	_, err = rl.Acquire(ctx, "k", "gpt", limiter.Consume{"calls": 1}, killDDBLimits)
	require.ErrorIs(t, err, limiter.ErrRateLimited, "never more than 8")
	for _, l := range leases {
		require.NoError(t, l.Commit(ctx))
	}
	free, err := rl.Available(ctx, "k", "gpt", killDDBLimits)
	require.NoError(t, err)
	require.Equal(t, int64(killDDBSlotCount), free["calls"])
}

// TestInFlightKill9DynamoDBChild is the child of TestInFlightKill9DynamoDB:
// it takes 8 slots, says so, and holds them until it is killed.
func TestInFlightKill9DynamoDBChild(t *testing.T) {
	if os.Getenv(envHoldChild) == "" {
		t.Skip("run by TestInFlightKill9DynamoDB")
	}
	repo := openChildRepo(t, 8)
	require.NotNil(t, repo)
	rl := limiter.New(repo, func(o *limiter.Options) { o.SlotTTL = killDDBSlotTTL })
	for range killDDBSlotCount {
		_, err := rl.Acquire(context.Background(), "k", "gpt", limiter.Consume{"calls": 1}, killDDBLimits)
		require.NoError(t, err)
	}
	os.Stdout.WriteString("HELD 8\n")
	time.Sleep(time.Minute) // bounded, should the parent die without killing it
}
