package limiter

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseWhileInUse: Close runs while goroutines acquire, adjust,
// commit and roll back, with background commit on and off: it never
// panics (a Commit during Close once reused a WaitGroup before its Wait
// returned), returns once the calls in progress ended, and every call
// that starts after it fails with ErrClosed. Bounded rounds, no timing.
func TestCloseWhileInUse(t *testing.T) {
	t.Parallel()
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	for _, bg := range []bool{true, false} {
		t.Run(map[bool]string{true: "background", false: "sync"}[bg], func(t *testing.T) {
			for range rounds {
				closeRound(t, bg)
			}
		})
	}
}

// closeRound runs one round of TestCloseWhileInUse.
func closeRound(t *testing.T, bg bool) {
	ctx := context.Background()
	rl := New(newMemory(), func(o *Options) { o.BackgroundCommit = bg })
	if rl.commits != nil {
		rl.commits.delay = 0 // the delay ends at once: writes race with Close
	}
	lim := WithLimits(PerMinute("tpm", 1_000_000))
	const workers, ops = 4, 20
	var wg sync.WaitGroup
	started := make(chan struct{}, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			started <- struct{}{}
			for i := range ops {
				lease, err := rl.Acquire(ctx, "e", "api", Consume{"tpm": 10}, lim)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				if err := lease.Adjust(Consume{"tpm": int64(w - 2)}); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					err = lease.Rollback(ctx)
				} else {
					err = lease.Commit(ctx)
				}
				if err != nil && !errors.Is(err, ErrClosed) {
					errs <- err
					return
				}
			}
		})
	}
	<-started
	require.NoError(t, rl.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, err := rl.Acquire(ctx, "e", "api", Consume{"tpm": 1}, lim)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, rl.Close(), "Close twice")
}

// TestCallsAfterClose: every call that reads or writes the store fails
// with ErrClosed after Close, a lease acquired before it can be neither
// committed nor rolled back, and a Wait sleeping for a refill wakes with
// ErrClosed.
func TestCallsAfterClose(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: epoch}
	rl := New(newMemory(), func(o *Options) { o.Clock = clock.now })
	lim := WithLimits(PerMinute("rpm", 1))
	lease, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.NoError(t, err)
	held, err := rl.Acquire(ctx, "f", "api", Consume{"rpm": 1}, lim)
	require.NoError(t, err)
	require.NoError(t, held.Commit(ctx))

	// A Wait on the exhausted bucket sleeps (retry after a minute) until
	// Close wakes it.
	sleeping := make(chan struct{})
	rl.sleep = func(ctx context.Context, d time.Duration) error {
		close(sleeping)
		<-ctx.Done()
		return ctx.Err()
	}
	waited := make(chan error, 1)
	go func() {
		_, err := rl.Wait(ctx, "f", "api", Consume{"rpm": 1}, lim)
		waited <- err
	}()
	<-sleeping
	require.NoError(t, rl.Close())
	require.ErrorIs(t, <-waited, ErrClosed)

	require.ErrorIs(t, lease.Commit(ctx), ErrClosed)
	require.ErrorIs(t, lease.Rollback(ctx), ErrClosed)
	_, err = rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = rl.AcquireAll(ctx, []AcquireRequest{{EntityID: "e", Resource: "api", Consume: Consume{"rpm": 1}}}, lim)
	require.ErrorIs(t, err, ErrClosed)
	_, err = rl.Wait(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrClosed)
	ran := false
	err = rl.Do(ctx, "e", "api", Consume{"rpm": 1}, func(context.Context, *Lease) error { ran = true; return nil }, lim)
	require.ErrorIs(t, err, ErrClosed)
	assert.False(t, ran)
	_, err = rl.Available(ctx, "e", "api", lim)
	require.ErrorIs(t, err, ErrClosed)
	_, err = rl.TimeUntilAvailable(ctx, "e", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "api"}, []Limit{PerMinute("rpm", 5)}), ErrClosed)
	require.ErrorIs(t, rl.Admin().SetLimits(ctx, Scope{Resource: "api"}, []Limit{PerMinute("rpm", 5)}), ErrClosed)
	require.ErrorIs(t, rl.Admin().SetLimits(ctx, Scope{}, []Limit{PerMinute("rpm", 5)}), ErrClosed)
	require.ErrorIs(t, rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: "api"}), ErrClosed)
	require.ErrorIs(t, rl.Admin().DeleteLimits(ctx, Scope{Resource: "api"}), ErrClosed)
	require.ErrorIs(t, rl.Admin().DeleteLimits(ctx, Scope{}), ErrClosed)
	_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "x"})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, rl.Admin().DeleteEntity(ctx, "e"), ErrClosed)
	require.ErrorIs(t, rl.Reset(ctx, "e", "api"), ErrClosed)
	_, err = rl.LowerTokens(ctx, "e", "api", Consume{"rpm": 0})
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, rl.Close())
}
