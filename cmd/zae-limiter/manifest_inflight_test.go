package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
)

// manifestInFlight declares 8 calls in flight per key and 32 per
// organisation.
const manifestInFlight = `namespace: tenant-f
entities:
  org-1:
    resources:
      gpt-4o:
        limits:
          calls: {inflight: 32}
  key-1:
    resources:
      gpt-4o:
        limits:
          calls: {inflight: 8}
          rpm: {capacity: 500}
`

// TestManifestInFlight: inflight: N declares a limit of N calls in
// flight and takes no other field; --limit name:inflight:N parses to the
// same limit; both show as "N in flight".
func TestManifestInFlight(t *testing.T) {
	m, err := parseManifest([]byte(manifestInFlight))
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.InFlight("calls", 32)}, m.entities[entityTarget{"org-1", "gpt-4o"}])
	require.Equal(t, []limiter.Limit{limiter.InFlight("calls", 8), limiter.PerMinute("rpm", 500)}, m.entities[entityTarget{"key-1", "gpt-4o"}])
	// The CloudFormation form carries the kind: Capacity alone would
	// declare 8 a minute.
	p := manifestProperties("t", m)
	require.Equal(t, provisioner.Limit{Capacity: 8, InFlight: true}, p.Entities["key-1"].Resources["gpt-4o"].Limits["calls"])
	require.Equal(t, provisioner.Limit{Capacity: 32, InFlight: true}, p.Entities["org-1"].Resources["gpt-4o"].Limits["calls"])
	for _, bad := range []string{
		"resources:\n  r:\n    limits:\n      calls: {inflight: 8, capacity: 8}\n",
		"resources:\n  r:\n    limits:\n      calls: {inflight: 8, prepaid: true}\n",
		"resources:\n  r:\n    limits:\n      calls: {inflight: 0}\n",
	} {
		_, err := parseManifest([]byte(bad))
		require.ErrorContains(t, err, "invalid manifest", bad)
	}
	l, err := parseLimit("calls:inflight:8")
	require.NoError(t, err)
	require.Equal(t, limiter.InFlight("calls", 8), l)
	require.Equal(t, "calls: 8 in flight", formatLimit(l))
	for _, bad := range []string{"calls:inflight", "calls:inflight:x", "calls:inflight:-1"} {
		_, err := parseLimit(bad)
		require.Error(t, err, bad)
	}
	require.NotEqual(t, keyOf(limiter.InFlight("calls", 8)), keyOf(limiter.Prepaid("calls").WithBurst(8)))
}
