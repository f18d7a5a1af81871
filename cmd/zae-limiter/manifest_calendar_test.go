package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/store"
)

// manifestMoney is the manifest of docs/cli.md's calendar limits: the
// dollar shorthand on the system, a resource and an entity, and an explicit
// calendar limit beside rolling ones.
const manifestMoney = "testdata/money.yaml"

func TestParseManifestCalendar(t *testing.T) {
	m, err := loadManifest(manifestMoney, nil)
	require.NoError(t, err)
	ny, err := store.LoadCalendarLocation("America/New_York")
	require.NoError(t, err)
	require.NotNil(t, m.system)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerCalendarDay("usd", 20*llmhttp.USD)}, m.system.limits)
	require.Equal(t, []limiter.Limit{
		limiter.PerCalendarDay("rpd", 5000).InLocation(ny),
		limiter.PerMinute("rpm", 600),
		limiter.PerCalendarMonth("usd", 500*llmhttp.USD),
	}, m.resources["gpt-4o"])
	require.Equal(t, []limiter.Limit{limiter.PerMinute("tpm", 20000), limiter.PerCalendarWeek("usd", 450_000)},
		m.entities[entityTarget{"key-1", "gpt-4o"}])

	// A level may hold the shorthand alone.
	m, err = parseManifest([]byte("resources:\n  r:\n    usd_per_month: 12.000001\n"))
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 12_000_001)}, m.resources["r"])
}

func TestParseDollars(t *testing.T) {
	for in, want := range map[string]int64{
		"500": 500_000_000, "0.45": 450_000, ".5": 500_000, "12.000001": 12_000_001, "1.10": 1_100_000, "0.000001": 1,
	} {
		got, err := parseDollars(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0.0", "-5", "+5", "1.0000001", "1e3", "lots", "1.", "1_000", "0x10", "9223372036855"} {
		_, err := parseDollars(in)
		require.Error(t, err, in)
	}
	for micros, want := range map[int64]string{
		500_000_000: "$500", 450_000: "$0.45", 12_000_001: "$12.000001", 1_500_000_000: "$1,500", -3_500_000: "-$3.50", 0: "$0",
	} {
		require.Equal(t, want, formatDollars(micros), micros)
	}
}

func TestBadCalendarManifests(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"shorthand and usd", "resources:\n  r:\n    usd_per_month: 5\n    limits:\n      usd: {capacity: 1}\n",
			"resources.r: usd_per_month and limits.usd both declare the limit usd"},
		{"two shorthands", "system:\n  usd_per_day: 5\n  usd_per_month: 50\n", "system: usd_per_day and usd_per_month: one dollar budget per level"},
		{"negative dollars", "resources:\n  r:\n    usd_per_day: -5\n", "resources.r.usd_per_day: \"-5\" is not an amount of dollars"},
		{"zero dollars", "resources:\n  r:\n    usd_per_day: 0\n", "resources.r.usd_per_day: 0 dollars: a budget must be positive"},
		{"sub-micro dollars", "resources:\n  r:\n    usd_per_day: 0.0000001\n", "at most 6 decimals"},
		{"dollar list", "resources:\n  r:\n    usd_per_day: [5]\n", "a dollar amount must be a number"},
		{"entity shorthand twice", "entities:\n  e:\n    resources:\n      r:\n        usd_per_week: 1\n        limits:\n          usd: {capacity: 1, calendar: week}\n",
			"entities.e.resources.r: usd_per_week and limits.usd both declare"},
		{"bad calendar", "resources:\n  r:\n    limits:\n      rpd: {capacity: 1, calendar: year}\n", `resources.r.limits.rpd: calendar "year": use day, week or month`},
		{"calendar with refill", "resources:\n  r:\n    limits:\n      rpd: {capacity: 1, calendar: day, refill_period: 60}\n",
			"resources.r.limits.rpd: a calendar limit resets each period and takes no refill_amount or refill_period"},
		{"calendar without capacity", "resources:\n  r:\n    limits:\n      rpd: {calendar: day}\n", "resources.r.limits.rpd: capacity is required"},
		{"bad zone", "resources:\n  r:\n    limits:\n      rpd: {capacity: 1, calendar: day, timezone: Mars/Olympus}\n",
			`resources.r.limits.rpd: timezone "Mars/Olympus": not an IANA time zone`},
		{"zone without calendar", "resources:\n  r:\n    limits:\n      rpm: {capacity: 1, timezone: UTC}\n",
			"resources.r.limits.rpm: timezone is only for a calendar limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseManifest([]byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "invalid manifest: ")
		})
	}
}

// TestCalendarManifestProperties: the provisioner's properties of a
// manifest with calendar limits carry their period and zone, and the
// provisioner decodes them back unchanged from JSON, as CloudFormation
// hands them over (infra/provisioner's TestCalendarLimits stores them).
func TestCalendarManifestProperties(t *testing.T) {
	m, err := loadManifest(manifestMoney, nil)
	require.NoError(t, err)
	props := manifestProperties("tbl", m)
	require.Equal(t, provisioner.Limit{Capacity: 5000, Calendar: "day", Timezone: "America/New_York"}, props.Resources["gpt-4o"].Limits["rpd"])
	require.Equal(t, provisioner.Limit{Capacity: 500 * llmhttp.USD, Calendar: "month"}, props.Resources["gpt-4o"].Limits["usd"])
	require.Equal(t, provisioner.Limit{Capacity: 600, RefillAmount: 600, RefillPeriod: 60}, props.Resources["gpt-4o"].Limits["rpm"])

	b, err := json.Marshal(props)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	back, err := provisioner.ParseProperties(raw, "")
	require.NoError(t, err)
	require.Equal(t, props, back)
}

