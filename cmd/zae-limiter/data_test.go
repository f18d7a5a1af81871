package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

func TestEntityCommands(t *testing.T) {
	e := newEnv(t)
	out := e.ok("entity", "create", "org-1", "--display-name", "Org One", "-m", "tier=gold")
	contains(t, out, "Created entity 'org-1'", "Name:    Org One", "Cascade: false")

	var created entityJSON
	e.json(&created, "entity", "create", "key-1", "--parent", "org-1", "--cascade")
	assert.Equal(t, "key-1", created.ID, "entity create -o json")
	assert.Equal(t, "org-1", created.ParentID, "entity create -o json")
	assert.True(t, created.Cascade, "entity create -o json")
	assert.NotEmpty(t, created.CreatedAt, "entity create -o json")
	ent, err := e.repo.Admin().Entity(e.ctx, "key-1")
	require.NoError(t, err)
	assert.Equal(t, "org-1", ent.ParentID, "GetEntity(key-1)")
	assert.True(t, ent.Cascade, "GetEntity(key-1)")
	msg := e.fail("entity", "create", "key-1")
	contains(t, msg, "key-1")
	// A parent that does not exist is refused, and nothing is stored.
	contains(t, e.fail("entity", "create", "orphan", "--parent", "nosuch", "--cascade"), "parent entity 'nosuch' not found")
	_, err = e.repo.Admin().Entity(e.ctx, "orphan")
	assert.ErrorIs(t, err, limiter.ErrEntityNotFound, "orphan stored")

	contains(t, e.ok("entity", "show", "key-1"), "Entity:", "key-1", "Parent:", "org-1", "Cascade:", "true")
	var shown entityJSON
	e.json(&shown, "entity", "show", "org-1")
	assert.Equal(t, "Org One", shown.Name, "entity show org-1 -o json")
	assert.Equal(t, map[string]string{"tier": "gold"}, shown.Metadata, "entity show org-1 -o json")
	assert.Empty(t, shown.ParentID, "entity show org-1 -o json")

	contains(t, e.ok("entity", "children", "org-1"), "ID", "CASCADE", "key-1")
	var kids struct {
		ParentID string       `json:"parent_id"`
		Children []entityJSON `json:"children"`
	}
	e.json(&kids, "entity", "children", "org-1")
	assert.Equal(t, "org-1", kids.ParentID, "entity children -o json")
	if assert.Len(t, kids.Children, 1, "entity children -o json") {
		assert.Equal(t, "key-1", kids.Children[0].ID, "entity children -o json")
	}

	out = e.ok("entity", "set-limits", "key-1", "-r", "gpt-4", "-l", "rpm:100", "--limit", "tpm:10000/min:20000")
	contains(t, out, "Set 2 limit(s) for entity 'key-1' on resource 'gpt-4':", "rpm: 100/min", "tpm: 10,000/min (burst: 20,000)")
	stored, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.True(t, sameLimits(stored, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10000).WithBurst(20000)}),
		"GetLimits(key-1, gpt-4) = %+v", stored)
	e.ok("entity", "set-limits", "org-1", "-l", "rpd:5000/day") // default resource
	stored, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "org-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	if assert.Len(t, stored, 1, "GetLimits(org-1, _default_)") {
		assert.Equal(t, 24*time.Hour, stored[0].RefillPeriod, "GetLimits(org-1, _default_)")
	}

	contains(t, e.ok("entity", "get-limits", "key-1", "-r", "gpt-4"), "LIMIT", "CAPACITY", "rpm", "100", "tpm", "20000", "60s")
	var got limitsJSON
	e.json(&got, "entity", "get-limits", "key-1", "--resource", "gpt-4")
	assert.Equal(t, "key-1", got.EntityID, "entity get-limits -o json")
	assert.Equal(t, "gpt-4", got.Resource, "entity get-limits -o json")
	if assert.Len(t, got.Limits, 2, "entity get-limits -o json") {
		assert.Equal(t, limitJSON{Name: "tpm", Capacity: 20000, RefillAmount: 10000, RefillPeriodSeconds: 60}, got.Limits[1], "entity get-limits -o json")
	}

	assert.Equal(t, "key-1\n", e.ok("entity", "list", "--with-custom-limits", "gpt-4"), "entity list")
	var listed struct{ Entities []string }
	e.json(&listed, "entity", "list", "--with-custom-limits", "claude")
	assert.Equal(t, []string{}, listed.Entities, "entity list (none) -o json: an empty list, not null")
	contains(t, e.ok("entity", "list-resources"), "gpt-4", "_default_")

	// Without --with-custom-limits: every entity of the namespace, in id
	// order, with its record.
	assert.Equal(t, "ID     NAME     PARENT  CASCADE  CREATED\n", firstLine(e.ok("entity", "list")), "entity list header")
	contains(t, e.ok("entity", "list"), "key-1  key-1    org-1   true", "org-1  Org One  -       false")
	var all struct{ Entities []entityJSON }
	e.json(&all, "entity", "list")
	if assert.Len(t, all.Entities, 2, "entity list -o json") {
		assert.Equal(t, "key-1", all.Entities[0].ID, "entity list -o json")
		assert.Equal(t, "org-1", all.Entities[0].ParentID, "entity list -o json")
		assert.Equal(t, "org-1", all.Entities[1].ID, "entity list -o json")
		assert.Equal(t, map[string]string{"tier": "gold"}, all.Entities[1].Metadata, "entity list -o json")
	}
	e.json(&all, "entity", "list", "--limit", "1")
	assert.Len(t, all.Entities, 1, "entity list --limit 1 -o json")

	contains(t, e.fail("entity", "delete-limits", "key-1", "-r", "gpt-4"), "without --yes")
	contains(t, e.ok("entity", "delete-limits", "key-1", "-r", "gpt-4", "--yes"), "Deleted limits for entity 'key-1' on resource 'gpt-4'")
	stored, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Empty(t, stored, "GetLimits after delete-limits")
	contains(t, e.ok("entity", "get-limits", "key-1", "-r", "gpt-4"), "No limits configured for entity 'key-1' on resource 'gpt-4'",
		"zae-limiter entity limits-in-force key-1 -r gpt-4 shows the limits in force")

	contains(t, e.ok("entity", "delete", "key-1", "-y"), "Deleted entity 'key-1'")
	_, err = e.repo.Admin().Entity(e.ctx, "key-1")
	assert.ErrorIs(t, err, limiter.ErrEntityNotFound, "GetEntity after delete")
	assert.Equal(t, "limiter: entity not found: key-1", e.fail("entity", "show", "key-1"), "entity show (deleted)")
	contains(t, e.fail("entity", "create", "bad id"), "limiter: invalid entity_id")
}

