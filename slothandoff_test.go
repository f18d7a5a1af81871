package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// waitInBackground starts rl.Wait(entity, "api", call) and returns the
// channel of its lease (nil when it failed, the error reported).
func waitInBackground(t *testing.T, ctx context.Context, rl *RateLimiter, entity string, call Consume) <-chan *Lease {
	t.Helper()
	got := make(chan *Lease, 1)
	go func() {
		l, err := rl.Wait(ctx, entity, "api", call)
		if err != nil && ctx.Err() == nil {
			t.Errorf("wait %s: %v", entity, err)
		}
		got <- l
	}()
	return got
}

// queuedOn waits until n Waits of rl are queued on entity's "api" item
// (one when n is not given).
func queuedOn(t *testing.T, rl *RateLimiter, entity string, n ...int) {
	t.Helper()
	want := append(n, 1)[0]
	require.Eventually(t, func() bool {
		rl.slotWaits.mu.Lock()
		defer rl.slotWaits.mu.Unlock()
		return len(rl.slotWaits.q[slotWaitKey{entity, "api"}]) >= want
	}, 5*time.Second, time.Millisecond, "%d Waits queued on %s", want, entity)
}

// leaseOf returns the lease got sends within 5 s.
func leaseOf(t *testing.T, got <-chan *Lease) *Lease {
	t.Helper()
	select {
	case l := <-got:
		require.NotNil(t, l)
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("the Wait got no lease")
	}
	return nil
}

// freeCalls returns the slots of "calls" free on entity's "api" item, as a
// limiter that is not rl (another process) sees them.
func freeCalls(t *testing.T, other *RateLimiter, entity string) int64 {
	t.Helper()
	free, err := other.Available(context.Background(), entity, "api")
	require.NoError(t, err)
	return free["calls"]
}

// memoryProcesses returns two limiters on one memory store, as two
// processes would be (slot TTL an hour), closed when the test ends.
func memoryProcesses(t *testing.T) (*RateLimiter, *RateLimiter) {
	t.Helper()
	mem := newMemory()
	var out [2]*RateLimiter
	for i := range out {
		out[i] = New(mem, func(o *Options) { o.SlotTTL = time.Hour })
		t.Cleanup(func() { _ = out[i].Close() })
	}
	return out[0], out[1]
}

// handedOnCommit starts a Wait of call on "key", waits until it is queued
// on queue's item, clears env's record of store calls, commits held and
// returns the Wait's lease: the calls recorded are those of the commit and
// of the Wait's acquire.
func handedOnCommit(t *testing.T, env *testEnv, rl *RateLimiter, call Consume, queue string, held *Lease) *Lease {
	t.Helper()
	wctx, cancel := context.WithTimeout(env.ctx, 10*time.Second)
	t.Cleanup(cancel)
	got := waitInBackground(t, wctx, rl, "key", call)
	queuedOn(t, rl, queue)
	env.rec.Reset()
	mustCommit(t, held)
	return leaseOf(t, got)
}

// TestSlotHandOffCallCounts: a lease that ends while a Wait of its limiter
// waits for exactly its slots (the next call of the same key, refused by
// the organisation's cap) hands them over: the commit writes nothing, and
// the Wait's acquire writes the key's item for its rpm alone, not the
// organisation's. The slots never show free in the store: another process
// finds the organisation full throughout. The last lease, with no Wait
// queued, gives every slot back.
func TestSlotHandOffCallCounts(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := slotLimiter(t, env)
	other := slotLimiter(t, env)
	ctx := env.ctx
	orgKeyCascade(t, rl, []Limit{InFlight("calls", 2)}, []Limit{InFlight("calls", 8), PerMinute("rpm", 100)})
	call := Consume{"calls": 1, "rpm": 1}
	mustCommit(t, mustAcquire(t, rl, "key", "api", call)) // creates the items
	held := mustAcquire(t, rl, "key", "api", call)
	held2 := mustAcquire(t, rl, "key", "api", call)

	l := handedOnCommit(t, env, rl, call, "org", held)
	require.Equal(t, []string{"UpdateItem"}, opsOf(env.rec.Calls()), "one write: the key's rpm")
	require.Equal(t, int64(2), l.Consumed()["calls"], "the key's slot and the organisation's")
	require.Equal(t, int64(0), freeCalls(t, other, "org"), "the organisation's slots stayed held")
	_, err := other.Acquire(ctx, "key", "api", call)
	require.ErrorIs(t, err, ErrRateLimited, "another process finds the organisation full")

	mustCommit(t, l)
	mustCommit(t, held2)
	require.Equal(t, int64(2), freeCalls(t, other, "org"))
	require.Equal(t, int64(8), freeCalls(t, other, "key"))
}

