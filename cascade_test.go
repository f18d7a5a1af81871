package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// deepChain creates org, proj (cascading to org) and key (cascading to
// proj) on rl, with rpm, tpm and a per-hour usd money limit (micro-USD)
// as the resource defaults of every level.
func deepChain(t *testing.T, env *testEnv, rl *RateLimiter) {
	t.Helper()
	deepChainWith(t, env, rl, PerHour("usd", 50_000_000))
}

// deepChainWith is deepChain with usd as the money limit.
func deepChainWith(t *testing.T, env *testEnv, rl *RateLimiter, usd Limit) {
	t.Helper()
	for _, e := range []Entity{{ID: "org"}, {ID: "proj", ParentID: "org", Cascade: true}, {ID: "key", ParentID: "proj", Cascade: true}} {
		_, err := rl.Admin().CreateEntity(env.ctx, e)
		require.NoError(t, err)
	}
	err := rl.Admin().SetLimits(env.ctx, Scope{Resource: "gpt"}, []Limit{PerMinute("rpm", 1000), PerMinute("tpm", 1_000_000), usd})
	require.NoError(t, err)
}

// TestDeepCascadeOneCall: with warm caches, an acquire of rpm, tpm and usd
// on a three-level cascade (key → project → organisation) is one
// DynamoDB call, a TransactWriteItems of the three buckets; the first
// creates them (read, then written on the read-then-write path). Each
// level is charged.
func TestDeepCascadeOneCall(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	deepChain(t, env, rl)
	c := Consume{"rpm": 1, "tpm": 500, "usd": 2_000}
	check := env.callChecker(t)
	// The configs of each level (the key's four levels and its
	// entity-wide bucket's two, then the project's and the organisation's
	// own, each with its entity-wide slot), the buckets read (missing),
	// then the read-then-write path.
	check("first acquire", "BatchGetItem[6], BatchGetItem[3], BatchGetItem[3], BatchGetItem[3], BatchGetItem[6], TransactWriteItems[3]", func() {
		_, err := rl.Acquire(env.ctx, "key", "gpt", c)
		require.NoError(t, err)
	})
	for i := range 3 {
		check("warm acquire", "TransactWriteItems[3]", func() {
			lease, err := rl.Acquire(env.ctx, "key", "gpt", c)
			require.NoError(t, err, "warm acquire %d", i)
			require.Len(t, lease.Statuses(), 9, "a lease over three buckets of three limits")
		})
	}
	for _, id := range []string{"key", "proj", "org"} {
		require.Equal(t, int64((1_000_000-4*500)*1000), env.tokens(id, "gpt", "tpm"), "%s's tpm after four acquires", id)
		require.Equal(t, int64((50_000_000-4*2_000)*1000), env.tokens(id, "gpt", "usd"), "%s's usd after four acquires", id)
	}
	// Full again (within the caches' TTLs): the exact writes of the
	// refilled state, still one call.
	env.clock.advance(2 * time.Second)
	check("full buckets", "TransactWriteItems[3]", func() {
		_, err := rl.Acquire(env.ctx, "key", "gpt", c)
		require.NoError(t, err)
	})
	for _, id := range []string{"key", "proj", "org"} {
		require.Equal(t, int64((50_000_000-2_000)*1000), env.tokens(id, "gpt", "usd"), "%s's usd after a refill", id)
	}
}

// TestDeepCascadeRefusedAtTop: a refusal at the organisation leaves the
// key and the project untouched, on both paths; a rollback gives every
// level back what it took.
func TestDeepCascadeRefusedAtTop(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		deepChain(t, env, rl)
		err := rl.Admin().SetLimits(env.ctx, Scope{Entity: "org", Resource: "gpt"}, []Limit{PerMinute("rpm", 1000), PerMinute("tpm", 1000), PerHour("usd", 50_000_000)})
		require.NoError(t, err)
		lease, err := rl.Acquire(env.ctx, "key", "gpt", Consume{"rpm": 1, "tpm": 900})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(env.ctx))
		before := map[string]int64{"key": env.tokens("key", "gpt", "tpm"), "proj": env.tokens("proj", "gpt", "tpm")}
		_, err = rl.Acquire(env.ctx, "key", "gpt", Consume{"rpm": 1, "tpm": 200})
		var rle *RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, "org", rle.Primary.EntityID, "the violation is the organisation's: %v", err)
		for id, want := range before {
			require.Equal(t, want, env.tokens(id, "gpt", "tpm"), "%s's tpm after a refusal at the organisation", id)
		}
		lease, err = rl.Acquire(env.ctx, "key", "gpt", Consume{"rpm": 1, "tpm": 100})
		require.NoError(t, err)
		require.NoError(t, lease.Rollback(env.ctx))
		for id, want := range before {
			require.Equal(t, want, env.tokens(id, "gpt", "tpm"), "%s's tpm after a rollback", id)
		}
	})
}