// TestLimitsManifestCalendar applies a manifest with calendar limits
// through the library: the stored limits read back as declared, a second
// apply changes nothing, and a changed zone or period is an update.
func TestLimitsManifestCalendar(t *testing.T) {
	e := newEnv(t)
	path := manifestMoney
	out := e.ok("limits", "plan", "-f", path)
	contains(t, out, "Plan: 3 change(s) in namespace tenant-m",
		"+ create system: (system defaults)  [rpm: 1,000/min, usd: $20/calendar day]",
		"+ create resource: gpt-4o  [rpd: 5,000/calendar day (America/New_York), rpm: 600/min, usd: $500/calendar month]",
		"+ create entity: key-1/gpt-4o  [tpm: 20,000/min, usd: $0.45/calendar week]")
	var p planResult
	e.json(&p, "limits", "plan", "-f", path)
	require.Len(t, p.Changes, 3)
	require.Equal(t, []limitJSON{
		{Name: "rpd", Capacity: 5000, Calendar: "day", Timezone: "America/New_York"},
		{Name: "rpm", Capacity: 600, RefillAmount: 600, RefillPeriodSeconds: 60},
		{Name: "usd", Capacity: 500 * llmhttp.USD, Calendar: "month"},
	}, p.Changes[1].Limits)

	contains(t, e.ok("limits", "apply", "-f", path), "Applied: 3 created, 0 updated, 0 deleted.")
	nsRepo, err := e.repo.repo.Namespace(e.ctx, "tenant-m")
	require.NoError(t, err)
	ns := newTable(nsRepo)
	m, err := loadManifest(manifestMoney, nil)
	require.NoError(t, err)
	got, err := ns.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	require.True(t, sameLimits(m.resources["gpt-4o"], got), "gpt-4o after apply = %v", got)
	got, err = ns.Admin().Limits(e.ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"})
	require.NoError(t, err)
	require.True(t, sameLimits(m.entities[entityTarget{"key-1", "gpt-4o"}], got), "key-1/gpt-4o after apply = %v", got)
	got, _, err = ns.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	require.True(t, sameLimits(m.system.limits, got), "system after apply = %v", got)

	// Applying the same manifest again changes nothing.
	contains(t, e.ok("limits", "apply", "-f", path), "No changes. Infrastructure is up-to-date.")
	contains(t, e.ok("limits", "diff", "-f", path), "No drift detected.")

	// Another zone, or another period, is an update.
	moved := writeFile(t, "moved.yaml", `
namespace: tenant-m
resources:
  gpt-4o:
    usd_per_week: 500
    limits:
      rpm: {capacity: 600}
      rpd: {capacity: 5000, calendar: day, timezone: Europe/Paris}
`)
	var up planResult
	e.json(&up, "limits", "plan", "-f", moved)
	require.Len(t, up.Changes, 1)
	require.Equal(t, actionUpdate, up.Changes[0].Action)
	require.Equal(t, limitJSON{Name: "rpd", Capacity: 5000, Calendar: "day", Timezone: "America/New_York"}, up.Changes[0].Previous[0])
	require.Equal(t, limitJSON{Name: "usd", Capacity: 500 * llmhttp.USD, Calendar: "week"}, up.Changes[0].Limits[2])
	contains(t, e.ok("limits", "apply", "-f", moved), "Applied: 0 created, 1 updated, 0 deleted.")
	contains(t, e.ok("limits", "plan", "-f", moved), "No changes.")

	// The stored limits show their period and zone.
	contains(t, e.ok("resource", "get-defaults", "gpt-4o", "-N", "tenant-m"), "calendar day Europe/Paris", "usd: $500/calendar week")
}

func TestSameLimitsCalendar(t *testing.T) {
	ny, err := store.LoadCalendarLocation("America/New_York")
	require.NoError(t, err)
	month := limiter.PerCalendarMonth("usd", 5)
	for _, other := range []limiter.Limit{
		month.InLocation(ny),
		limiter.PerCalendarWeek("usd", 5),
		limiter.PerCalendarMonth("usd", 6),
		{Name: "usd", Capacity: 5, RefillAmount: 5, RefillPeriod: 60 * 1e9},
	} {
		require.False(t, sameLimits([]limiter.Limit{month}, []limiter.Limit{other}), "%v", other)
	}
	// Two loads of one zone are the same zone.
	paris1, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	paris2, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	require.NotSame(t, paris1, paris2)
	require.True(t, sameLimits([]limiter.Limit{month.InLocation(paris1)}, []limiter.Limit{month.InLocation(paris2)}))
	require.True(t, sameLimits([]limiter.Limit{month.InLocation(time.UTC)}, []limiter.Limit{month}))
}
