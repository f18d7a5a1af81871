package limiter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestAdminScopes: one SetLimits, Limits and DeleteLimits address the
// three levels by scope; an entity scope without a resource is the
// entity's default; SetLimits at the system scope keeps the stored mode,
// SetSystemDefaults replaces both.
func TestAdminScopes(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	defer rl.Close()
	a := rl.Admin()
	_, err := a.CreateEntity(ctx, limiter.Entity{ID: "k"})
	require.NoError(t, err)

	sys := []limiter.Limit{limiter.PerMinute("rpm", 1)}
	res := []limiter.Limit{limiter.PerMinute("rpm", 2)}
	ent := []limiter.Limit{limiter.PerMinute("rpm", 3)}
	def := []limiter.Limit{limiter.PerMinute("rpm", 4)}
	require.NoError(t, a.SetSystemDefaults(ctx, sys, limiter.OnUnavailableAllow))
	require.NoError(t, a.SetLimits(ctx, limiter.Scope{Resource: "gpt"}, res))
	require.NoError(t, a.SetLimits(ctx, limiter.Scope{Entity: "k", Resource: "gpt"}, ent))
	require.NoError(t, a.SetLimits(ctx, limiter.Scope{Entity: "k"}, def))

	for _, tc := range []struct {
		scope limiter.Scope
		want  []limiter.Limit
	}{
		{limiter.Scope{}, sys},
		{limiter.Scope{Resource: "gpt"}, res},
		{limiter.Scope{Entity: "k", Resource: "gpt"}, ent},
		{limiter.Scope{Entity: "k"}, def},
		{limiter.Scope{Entity: "k", Resource: limiter.DefaultResource}, def},
	} {
		got, err := a.Limits(ctx, tc.scope)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "Limits(%+v)", tc.scope)
	}
	got, src, err := a.ResolveLimits(ctx, "k", "claude")
	require.NoError(t, err)
	require.Equal(t, def, got)
	require.Equal(t, limiter.SourceEntityDefault, src)

	// The mode stays when the system limits change alone.
	require.NoError(t, a.SetLimits(ctx, limiter.Scope{}, res))
	_, mode, err := a.SystemDefaults(ctx)
	require.NoError(t, err)
	require.Equal(t, limiter.OnUnavailableAllow, mode)
	require.NoError(t, a.SetSystemDefaults(ctx, sys, ""))
	_, mode, err = a.SystemDefaults(ctx)
	require.NoError(t, err)
	require.Equal(t, limiter.OnUnavailable(""), mode)

	require.NoError(t, a.DeleteLimits(ctx, limiter.Scope{Entity: "k"}))
	got, err = a.Limits(ctx, limiter.Scope{Entity: "k", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, a.DeleteLimits(ctx, limiter.Scope{}))
	got, err = a.Limits(ctx, limiter.Scope{})
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestAdminListingsPage: a listing longer than a page yields every item
// once, in order, and a loop that breaks stops reading.
func TestAdminListingsPage(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	defer rl.Close()
	a := rl.Admin()
	const n = 250 // more than two pages
	var want []string
	for i := range n {
		id := fmt.Sprintf("e%03d", i)
		want = append(want, id)
		_, err := a.CreateEntity(ctx, limiter.Entity{ID: id})
		require.NoError(t, err)
		require.NoError(t, a.SetLimits(ctx, limiter.Scope{Entity: id, Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("rpm", 1)}))
	}
	ents, err := iterx.Collect(a.Entities(ctx))
	require.NoError(t, err)
	var ids []string
	for _, e := range ents {
		ids = append(ids, e.ID)
	}
	require.Equal(t, want, ids)
	withLimits, err := iterx.Collect(a.EntitiesWithLimits(ctx, "gpt"))
	require.NoError(t, err)
	require.Equal(t, want, withLimits)

	seen := 0
	for _, err := range a.Entities(ctx) {
		require.NoError(t, err)
		if seen++; seen == 3 {
			break
		}
	}
	require.Equal(t, 3, seen)

	// A failure is yielded once, last.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var errs []error
	for _, err := range a.Entities(cctx) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
}
