package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
)

// TestLimitsLevelCommands: `limits set|get|delete` reach the entity,
// resource and system levels, with the effects visible through the library.
func TestLimitsLevelCommands(t *testing.T) {
	e := newEnv(t)
	e.ok("entity", "create", "key-1") // as in docs/cli.md, where key-1 was created before
	contains(t, e.ok("limits", "set", "--entity", "key-1", "--resource", "gpt-4", "-l", "rpm:5", "-l", "tpm:100"),
		"Set 2 limit(s) for entity 'key-1' on resource 'gpt-4'")
	contains(t, e.ok("limits", "set", "-e=key-1", "-l", "rpm:7"), "entity 'key-1' on resource '_default_'")
	contains(t, e.ok("limits", "set", "-r", "gpt-4", "-l", "rpm:1000"), "Set 1 default(s) for resource 'gpt-4'")
	contains(t, e.ok("limits", "set", "--system", "-l", "rpm:10", "--on-unavailable", "allow"), "on_unavailable: allow")

	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Len(t, got, 2, "entity limits on gpt-4")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	if assert.Len(t, got, 1, "entity default limits") {
		assert.Equal(t, int64(7), got[0].Capacity, "entity default limits")
	}
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	if assert.Len(t, got, 1, "resource defaults") {
		assert.Equal(t, int64(1000), got[0].Capacity, "resource defaults")
	}
	got, ou, err := e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Len(t, got, 1, "system defaults")
	assert.Equal(t, limiter.OnUnavailableAllow, ou, "system defaults")

	var ent limitsJSON
	e.json(&ent, "limits", "get", "-e", "key-1", "-r", "gpt-4")
	assert.Equal(t, "key-1", ent.EntityID, "limits get --entity -o json")
	assert.Equal(t, "gpt-4", ent.Resource, "limits get --entity -o json")
	assert.Len(t, ent.Limits, 2, "limits get --entity -o json")
	contains(t, e.ok("limits", "get", "--resource", "gpt-4"), "rpm: 1,000/min")
	contains(t, e.ok("limits", "get", "--system"), "on_unavailable: allow")

	e.fail("limits", "delete", "--system") // no --yes
	e.ok("limits", "delete", "--entity", "key-1", "--resource", "gpt-4", "--yes")
	e.ok("limits", "delete", "--resource", "gpt-4", "--yes")
	e.ok("limits", "delete", "--system", "--yes")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Empty(t, got, "entity limits after delete")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Empty(t, got, "resource defaults after delete")
	got, _, err = e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "system defaults after delete")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"limits", "set", "-l", "rpm:5"}, "give exactly one of"},
		{[]string{"limits", "set", "--system", "-e", "k", "-l", "rpm:5"}, "give exactly one of"},
		{[]string{"limits", "set", "-e", "k", "-l", "rpm:five"}, `invalid limit "rpm:five"`},
		{[]string{"limits", "get", "--entity"}, "flag needs an argument: --entity"},
	} {
		contains(t, e.fail(c.args...), c.want)
	}
	contains(t, e.ok("limits", "set", "--help"), "--entity ID [--resource R]", "entity set-limits")
}
