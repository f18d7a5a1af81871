package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	limiter "github.com/zaelimiter/limiter"
)

const manifestV1 = `
namespace: tenant-a
system:
  on_unavailable: allow
  limits:
    rpm: {capacity: 1000}
resources:
  gpt-4:
    limits:
      rpm: {capacity: 500}
      tpm: {capacity: 100000, refill_amount: 50000}
entities:
  key-1:
    resources:
      gpt-4:
        limits:
          rpm: {capacity: 50, refill_amount: 25, refill_period: 30}
      _default_:
        limits:
          rpd: {capacity: 5000, refill_period: 86400}
`

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
	for _, id := range []string{limiter.AuditEntitySystem, limiter.AuditEntityResource("gpt-4"), limiter.AuditEntityResource("claude"), "key-1"} {
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
	v1 := writeFile(t, "v1.yaml", manifestV1)
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