// TestDeepCascadeLearnedLate: a limiter whose entity cache knows nothing
// of the chain reads the key's record first (and its item), then learns
// the rest from the bucket its parent's fast-path write returns; when it
// shows that the parent cascades too, both writes are given back and the
// batch path charges each level once. A new limiter on missing buckets
// learns it from the entity records its read returns.
func TestDeepCascadeLearnedLate(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	deepChain(t, env, env.limiter())
	c := Consume{"rpm": 1, "tpm": 500, "usd": 2_000}
	for i := range 3 {
		rl := env.limiter() // each with an empty entity cache
		env.rec.Reset()
		_, err := rl.Acquire(env.ctx, "key", "gpt", c)
		require.NoError(t, err, "acquire %d", i)
		if i > 0 {
			// The key's config, its record and item, the project's
			// config, the key's and the project's writes, the two
			// give-backs, the organisation's record and config, and the
			// batch (each config read with the entity's entity-wide
			// slot).
			require.Equal(t, "BatchGetItem[6], BatchGetItem[2], BatchGetItem[3], UpdateItem, UpdateItem, UpdateItem, UpdateItem, GetItem, BatchGetItem[3], TransactWriteItems[3]",
				env.calls(), "acquire %d", i)
		}
		for _, id := range []string{"key", "proj", "org"} {
			require.Equal(t, int64((50_000_000-(i+1)*2_000)*1000), env.tokens(id, "gpt", "usd"), "%s charged once per acquire", id)
		}
	}
}

// TestCascadeChainBounds: the chain an acquire charges ends at an entity
// that does not cascade, at an ancestor met again (a cycle: each entity is
// charged once) and after MaxCascadeLevels−1 ancestors.
func TestCascadeChainBounds(t *testing.T) {
	rl := New(newMemory())
	defer rl.Close()
	// Cascade settings as another client may have written them: the
	// entity cache holds them as if read from the records.
	for _, e := range []Entity{
		{ID: "a", ParentID: "b", Cascade: true}, {ID: "b", ParentID: "c", Cascade: true}, {ID: "c", ParentID: "d", Cascade: true},
		{ID: "d", ParentID: "e", Cascade: true}, {ID: "e"},
		{ID: "x", ParentID: "y", Cascade: true}, {ID: "y", ParentID: "z", Cascade: true}, {ID: "z", ParentID: "x", Cascade: true},
		{ID: "p", ParentID: "q", Cascade: true}, {ID: "q", ParentID: "r"}, {ID: "r"},
	} {
		rl.ents.setEntity(e.ID, true, e.Cascade, e.ParentID)
	}
	for id, want := range map[string][]string{
		"a": {"b", "c", "d"}, // four levels: e is not charged
		"c": {"d", "e"},
		"x": {"y", "z"}, // z's parent is x: charged once
		"p": {"q"},      // q does not cascade
		"e": nil,
	} {
		got, err := rl.cascadeChain(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, got, "the chain of %s", id)
	}
}

// TestDeepCascadeMonthlyBudgetOneCall: the same three-level cascade with
// usd as a monthly budget (a calendar limit: each level's month is a
// bucket of its own) is one call too once warm, a TransactWriteItems of
// the six buckets, and each level's month is charged.
func TestDeepCascadeMonthlyBudgetOneCall(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	deepChainWith(t, env, rl, PerCalendarMonth("usd", 500_000_000))
	c := Consume{"rpm": 1, "tpm": 500, "usd": 2_000}
	_, err := rl.Acquire(env.ctx, "key", "gpt", c)
	require.NoError(t, err)
	check := env.callChecker(t)
	for i := range 3 {
		check("warm acquire", "TransactWriteItems[6]", func() {
			_, err := rl.Acquire(env.ctx, "key", "gpt", c)
			require.NoError(t, err, "warm acquire %d", i)
		})
	}
	month, _, err := store.Limit(PerCalendarMonth("usd", 1)).CalendarBucket("gpt", env.clock.now())
	require.NoError(t, err)
	for _, id := range []string{"key", "proj", "org"} {
		require.Equal(t, int64((500_000_000-4*2_000)*1000), env.tokens(id, month, "usd"), "%s's month after four acquires", id)
	}
}