// firstLine returns the first line of s, with its newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i+1]
	}
	return s
}

// TestEntityLimitsInForce: `entity limits-in-force` shows the limits an
// acquire is checked against and the level each comes from, the parent's
// of a cascading entity included; `entity get-limits` finding nothing at
// its level points to it.
func TestEntityLimitsInForce(t *testing.T) {
	e := newEnv(t)
	contains(t, e.ok("entity", "limits-in-force", "key-1", "-r", "gpt-4"),
		"No limits in force for entity 'key-1' on resource 'gpt-4': an acquire fails until limits are stored")
	contains(t, e.fail("entity", "limits-in-force", "key-1"), "--resource RESOURCE is required")

	e.ok("system", "set-defaults", "-l", "rpm:10")
	e.ok("resource", "set-defaults", "gpt-4", "-l", "rpm:100", "-l", "tpm:10000")
	e.ok("entity", "create", "proj-1")
	e.ok("entity", "create", "key-1", "--parent", "proj-1", "--cascade")
	e.ok("entity", "set-limits", "proj-1", "-l", "rpm:1000")
	contains(t, e.ok("entity", "get-limits", "key-1", "-r", "gpt-4"), "No limits configured for entity 'key-1' on resource 'gpt-4'",
		"the resource's or the system defaults may apply")

	out := e.ok("entity", "limits-in-force", "key-1", "-r", "gpt-4")
	assert.Equal(t, `Limits in force for entity 'key-1' on resource 'gpt-4':
ENTITY  LIMIT  CAPACITY  REFILL  PERIOD  SOURCE
key-1   rpm    100       100     60s     resource gpt-4 defaults
key-1   tpm    10000     10000   60s     resource gpt-4 defaults
proj-1  rpm    1000      1000    60s     entity proj-1 on _default_
'key-1' cascades to 'proj-1': an acquire takes from both buckets.
`, out, "entity limits-in-force")
	contains(t, e.ok("entity", "limits-in-force", "other", "-r", "claude"), "other   rpm    10        10      60s     system defaults")

	e.ok("entity", "set-limits", "key-1", "-r", "gpt-4", "-l", "rpm:5")
	var got struct {
		EntityID string             `json:"entity_id"`
		Resource string             `json:"resource"`
		Limits   []limitInForceJSON `json:"limits"`
	}
	e.json(&got, "entity", "limits-in-force", "key-1", "--resource", "gpt-4")
	assert.Equal(t, "key-1", got.EntityID)
	assert.Equal(t, "gpt-4", got.Resource)
	assert.Equal(t, []limitInForceJSON{
		{EntityID: "key-1", limitJSON: limitJSON{Name: "rpm", Capacity: 5, RefillAmount: 5, RefillPeriodSeconds: 60}, Source: "entity"},
		{EntityID: "proj-1", limitJSON: limitJSON{Name: "rpm", Capacity: 1000, RefillAmount: 1000, RefillPeriodSeconds: 60}, Source: "entity_default"},
	}, got.Limits, "entity limits-in-force -o json")
}