// opsOf returns the operations of calls, in order.
func opsOf(calls []ddblocal.Call) []string {
	out := []string{}
	for _, c := range calls {
		out = append(out, c.Op)
	}
	return out
}

// TestSlotHandOffEvensKeys: the organisation's slot a key's lease gives
// back goes to the Wait of another key of the organisation when that key
// holds fewer of the limiter's slots (0 against 3), not to the next call of
// the same key that waited longer: a key refused by its organisation's cap
// is not starved by a busier key's calls.
func TestSlotHandOffEvensKeys(t *testing.T) {
	t.Parallel()
	rl, other := memoryProcesses(t)
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "org"})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "org", Resource: "api"}, []Limit{InFlight("calls", 4)}))
	for _, k := range []string{"k0", "k1"} {
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: k, ParentID: "org", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: k, Resource: "api"}, []Limit{InFlight("calls", 4)}))
	}
	call := Consume{"calls": 1}
	var k0 []*Lease
	for range 4 {
		k0 = append(k0, mustAcquire(t, rl, "k0", "api", call))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	same := waitInBackground(t, wctx, rl, "k0", call) // waits longer
	queuedOn(t, rl, "k0")
	queuedOn(t, rl, "org")
	otherKey := waitInBackground(t, wctx, rl, "k1", call)
	queuedOn(t, rl, "org", 2)

	mustCommit(t, k0[0])
	l := leaseOf(t, otherKey)
	require.Equal(t, int64(2), l.Consumed()["calls"])
	select {
	case <-same:
		t.Fatal("the next call of the busier key took the organisation's slot")
	case <-time.After(100 * time.Millisecond):
	}
	require.Equal(t, int64(0), freeCalls(t, other, "org"))
	require.Equal(t, int64(1), freeCalls(t, other, "k0"), "k0 gave its slot back")
	require.Equal(t, int64(3), freeCalls(t, other, "k1"))

	// The next lease of k0 that ends: k0 holds 2, k1 1: its slots go to
	// the next call of k0.
	mustCommit(t, k0[1])
	l2 := leaseOf(t, same)
	require.Equal(t, int64(1), freeCalls(t, other, "k0"))
	for _, x := range append(k0[2:], l, l2) {
		mustCommit(t, x)
	}
	require.Equal(t, int64(4), freeCalls(t, other, "org"))
	require.Equal(t, int64(4), freeCalls(t, other, "k0"))
	require.Equal(t, int64(4), freeCalls(t, other, "k1"))
}

// TestSlotHandOffUnusedGivenBack: slots handed to a Wait whose acquire
// does not take them go back to the store, once: the limit stopped being
// an in-flight limit meanwhile (switched to a rolling limit of the same
// name), so the Wait's acquire charges the rolling limit, and the handed
// slots are given back.
func TestSlotHandOffUnusedGivenBack(t *testing.T) {
	t.Parallel()
	mem := newMemory()
	rl := New(mem, func(o *Options) { o.SlotTTL = time.Hour; o.ConfigCacheTTL = -1 })
	defer func() { _ = rl.Close() }()
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "solo"})
	require.NoError(t, err)
	scope := Scope{Entity: "solo", Resource: "api"}
	require.NoError(t, rl.Admin().SetLimits(ctx, scope, []Limit{InFlight("calls", 1)}))
	call := Consume{"calls": 1}
	held := mustAcquire(t, rl, "solo", "api", call)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := waitInBackground(t, wctx, rl, "solo", call)
	queuedOn(t, rl, "solo")

	require.NoError(t, rl.Admin().SetLimits(ctx, scope, []Limit{PerMinute("calls", 100)}))
	mustCommit(t, held)
	l := leaseOf(t, got)
	require.Equal(t, int64(1), l.Consumed()["calls"])
	require.Nil(t, l.slots, "the lease holds no slot")
	mustCommit(t, l)

	// Back to an in-flight limit: its one slot is free.
	require.NoError(t, rl.Admin().SetLimits(ctx, scope, []Limit{InFlight("calls", 1)}))
	mustCommit(t, mustAcquire(t, rl, "solo", "api", call))
}

