package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// manifestV1 is the manifest of docs/cli.md (its docs test checks that the
// two agree): a system default, a resource default and two entity configs in
// namespace tenant-a.
const manifestV1 = "testdata/limits.yaml"

// manifestV2 changes gpt-4's rpm and drops key-1's _default_ limits.
const manifestV2 = `
namespace: tenant-a
system:
  on_unavailable: allow
  limits:
    rpm: {capacity: 1000}
resources:
  gpt-4:
    limits:
      rpm: {capacity: 600}
      tpm: {capacity: 100000, refill_amount: 50000}
entities:
  key-1:
    resources:
      gpt-4:
        limits:
          rpm: {capacity: 50, refill_amount: 25, refill_period: 30}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// auditCount counts the audit events of the manifest's targets in ns.
func auditCount(t *testing.T, repo *table) int {
	t.Helper()
	n := 0
	for _, id := range []string{store.AuditEntitySystem, store.AuditEntityResource("gpt-4"), store.AuditEntityResource("claude"), "key-1"} {
		evs, err := repo.AuditEvents(t.Context(), id, 1000, "")
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
	}
	return n
}

func TestLimitsManifest(t *testing.T) {
	e := newEnv(t)
	v1 := manifestV1
	v2 := writeFile(t, "v2.yaml", manifestV2)

	// An unmanaged resource default in the namespace.
	e.ok("resource", "set-defaults", "claude", "-l", "rpm:7", "-N", "tenant-a")
	nsRepo, err := e.repo.repo.Namespace(e.ctx, "tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	ns := newTable(nsRepo)

	out := e.ok("limits", "plan", "-f", v1)
	contains(t, out, "Plan: 4 change(s) in namespace tenant-a",
		"+ create system: (system defaults)  [rpm: 1,000/min, on_unavailable: allow]",
		"+ create resource: gpt-4  [rpm: 500/min, tpm: 50,000/min (burst: 100,000)]",
		"+ create entity: key-1/_default_  [rpd: 5,000/day]",
		"+ create entity: key-1/gpt-4  [rpm: 25/30sec (burst: 50)]",
		"Plan: 4 to create, 0 to update, 0 to delete.")
	var p planResult
	e.json(&p, "limits", "plan", "--file", v1)
	if p.Namespace != "tenant-a" || p.Created != 4 || p.Applied || len(p.Changes) != 4 || p.Changes[0].Level != levelSystem ||
		p.Changes[1].Target != "gpt-4" || p.Changes[1].Limits[1] != (limitJSON{Name: "tpm", Capacity: 100000, RefillAmount: 50000, RefillPeriodSeconds: 60}) {
		t.Errorf("limits plan -o json = %+v", p)
	}
	if got, _ := ns.GetResourceDefaults(e.ctx, "gpt-4"); len(got) != 0 {
		t.Fatalf("plan wrote: %+v", got)
	}

	out = e.ok("limits", "apply", "-f", v1)
	contains(t, out, "+ create resource: gpt-4", "Applied: 4 created, 0 updated, 0 deleted.")
	if limits, ou, err := ns.GetSystemDefaults(e.ctx); err != nil || ou != limiter.OnUnavailableAllow || !sameLimits(limits, []limiter.Limit{limiter.PerMinute("rpm", 1000)}) {
		t.Errorf("system defaults after apply = %+v %q %v", limits, ou, err)
	}
	if got, _ := ns.GetLimits(e.ctx, "key-1", "gpt-4"); !sameLimits(got, []limiter.Limit{{Name: "rpm", Capacity: 50, RefillAmount: 25, RefillPeriod: 30 * time.Second}}) {
		t.Errorf("key-1/gpt-4 after apply = %+v", got)
	}
	if got, _ := ns.GetLimits(e.ctx, "key-1", limiter.DefaultResource); !sameLimits(got, []limiter.Limit{limiter.PerDay("rpd", 5000)}) {
		t.Errorf("key-1/_default_ after apply = %+v", got)
	}
	// Written through the library: audited, and listed by the registries
	// (the original's raw PutItems were neither).
	if ids, _, _ := ns.ListEntitiesWithCustomLimits(e.ctx, "gpt-4", 0, ""); len(ids) != 1 || ids[0] != "key-1" {
		t.Errorf("ListEntitiesWithCustomLimits(gpt-4) = %v", ids)
	}
	audits := auditCount(t, ns)
	if audits != 5 { // claude + system + gpt-4 + two entity configs
		t.Errorf("audit events after apply = %d, want 5", audits)
	}

	// Applying the same manifest again changes nothing.
	contains(t, e.ok("limits", "apply", "-f", v1), "No changes. Infrastructure is up-to-date.")
	var again planResult
	e.json(&again, "limits", "apply", "-f", v1)
	if !again.Applied || len(again.Changes) != 0 || again.Created+again.Updated+again.Deleted != 0 {
		t.Errorf("second apply -o json = %+v", again)
	}
	if n := auditCount(t, ns); n != audits {
		t.Errorf("audit events after a no-op apply = %d, want %d", n, audits)
	}
	contains(t, e.ok("limits", "diff", "-f", v1), "No drift detected.")

	// Without --prune, targets missing from the manifest are left alone.
	out = e.ok("limits", "plan", "-f", v2)
	contains(t, out, "Plan: 1 change(s)", "~ update resource: gpt-4  [rpm: 600/min, tpm: 50,000/min (burst: 100,000)]")
	var up planResult
	e.json(&up, "limits", "plan", "-f", v2)
	if len(up.Changes) != 1 || up.Changes[0].Previous[0].Capacity != 500 || up.Changes[0].Limits[0].Capacity != 600 {
		t.Errorf("update plan -o json = %+v", up)
	}
	out = e.ok("limits", "plan", "-f", v2, "--prune")
	contains(t, out, "Plan: 3 change(s)", "~ update resource: gpt-4", "- delete resource: claude", "- delete entity: key-1/_default_",
		"Plan: 0 to create, 1 to update, 2 to delete.")
	contains(t, e.ok("limits", "diff", "-f", v2, "--prune"), "Drift detected: 3 difference(s)", "- resource: claude")
	contains(t, e.ok("limits", "apply", "-f", v2, "--prune"), "Applied: 0 created, 1 updated, 2 deleted.")
	if got, _ := ns.GetResourceDefaults(e.ctx, "claude"); len(got) != 0 {
		t.Errorf("claude after prune = %+v", got)
	}
	if got, _ := ns.GetLimits(e.ctx, "key-1", limiter.DefaultResource); len(got) != 0 {
		t.Errorf("key-1/_default_ after prune = %+v", got)
	}
	if got, _ := ns.GetResourceDefaults(e.ctx, "gpt-4"); len(got) != 2 {
		t.Errorf("gpt-4 after prune = %+v", got)
	}
	contains(t, e.ok("limits", "plan", "-f", v2, "--prune"), "No changes.")
	// The default namespace was not touched.
	if got, _ := e.repo.GetResourceDefaults(e.ctx, "gpt-4"); len(got) != 0 {
		t.Errorf("default namespace gpt-4 = %+v", got)
	}
	// The manifest's namespace must agree with an explicit --namespace.
	contains(t, e.fail("limits", "plan", "-f", v1, "-N", "other"), `the manifest's namespace "tenant-a" differs from --namespace "other"`)
	// A manifest without a namespace uses --namespace.
	nsless := writeFile(t, "nsless.yaml", "resources:\n  gpt-4:\n    limits:\n      rpm: {capacity: 9}\n")
	var other planResult
	e.json(&other, "limits", "plan", "-f", nsless, "-N", "tenant-b")
	if other.Namespace != "tenant-b" || other.Created != 1 {
		t.Errorf("plan with -N = %+v", other)
	}
}

