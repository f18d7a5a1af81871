package main

import (
	"testing"

	limiter "github.com/zaelimiter/limiter"
)

// TestLimitsLevelCommands: `limits set|get|delete` reach the entity,
// resource and system levels, with the effects visible through the library.
func TestLimitsLevelCommands(t *testing.T) {
	e := newEnv(t)
	contains(t, e.ok("limits", "set", "--entity", "key-1", "--resource", "gpt-4", "-l", "rpm:5", "-l", "tpm:100"),
		"Set 2 limit(s) for entity 'key-1' on resource 'gpt-4'")
	contains(t, e.ok("limits", "set", "-e=key-1", "-l", "rpm:7"), "entity 'key-1' on resource '_default_'")
	contains(t, e.ok("limits", "set", "-r", "gpt-4", "-l", "rpm:1000"), "Set 1 default(s) for resource 'gpt-4'")
	contains(t, e.ok("limits", "set", "--system", "-l", "rpm:10", "--on-unavailable", "allow"), "on_unavailable: allow")

	if got, err := e.repo.GetLimits(e.ctx, "key-1", "gpt-4"); err != nil || len(got) != 2 {
		t.Errorf("entity limits on gpt-4 = %+v, %v", got, err)
	}
	if got, err := e.repo.GetLimits(e.ctx, "key-1", limiter.DefaultResource); err != nil || len(got) != 1 || got[0].Capacity != 7 {
		t.Errorf("entity default limits = %+v, %v", got, err)
	}
	if got, err := e.repo.GetResourceDefaults(e.ctx, "gpt-4"); err != nil || len(got) != 1 || got[0].Capacity != 1000 {
		t.Errorf("resource defaults = %+v, %v", got, err)
	}
	if got, ou, err := e.repo.GetSystemDefaults(e.ctx); err != nil || len(got) != 1 || ou != limiter.OnUnavailableAllow {
		t.Errorf("system defaults = %+v, %q, %v", got, ou, err)
	}

	var ent limitsJSON
	e.json(&ent, "limits", "get", "-e", "key-1", "-r", "gpt-4")
	if ent.EntityID != "key-1" || ent.Resource != "gpt-4" || len(ent.Limits) != 2 {
		t.Errorf("limits get --entity -o json = %+v", ent)
	}
	contains(t, e.ok("limits", "get", "--resource", "gpt-4"), "rpm: 1,000/min")
	contains(t, e.ok("limits", "get", "--system"), "on_unavailable: allow")

	e.fail("limits", "delete", "--system") // no --yes
	e.ok("limits", "delete", "--entity", "key-1", "--resource", "gpt-4", "--yes")
	e.ok("limits", "delete", "--resource", "gpt-4", "--yes")
	e.ok("limits", "delete", "--system", "--yes")
	if got, _ := e.repo.GetLimits(e.ctx, "key-1", "gpt-4"); len(got) != 0 {
		t.Errorf("entity limits after delete = %+v", got)
	}
	if got, _ := e.repo.GetResourceDefaults(e.ctx, "gpt-4"); len(got) != 0 {
		t.Errorf("resource defaults after delete = %+v", got)
	}
	if got, _, _ := e.repo.GetSystemDefaults(e.ctx); len(got) != 0 {
		t.Errorf("system defaults after delete = %+v", got)
	}

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
