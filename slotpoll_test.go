package limiter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// TestSlotViewsClaims: the waiters of a limiter go on to write no more
// at once than the slots a read showed free, less those claimed since;
// claims still in flight at the next read count against it; a slot a
// lease of the limiter gives back counts at once; while a read is under
// way no other waiter reads or writes; a view older than a poll must be
// read again, and one of another generation too.
func TestSlotViewsClaims(t *testing.T) {
	var s slotViews
	now := time.Unix(1000, 0)
	key := store.BucketKey{EntityID: "org", Resource: "m"}
	reads := []slotRead{{slotViewKey{key, "calls"}, 1}}
	item := func(free ...int64) map[store.BucketKey]*store.Bucket {
		b := &store.Bucket{}
		for i, f := range free {
			b.States = append(b.States, store.BucketState{LimitName: store.SlotLimitName("calls", 7+int64(i)), TokensMilli: f * 1000})
		}
		return map[store.BucketKey]*store.Bucket{key: b}
	}

	ok, stale := s.claim(reads, now, 7)
	require.False(t, ok)
	require.True(t, stale, "never read")
	require.True(t, s.freshView(reads, now))
	require.False(t, s.freshView(reads, now), "one read at a time")
	ok, stale = s.claim(reads, now, 7)
	require.False(t, ok || stale, "a read is under way: wait for it")
	s.rememberView(reads, item(3, 2), now, 7) // the fewer of the two generations
	for i := range 2 {
		ok, stale = s.claim(reads, now, 7)
		require.True(t, ok, "claim %d of 2 free", i)
		require.False(t, stale)
	}
	ok, _ = s.claim(reads, now, 7)
	require.False(t, ok, "both free slots are claimed")

	s.unclaim(reads) // one acquire returned; one is in flight
	require.True(t, s.freshView(reads, now))
	s.rememberView(reads, item(1, 1), now.Add(time.Millisecond), 7)
	ok, _ = s.claim(reads, now.Add(time.Millisecond), 7)
	require.False(t, ok, "the claim in flight may not be written yet: it counts")
	const genMs = 1000
	give := func(gen int64, consumed int64) store.BucketWrite {
		return store.BucketWrite{Key: key, Limits: []store.LimitWrite{
			{Name: "rpm", ConsumedMilli: -5000},
			{Name: store.SlotLimitName("calls", gen), ConsumedMilli: consumed},
		}}
	}
	require.Equal(t, int64(0), s.givenBack(give(7, 1000), 7*genMs, genMs), "a take gives nothing back")
	require.Equal(t, int64(2), s.givenBack(give(6, -2000), 7*genMs, genMs), "the previous generation's slots wake waiters")
	ok, _ = s.claim(reads, now.Add(time.Millisecond), 7)
	require.False(t, ok, "but free none of this generation's")
	require.Equal(t, int64(1), s.givenBack(give(7, -1000), 7*genMs+genMs-1, genMs))
	ok, _ = s.claim(reads, now.Add(time.Millisecond), 7)
	require.True(t, ok, "a slot given back by a lease of the limiter")

	_, stale = s.claim(reads, now.Add(time.Millisecond+slotWaitPoll), 7)
	require.True(t, stale, "older than a poll")
	_, stale = s.claim(reads, now.Add(time.Millisecond), 8)
	require.True(t, stale, "another generation")

	// An item without the generations' limits holds every slot free.
	require.True(t, s.freshView(reads, now))
	s.rememberView(reads, map[store.BucketKey]*store.Bucket{}, now, 9)
	require.Equal(t, int64(math.MaxInt64), s.m[reads[0].slotViewKey].free)
	ok, _ = s.claim(reads, now, 9)
	require.True(t, ok)

	// A failed read leaves the view as it was, and readable again.
	require.True(t, s.freshView(reads, now))
	s.rememberView(reads, nil, now, 9)
	require.True(t, s.freshView(reads, now))
}

// TestSlotViewsWriteDue: once every slotPollWriteEvery one Wait of the
// limiter for some slots writes whatever the reads show, and only one.
func TestSlotViewsWriteDue(t *testing.T) {
	var s slotViews
	now := time.Unix(1000, 0)
	reads := []slotRead{{slotViewKey{store.BucketKey{EntityID: "k", Resource: "m"}, "calls"}, 1}}
	require.False(t, s.writeDue(reads, now), "first seen now")
	require.False(t, s.writeDue(reads, now.Add(slotPollWriteEvery-time.Millisecond)))
	require.True(t, s.writeDue(reads, now.Add(slotPollWriteEvery)))
	require.False(t, s.writeDue(reads, now.Add(slotPollWriteEvery)), "one Wait writes")
}

// TestWaitForSlotFindsRaisedCapacity: a Wait on DynamoDB whose polls read
// that no slot is free still finds a capacity raised meanwhile (which no
// read shows until a write stores it), within the forced write of
// slotPollWriteEvery.
func TestWaitForSlotFindsRaisedCapacity(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := slotLimiter(t, env)
	ctx, cancel := context.WithTimeout(env.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "k", Resource: "m"}, []Limit{InFlight("calls", 1)}))
	held := mustAcquire(t, rl, "k", "m", Consume{"calls": 1})
	got := make(chan *Lease, 1)
	start := time.Now()
	go func() {
		l, err := rl.Wait(ctx, "k", "m", Consume{"calls": 1})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("a Wait got a slot of a full limit")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "k", Resource: "m"}, []Limit{InFlight("calls", 2)}))
	var l *Lease
	select {
	case l = <-got:
	case <-ctx.Done():
		t.Fatal("the Wait never found the raised capacity")
	}
	require.NotNil(t, l)
	require.Less(t, time.Since(start), slotPollWriteEvery+5*time.Second)
	mustCommit(t, held)
	mustCommit(t, l)
	free, err := rl.Available(ctx, "k", "m")
	require.NoError(t, err)
	require.Equal(t, int64(2), free["calls"])
}
