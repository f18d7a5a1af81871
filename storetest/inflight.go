package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The InFlight scenario: calls in flight, 2 per key and 3 per
// organisation (cascade), stored as entity configs beside a rolling limit;
// slots come back when leases end, and those of a limiter that stops (a
// process that died) lapse within the slot TTL.

func init() {
	scenarios = append(scenarios, scenario{"InFlight", scInFlight})
}

func scInFlight(t *testing.T, b *backend) {
	ctx := context.Background()
	const ttl = 30 * time.Second
	rl := b.rl(func(o *limiter.Options) { o.SlotTTL = ttl })
	defer func() { _ = rl.Close() }()
	for _, e := range []limiter.Entity{{ID: "org"}, {ID: "k1", ParentID: "org", Cascade: true}, {ID: "k2", ParentID: "org", Cascade: true}} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err, "create %s", e.ID)
	}
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "gpt"}, []limiter.Limit{limiter.InFlight("calls", 3)}))
	for _, id := range []string{"k1", "k2"} {
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: id, Resource: "gpt"}, []limiter.Limit{limiter.InFlight("calls", 2), limiter.PerMinute("rpm", 100)}))
	}
	stored, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "k1", Resource: "gpt"})
	require.NoError(t, err)
	b.note("stored: %v", stored)
	require.Contains(t, stored, limiter.InFlight("calls", 2), "the in-flight kind is stored")

	call := store.Consume{"calls": 1, "rpm": 1}
	acquire := func(what, id string) *limiter.Lease {
		lease, err := rl.Acquire(ctx, id, "gpt", call)
		b.noteErr(what, err)
		return lease
	}
	free := func(id string) int64 {
		a, err := rl.Available(ctx, id, "gpt")
		require.NoError(t, err)
		return a["calls"]
	}
	k1a, k1b := acquire("k1 first", "k1"), acquire("k1 second", "k1")
	require.NotNil(t, k1a)
	require.NotNil(t, k1b)
	require.Nil(t, acquire("k1 third: key cap", "k1"))
	k2a := acquire("k2 first", "k2")
	require.NotNil(t, k2a)
	require.Equal(t, int64(0), free("org"), "org holds 3")
	require.Equal(t, int64(1), free("k2"))
	_, err = rl.Acquire(ctx, "k2", "gpt", call)
	require.ErrorIs(t, err, limiter.ErrRateLimited, "k2 second: org cap")

	require.NoError(t, k1a.Commit(ctx))
	require.Equal(t, int64(1), free("org"), "a commit gives the slot back")
	k2b := acquire("k2 second after k1's commit", "k2")
	require.NotNil(t, k2b)
	require.NoError(t, k1b.Rollback(ctx))
	require.NoError(t, k2a.Commit(ctx))
	require.NoError(t, k2b.Commit(ctx))
	require.Equal(t, int64(3), free("org"))
	require.Equal(t, int64(2), free("k1"))
	a, err := rl.Available(ctx, "k1", "gpt")
	require.NoError(t, err)
	require.Equal(t, int64(99), a["rpm"], "the committed call keeps its rpm; the rolled back one gives it back")

	// Another limiter takes k1's two slots and stops without ending its
	// leases: they lapse within the TTL, and not before.
	dead := b.rl(func(o *limiter.Options) { o.SlotTTL = ttl })
	for range 2 {
		_, err := dead.Acquire(ctx, "k1", "gpt", call)
		require.NoError(t, err)
	}
	require.NoError(t, dead.Close())
	b.clock.Advance(ttl/2 - time.Second)
	_, err = rl.Acquire(ctx, "k1", "gpt", call)
	require.ErrorIs(t, err, limiter.ErrRateLimited, "slots of the dead limiter before the TTL")
	b.clock.Advance(ttl/2 + 2*time.Second)
	require.Equal(t, int64(2), free("k1"), "slots of the dead limiter after the TTL")
	l1, l2 := acquire("k1 after the TTL", "k1"), acquire("k1 after the TTL, second", "k1")
	require.NotNil(t, l1)
	require.NotNil(t, l2)
	require.NoError(t, l1.Commit(ctx))
	require.NoError(t, l2.Commit(ctx))
}
