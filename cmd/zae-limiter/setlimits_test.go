package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
)

// warned runs the CLI, requires success, and returns stdout and the
// warnings written on stderr (each "zae-limiter: warning: ...").
func (e *env) warned(args ...string) (out string, warnings []string) {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	require.Equal(e.t, exitOK, code, "zae-limiter %s: stderr %q", strings.Join(args, " "), errs)
	for _, line := range strings.Split(strings.TrimSuffix(errs, "\n"), "\n") {
		if line == "" {
			continue
		}
		require.True(e.t, strings.HasPrefix(line, "zae-limiter: warning: "), "stderr line %q", line)
		warnings = append(warnings, strings.TrimPrefix(line, "zae-limiter: warning: "))
	}
	return out, warnings
}

// TestSetLimitsSaysWhatItReplaced: set-limits replaces the whole set and
// says which limits it replaced and removed; --merge keeps the limits not
// named and says so; the stored set is what the output says.
func TestSetLimitsSaysWhatItReplaced(t *testing.T) {
	e := newEnv(t)
	_, err := e.repo.Admin().CreateEntity(e.ctx, limiter.Entity{ID: "proj-1"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "proj-1", "-l", "rpm:600", "-l", "usd:100000000/calendar-month")

	out := e.ok("entity", "set-limits", "proj-1", "-l", "usd:500000000/calendar-month", "--merge")
	require.Equal(t, "Set 1 limit(s) for entity 'proj-1' on resource '_default_':\n  usd: $500/calendar month\n"+
		"Replaced (as stored before):\n  usd: $100/calendar month\n"+
		"Kept (stored before, not given, --merge):\n  rpm: 600/min\n", out)
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "proj-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 600), limiter.PerCalendarMonth("usd", 500*llmhttp.USD)}, got)

	// The same limit again: nothing replaced, rpm still kept.
	var js setLimitsJSON
	e.json(&js, "entity", "set-limits", "proj-1", "-l", "usd:500000000/calendar-month", "--merge")
	require.Empty(t, js.Replaced)
	require.Equal(t, []limitJSON{{Name: "rpm", Capacity: 600, RefillAmount: 600, RefillPeriodSeconds: 60}}, js.Kept)
	require.Empty(t, js.Removed)

	// Without --merge the set is replaced, and the output names what went.
	out = e.ok("entity", "set-limits", "proj-1", "-l", "usd:700000000/calendar-month")
	require.Equal(t, "Set 1 limit(s) for entity 'proj-1' on resource '_default_':\n  usd: $700/calendar month\n"+
		"Replaced (as stored before):\n  usd: $500/calendar month\n"+
		"Removed (stored before, not given; --merge keeps such limits):\n  rpm: 600/min\n", out)
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "proj-1", Resource: limiter.DefaultResource})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 700*llmhttp.USD)}, got)
}

// TestSetLimitsWarnings: limits set on an entity that does not exist are
// stored (acquires of an id without a record use them) with a warning
// naming entity create; a new limit name close to a stored one is stored
// with a warning that suggests the stored name; a conventional new name
// (tpm beside rpm) is not warned about.
func TestSetLimitsWarnings(t *testing.T) {
	e := newEnv(t)
	_, w := e.warned("entity", "set-limits", "ghost", "-r", "gpt-4o", "-l", "rpm:100")
	require.Equal(t, []string{"entity 'ghost' does not exist: its limits apply to acquires of that id, which has no parent until " +
		"'zae-limiter entity create ghost' creates it (a misspelled id?)"}, w)
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "ghost", Resource: "gpt-4o"})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerMinute("rpm", 100)}, got, "stored all the same")

	_, err = e.repo.Admin().CreateEntity(e.ctx, limiter.Entity{ID: "key-1"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "key-1", "-r", "gpt-4o", "-l", "rpm:100", "-l", "requests:5")
	_, w = e.warned("entity", "set-limits", "key-1", "-r", "gpt-4o", "-l", "rmp:100", "--merge")
	require.Equal(t, []string{"limit 'rmp' is new for entity 'key-1' on resource 'gpt-4o' (stored: requests, rpm): did you mean rpm?"}, w)
	_, w = e.warned("entity", "set-limits", "key-1", "-r", "gpt-4o", "-l", "requestz:5", "--merge")
	require.Equal(t, []string{"limit 'requestz' is new for entity 'key-1' on resource 'gpt-4o' (stored: requests, rmp, rpm): did you mean requests?"}, w)
	_, w = e.warned("entity", "set-limits", "key-1", "-r", "gpt-4o", "-l", "tpm:1000", "-l", "rps:10/sec", "-l", "rpm:100", "--merge")
	require.Empty(t, w, "tpm and rps are conventional names, rpm is stored")
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"rmp", []string{"tpm", "rpm"}, "rpm"},
		{"tpm", []string{"rpm"}, "rpm"},
		{"rpm", []string{"rpm", "tpm"}, ""},
		{"credits", []string{"rpm", "usd"}, ""},
		{"refil_amount", []string{"capacity", "refill_amount", "refill_period"}, "refill_amount"},
		{"capacty", []string{"capacity"}, "capacity"},
		{"xyz", []string{"abc"}, ""},
	} {
		assert.Equal(t, tc.want, suggest(tc.word, tc.candidates), "suggest(%q, %q)", tc.word, tc.candidates)
	}
}

