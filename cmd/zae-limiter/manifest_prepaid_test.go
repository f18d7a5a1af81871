package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
)

// manifestPrepaid declares prepaid balances: one with the default
// ceiling, one with its own.
const manifestPrepaid = `namespace: tenant-p
resources:
  gpt-4o:
    limits:
      rpm: {capacity: 100}
      usd: {prepaid: true}
entities:
  acct-1:
    resources:
      gpt-4o:
        limits:
          credits: {prepaid: true, capacity: 5000}
`

// TestManifestPrepaid: prepaid: true declares a prepaid balance (capacity,
// optional, is its ceiling of top-ups; refill, calendar and zone fields
// are refused); apply stores it and a second apply changes nothing; the
// provisioner's properties carry it and read back the same.
func TestManifestPrepaid(t *testing.T) {
	m, err := parseManifest([]byte(manifestPrepaid))
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.Prepaid("usd")}, m.resources["gpt-4o"])
	require.Equal(t, []limiter.Limit{limiter.Prepaid("credits").WithBurst(5000)}, m.entities[entityTarget{"acct-1", "gpt-4o"}])
	for _, bad := range []string{
		"resources:\n  r:\n    limits:\n      usd: {prepaid: true, refill_period: 60}\n",
		"resources:\n  r:\n    limits:\n      usd: {prepaid: true, calendar: month}\n",
		"resources:\n  r:\n    limits:\n      usd: {prepaid: true, capacity: 0}\n",
	} {
		_, err := parseManifest([]byte(bad))
		require.ErrorContains(t, err, "invalid manifest", bad)
	}

	props := manifestProperties("tbl", m)
	require.Equal(t, provisioner.Limit{Capacity: provisioner.Number(limiter.Prepaid("usd").Capacity), Prepaid: true}, props.Resources["gpt-4o"].Limits["usd"])
	b, err := json.Marshal(props)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	back, err := provisioner.ParseProperties(raw, "")
	require.NoError(t, err)
	require.Equal(t, props, back)

	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "prepaid.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifestPrepaid), 0o600))
	contains(t, e.ok("limits", "apply", "-f", path), "Applied: 2 created, 0 updated, 0 deleted.")
	contains(t, e.ok("limits", "plan", "-f", path), "No changes")
	nsRepo, err := e.repo.repo.Namespace(e.ctx, "tenant-p")
	require.NoError(t, err)
	got, err := newTable(nsRepo).Admin().Limits(e.ctx, limiter.Scope{Entity: "acct-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.Prepaid("credits").WithBurst(5000)}, got)
}
