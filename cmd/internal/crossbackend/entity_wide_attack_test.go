package crossbackend_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestEntityWideSameNameBothCharged: rpm 10 per model and rpm 15 on
// AllResources both count: calls spread over three models admit 15 (the
// entity-wide limit), and each model's bucket holds what its calls took.
func TestEntityWideSameNameBothCharged(t *testing.T) {
	eachBackendCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 10)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("rpm", 15)}))
		per := map[string]int64{}
		admitted := int64(0)
		for i := range 30 {
			m := models[i%3]
			if _, err := rl.Acquire(ctx, "e", m, limiter.Consume{"rpm": 1}); err == nil {
				per[m]++
				admitted++
			} else {
				require.True(t, isRateLimited(err), "%v", err)
			}
		}
		require.Equal(t, int64(15), admitted)
		for _, m := range models[:3] {
			a, err := rl.Available(ctx, "e", m)
			require.NoError(t, err)
			require.Equal(t, 10-per[m], a["rpm"], m)
		}
		a, err := rl.Available(ctx, "e", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(0), a["rpm"])
		// LimitsInForce shows both buckets.
		lif, err := rl.LimitsInForce(ctx, "e", "gpt-4o")
		require.NoError(t, err)
		require.Len(t, lif, 2)
		require.Equal(t, "gpt-4o", lif[0].Resource)
		require.Equal(t, limiter.AllResources, lif[1].Resource)
		require.Equal(t, limiter.SourceEntity, lif[1].Source)
	})
}

// TestEntityWideRefusalTakesNothing: a refusal by any bucket of the plan
// (the model's, the key's entity-wide one, the project's) leaves every
// bucket as it was.
func TestEntityWideRefusalTakesNothing(t *testing.T) {
	eachBackendCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "proj", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("tpm", 1000)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		snapshot := func() [3]map[string]int64 {
			var out [3]map[string]int64
			var err error
			out[0], err = rl.Available(ctx, "key", "gpt-4o")
			require.NoError(t, err)
			out[1], err = rl.Available(ctx, "key", limiter.AllResources)
			require.NoError(t, err)
			out[2], err = rl.Available(ctx, "proj", limiter.AllResources)
			require.NoError(t, err)
			return out
		}
		l, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 100, "usd": 100_000})
		require.NoError(t, err)
		require.NoError(t, l.Commit(ctx))
		before := snapshot()
		for _, c := range []limiter.Consume{
			{"rpm": 1, "tpm": 2000, "usd": 1},     // the model's bucket refuses
			{"rpm": 200, "tpm": 1, "usd": 1},      // the key's entity-wide bucket
			{"rpm": 1, "tpm": 1, "usd": 950_000},  // the project's budget
			{"rpm": 200, "tpm": 2000, "usd": usd}, // all three
		} {
			_, err := rl.Acquire(ctx, "key", "gpt-4o", c)
			require.True(t, isRateLimited(err), "%v: %v", c, err)
			require.Equal(t, before, snapshot(), "%v took something", c)
		}
		// A name no bucket has is refused as invalid.
		_, err = rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rmp": 1})
		require.ErrorIs(t, err, limiter.ErrValidation)
		// The resource "*" is not acquired on.
		_, err = rl.Acquire(ctx, "key", limiter.AllResources, limiter.Consume{"rpm": 1})
		require.ErrorIs(t, err, limiter.ErrInvalidName)
	})
}

