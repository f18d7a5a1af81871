package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The integrity scenarios: the limit an operator sets is the limit
// enforced — limit changes at every level, refunds, expiry, bad input.

func init() {
	scenarios = append(scenarios,
		scenario{"LimitChangeEveryLevel", limitChangeEveryLevel},
		scenario{"LimitChangeSustained", limitChangeSustained},
		scenario{"LimitRaise", limitRaise},
		scenario{"LimitChangeOtherLimiter", limitChangeOtherLimiter},
		scenario{"DebtOutlivesRefill", debtOutlivesRefill},
		scenario{"BadInput", badInput},
	)
}

// drain acquires one token of limit name at a time until refused (at most
// max times) and returns how many were admitted; every lease is committed.
func drain(t *testing.T, rl *limiter.RateLimiter, entity, resource, name string, max int, opts ...limiter.AcquireOption) int {
	t.Helper()
	ctx := context.Background()
	for n := 0; n < max; n++ {
		lease, err := rl.Acquire(ctx, entity, resource, store.Consume{name: 1}, opts...)
		if errors.Is(err, limiter.ErrRateLimited) {
			return n
		}
		require.NoError(t, err, "acquire %s/%s: %v", entity, resource, err)
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return max
}

// limitChangeEveryLevel: a limit of 1000/day lowered to 10/day admits at
// most 10 more, whatever level it is stored at (or passed per call).
func limitChangeEveryLevel(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	for _, lv := range []struct {
		level string
		set   func(l store.Limit) ([]limiter.AcquireOption, error)
	}{
		{"override", func(l store.Limit) ([]limiter.AcquireOption, error) {
			return []limiter.AcquireOption{limiter.WithLimits(limiter.Limit(l))}, nil
		}},
		{"entity", func(l store.Limit) ([]limiter.AcquireOption, error) {
			return nil, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e-entity", Resource: "r-entity"}, toCallerLimits([]store.Limit{l}))
		}},
		{"entity-default", func(l store.Limit) ([]limiter.AcquireOption, error) {
			return nil, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e-entity-default", Resource: store.DefaultResource}, toCallerLimits([]store.Limit{l}))
		}},
		{"resource", func(l store.Limit) ([]limiter.AcquireOption, error) {
			return nil, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "r-resource"}, toCallerLimits([]store.Limit{l}))
		}},
		{"system", func(l store.Limit) ([]limiter.AcquireOption, error) {
			return nil, rl.Admin().SetLimits(ctx, limiter.Scope{}, toCallerLimits([]store.Limit{l}))
		}},
	} {
		entity, resource := "e-"+lv.level, "r-"+lv.level
		opts, err := lv.set(store.Limit(limiter.PerDay("rpd", 1000)))
		require.NoError(t, err, "%s: %v", lv.level, err)
		before := drain(t, rl, entity, resource, "rpd", 5, opts...)
		if opts, err = lv.set(store.Limit(limiter.PerDay("rpd", 10))); err != nil {
			t.Fatalf("%s: %v", lv.level, err)
		}
		after := drain(t, rl, entity, resource, "rpd", 30, opts...)
		b.note("%s: %d admitted at 1000/day, then %d at 10/day; bucket %s", lv.level, before, after, b.bucket(entity, resource))
		assert.Equal(t, 5, before, "%s: %d admitted after lowering 1000/day to 10/day (5 taken before), want 10", lv.level, after)
		assert.Equal(t, 10, after, "%s: %d admitted after lowering 1000/day to 10/day (5 taken before), want 10", lv.level, after)
	}
}

// limitChangeSustained: a resource default lowered from 100/min to 10/min
// admits at most 10 per minute from then on (plus the 10 the lowered
// bucket holds).
func limitChangeSustained(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 100))}))
	require.NoError(t, err)
	n := drain(t, rl, "k", "gpt", "rpm", 20)
	require.EqualValues(t, 20, n, "admitted %d of 20 at 100/min", n)
	err = rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 10))}))
	require.NoError(t, err)
	perMinute := make([]int, 5)
	for step := range 5 * 60 * 2 { // an attempt every 500 ms for 5 minutes
		lease, err := rl.Acquire(ctx, "k", "gpt", store.Consume{"rpm": 1})
		switch {
		case err == nil:
			perMinute[step/120]++
			lease.Commit(ctx)
		case !errors.Is(err, limiter.ErrRateLimited):
			t.Fatal(err)
		}
		b.clock.Advance(500 * time.Millisecond)
	}
	total := 0
	for _, n := range perMinute {
		total += n
	}
	b.note("admitted per minute after lowering to 10/min: %v", perMinute)
	assert.LessOrEqual(t, total, 10+5*10, "admitted %d in 5 minutes at 10/min (%v), want at most 60", total, perMinute)
}

