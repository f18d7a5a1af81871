package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

func TestEntityCommands(t *testing.T) {
	e := newEnv(t)
	out := e.ok("entity", "create", "org-1", "--display-name", "Org One", "-m", "tier=gold")
	contains(t, out, "Created entity 'org-1'", "Name:    Org One", "Cascade: false")

	var created entityJSON
	e.json(&created, "entity", "create", "key-1", "--parent", "org-1", "--cascade")
	if created.ID != "key-1" || created.ParentID != "org-1" || !created.Cascade || created.CreatedAt == "" {
		t.Errorf("entity create -o json = %+v", created)
	}
	if got, err := e.repo.GetEntity(e.ctx, "key-1"); err != nil || got.ParentID != "org-1" || !got.Cascade {
		t.Errorf("GetEntity(key-1) = %+v, %v", got, err)
	}
	msg := e.fail("entity", "create", "key-1")
	contains(t, msg, "key-1")
	// A parent that does not exist is refused, and nothing is stored.
	contains(t, e.fail("entity", "create", "orphan", "--parent", "nosuch", "--cascade"), "parent entity 'nosuch' not found")
	if _, err := e.repo.GetEntity(e.ctx, "orphan"); !errors.Is(err, limiter.ErrEntityNotFound) {
		t.Errorf("orphan stored: %v", err)
	}

	contains(t, e.ok("entity", "show", "key-1"), "Entity:", "key-1", "Parent:", "org-1", "Cascade:", "true")
	var shown entityJSON
	e.json(&shown, "entity", "show", "org-1")
	if shown.Name != "Org One" || shown.Metadata["tier"] != "gold" || shown.ParentID != "" {
		t.Errorf("entity show org-1 -o json = %+v", shown)
	}

	contains(t, e.ok("entity", "children", "org-1"), "ID", "CASCADE", "key-1")
	var kids struct {
		ParentID string       `json:"parent_id"`
		Children []entityJSON `json:"children"`
	}
	e.json(&kids, "entity", "children", "org-1")
	if kids.ParentID != "org-1" || len(kids.Children) != 1 || kids.Children[0].ID != "key-1" {
		t.Errorf("entity children -o json = %+v", kids)
	}

	out = e.ok("entity", "set-limits", "key-1", "-r", "gpt-4", "-l", "rpm:100", "--limit", "tpm:10000/min:20000")
	contains(t, out, "Set 2 limit(s) for entity 'key-1' on resource 'gpt-4':", "rpm: 100/min", "tpm: 10,000/min (burst: 20,000)")
	stored, err := e.repo.GetLimits(e.ctx, "key-1", "gpt-4")
	if err != nil || !sameLimits(stored, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10000).WithBurst(20000)}) {
		t.Errorf("GetLimits(key-1, gpt-4) = %+v, %v", stored, err)
	}
	e.ok("entity", "set-limits", "org-1", "-l", "rpd:5000/day") // default resource
	if got, _ := e.repo.GetLimits(e.ctx, "org-1", limiter.DefaultResource); len(got) != 1 || got[0].RefillPeriod != 24*time.Hour {
		t.Errorf("GetLimits(org-1, _default_) = %+v", got)
	}

	contains(t, e.ok("entity", "get-limits", "key-1", "-r", "gpt-4"), "LIMIT", "CAPACITY", "rpm", "100", "tpm", "20000", "60s")
	var got limitsJSON
	e.json(&got, "entity", "get-limits", "key-1", "--resource", "gpt-4")
	if got.EntityID != "key-1" || got.Resource != "gpt-4" || len(got.Limits) != 2 ||
		got.Limits[1] != (limitJSON{Name: "tpm", Capacity: 20000, RefillAmount: 10000, RefillPeriodSeconds: 60}) {
		t.Errorf("entity get-limits -o json = %+v", got)
	}

	if out := e.ok("entity", "list", "--with-custom-limits", "gpt-4"); out != "key-1\n" {
		t.Errorf("entity list = %q", out)
	}
	var listed struct{ Entities []string }
	e.json(&listed, "entity", "list", "--with-custom-limits", "claude")
	if listed.Entities == nil || len(listed.Entities) != 0 {
		t.Errorf("entity list (none) -o json = %+v", listed)
	}
	contains(t, e.ok("entity", "list-resources"), "gpt-4", "_default_")

	contains(t, e.fail("entity", "delete-limits", "key-1", "-r", "gpt-4"), "without --yes")
	contains(t, e.ok("entity", "delete-limits", "key-1", "-r", "gpt-4", "--yes"), "Deleted limits for entity 'key-1' on resource 'gpt-4'")
	if got, err := e.repo.GetLimits(e.ctx, "key-1", "gpt-4"); err != nil || len(got) != 0 {
		t.Errorf("GetLimits after delete-limits = %+v, %v", got, err)
	}
	contains(t, e.ok("entity", "get-limits", "key-1", "-r", "gpt-4"), "No limits configured for entity 'key-1' on resource 'gpt-4'")

	contains(t, e.ok("entity", "delete", "key-1", "-y"), "Deleted entity 'key-1'")
	if _, err := e.repo.GetEntity(e.ctx, "key-1"); !errors.Is(err, limiter.ErrEntityNotFound) {
		t.Errorf("GetEntity after delete: %v, want ErrEntityNotFound", err)
	}
	if msg := e.fail("entity", "show", "key-1"); msg != "limiter: entity not found: key-1" {
		t.Errorf("entity show (deleted) = %q", msg)
	}
	contains(t, e.fail("entity", "create", "bad id"), "limiter: invalid entity_id")
}

