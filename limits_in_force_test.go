package limiter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestLimitsInForce: the limits an acquire is checked against, from each
// of the four stored levels in precedence order, the override, the caps,
// and a cascading entity's parent with its own level.
func TestLimitsInForce(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.ConfigCacheTTL = 0 })
	t.Cleanup(func() { _ = rl.Close() })

	inForce := func(t *testing.T, entity string, opts ...limiter.AcquireOption) []limiter.LimitInForce {
		t.Helper()
		got, err := rl.LimitsInForce(ctx, entity, "gpt-4", opts...)
		require.NoError(t, err)
		return got
	}
	one := func(entity string, l limiter.Limit, src limiter.ConfigSource) limiter.LimitInForce {
		return limiter.LimitInForce{EntityID: entity, Resource: "gpt-4", Limit: l, Source: src}
	}

	_, err := rl.LimitsInForce(ctx, "key-1", "gpt-4")
	require.ErrorIs(t, err, limiter.ErrValidation, "no limits anywhere: refused as Acquire refuses")

	sys := limiter.PerMinute("rpm", 10)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{sys}))
	assert.Equal(t, []limiter.LimitInForce{one("key-1", sys, limiter.SourceSystem)}, inForce(t, "key-1"))

	res := limiter.PerMinute("rpm", 100)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4"}, []limiter.Limit{res}))
	assert.Equal(t, []limiter.LimitInForce{one("key-1", res, limiter.SourceResource)}, inForce(t, "key-1"))

	def := limiter.PerMinute("tpm", 5000)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-1", Resource: limiter.DefaultResource}, []limiter.Limit{def}))
	assert.Equal(t, []limiter.LimitInForce{one("key-1", def, limiter.SourceEntityDefault)}, inForce(t, "key-1"))

	own := []limiter.Limit{limiter.PerMinute("rpm", 50), limiter.PerMinute("tpm", 20_000)}
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"}, own))
	assert.Equal(t, []limiter.LimitInForce{one("key-1", own[0], limiter.SourceEntity), one("key-1", own[1], limiter.SourceEntity)},
		inForce(t, "key-1"))

	// A cap lowers the entity's limit it names; the override replaces
	// every level.
	capped := own[1]
	capped.Capacity, capped.RefillAmount = 1000, 1000
	assert.Equal(t, []limiter.LimitInForce{one("key-1", own[0], limiter.SourceEntity), one("key-1", capped, limiter.SourceEntity)},
		inForce(t, "key-1", limiter.WithLimitCaps(limiter.PerMinute("tpm", 1000))))
	over := limiter.PerSecond("rps", 2)
	assert.Equal(t, []limiter.LimitInForce{one("key-1", over, limiter.SourceOverride)}, inForce(t, "key-1", limiter.WithLimits(over)))
	assert.Empty(t, inForce(t, "key-1", limiter.WithLimits()))

	// A cascading entity: its limits, then its parent's, each from its
	// own level.
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj-1"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key-2", ParentID: "proj-1", Cascade: true})
	require.NoError(t, err)
	projLimits := []limiter.Limit{limiter.PerMinute("rpm", 1000)}
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj-1", Resource: "gpt-4"}, projLimits))
	assert.Equal(t, []limiter.LimitInForce{one("key-2", res, limiter.SourceResource), one("proj-1", projLimits[0], limiter.SourceEntity)},
		inForce(t, "key-2"))
	// A child without cascade is charged alone.
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key-3", ParentID: "proj-1"})
	require.NoError(t, err)
	assert.Equal(t, []limiter.LimitInForce{one("key-3", res, limiter.SourceResource)}, inForce(t, "key-3"))

	// What it reports is what Acquire checks: key-2 takes from both.
	lease, err := rl.Acquire(ctx, "key-2", "gpt-4", limiter.Consume{"rpm": 1})
	require.NoError(t, err)
	var got []string
	for _, s := range lease.Statuses() {
		got = append(got, s.EntityID+":"+s.Limit.Name)
	}
	assert.Equal(t, []string{"key-2:rpm", "proj-1:rpm"}, got)
	require.NoError(t, lease.Commit(ctx))

	_, err = rl.LimitsInForce(ctx, "bad#id", "gpt-4")
	require.ErrorIs(t, err, limiter.ErrInvalidIdentifier)
	require.NoError(t, rl.Close())
	_, err = rl.LimitsInForce(ctx, "key-1", "gpt-4")
	require.ErrorIs(t, err, limiter.ErrClosed)
}