// limitRaise: a raised limit keeps the balance and refills at the new rate.
func limitRaise(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 10))})); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, rl, "k", "gpt", "rpm", 20); n != 10 {
		t.Fatalf("admitted %d at 10/min, want 10", n)
	}
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 1000))})); err != nil {
		t.Fatal(err)
	}
	avail, err := rl.Available(ctx, "k", "gpt")
	b.note("after the raise: available %v %v", avail, err)
	// The next acquire applies the change (refused: the bucket is empty);
	// from then on the bucket refills at the new rate.
	if n := drain(t, rl, "k", "gpt", "rpm", 1); n != 0 {
		t.Fatalf("%d admitted from an empty bucket", n)
	}
	b.clock.Advance(6 * time.Second) // 100 tokens at 1000/min (1 at 10/min)
	n := drain(t, rl, "k", "gpt", "rpm", 200)
	b.note("6 s later: %d admitted; bucket %s", n, b.bucket("k", "gpt"))
	assert.Zero(t, avail["rpm"], "raise 10/min → 1000/min on a drained bucket: available %v, then %d admitted in 6 s; want 0 then 100", avail, n)
	assert.Equal(t, 100, n, "raise 10/min → 1000/min on a drained bucket: available %v, then %d admitted in 6 s; want 0 then 100", avail, n)
}

// limitChangeOtherLimiter: another limiter (another process) sees a change
// within its config cache TTL: until then it enforces what it resolved.
func limitChangeOtherLimiter(t *testing.T, b *backend) {
	ctx := context.Background()
	admin, other := b.rl(), b.rl(func(o *limiter.Options) { o.ConfigCacheTTL = time.Minute })
	err := admin.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerDay("rpd", 1000))}))
	require.NoError(t, err)
	n := drain(t, other, "k", "gpt", "rpd", 1)
	require.EqualValues(t, 1, n, "first acquire refused")
	err = admin.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerDay("rpd", 10))}))
	require.NoError(t, err)
	b.clock.Advance(30 * time.Second)
	within := drain(t, other, "k", "gpt", "rpd", 20)
	b.clock.Advance(31 * time.Second) // past the TTL
	after := drain(t, other, "k", "gpt", "rpd", 20)
	b.note("within the cache TTL: %d admitted; after it: %d", within, after)
	assert.Equal(t, 20, within, "other limiter: %d admitted within its TTL (old limit), %d after; want 20, then 10 (the balance capped at 10/day)", within, after)
	assert.Equal(t, 10, after, "other limiter: %d admitted within its TTL (old limit), %d after; want 20, then 10 (the balance capped at 10/day)", within, after)
}

// debtOutlivesRefill: a lease's debt is recorded in full even when its
// bucket had refilled to its capacity before the lease was committed: the
// overrun is owed from the refilled balance, not absorbed by the cap.
func debtOutlivesRefill(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	lim := limiter.WithLimits(limiter.PerMinute("tpm", 1000))
	lease, err := rl.Acquire(ctx, "k", "gpt", store.Consume{"tpm": 1000}, lim)
	require.NoError(t, err)
	b.clock.Advance(2 * time.Minute)
	if err := lease.Adjust(store.Consume{"tpm": 3000}); err != nil {
		t.Fatal(err)
	}
	if err := lease.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	avail, err := rl.Available(ctx, "k", "gpt", lim)
	b.note("estimate 1000, used 4000, committed after a full refill: available %v %v; bucket %s", avail, err, b.bucket("k", "gpt"))
	assert.EqualValues(t, -2000, avail["tpm"], "available %v, want tpm=-2000 (1000 taken, refilled to the capacity of 1000 over two minutes, then 3000 more owed)", avail)
}