func TestResourceAndSystemDefaults(t *testing.T) {
	e := newEnv(t)
	out := e.ok("resource", "set-defaults", "gpt-4", "-l", "rpm:1000", "-l", "tph:50000/hour")
	contains(t, out, "Set 2 default(s) for resource 'gpt-4':", "rpm: 1,000/min", "tph: 50,000/hour")
	var res limitsJSON
	e.json(&res, "resource", "get-defaults", "gpt-4")
	if res.Resource != "gpt-4" || len(res.Limits) != 2 || res.Limits[1].RefillPeriodSeconds != 3600 {
		t.Errorf("resource get-defaults -o json = %+v", res)
	}
	if got, err := e.repo.GetResourceDefaults(e.ctx, "gpt-4"); err != nil || len(got) != 2 {
		t.Errorf("GetResourceDefaults = %+v, %v", got, err)
	}
	if out := e.ok("resource", "list"); out != "gpt-4\n" {
		t.Errorf("resource list = %q", out)
	}
	e.fail("resource", "delete-defaults", "gpt-4")
	e.ok("resource", "delete-defaults", "gpt-4", "--yes")
	contains(t, e.ok("resource", "get-defaults", "gpt-4"), "No defaults configured for resource 'gpt-4'")
	var list struct{ Resources []string }
	e.json(&list, "resource", "list")
	if list.Resources == nil || len(list.Resources) != 0 {
		t.Errorf("resource list -o json = %+v", list)
	}

	contains(t, e.ok("system", "set-defaults", "-l", "rpm:10", "--on-unavailable", "allow"),
		"Set 1 system-wide default(s):", "rpm: 10/min", "on_unavailable: allow")
	var sys limitsJSON
	e.json(&sys, "system", "get-defaults")
	if sys.OnUnavailable != "allow" || len(sys.Limits) != 1 || sys.Limits[0].Capacity != 10 {
		t.Errorf("system get-defaults -o json = %+v", sys)
	}
	if limits, ou, err := e.repo.GetSystemDefaults(e.ctx); err != nil || ou != limiter.OnUnavailableAllow || len(limits) != 1 {
		t.Errorf("GetSystemDefaults = %+v, %q, %v", limits, ou, err)
	}
	contains(t, e.ok("system", "get-defaults"), "rpm", "on_unavailable: allow")
	e.ok("system", "set-defaults", "--on-unavailable", "block")
	if limits, ou, _ := e.repo.GetSystemDefaults(e.ctx); ou != limiter.OnUnavailableBlock || len(limits) != 0 {
		t.Errorf("GetSystemDefaults after on-unavailable only = %+v, %q", limits, ou)
	}
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
	if len(all.Events) != 2 || all.Events[0].Action != store.AuditLimitsSet || all.Events[1].Action != store.AuditEntityCreated ||
		all.Events[0].Details["limits"] == nil || all.Next != "" {
		t.Fatalf("audit list -o json = %+v", all)
	}

	out = e.ok("audit", "list", "-e", "key-1", "-l", "1")
	contains(t, out, "Total: 1 events", "More events may exist. Use --start-event-id "+all.Events[0].EventID)
	var older struct{ Events []auditEventJSON }
	e.json(&older, "audit", "list", "-e", "key-1", "--start-event-id", all.Events[0].EventID)
	if len(older.Events) != 1 || older.Events[0].EventID != all.Events[1].EventID {
		t.Errorf("audit list --start-event-id = %+v", older)
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
	if _, err := e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		e.t.Fatal(err)
	}
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
	if len(list.Snapshots) != 2 || list.More || list.Snapshots[0].WindowStart != "2026-01-02T03:00:00Z" ||
		list.Snapshots[0].WindowEnd != "2026-01-02T03:59:59Z" || list.Snapshots[0].Counters["tpm"] != 3000 {
		t.Errorf("usage list -o json = %+v", list)
	}
	e.json(&list, "usage", "list", "-e", "e1", "-l", "2")
	if len(list.Snapshots) != 2 || !list.More {
		t.Errorf("usage list -l 2 -o json = %+v", list)
	}
	e.json(&list, "usage", "list", "-r", "gpt", "-w", "hourly", "--end", "2026-01-02")
	if len(list.Snapshots) != 0 {
		t.Errorf("usage list --end before all = %+v", list)
	}
	e.json(&list, "usage", "list", "-r", "gpt", "-w", "hourly")
	if len(list.Snapshots) != 4 {
		t.Errorf("usage list -r gpt (GSI2) = %d snapshots, want 4", len(list.Snapshots))
	}

	var sum usageSummaryJSON
	e.json(&sum, "usage", "summary", "-e", "e1", "-w", "hourly")
	if sum.SnapshotCount != 3 || sum.Total["rpm"] != 6 || sum.Total["tpm"] != 6000 || sum.Average["rpm"] != 2 ||
		sum.MinWindowStart != "2026-01-02T01:00:00Z" || sum.MaxWindowStart != "2026-01-02T03:00:00Z" {
		t.Errorf("usage summary -o json = %+v", sum)
	}
	// Without --window: the finest window present, never a sum over
	// windows (the daily snapshot holds the same traffic again).
	contains(t, e.ok("usage", "summary", "-r", "gpt"), "Window:    hourly (the finest present", "Snapshots: 4", "rpm    13 ")
	e.json(&sum, "usage", "summary", "-e", "e1")
	if sum.Window != "hourly" || sum.SnapshotCount != 3 || sum.Total["rpm"] != 6 {
		t.Errorf("usage summary without --window -o json = %+v, want hourly: 3 snapshots, rpm 6", sum)
	}
	e.putSnapshot("e3", "gpt", "daily", "2026-01-03T00:00:00Z", map[string]int64{"rpm": 4})
	e.putSnapshot("e3", "gpt", "monthly", "2026-01-01T00:00:00Z", map[string]int64{"rpm": 9})
	e.json(&sum, "usage", "summary", "-e", "e3")
	if sum.Window != "daily" || sum.SnapshotCount != 1 || sum.Total["rpm"] != 4 {
		t.Errorf("usage summary -e e3 (daily and monthly) -o json = %+v, want daily: 1 snapshot, rpm 4", sum)
	}
	e.json(&sum, "usage", "summary", "-e", "e3", "-w", "monthly")
	if sum.Window != "monthly" || sum.Total["rpm"] != 9 {
		t.Errorf("usage summary -e e3 -w monthly -o json = %+v", sum)
	}
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
	if len(reg.Namespaces) != 1 || reg.Namespaces[0].NamespaceID == "" {
		t.Fatalf("namespace register -o json = %+v", reg)
	}
	id := reg.Namespaces[0].NamespaceID

	contains(t, e.ok("namespace", "list"), "NAME", "default", "ns-a", "ns-b", id, "Total: 3 namespace(s)")
	var shown namespaceJSON
	e.json(&shown, "namespace", "show", "ns-a")
	if shown.Name != "ns-a" || shown.NamespaceID != id || shown.Status != "active" || shown.CreatedAt == "" {
		t.Errorf("namespace show -o json = %+v", shown)
	}

	// Data is scoped by --namespace.
	e.ok("entity", "create", "e1", "-N", "ns-b")
	e.ok("entity", "show", "e1", "--namespace", "ns-b")
	e.fail("entity", "show", "e1")

	e.fail("namespace", "delete", "ns-a")
	e.ok("namespace", "delete", "ns-a", "--yes")
	var list struct{ Namespaces []namespaceJSON }
	e.json(&list, "namespace", "list")
	if len(list.Namespaces) != 2 {
		t.Errorf("namespace list after delete = %+v", list)
	}
	var orphans struct{ Namespaces []namespaceJSON }
	e.json(&orphans, "namespace", "orphans")
	if len(orphans.Namespaces) != 1 || orphans.Namespaces[0].NamespaceID != id || orphans.Namespaces[0].DeletedAt == "" {
		t.Fatalf("namespace orphans = %+v", orphans)
	}
	contains(t, e.ok("namespace", "recover", id), "Recovered namespace 'ns-a'")
	contains(t, e.ok("namespace", "list"), "ns-a")
	contains(t, e.fail("namespace", "purge", id, "--yes"), "active")

	e.ok("namespace", "delete", "ns-a", "-y")
	e.fail("namespace", "purge", id)
	contains(t, e.ok("namespace", "purge", id, "--yes"), "Purged namespace "+id)
	contains(t, e.ok("namespace", "orphans"), "No orphan namespaces.")
	if _, err := e.repo.GetNamespace(e.ctx, "ns-a"); err == nil {
		t.Error("GetNamespace(ns-a) after purge: no error")
	}
	if !strings.Contains(e.ok("namespace", "list"), "ns-b") {
		t.Error("ns-b lost")
	}
}

