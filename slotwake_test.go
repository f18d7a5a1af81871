package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/memorystore"
)

// TestWaitGetsSlotGivenBack: Waits refused by an in-flight limit whose
// polls never come due (the limiter's sleep only ends with its context)
// still get the slots that leases of this process give back, one each.
// Without the hand-off every Wait below would block until its deadline.
func TestWaitGetsSlotGivenBack(t *testing.T) {
	rl, ctx := neverPolling(t)
	defer func() { _ = rl.Close() }()
	opt := WithLimits(InFlight("calls", 2), PerMinute("rpm", 1000))
	held := make([]*Lease, 2)
	for i := range held {
		var err error
		held[i], err = rl.Acquire(ctx, "k", "m", Consume{"calls": 1, "rpm": 1}, opt)
		require.NoError(t, err)
	}
	const waiters = 3
	got := make(chan *Lease, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			l, err := rl.Wait(ctx, "k", "m", Consume{"calls": 1, "rpm": 1}, opt)
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		})
	}
	require.Eventually(t, func() bool { return rl.slotWaiting(slotWaitKey{"k", "m"}) == waiters }, 5*time.Second, time.Millisecond)

	next := func() *Lease {
		select {
		case l := <-got:
			return l
		case <-ctx.Done():
			t.Fatal("no Wait got the slot given back")
			return nil
		}
	}
	require.NoError(t, held[0].Commit(ctx))
	first := next()
	require.NoError(t, held[1].Rollback(ctx))
	second := next()
	select {
	case l := <-got:
		t.Fatalf("a third Wait got a slot with both taken: %v", l)
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, first.Commit(ctx))
	third := next()
	wg.Wait()
	require.NoError(t, second.Commit(ctx))
	require.NoError(t, third.Commit(ctx))
	free, err := rl.Available(ctx, "k", "m", opt)
	require.NoError(t, err)
	require.Equal(t, int64(2), free["calls"])
}

// slotWaiting returns how many Waits are queued on key.
func (rl *RateLimiter) slotWaiting(key slotWaitKey) int {
	rl.slotWaits.mu.Lock()
	defer rl.slotWaits.mu.Unlock()
	return len(rl.slotWaits.q[key])
}

// TestWaitForSlotEndsAtClose: a Wait queued for a slot (its polls never
// come due) returns ErrClosed when the limiter closes, and leaves the
// queue.
func TestWaitForSlotEndsAtClose(t *testing.T) {
	rl, ctx := neverPolling(t)
	opt := WithLimits(InFlight("calls", 1))
	held, err := rl.Acquire(ctx, "k", "m", Consume{"calls": 1}, opt)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := rl.Wait(ctx, "k", "m", Consume{"calls": 1}, opt)
		done <- err
	}()
	require.Eventually(t, func() bool { return rl.slotWaiting(slotWaitKey{"k", "m"}) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, rl.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-ctx.Done():
		t.Fatal("the Wait did not end at Close")
	}
	require.Equal(t, 0, rl.slotWaiting(slotWaitKey{"k", "m"}))
	_ = held
}

// TestWaitGetsEntityWideSlotGivenBack: the hand-off of a slot of an
// entity-wide in-flight limit (its item is the entity's AllResources
// bucket, shared by every resource): a Wait on one model gets the slot a
// lease on another model gives back.
func TestWaitGetsEntityWideSlotGivenBack(t *testing.T) {
	rl, ctx := neverPolling(t)
	defer func() { _ = rl.Close() }()
	opt := WithEntityWideLimits(InFlight("calls", 1))
	held, err := rl.Acquire(ctx, "k", "m1", Consume{"calls": 1}, opt)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := rl.Wait(ctx, "k", "m2", Consume{"calls": 1}, opt)
		if err == nil {
			err = l.Commit(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool { return rl.slotWaiting(slotWaitKey{"k", AllResources}) == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, held.Commit(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("no Wait got the slot given back")
	}
}

// neverPolling returns a memory-backed limiter whose Waits sleep until
// their context ends (no poll ever comes due, so only a hand-off wakes
// them), and a context of 10 s.
func neverPolling(t *testing.T) (*RateLimiter, context.Context) {
	rl := New(memorystore.New(), func(o *Options) { o.SlotTTL = time.Hour })
	rl.sleep = func(ctx context.Context, _ time.Duration) error {
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return rl, ctx
}
