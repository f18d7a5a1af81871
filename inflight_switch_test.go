package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInFlightKindSwitch switches a stored limit from in-flight to rolling
// and back while leases hold slots, on DynamoDB Local and memory: the
// rolling limit of the same name is a limit of its own (its slots are
// not spent by the leases, and it starts full), the leases still hold
// their slots when the in-flight limit is back (the cap counts them), and
// their commits give them back.
func TestInFlightKindSwitch(t *testing.T) {
	t.Parallel()
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		rl := New(repo, func(o *Options) { o.Clock = clock }, func(o *Options) { o.SlotTTL = time.Hour })
		defer func() { _ = rl.Close() }()
		ctx := context.Background()
		inflight := []Limit{InFlight("calls", 2), PerMinute("rpm", 1000)}
		call := Consume{"calls": 1, "rpm": 1}
		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "m"}, inflight))
		l1 := mustAcquire(t, rl, "e", "m", call)
		l2 := mustAcquire(t, rl, "e", "m", call)
		_, err := rl.Acquire(ctx, "e", "m", call)
		require.ErrorIs(t, err, ErrRateLimited, "both slots held")

		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "m"}, []Limit{PerMinute("calls", 3), PerMinute("rpm", 1000)}))
		for range 3 {
			mustCommit(t, mustAcquire(t, rl, "e", "m", call))
		}
		_, err = rl.Acquire(ctx, "e", "m", call)
		require.ErrorIs(t, err, ErrRateLimited, "the rolling limit of the same name is spent")
		mustCommit(t, l1)

		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "m"}, inflight))
		l3 := mustAcquire(t, rl, "e", "m", call)
		_, err = rl.Acquire(ctx, "e", "m", call)
		require.ErrorIs(t, err, ErrRateLimited, "l2 still holds its slot")
		mustCommit(t, l2)
		mustCommit(t, l3)
		free, err := rl.Available(ctx, "e", "m")
		require.NoError(t, err)
		require.Equal(t, int64(2), free["calls"])
	})
}

// TestInFlightEntityRecreated deletes an entity while a lease holds its
// slot and creates it again: the new item starts with every slot free,
// and the old lease's commit gives nothing back to it (the slots of the
// new item stay exact).
func TestInFlightEntityRecreated(t *testing.T) {
	t.Parallel()
	bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
		rl := New(repo, func(o *Options) { o.Clock = clock }, func(o *Options) { o.SlotTTL = time.Hour })
		defer func() { _ = rl.Close() }()
		ctx := context.Background()
		limits := []Limit{InFlight("calls", 2), PerMinute("rpm", 1000)}
		call := Consume{"calls": 1, "rpm": 1}
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "e"})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "m"}, limits))
		old := mustAcquire(t, rl, "e", "m", call)
		require.NoError(t, rl.Admin().DeleteEntity(ctx, "e"))
		_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "e"})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "m"}, limits))
		a := mustAcquire(t, rl, "e", "m", call)
		b := mustAcquire(t, rl, "e", "m", call)
		_, err = rl.Acquire(ctx, "e", "m", call)
		require.ErrorIs(t, err, ErrRateLimited)
		mustCommit(t, old)
		_, err = rl.Acquire(ctx, "e", "m", call)
		require.ErrorIs(t, err, ErrRateLimited, "the old lease gave nothing back to the new item")
		mustCommit(t, a)
		mustCommit(t, b)
		free, err := rl.Available(ctx, "e", "m")
		require.NoError(t, err)
		require.Equal(t, int64(2), free["calls"])
	})
}

// TestInFlightCommitPaths ends leases with slots through group commit and
// background commit, on DynamoDB Local and memory: each commit gives its
// slots back (a cap of 2 admits again at once), and at the end every
// slot is free.
func TestInFlightCommitPaths(t *testing.T) {
	t.Parallel()
	for _, bg := range []bool{false, true} {
		t.Run(map[bool]string{false: "group", true: "background"}[bg], func(t *testing.T) {
			bgRepos(t, func(t *testing.T, repo Repository, clock func() time.Time) {
				rl := New(repo, func(o *Options) { o.Clock = clock }, func(o *Options) { o.SlotTTL = time.Hour }, func(o *Options) { o.GroupCommit = true }, func(o *Options) { o.BackgroundCommit = bg })
				defer func() { _ = rl.Close() }()
				ctx := context.Background()
				opt := WithLimits(InFlight("calls", 2), PerMinute("tpm", 1_000_000))
				call := Consume{"calls": 1, "tpm": 10}
				for range 10 {
					a, err := rl.Acquire(ctx, "e", "m", call, opt)
					require.NoError(t, err)
					b, err := rl.Acquire(ctx, "e", "m", call, opt)
					require.NoError(t, err)
					_, err = rl.Acquire(ctx, "e", "m", call, opt)
					require.ErrorIs(t, err, ErrRateLimited)
					require.NoError(t, a.Adjust(Consume{"tpm": 5}))
					require.NoError(t, a.Commit(ctx))
					require.NoError(t, b.Commit(ctx))
				}
				free, err := rl.Available(ctx, "e", "m", opt)
				require.NoError(t, err)
				require.Equal(t, int64(2), free["calls"])
			})
		})
	}
}