func TestResourceAndSystemDefaults(t *testing.T) {
	e := newEnv(t)
	out := e.ok("resource", "set-defaults", "gpt-4", "-l", "rpm:1000", "-l", "tph:50000/hour")
	contains(t, out, "Set 2 default(s) for resource 'gpt-4':", "rpm: 1,000/min", "tph: 50,000/hour")
	var res limitsJSON
	e.json(&res, "resource", "get-defaults", "gpt-4")
	assert.Equal(t, "gpt-4", res.Resource, "resource get-defaults -o json")
	if assert.Len(t, res.Limits, 2, "resource get-defaults -o json") {
		assert.Equal(t, int64(3600), res.Limits[1].RefillPeriodSeconds, "resource get-defaults -o json")
	}
	defaults, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Len(t, defaults, 2, "GetResourceDefaults")
	assert.Equal(t, "gpt-4\n", e.ok("resource", "list"), "resource list")
	e.fail("resource", "delete-defaults", "gpt-4")
	e.ok("resource", "delete-defaults", "gpt-4", "--yes")
	contains(t, e.ok("resource", "get-defaults", "gpt-4"), "No defaults configured for resource 'gpt-4'")
	var list struct{ Resources []string }
	e.json(&list, "resource", "list")
	assert.Equal(t, []string{}, list.Resources, "resource list -o json: an empty list, not null")

	contains(t, e.ok("system", "set-defaults", "-l", "rpm:10", "--on-unavailable", "allow"),
		"Set 1 system-wide default(s):", "rpm: 10/min", "on_unavailable: allow")
	var sys limitsJSON
	e.json(&sys, "system", "get-defaults")
	assert.Equal(t, "allow", sys.OnUnavailable, "system get-defaults -o json")
	if assert.Len(t, sys.Limits, 1, "system get-defaults -o json") {
		assert.Equal(t, int64(10), sys.Limits[0].Capacity, "system get-defaults -o json")
	}
	limits, ou, err := e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableAllow, ou, "GetSystemDefaults")
	assert.Len(t, limits, 1, "GetSystemDefaults")
	contains(t, e.ok("system", "get-defaults"), "rpm", "on_unavailable: allow")
	e.ok("system", "set-defaults", "--on-unavailable", "block")
	limits, ou, err = e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableBlock, ou, "GetSystemDefaults after on-unavailable only")
	assert.Empty(t, limits, "GetSystemDefaults after on-unavailable only")
	e.fail("system", "delete-defaults")
	e.ok("system", "delete-defaults", "--yes")
	contains(t, e.ok("system", "get-defaults"), "No system defaults configured")
}