// TestLimitsInForceChain: limits-in-force names every level of a
// three-level cascade and shows money in dollars, as set-limits does.
func TestLimitsInForceChain(t *testing.T) {
	e := newEnv(t)
	for _, ent := range []limiter.Entity{{ID: "org"}, {ID: "acme", ParentID: "org", Cascade: true}, {ID: "acme-key-1", ParentID: "acme", Cascade: true}} {
		_, err := e.repo.Admin().CreateEntity(e.ctx, ent)
		require.NoError(t, err)
	}
	e.ok("entity", "set-limits", "org", "-r", "gpt-4o", "-l", "rpm:10000")
	e.ok("entity", "set-limits", "acme", "-r", "gpt-4o", "-l", "rpm:1000", "-l", "usd:500000000/calendar-month")
	e.ok("entity", "set-limits", "acme-key-1", "-r", "gpt-4o", "-l", "rpm:100")
	out := e.ok("entity", "limits-in-force", "acme-key-1", "-r", "gpt-4o")
	require.Equal(t, "Limits in force for entity 'acme-key-1' on resource 'gpt-4o':\n"+
		"ENTITY      LIMIT  CAPACITY  REFILL  PERIOD          SOURCE\n"+
		"acme-key-1  rpm    100       100     60s             entity acme-key-1 on gpt-4o\n"+
		"acme        rpm    1000      1000    60s             entity acme on gpt-4o\n"+
		"acme        usd    $500      -       calendar month  entity acme on gpt-4o\n"+
		"org         rpm    10000     10000   60s             entity org on gpt-4o\n"+
		"'acme-key-1' cascades to 'acme', which cascades to 'org': an acquire takes from all 3 entities' buckets.\n", out)
	require.Contains(t, e.ok("entity", "get-limits", "acme", "-r", "gpt-4o"), "usd    $500")
	e.ok("entity", "set-limits", "org", "-r", "gpt-4o", "-l", "usd:2000000/hour:5000000", "--merge") // $2 an hour, burst $5
	require.Contains(t, e.ok("entity", "limits-in-force", "acme-key-1", "-r", "gpt-4o"), "org         usd    $5        $2      3600s           entity org on gpt-4o")
}

// TestEntityWideResourceFlag needs the entity-wide resource of the library
// ('*'): -r '*' stores, shows and deletes an entity's entity-wide limits,
// and limits-in-force names them.
func TestEntityWideResourceFlag(t *testing.T) {
	e := newEnv(t)
	_, err := e.repo.Admin().CreateEntity(e.ctx, limiter.Entity{ID: "acme"})
	require.NoError(t, err)
	out := e.ok("entity", "set-limits", "acme", "-r", "*", "-l", "usd:500000000/calendar-month")
	require.Contains(t, out, "Set 1 limit(s) for entity 'acme' on every resource ('*'):")
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarMonth("usd", 500*llmhttp.USD)}, got)
	require.Contains(t, e.ok("entity", "get-limits", "acme", "-r", "*"), "$500")
	e.ok("entity", "set-limits", "acme", "-r", "gpt-4o", "-l", "rpm:100")
	require.Contains(t, e.ok("entity", "limits-in-force", "acme", "-r", "gpt-4o"), "entity acme on * (every resource)")
	e.ok("entity", "delete-limits", "acme", "-r", "*", "--yes")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Contains(t, e.ok("entity", "get-limits", "acme", "-r", "*"), "No entity-wide limits configured for entity 'acme'")
}

