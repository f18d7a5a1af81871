package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The cascade-depth scenario: deleting an entity keeps its children, so
// creating the id again under a deeper parent would join the kept
// children's chain to the new ancestors. CreateEntity counts the
// descendants that cascade into the entity as well as its ancestors, so
// no chain the library builds charges more than MaxCascadeLevels entities
// and every level of a chain it accepts is charged.

func init() {
	scenarios = append(scenarios, scenario{"CascadeDepthDescendants", cascadeDepthDescendants})
}

func cascadeDepthDescendants(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	for _, e := range []limiter.Entity{
		{ID: "top"},
		{ID: "top2", ParentID: "top", Cascade: true},
		{ID: "org", Cascade: true},
		{ID: "proj", ParentID: "org", Cascade: true},
		{ID: "key", ParentID: "proj", Cascade: true},
	} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err, "create %s", e.ID)
	}
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "top", Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("rpm", 5)}))
	for _, id := range []string{"top2", "org", "proj", "key"} {
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: id, Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("rpm", 1000)}))
	}
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "org"))

	// key → proj → org → top2 → top would be five levels.
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org", ParentID: "top2", Cascade: true})
	b.noteErr("org under top2", err)
	require.ErrorIs(t, err, limiter.ErrCascadeTooDeep, "org under top2: %v", err)
	_, err = rl.Admin().Entity(ctx, "org")
	require.ErrorIs(t, err, limiter.ErrEntityNotFound, "a refused entity is not stored")

	// key → proj → org → top is four: accepted, and top is charged.
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org", ParentID: "top", Cascade: true})
	b.noteErr("org under top", err)
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("rpm", 1000)}))
	admitted := 0
	for range 20 {
		lease, err := rl.Acquire(ctx, "key", "gpt", store.Consume{"rpm": 1})
		if err == nil {
			require.NoError(t, lease.Commit(ctx))
			admitted++
		}
	}
	b.note("admitted on key: %d of 20; top: %s", admitted, b.bucket("top", "gpt"))
	require.Equal(t, 5, admitted, "top's 5 a minute bounds key")

	// A non-cascading org ends the chain there: key → proj → org under top2.
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "org"))
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org", ParentID: "top2"})
	b.noteErr("non-cascading org under top2", err)
	require.NoError(t, err)

	// Children created while their parent's parent was missing can chain
	// four levels below a deleted entity: re-creating it at the top, with
	// no parent, would make five.
	for _, e := range []limiter.Entity{
		{ID: "e"},
		{ID: "d", ParentID: "e", Cascade: true},
	} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err, "create %s", e.ID)
	}
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "e"))
	for _, e := range []limiter.Entity{
		{ID: "c", ParentID: "d", Cascade: true},
		{ID: "b", ParentID: "c", Cascade: true},
		{ID: "a", ParentID: "b", Cascade: true},
	} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err, "create %s", e.ID)
	}
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "e"})
	b.noteErr("e at the top of a → b → c → d", err)
	require.ErrorIs(t, err, limiter.ErrCascadeTooDeep, "e: %v", err)
}