func TestAuditList(t *testing.T) {
	e := newEnv(t)
	e.ok("entity", "create", "key-1")
	e.ok("entity", "set-limits", "key-1", "-r", "gpt-4", "-l", "rpm:5")
	out := e.ok("audit", "list", "-e", "key-1")
	contains(t, out, "TIMESTAMP", "ACTION", "entity_created", "limits_set", "gpt-4", "Total: 2 events")

	var all struct {
		EntityID string           `json:"entity_id"`
		Events   []auditEventJSON `json:"events"`
		Next     string           `json:"next_start_event_id"`
	}
	e.json(&all, "audit", "list", "--entity-id", "key-1")
	require.Len(t, all.Events, 2, "audit list -o json")
	assert.Equal(t, store.AuditLimitsSet, all.Events[0].Action, "audit list -o json: newest first")
	assert.Equal(t, store.AuditEntityCreated, all.Events[1].Action, "audit list -o json")
	assert.NotNil(t, all.Events[0].Details["limits"], "audit list -o json: details")
	assert.Empty(t, all.Next, "audit list -o json: no next page")

	out = e.ok("audit", "list", "-e", "key-1", "-l", "1")
	contains(t, out, "Total: 1 events", "More events may exist. Use --start-event-id "+all.Events[0].EventID)
	var older struct{ Events []auditEventJSON }
	e.json(&older, "audit", "list", "-e", "key-1", "--start-event-id", all.Events[0].EventID)
	if assert.Len(t, older.Events, 1, "audit list --start-event-id") {
		assert.Equal(t, all.Events[1].EventID, older.Events[0].EventID, "audit list --start-event-id")
	}

	e.ok("resource", "set-defaults", "gpt-4", "-l", "rpm:5")
	contains(t, e.ok("audit", "list", "-e", "$RESOURCE:gpt-4"), "limits_set")
	contains(t, e.ok("audit", "list", "-e", "nobody"), "No audit events found for entity: nobody")
}

// putSnapshot writes a usage snapshot item as the aggregator does (schema
// 0.10.0 layout).
func (e *env) putSnapshot(entity, resource, window, start string, counters map[string]int64) {
	e.t.Helper()
	ns := e.repo.repo.NamespaceID()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	item := map[string]types.AttributeValue{
		"PK": s(ns + "/ENTITY#" + entity), "SK": s("#USAGE#" + resource + "#" + start),
		"entity_id": s(entity), "resource": s(resource), "window": s(window), "window_start": s(start),
		"GSI2PK": s(ns + "/RESOURCE#" + resource), "GSI2SK": s("USAGE#" + start + "#" + entity),
		"total_events": n(int64(len(counters))),
	}
	for k, v := range counters {
		item[k] = n(v)
	}
	_, err := e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
	require.NoError(e.t, err)
}