// TestSlotHandOffWaitGone: a Wait whose context ends as a lease hands it
// its slots gives them back, whichever comes first: after 50 such races
// every slot is free.
func TestSlotHandOffWaitGone(t *testing.T) {
	t.Parallel()
	rl, other := memoryProcesses(t)
	ctx := context.Background()
	orgKeyCascade(t, rl, []Limit{InFlight("calls", 1)}, []Limit{InFlight("calls", 1)})
	call := Consume{"calls": 1}
	handed := 0
	for range 50 {
		held := mustAcquire(t, rl, "key", "api", call)
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan *Lease, 1)
		go func() {
			l, _ := rl.Wait(wctx, "key", "api", call)
			got <- l
		}()
		queuedOn(t, rl, "key")
		go cancel()
		mustCommit(t, held)
		if l := <-got; l != nil {
			handed++
			mustCommit(t, l)
		}
		require.Equal(t, int64(1), freeCalls(t, other, "org"))
		require.Equal(t, int64(1), freeCalls(t, other, "key"))
	}
	t.Logf("%d of 50 Waits took the slots before their context ended", handed)

	// Handed to a Wait that is gone before it looked: given back.
	held := mustAcquire(t, rl, "key", "api", call)
	keys := []slotWaitKey{{"key", "api"}, {"org", "api"}}
	w := &slotWaiter{wake: func() {}, since: time.Now(), want: []slotRead{
		{slotViewKey{store.BucketKey{EntityID: "key", Resource: "api"}, "calls"}, 1},
		{slotViewKey{store.BucketKey{EntityID: "org", Resource: "api"}, "calls"}, 1},
	}}
	rl.slotWaits.join(w, keys)
	mustCommit(t, held)
	gift, _ := rl.slotWaits.leave(w, keys).(*slotGift)
	require.NotNil(t, gift, "the slots were handed to the Wait")
	require.Equal(t, int64(0), freeCalls(t, other, "org"))
	rl.giveBackGift(ctx, gift)
	require.Equal(t, int64(1), freeCalls(t, other, "org"))
	require.Equal(t, int64(1), freeCalls(t, other, "key"))
}

// TestSlotHandOffNotPastWaitWithOptions: a Wait with options is not handed
// slots, and while it waits longest on an item no other Wait is handed
// that item's slots either: they go back to the store and it is woken, so
// the Waits without options do not pass it.
func TestSlotHandOffNotPastWaitWithOptions(t *testing.T) {
	t.Parallel()
	rl := New(newMemory(), func(o *Options) { o.SlotTTL = time.Hour })
	defer func() { _ = rl.Close() }()
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "solo"})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: "api"}, []Limit{InFlight("calls", 1)}))
	call := Consume{"calls": 1}
	held := mustAcquire(t, rl, "solo", "api", call)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	withOptions := make(chan *Lease, 1)
	go func() {
		l, err := rl.Wait(wctx, "solo", "api", call, WithOnUnavailable(OnUnavailableBlock))
		if err != nil && wctx.Err() == nil {
			t.Errorf("wait with options: %v", err)
		}
		withOptions <- l
	}()
	queuedOn(t, rl, "solo")
	plain := waitInBackground(t, wctx, rl, "solo", call)
	queuedOn(t, rl, "solo", 2)

	mustCommit(t, held)
	l := leaseOf(t, withOptions)
	select {
	case <-plain:
		t.Fatal("the Wait without options passed the one with options")
	case <-time.After(100 * time.Millisecond):
	}
	mustCommit(t, l)
	mustCommit(t, leaseOf(t, plain))
}

// TestSlotHandOffNothingElseToTake: a Wait whose call takes slots alone,
// handed all of them, acquires without a store call at all, and its lease
// gives them back at its commit.
func TestSlotHandOffNothingElseToTake(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := slotLimiter(t, env)
	ctx := env.ctx
	orgKeyCascade(t, rl, []Limit{InFlight("calls", 1)}, []Limit{InFlight("calls", 1)})
	call := Consume{"calls": 1}
	mustCommit(t, mustAcquire(t, rl, "key", "api", call)) // creates the items
	held := mustAcquire(t, rl, "key", "api", call)
	l := handedOnCommit(t, env, rl, call, "key", held)
	require.Equal(t, []string{}, opsOf(env.rec.Calls()), "no store call")
	require.Equal(t, int64(2), l.Consumed()["calls"])
	env.rec.Reset()
	mustCommit(t, l)
	require.Equal(t, 2, env.rec.Count("UpdateItem"), "the key's and the organisation's give-back")
	free, err := rl.Available(ctx, "key", "api")
	require.NoError(t, err)
	require.Equal(t, int64(1), free["calls"])
}