func TestVersionAndCheck(t *testing.T) {
	e := newEnv(t)
	out := e.ok("version")
	contains(t, out, "Client Version:", "go-"+limiter.ClientVersion, "Schema Version:", limiter.SchemaVersion, "Status:", "COMPATIBLE")
	var rep versionReport
	e.json(&rep, "check")
	if !rep.Compatible || !rep.Initialized || rep.InfraSchema != limiter.SchemaVersion || rep.ClientVersion != "go-"+limiter.ClientVersion {
		t.Errorf("check -o json = %+v", rep)
	}
	contains(t, e.ok("check"), "Result: COMPATIBLE")

	// A table that needs a newer client.
	if err := e.repo.repo.SetVersionRecord(e.ctx, limiter.VersionRecord{SchemaVersion: limiter.SchemaVersion, ClientMinVersion: "99.0.0"}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"version", "check"} {
		code, out, errs := e.cli(cmd)
		msg := checkFailure(t, []string{cmd}, code, out, errs, exitIncompatible)
		contains(t, msg, "incompatible: client "+limiter.ClientVersion+" is older than the table's minimum client version 99.0.0")
		contains(t, out, "INCOMPATIBLE")
	}

	// A table of another major schema version.
	if err := e.repo.repo.SetVersionRecord(e.ctx, limiter.VersionRecord{SchemaVersion: "1.0.0", ClientMinVersion: "0.0.0"}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := e.cli("check", "-o", "json")
	msg := checkFailure(t, []string{"check"}, code, out, errs, exitIncompatible)
	contains(t, msg, "schema migration required")
	contains(t, out, `"compatible": false`, `"infra_schema_version": "1.0.0"`)
}