// badInput: every invalid request is a typed error, before any write.
func badInput(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 10)), store.Limit(limiter.PerMinute("tpm", 1000))})); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		b.noteErr(what, err)
		assert.ErrorIs(t, err, store.ErrValidation, "%s: %v, want a ValidationError", what, err)
	}
	_, err := rl.Acquire(ctx, "k", "gpt", store.Consume{"rpm": 1, "tpm": -500})
	check("negative amount", err)
	_, err = rl.Wait(ctx, "k", "gpt", store.Consume{"rpm": -1})
	check("negative amount in Wait", err)
	err = rl.Do(ctx, "k", "gpt", store.Consume{"tpm": -1}, func(context.Context, *limiter.Lease) error { return nil })
	check("negative amount in Do", err)
	_, err = rl.Acquire(ctx, "k", "gpt", store.Consume{"rmp": 1})
	check("misspelled limit", err)
	if err != nil {
		assert.ErrorContains(t, err, `"rmp"`, "misspelled limit: %q should name rmp and the limits rpm, tpm", err)
		assert.ErrorContains(t, err, "rpm, tpm", "misspelled limit: %q should name rmp and the limits rpm, tpm", err)
	}
	var nilCtx context.Context
	_, err = rl.Acquire(nilCtx, "k", "gpt", store.Consume{"rpm": 1})
	check("nil context", err)
	b.note("bucket after bad requests: %s", b.bucket("k", "gpt"))
	got := b.bucket("k", "gpt")
	assert.EqualValues(t, "missing", got, "a bad request wrote the bucket: %s", got)

	// Entities: their own parent, an unknown parent, a cycle.
	_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "self", ParentID: "self", Cascade: true})
	check("own parent", err)
	_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "orphan", ParentID: "nobody"})
	check("unknown parent", err)
	assert.ErrorIs(t, err, store.ErrEntityNotFound, "unknown parent: %v, want it to match ErrEntityNotFound too", err)
	// Another client wrote a child whose parent does not exist yet, and an
	// entity that is its own parent.
	for _, e := range []store.Entity{
		{ID: "a", Name: "a", ParentID: "b", Cascade: true, Metadata: map[string]string{}, CreatedAt: Epoch.Truncate(time.Second)},
		{ID: "loop", Name: "loop", ParentID: "loop", Cascade: true, Metadata: map[string]string{}, CreatedAt: Epoch.Truncate(time.Second)},
	} {
		err := b.repo.CreateEntity(ctx, e)
		require.NoError(t, err)
	}
	_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "b", ParentID: "a", Cascade: true})
	check("cycle", err)
	lease, err := rl.Acquire(ctx, "loop", "gpt", store.Consume{"rpm": 1})
	b.noteErr("acquire on an entity that is its own parent", err)
	require.NoError(t, err, "acquire on an entity recorded as its own parent: %v", err)
	lease.Commit(ctx)
	b.note("its bucket: %s", b.bucket("loop", "gpt"))
	got = b.bucket("loop", "gpt")
	assert.EqualValues(t, "rpm=9000/1000 tpm=1000000/0", got, "own-parent entity charged: %s, want once", got)

	// Huge limits saturate: the bucket TTL stays in the future.
	huge := store.Limit{Name: "big", Capacity: math.MaxInt64 / 1000, RefillAmount: 1, RefillPeriod: 24 * time.Hour}
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "huge"}, toCallerLimits([]store.Limit{huge})); err != nil {
		t.Fatal(err)
	}
	lease, err = rl.Acquire(ctx, "k", "huge", store.Consume{"big": 1})
	require.NoError(t, err)
	lease.Commit(ctx)
	sb, err := b.repo.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "huge"})
	require.NoError(t, err, "GetBucket: %v %v", sb, err)
	require.NotNil(t, sb, "GetBucket: %v %v", sb, err)
	b.note("ttl of a huge limit's bucket is in the future: %v", sb.TTL > b.clock.Now().Unix())
	assert.Greater(t, sb.TTL, b.clock.Now().Unix(), "ttl %d of a huge limit's bucket is not in the future", sb.TTL)
	_ = fmt.Sprint
}