func TestUsageCommands(t *testing.T) {
	e := newEnv(t)
	for h := 1; h <= 3; h++ {
		e.putSnapshot("e1", "gpt", "hourly", fmt.Sprintf("2026-01-02T%02d:00:00Z", h), map[string]int64{"rpm": int64(h), "tpm": int64(1000 * h)})
	}
	e.putSnapshot("e2", "gpt", "hourly", "2026-01-02T02:00:00Z", map[string]int64{"rpm": 7})
	e.putSnapshot("e1", "gpt", "daily", "2026-01-02T00:00:00Z", map[string]int64{"rpm": 6})

	out := e.ok("usage", "list", "-e", "e1", "-w", "hourly")
	contains(t, out, "WINDOW START", "2026-01-02T03:00:00Z", "rpm=3 tpm=3,000", "Total: 3 snapshots")
	var list struct {
		Snapshots []usageSnapshotJSON `json:"snapshots"`
		More      bool                `json:"more"`
	}
	e.json(&list, "usage", "list", "-e", "e1", "-r", "gpt", "-w", "hourly", "--start", "2026-01-02T02:00:00Z")
	assert.False(t, list.More, "usage list -o json")
	if assert.Len(t, list.Snapshots, 2, "usage list -o json") {
		assert.Equal(t, "2026-01-02T03:00:00Z", list.Snapshots[0].WindowStart, "usage list -o json: newest first")
		assert.Equal(t, "2026-01-02T03:59:59Z", list.Snapshots[0].WindowEnd, "usage list -o json")
		assert.Equal(t, int64(3000), list.Snapshots[0].Counters["tpm"], "usage list -o json")
	}
	e.json(&list, "usage", "list", "-e", "e1", "-l", "2")
	assert.Len(t, list.Snapshots, 2, "usage list -l 2 -o json")
	assert.True(t, list.More, "usage list -l 2 -o json")
	e.json(&list, "usage", "list", "-r", "gpt", "-w", "hourly", "--end", "2026-01-02")
	assert.Empty(t, list.Snapshots, "usage list --end before all")
	e.json(&list, "usage", "list", "-r", "gpt", "-w", "hourly")
	assert.Len(t, list.Snapshots, 4, "usage list -r gpt (GSI2)")

	var sum usageSummaryJSON
	e.json(&sum, "usage", "summary", "-e", "e1", "-w", "hourly")
	assert.Equal(t, 3, sum.SnapshotCount, "usage summary -o json")
	assert.EqualValues(t, 6, sum.Total["rpm"], "usage summary -o json")
	assert.EqualValues(t, 6000, sum.Total["tpm"], "usage summary -o json")
	assert.EqualValues(t, 2, sum.Average["rpm"], "usage summary -o json")
	assert.Equal(t, "2026-01-02T01:00:00Z", sum.MinWindowStart, "usage summary -o json")
	assert.Equal(t, "2026-01-02T03:00:00Z", sum.MaxWindowStart, "usage summary -o json")
	// Without --window: the finest window present, never a sum over
	// windows (the daily snapshot holds the same traffic again).
	contains(t, e.ok("usage", "summary", "-r", "gpt"), "Window:    hourly (the finest present", "Snapshots: 4", "rpm    13 ")
	e.json(&sum, "usage", "summary", "-e", "e1")
	assert.Equal(t, "hourly", sum.Window, "usage summary without --window")
	assert.Equal(t, 3, sum.SnapshotCount, "usage summary without --window")
	assert.EqualValues(t, 6, sum.Total["rpm"], "usage summary without --window")
	e.putSnapshot("e3", "gpt", "daily", "2026-01-03T00:00:00Z", map[string]int64{"rpm": 4})
	e.putSnapshot("e3", "gpt", "monthly", "2026-01-01T00:00:00Z", map[string]int64{"rpm": 9})
	e.json(&sum, "usage", "summary", "-e", "e3")
	assert.Equal(t, "daily", sum.Window, "usage summary -e e3 (daily and monthly)")
	assert.Equal(t, 1, sum.SnapshotCount, "usage summary -e e3 (daily and monthly)")
	assert.EqualValues(t, 4, sum.Total["rpm"], "usage summary -e e3 (daily and monthly)")
	e.json(&sum, "usage", "summary", "-e", "e3", "-w", "monthly")
	assert.Equal(t, "monthly", sum.Window, "usage summary -e e3 -w monthly")
	assert.EqualValues(t, 9, sum.Total["rpm"], "usage summary -e e3 -w monthly")
	contains(t, e.ok("usage", "list", "-e", "nobody"), "No usage snapshots found")
	contains(t, e.ok("usage", "list", "-e", "e1", "-w", "hourly", "--plot"), "Usage Plot: gpt (hourly)", "Entity: e1", "RPM", "TPM",
		"3,000 ┤  ╭", "3.0 ┤  ╭", "1.2 ┤ │", "Time range: 2026-01-02T01:00:00Z to 2026-01-02T03:00:00Z", "Data points: 3")
	contains(t, e.fail("usage", "list", "-e", "e1", "-p", "-o", "json"), "--plot draws charts")
	contains(t, e.fail("usage", "list", "-e", "e1", "--start", "yesterday"), `invalid --start "yesterday"`)
	contains(t, e.fail("usage", "summary", "-e", "e1", "-w", "weekly"), `invalid --window "weekly"`)
}