func TestBadManifests(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "invalid manifest: the file is empty"},
		{"not yaml", "resources: [", "invalid manifest:"},
		{"unknown key", "namespace: a\nresource: {}\n", "field resource not found"},
		{"unknown limit key", "resources:\n  r:\n    limits:\n      rpm: {capcity: 1}\n", "field capcity not found"},
		{"no capacity", "resources:\n  r:\n    limits:\n      rpm: {refill_amount: 1}\n", "resources.r.limits.rpm: capacity is required"},
		{"bad capacity", "resources:\n  r:\n    limits:\n      rpm: {capacity: -1}\n", "capacity must be positive"},
		{"string capacity", "resources:\n  r:\n    limits:\n      rpm: {capacity: lots}\n", "invalid manifest:"},
		{"bad period", "resources:\n  r:\n    limits:\n      rpm: {capacity: 1, refill_period: 0}\n", "refill_period must be a positive"},
		{"no limits", "resources:\n  r: {}\n", "resources.r declares no limits"},
		{"bad resource", "resources:\n  'a#b':\n    limits:\n      rpm: {capacity: 1}\n", "resources.a#b"},
		{"bad entity", "entities:\n  'bad id':\n    resources:\n      r:\n        limits:\n          rpm: {capacity: 1}\n", "entities.bad id"},
		{"bad on_unavailable", "system:\n  on_unavailable: sometimes\n", `system.on_unavailable "sometimes"`},
		{"empty system", "system: {}\n", "system declares neither limits nor on_unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, "m.yaml", tc.yaml)
			code, out, errs := e.cli("limits", "apply", "-f", p)
			msg := checkFailure(t, []string{"limits", "apply", tc.name}, code, out, errs, exitError)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to contain %q", msg, tc.want)
			}
		})
	}
	contains(t, e.fail("limits", "plan", "-f", filepath.Join(t.TempDir(), "missing.yaml")), "read manifest:", "no such file")
}