// TestEntityWideConfigRecreated: an entity-wide budget deleted while a
// lease holds part of it, then stored again: the lease ends normally,
// acquires meanwhile do not charge the bucket, and the budget stored
// again does not refill it (what was spent stays spent).
func TestEntityWideConfigRecreated(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		budget := []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.AllResources}, budget))
		lease, err := rl.Acquire(ctx, "e", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 300_000})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.AllResources}))
		// Without the budget, usd is no limit of e: refused as invalid.
		_, err = rl.Acquire(ctx, "e", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1})
		require.ErrorIs(t, err, limiter.ErrValidation)
		l2, err := rl.Acquire(ctx, "e", "gpt-4o", limiter.Consume{"rpm": 1})
		require.NoError(t, err)
		require.NoError(t, l2.Commit(ctx))
		require.NoError(t, lease.Adjust(limiter.Consume{"usd": 100_000}))
		require.NoError(t, lease.Commit(ctx))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: limiter.AllResources}, budget))
		left, err := rl.Available(ctx, "e", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(usd-400_000), left["usd"], "stored again, the budget is not refilled")
		admitted := 0
		for range 5 {
			if _, err := rl.Acquire(ctx, "e", "gpt-4o", limiter.Consume{"usd": 200_000}); err == nil {
				admitted++
			}
		}
		require.Equal(t, 3, admitted)
	})
}

// TestEntityWideReparentedKey: a key moved from one project to another
// (deleted and created again with the other parent) while a second
// limiter still holds the old parent in its entity cache: each project's
// entity-wide budget is never exceeded, whichever limiter charges it.
func TestEntityWideReparentedKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl1 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl1.Close()
		rl2 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl2.Close()
		for _, p := range []string{"projA", "projB"} {
			_, err := rl1.Admin().CreateEntity(ctx, limiter.Entity{ID: p})
			require.NoError(t, err)
			require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: p, Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		}
		_, err := rl1.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "projA", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 10_000)}))
		// Both limiters learn key → projA.
		for _, rl := range []*limiter.RateLimiter{rl1, rl2} {
			l, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 100_000})
			require.NoError(t, err)
			require.NoError(t, l.Commit(ctx))
		}
		require.NoError(t, rl1.Admin().DeleteEntity(ctx, "key"))
		_, err = rl1.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "projB", Cascade: true})
		require.NoError(t, err)
		require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 10_000)}))
		var wg sync.WaitGroup
		var admitted atomic.Int64
		for i := range 40 {
			rl := rl1
			if i%2 == 1 {
				rl = rl2
			}
			wg.Go(func() {
				_, err := rl.Acquire(ctx, "key", models[i%len(models)], limiter.Consume{"rpm": 1, "usd": 100_000})
				if err == nil {
					admitted.Add(1)
				} else if !isRateLimited(err) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, p := range []string{"projA", "projB"} {
			left, err := rl1.Available(ctx, p, limiter.AllResources)
			require.NoError(t, err)
			require.GreaterOrEqual(t, left["usd"], int64(0), "%s's budget exceeded", p)
		}
		// 200,000 were spent on projA before the move: at most 8 + 10 more.
		require.LessOrEqual(t, admitted.Load(), int64(18))
		require.GreaterOrEqual(t, admitted.Load(), int64(10), "projB's budget admits 10 after the move")
	})
}

// TestEntityWideStaleConfigCache: a limiter whose config cache holds the
// project without entity-wide limits keeps charging without them until
// its cache's TTL, then charges the budget stored by another limiter;
// the budget's bucket never goes below zero.
func TestEntityWideStaleConfigCache(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl1 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl1.Close()
		rl2 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now }, func(o *limiter.Options) { o.ConfigCacheTTL = time.Minute })
		defer rl2.Close()
		require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 10_000)}))
		l, err := rl2.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1})
		require.NoError(t, err)
		require.NoError(t, l.Commit(ctx))
		require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		// rl2 does not know usd yet: a name no limit of its view has.
		_, err = rl2.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1})
		require.ErrorIs(t, err, limiter.ErrValidation)
		clk.set(clk.now().Add(time.Minute + time.Second))
		admitted := 0
		for i := range 8 {
			rl := rl1
			if i%2 == 1 {
				rl = rl2
			}
			_, err := rl.Acquire(ctx, "proj", models[i%len(models)], limiter.Consume{"rpm": 1, "usd": 300_000})
			if err == nil {
				admitted++
				continue
			}
			require.True(t, isRateLimited(err), "call %d: %v", i, err)
		}
		require.Equal(t, 3, admitted)
	})
}
