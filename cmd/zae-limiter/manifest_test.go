package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
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
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// auditCount counts the audit events of the manifest's targets in ns.
func auditCount(t *testing.T, repo *table) int {
	t.Helper()
	n := 0
	for _, id := range []string{store.AuditEntitySystem, store.AuditEntityResource("gpt-4"), store.AuditEntityResource("claude"), "key-1"} {
		evs, err := iterx.Collect(repo.Admin().AuditEvents(t.Context(), id))
		require.NoError(t, err)
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
	require.NoError(t, err)
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
	assert.Equal(t, "tenant-a", p.Namespace, "limits plan -o json")
	assert.Equal(t, 4, p.Created, "limits plan -o json")
	assert.False(t, p.Applied, "limits plan -o json")
	if assert.Len(t, p.Changes, 4, "limits plan -o json") {
		assert.Equal(t, levelSystem, p.Changes[0].Level, "limits plan -o json")
		assert.Equal(t, "gpt-4", p.Changes[1].Target, "limits plan -o json")
		if assert.Len(t, p.Changes[1].Limits, 2, "limits plan -o json") {
			assert.Equal(t, limitJSON{Name: "tpm", Capacity: 100000, RefillAmount: 50000, RefillPeriodSeconds: 60}, p.Changes[1].Limits[1], "limits plan -o json")
		}
	}
	got, err := ns.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	require.Empty(t, got, "plan wrote")

	out = e.ok("limits", "apply", "-f", v1)
	contains(t, out, "+ create resource: gpt-4", "Applied: 4 created, 0 updated, 0 deleted.")
	limits, ou, err := ns.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Equal(t, limiter.OnUnavailableAllow, ou, "system defaults after apply")
	assert.True(t, sameLimits(limits, []limiter.Limit{limiter.PerMinute("rpm", 1000)}), "system defaults after apply = %+v", limits)
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.True(t, sameLimits(got, []limiter.Limit{{Name: "rpm", Capacity: 50, RefillAmount: 25, RefillPeriod: 30 * time.Second}}), "key-1/gpt-4 after apply = %+v", got)
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	assert.True(t, sameLimits(got, []limiter.Limit{limiter.PerDay("rpd", 5000)}), "key-1/_default_ after apply = %+v", got)
	// Written through the library: audited, and listed by the registries
	// (the original's raw PutItems were neither).
	ids, err := iterx.Collect(ns.Admin().EntitiesWithLimits(e.ctx, "gpt-4"))
	require.NoError(t, err)
	assert.Equal(t, []string{"key-1"}, ids, "ListEntitiesWithCustomLimits(gpt-4)")
	audits := auditCount(t, ns)
	assert.Equal(t, 5, audits, "audit events after apply: claude, system, gpt-4 and two entity configs")

	// Applying the same manifest again changes nothing.
	contains(t, e.ok("limits", "apply", "-f", v1), "No changes. Infrastructure is up-to-date.")
	var again planResult
	e.json(&again, "limits", "apply", "-f", v1)
	assert.True(t, again.Applied, "second apply -o json")
	assert.Empty(t, again.Changes, "second apply -o json")
	assert.Zero(t, again.Created+again.Updated+again.Deleted, "second apply -o json: %+v", again)
	assert.Equal(t, audits, auditCount(t, ns), "audit events after a no-op apply")
	contains(t, e.ok("limits", "diff", "-f", v1), "No drift detected.")

	// Without --prune, targets missing from the manifest are left alone.
	out = e.ok("limits", "plan", "-f", v2)
	contains(t, out, "Plan: 1 change(s)", "~ update resource: gpt-4  [rpm: 600/min, tpm: 50,000/min (burst: 100,000)]")
	var up planResult
	e.json(&up, "limits", "plan", "-f", v2)
	if assert.Len(t, up.Changes, 1, "update plan -o json") && assert.NotEmpty(t, up.Changes[0].Previous) && assert.NotEmpty(t, up.Changes[0].Limits) {
		assert.Equal(t, int64(500), up.Changes[0].Previous[0].Capacity, "update plan -o json: previous")
		assert.Equal(t, int64(600), up.Changes[0].Limits[0].Capacity, "update plan -o json: new")
	}
	out = e.ok("limits", "plan", "-f", v2, "--prune")
	contains(t, out, "Plan: 3 change(s)", "~ update resource: gpt-4", "- delete resource: claude", "- delete entity: key-1/_default_",
		"Plan: 0 to create, 1 to update, 2 to delete.")
	contains(t, e.ok("limits", "diff", "-f", v2, "--prune"), "Drift detected: 3 difference(s)", "- resource: claude")
	contains(t, e.ok("limits", "apply", "-f", v2, "--prune"), "Applied: 0 created, 1 updated, 2 deleted.")
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Resource: "claude"})
	require.NoError(t, err)
	assert.Empty(t, got, "claude after prune")
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	assert.Empty(t, got, "key-1/_default_ after prune")
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Len(t, got, 2, "gpt-4 after prune")
	contains(t, e.ok("limits", "plan", "-f", v2, "--prune"), "No changes.")
	// The default namespace was not touched.
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Empty(t, got, "default namespace gpt-4")
	// The manifest's namespace must agree with an explicit --namespace.
	contains(t, e.fail("limits", "plan", "-f", v1, "-N", "other"), `the manifest's namespace "tenant-a" differs from --namespace "other"`)
	// A manifest without a namespace uses --namespace.
	nsless := writeFile(t, "nsless.yaml", "resources:\n  gpt-4:\n    limits:\n      rpm: {capacity: 9}\n")
	var other planResult
	e.json(&other, "limits", "plan", "-f", nsless, "-N", "tenant-b")
	assert.Equal(t, "tenant-b", other.Namespace, "plan with -N")
	assert.Equal(t, 1, other.Created, "plan with -N")
}

func TestBadManifests(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "invalid manifest: the file is empty"},
		{"not yaml", "resources: [", "invalid manifest:"},
		{"unknown key", "namespace: a\nresource: {}\n", "line 2: unknown field resource in the manifest; did you mean resources?"},
		{"unknown limit key", "resources:\n  r:\n    limits:\n      rpm: {capcity: 1}\n", "unknown field capcity in limit rpm (resources.r.limits.rpm); did you mean capacity?"},
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
			assert.Contains(t, checkFailure(t, []string{"limits", "apply", tc.name}, code, out, errs, exitError), tc.want)
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
		_, err := e.client.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item})
		require.NoError(t, err)
	}
}

// TestLimitsPruneProvisionerItems: on a namespace the original's
// provisioner managed, whose config items the list indexes do not show,
// --prune still finds and deletes the stored limits the manifest omits.
func TestLimitsPruneProvisionerItems(t *testing.T) {
	e := newEnv(t)
	putProvisionerItems(t, e)
	// The list indexes miss the provisioner's items.
	require.NotContains(t, e.ok("resource", "list"), "claude", "resource list shows the provisioner's claude (the test needs an unindexed item)")
	require.NotContains(t, e.ok("entity", "list", "--with-custom-limits", "gpt-4"), "key-9", "entity list shows the provisioner's key-9")
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
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "claude"})
	require.NoError(t, err)
	assert.Empty(t, got, "claude after prune")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-9", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Empty(t, got, "key-9/gpt-4 after prune")
	got, ou, err := e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	assert.Empty(t, got, "system after prune")
	assert.Empty(t, ou, "system after prune: on_unavailable")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4"})
	require.NoError(t, err)
	assert.Len(t, got, 1, "key-1/gpt-4 (declared) after prune")
	contains(t, e.ok("limits", "plan", "-f", m, "--prune"), "No changes.")
}