// putProvisionerItems writes config items and the state record the way the
// original's provisioner Lambda does: PK, SK, GSI4PK (no GSI4SK), the l_*
// attributes and on_unavailable / resource / entity_id — no GSI3 keys, no
// config_version, no registry entries.
func putProvisionerItems(t *testing.T, e *env) {
	t.Helper()
	ns := e.repo.repo.NamespaceID()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	limit := func(item map[string]types.AttributeValue, name string, capacity, refill, period int64) map[string]types.AttributeValue {
		item["l_"+name+"_cp"], item["l_"+name+"_ra"], item["l_"+name+"_rp"] = n(capacity), n(refill), n(period)
		return item
	}
	list := func(vs ...string) types.AttributeValue {
		l := &types.AttributeValueMemberL{}
		for _, v := range vs {
			l.Value = append(l.Value, s(v))
		}
		return l
	}
	for _, item := range []map[string]types.AttributeValue{
		limit(map[string]types.AttributeValue{"PK": s(ns + "/SYSTEM#"), "SK": s("#CONFIG"), "GSI4PK": s(ns), "on_unavailable": s("allow")}, "rpm", 1000, 1000, 60),
		limit(map[string]types.AttributeValue{"PK": s(ns + "/RESOURCE#claude"), "SK": s("#CONFIG"), "GSI4PK": s(ns), "resource": s("claude")}, "rpm", 300, 300, 60),
		limit(map[string]types.AttributeValue{"PK": s(ns + "/RESOURCE#gpt-4"), "SK": s("#CONFIG"), "GSI4PK": s(ns), "resource": s("gpt-4")}, "rpm", 500, 500, 60),
		limit(map[string]types.AttributeValue{"PK": s(ns + "/ENTITY#key-9"), "SK": s("#CONFIG#gpt-4"), "GSI4PK": s(ns), "entity_id": s("key-9"), "resource": s("gpt-4")}, "tpm", 9000, 9000, 60),
		limit(map[string]types.AttributeValue{"PK": s(ns + "/ENTITY#key-1"), "SK": s("#CONFIG#gpt-4"), "GSI4PK": s(ns), "entity_id": s("key-1"), "resource": s("gpt-4")}, "rpm", 50, 25, 30),
		{
			"PK": s(ns + "/SYSTEM#"), "SK": s("#PROVISIONER"), "GSI4PK": s(ns),
			"managed_system": &types.AttributeValueMemberBOOL{Value: true}, "managed_resources": list("claude", "gpt-4"),
			"managed_entities": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"key-9": list("gpt-4"), "key-1": list("gpt-4")}},
			"last_applied":     s("2026-01-02T03:04:05+00:00"), "applied_hash": s("sha256:00"),
		},
	} {
		if _, err := e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLimitsPruneProvisionerItems: on a namespace the original's
// provisioner managed, whose config items the list indexes do not show,
// --prune still finds and deletes the stored limits the manifest omits.
func TestLimitsPruneProvisionerItems(t *testing.T) {
	e := newEnv(t)
	putProvisionerItems(t, e)
	// The list indexes miss the provisioner's items.
	if out := e.ok("resource", "list"); strings.Contains(out, "claude") {
		t.Fatalf("resource list shows the provisioner's claude: %q (the test needs an unindexed item)", out)
	}
	if out := e.ok("entity", "list", "--with-custom-limits", "gpt-4"); strings.Contains(out, "key-9") {
		t.Fatalf("entity list shows the provisioner's key-9: %q", out)
	}
	m := writeFile(t, "m.yaml", `
resources:
  gpt-4:
    limits:
      rpm: {capacity: 500}
entities:
  key-1:
    resources:
      gpt-4:
        limits:
          rpm: {capacity: 50, refill_amount: 25, refill_period: 30}
`)
	contains(t, e.ok("limits", "plan", "-f", m), "No changes.") // without --prune: nothing to do
	out := e.ok("limits", "plan", "-f", m, "--prune")
	contains(t, out, "- delete system: (system defaults)", "- delete resource: claude", "- delete entity: key-9/gpt-4",
		"Plan: 0 to create, 0 to update, 3 to delete.")
	contains(t, e.ok("limits", "apply", "-f", m, "--prune"), "Applied: 0 created, 0 updated, 3 deleted.")
	if got, err := e.repo.GetResourceDefaults(e.ctx, "claude"); err != nil || len(got) != 0 {
		t.Errorf("claude after prune = %+v, %v", got, err)
	}
	if got, err := e.repo.GetLimits(e.ctx, "key-9", "gpt-4"); err != nil || len(got) != 0 {
		t.Errorf("key-9/gpt-4 after prune = %+v, %v", got, err)
	}
	if got, ou, err := e.repo.GetSystemDefaults(e.ctx); err != nil || len(got) != 0 || ou != "" {
		t.Errorf("system after prune = %+v %q, %v", got, ou, err)
	}
	if got, _ := e.repo.GetLimits(e.ctx, "key-1", "gpt-4"); len(got) != 1 {
		t.Errorf("key-1/gpt-4 (declared) after prune = %+v", got)
	}
	contains(t, e.ok("limits", "plan", "-f", m, "--prune"), "No changes.")
}
