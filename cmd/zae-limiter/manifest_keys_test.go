package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
)

// TestManifestTypos: an unknown field is answered in the manifest's terms
// (the limit, resource or entity it is in, its path and line) with the
// field meant when one is close, or the fields there; a value of the wrong
// kind names no Go type.
func TestManifestTypos(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml, want string }{
		{"limit field", "entities:\n  acme:\n    resources:\n      gpt-4o:\n        limits:\n          rpm: {capacity: 100, refil_amount: 50}\n",
			"invalid manifest: line 6: unknown field refil_amount in limit rpm (entities.acme.resources.gpt-4o.limits.rpm); did you mean refill_amount?"},
		{"entity resource field", "entities:\n  acme:\n    resources:\n      gpt-4o:\n        limts:\n          rpm: {capacity: 1}\n",
			"invalid manifest: line 5: unknown field limts in resource gpt-4o of entity acme (entities.acme.resources.gpt-4o); did you mean limits?"},
		{"dollar shorthand", "resources:\n  gpt-4o:\n    usd_per_mnoth: 500\n",
			"invalid manifest: line 3: unknown field usd_per_mnoth in resource gpt-4o (resources.gpt-4o); did you mean usd_per_month?"},
		{"entity field", "entities:\n  acme:\n    resource: {}\n",
			"invalid manifest: line 3: unknown field resource in entity acme (entities.acme); did you mean resources?"},
		{"system field", "system:\n  on_unavailible: allow\n",
			"invalid manifest: line 2: unknown field on_unavailible in system (system); did you mean on_unavailable?"},
		{"calendar value", "resources:\n  r:\n    limits:\n      usd: {capacity: 5, calendar: montth}\n",
			`invalid manifest: resources.r.limits.usd: calendar "montth": use day, week or month (did you mean month?)`},
		{"nothing close", "resources:\n  r:\n    limits:\n      rpm: {colour: 1}\n",
			"invalid manifest: line 4: unknown field colour in limit rpm (resources.r.limits.rpm); the fields there are burst, calendar, capacity, inflight, prepaid, refill_amount, refill_period, timezone"},
	} {
		_, err := parseManifest([]byte(tc.yaml))
		require.Error(t, err, tc.name)
		assert.Equal(t, tc.want, err.Error(), tc.name)
		assert.NotContains(t, err.Error(), "main.", tc.name)
	}
	for _, bad := range []string{
		"resources:\n  r:\n    limits:\n      rpm: 100\n",
		"resources:\n  r:\n    limits:\n      rpm: {capacity: lots}\n",
		"resources:\n  r: [1]\n",
		"entities:\n  e: 5\n",
		"resources:\n  r:\n    limits:\n      rpm: {capacity: 1, prepaid: maybe}\n",
	} {
		_, err := parseManifest([]byte(bad))
		require.Error(t, err, bad)
		assert.NotContains(t, err.Error(), "main.", "%q: %v", bad, err)
		assert.NotContains(t, err.Error(), "int64", "%q: %v", bad, err)
	}
	_, err := parseManifest([]byte("resources:\n  r:\n    limits:\n      rpm: 100\n"))
	assert.ErrorContains(t, err, "into a limit (a mapping such as {capacity: 100, refill_period: 60})")
}

// TestManifestEntityWideParse: resources "*" in a manifest, at the top
// level (every entity's entity-wide default) and under an entity, are
// accepted and declare limits on limiter.AllResources.
func TestManifestEntityWideParse(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/entitywide.yaml") // docs/cli.md's example
	require.NoError(t, err)
	m, err := parseManifest(data)
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 5000)}, m.resources[limiter.AllResources])
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 500*llmhttp.USD)}, m.entities[entityTarget{"acme", limiter.AllResources}])
	require.Len(t, m.entities, 2)
}

// TestManifestEntityWideApply needs the entity-wide resource of the
// library: a manifest's resources "*" are applied to (entity, "*") and to
// the resource defaults of "*", and applying it again changes nothing.
func TestManifestEntityWideApply(t *testing.T) {
	e := newEnv(t)
	p := "testdata/entitywide.yaml" // docs/cli.md's example
	e.ok("limits", "apply", "-f", p)
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 500*llmhttp.USD)}, got)
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 5000)}, got)
	require.Contains(t, e.ok("limits", "plan", "-f", p), "No changes. Infrastructure is up-to-date.")
}