// TestSetDefaultsMerge: resource and system set-defaults say what they
// replaced and removed, and keep with --merge the limits not named (the
// system's on-unavailable mode too when not given); limits set --merge
// reaches each level.
func TestSetDefaultsMerge(t *testing.T) {
	e := newEnv(t)
	e.ok("resource", "set-defaults", "gpt-4o", "-l", "rpm:1000", "-l", "tpm:50000")
	out := e.ok("resource", "set-defaults", "gpt-4o", "-l", "rpm:2000", "--merge")
	require.Equal(t, "Set 1 default(s) for resource 'gpt-4o':\n  rpm: 2,000/min\nReplaced (as stored before):\n  rpm: 1,000/min\n"+
		"Kept (stored before, not given, --merge):\n  tpm: 50,000/min\n", out)
	got, err := e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 2000), limiter.PerMinute("tpm", 50000)}, got)
	var js setLimitsJSON
	e.json(&js, "limits", "set", "--resource", "gpt-4o", "-l", "usd:9/calendar-day")
	require.Equal(t, []string{"rpm", "tpm"}, []string{js.Removed[0].Name, js.Removed[1].Name}, "without --merge: removed")
	got, err = e.repo.Admin().Limits(e.ctx, limiter.Scope{Resource: "gpt-4o"})
	require.NoError(t, err)
	require.Equal(t, []limiter.Limit{limiter.PerCalendarDay("usd", 9)}, got)

	e.ok("system", "set-defaults", "-l", "rpm:100", "--on-unavailable", "allow")
	out = e.ok("system", "set-defaults", "-l", "tpm:9000", "--merge")
	require.Contains(t, out, "  on_unavailable: allow\n")
	require.Contains(t, out, "Kept (stored before, not given, --merge):\n  rpm: 100/min\n")
	limits, ou, err := e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 9000)}, limits)
	require.Equal(t, limiter.OnUnavailableAllow, ou, "the mode kept by --merge")
	out = e.ok("limits", "set", "--system", "--on-unavailable", "block")
	require.Contains(t, out, "Removed (stored before, not given; --merge keeps such limits):\n  rpm: 100/min\n  tpm: 9,000/min\n")
	limits, ou, err = e.repo.Admin().SystemDefaults(e.ctx)
	require.NoError(t, err)
	require.Empty(t, limits)
	require.Equal(t, limiter.OnUnavailableBlock, ou)
}

// TestDescribeSource: where limits-in-force says a limit comes from,
// entity-wide ones included.
func TestDescribeSource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l    limiter.LimitInForce
		want string
	}{
		{limiter.LimitInForce{EntityID: "k", Resource: "gpt-4o", Source: limiter.SourceEntity}, "entity k on gpt-4o"},
		{limiter.LimitInForce{EntityID: "k", Resource: limiter.AllResources, Source: limiter.SourceEntity}, "entity k on * (every resource)"},
		{limiter.LimitInForce{EntityID: "k", Resource: "gpt-4o", Source: limiter.SourceEntityDefault}, "entity k on _default_"},
		{limiter.LimitInForce{EntityID: "k", Resource: "gpt-4o", Source: limiter.SourceResource}, "resource gpt-4o defaults"},
		{limiter.LimitInForce{EntityID: "k", Resource: limiter.AllResources, Source: limiter.SourceResource}, "entity-wide defaults (resource *)"},
		{limiter.LimitInForce{EntityID: "k", Resource: "gpt-4o", Source: limiter.SourceSystem}, "system defaults"},
	} {
		assert.Equal(t, tc.want, describeSource(tc.l))
	}
	assert.Equal(t, "'a' cascades to 'b': an acquire takes from both buckets.", describeChain("a", []string{"b"}))
	assert.Equal(t, "'a' cascades to 'b', which cascades to 'c', which cascades to 'd': an acquire takes from all 4 entities' buckets.",
		describeChain("a", []string{"b", "c", "d"}))
}