func TestNamespaceCommands(t *testing.T) {
	e := newEnv(t)
	out := e.ok("namespace", "register", "ns-a", "ns-b")
	contains(t, out, "Registered 2 namespace(s):", "ns-a: ", "ns-b: ")
	var reg struct{ Namespaces []namespaceJSON }
	e.json(&reg, "namespace", "register", "ns-a")
	require.Len(t, reg.Namespaces, 1, "namespace register -o json")
	require.NotEmpty(t, reg.Namespaces[0].NamespaceID, "namespace register -o json")
	id := reg.Namespaces[0].NamespaceID

	contains(t, e.ok("namespace", "list"), "NAME", "default", "ns-a", "ns-b", id, "Total: 3 namespace(s)")
	var shown namespaceJSON
	e.json(&shown, "namespace", "show", "ns-a")
	assert.Equal(t, "ns-a", shown.Name, "namespace show -o json")
	assert.Equal(t, id, shown.NamespaceID, "namespace show -o json")
	assert.Equal(t, "active", shown.Status, "namespace show -o json")
	assert.NotEmpty(t, shown.CreatedAt, "namespace show -o json")

	// Data is scoped by --namespace.
	e.ok("entity", "create", "e1", "-N", "ns-b")
	e.ok("entity", "show", "e1", "--namespace", "ns-b")
	e.fail("entity", "show", "e1")

	e.fail("namespace", "delete", "ns-a")
	e.ok("namespace", "delete", "ns-a", "--yes")
	var list struct{ Namespaces []namespaceJSON }
	e.json(&list, "namespace", "list")
	assert.Len(t, list.Namespaces, 2, "namespace list after delete")
	var orphans struct{ Namespaces []namespaceJSON }
	e.json(&orphans, "namespace", "orphans")
	require.Len(t, orphans.Namespaces, 1, "namespace orphans")
	assert.Equal(t, id, orphans.Namespaces[0].NamespaceID, "namespace orphans")
	assert.NotEmpty(t, orphans.Namespaces[0].DeletedAt, "namespace orphans")
	contains(t, e.ok("namespace", "recover", id), "Recovered namespace 'ns-a'")
	contains(t, e.ok("namespace", "list"), "ns-a")
	contains(t, e.fail("namespace", "purge", id, "--yes"), "active")

	e.ok("namespace", "delete", "ns-a", "-y")
	e.fail("namespace", "purge", id)
	contains(t, e.ok("namespace", "purge", id, "--yes"), "Purged namespace "+id)
	contains(t, e.ok("namespace", "orphans"), "No orphan namespaces.")
	_, err := e.repo.GetNamespace(e.ctx, "ns-a")
	assert.Error(t, err, "GetNamespace(ns-a) after purge")
	assert.Contains(t, e.ok("namespace", "list"), "ns-b", "ns-b lost")
}

func TestVersionAndCheck(t *testing.T) {
	e := newEnv(t)
	out := e.ok("version")
	contains(t, out, "Client Version:", "go-"+limiter.ClientVersion, "Schema Version:", limiter.SchemaVersion, "Status:", "COMPATIBLE")
	var rep versionReport
	e.json(&rep, "check")
	assert.True(t, rep.Compatible, "check -o json")
	assert.True(t, rep.Initialized, "check -o json")
	assert.Equal(t, limiter.SchemaVersion, rep.InfraSchema, "check -o json")
	assert.Equal(t, "go-"+limiter.ClientVersion, rep.ClientVersion, "check -o json")
	contains(t, e.ok("check"), "Result: COMPATIBLE")

	// A table that needs a newer client.
	require.NoError(t, e.repo.repo.SetVersionRecord(e.ctx, limiter.VersionRecord{SchemaVersion: limiter.SchemaVersion, ClientMinVersion: "99.0.0"}))
	for _, cmd := range []string{"version", "check"} {
		code, out, errs := e.cli(cmd)
		msg := checkFailure(t, []string{cmd}, code, out, errs, exitIncompatible)
		contains(t, msg, "incompatible: client "+limiter.ClientVersion+" is older than the table's minimum client version 99.0.0")
		contains(t, out, "INCOMPATIBLE")
	}

	// A table of another major schema version.
	require.NoError(t, e.repo.repo.SetVersionRecord(e.ctx, limiter.VersionRecord{SchemaVersion: "1.0.0", ClientMinVersion: "0.0.0"}))
	code, out, errs := e.cli("check", "-o", "json")
	msg := checkFailure(t, []string{"check"}, code, out, errs, exitIncompatible)
	contains(t, msg, "schema migration required")
	contains(t, out, `"compatible": false`, `"infra_schema_version": "1.0.0"`)
}
