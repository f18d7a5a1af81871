package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
)

// TestEntityTopUp: prepaid limits set with -l name:prepaid[:ceiling];
// entity top-up adds to a prepaid balance once per id (the same id again
// adds nothing and says so), in dollars for usd or in tokens, and an
// acquire then spends it; bad flags are refused before any call.
func TestEntityTopUp(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	_, err := e.repo.Admin().CreateEntity(ctx, limiter.Entity{ID: "acct"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "acct", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:prepaid", "-l", "credits:prepaid:5000")
	stored, err := e.repo.Admin().Limits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"})
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.Prepaid("usd"), limiter.Prepaid("credits").WithBurst(5000)}, stored)
	require.Contains(t, e.ok("entity", "get-limits", "acct", "-r", "gpt-4o"), "credits: prepaid balance (top-ups up to 5,000)")

	var got topUpJSON
	e.json(&got, "entity", "top-up", "acct", "-r", "gpt-4o", "--limit", "usd", "--dollars", "25.50", "--id", "pay-1")
	require.Equal(t, topUpJSON{EntityID: "acct", Resource: "gpt-4o", Limit: "usd", ID: "pay-1", Amount: 25_500_000, Applied: true, Balance: 25_500_000}, got)
	e.json(&got, "entity", "top-up", "acct", "-r", "gpt-4o", "--limit", "usd", "--dollars", "25.50", "--id", "pay-1")
	require.Equal(t, topUpJSON{EntityID: "acct", Resource: "gpt-4o", Limit: "usd", ID: "pay-1", Amount: 25_500_000, Applied: false, Balance: 25_500_000}, got, "the same id again")

	lease, err := e.repo.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 5 * llmhttp.USD})
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))
	require.Equal(t, "Topped up usd of entity 'acct' on resource 'gpt-4o' by $10 (top-up 'pay-2')\n  Balance: $30.50\n",
		e.ok("entity", "top-up", "acct", "-r", "gpt-4o", "--limit", "usd", "--dollars", "10", "--id", "pay-2"))
	require.Equal(t, "Top-up 'pay-2' was applied before: nothing added\n  Balance: $30.50\n",
		e.ok("entity", "top-up", "acct", "-r", "gpt-4o", "--limit", "usd", "--dollars", "10", "--id", "pay-2"))

	e.json(&got, "entity", "top-up", "acct", "-r", "gpt-4o", "--limit", "credits", "--amount", "1000", "--id", "grant-1")
	require.Equal(t, int64(1000), got.Balance)

	for _, args := range [][]string{
		{"--limit", "usd", "--dollars", "10"},                              // no id
		{"--dollars", "10", "--id", "x"},                                   // no limit
		{"--limit", "usd", "--id", "x"},                                    // no amount
		{"--limit", "usd", "--dollars", "1", "--amount", "1", "--id", "x"}, // both
		{"--limit", "credits", "--amount", "-5", "--id", "x"},              // negative
		{"--limit", "rpm", "--amount", "5", "--id", "x"},                   // not prepaid
	} {
		e.fail(append([]string{"entity", "top-up", "acct", "-r", "gpt-4o"}, args...)...)
	}
	// docs/cli.md's example, as written there.
	e.ok("entity", "create", "cust-42")
	e.ok("entity", "set-limits", "cust-42", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:500000000/calendar-month@America/New_York")
	stored, err = e.repo.Admin().Limits(ctx, limiter.Scope{Entity: "cust-42", Resource: "gpt-4o"})
	require.NoError(t, err)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerCalendarMonth("usd", 500_000_000).InLocation(ny)}, stored)
	e.ok("entity", "create", "acct-7")
	e.ok("entity", "set-limits", "acct-7", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:prepaid")
	e.json(&got, "entity", "top-up", "acct-7", "-r", "gpt-4o", "--limit", "usd", "--dollars", "25", "--id", "pay-001")
	require.Equal(t, int64(25*llmhttp.USD), got.Balance)

	av, err := e.repo.Available(ctx, "acct", "gpt-4o")
	require.NoError(t, err)
	require.Equal(t, int64(1000), av["credits"], "no refused call added anything")
	require.Equal(t, int64(30_500_000), av["usd"])
}

// TestEntityTopUpWithoutResource: a top-up without -r says exactly what to
// pass: the resources that hold the entity's balance, the per-resource
// balances of _default_, or how to store an entity-wide one; never the
// resource validation's "must start with a letter".
func TestEntityTopUpWithoutResource(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"acct", "dflt", "bare"} {
		_, err := e.repo.Admin().CreateEntity(e.ctx, limiter.Entity{ID: id})
		require.NoError(t, err)
	}
	e.ok("entity", "set-limits", "acct", "-r", "gpt-4o", "-l", "usd:prepaid")
	e.ok("entity", "set-limits", "dflt", "-l", "usd:prepaid")
	msg := e.fail("entity", "top-up", "acct", "--limit", "usd", "--dollars", "5", "--id", "p1")
	require.Contains(t, msg, "entity 'acct' has no entity-wide prepaid balance usd; it has one on 'gpt-4o': pass -r RESOURCE, e.g. -r gpt-4o")
	msg = e.fail("entity", "top-up", "dflt", "--limit", "usd", "--dollars", "5", "--id", "p1")
	require.Contains(t, msg, "its _default_ limits give each resource a balance of its own: pass -r RESOURCE")
	msg = e.fail("entity", "top-up", "bare", "--limit", "usd", "--dollars", "5", "--id", "p1")
	require.Contains(t, msg, "zae-limiter entity set-limits bare -r '*' -l usd:prepaid")
	require.NotContains(t, msg, "must start with a letter")
	// -r _default_ is refused by the library with a reason naming '*'.
	msg = e.fail("entity", "top-up", "dflt", "-r", "_default_", "--limit", "usd", "--dollars", "5", "--id", "p1")
	require.Contains(t, msg, `AllResources ("*")`)
	av, err := e.repo.Available(e.ctx, "acct", "gpt-4o")
	require.NoError(t, err)
	require.Equal(t, int64(0), av["usd"], "nothing was added")
}

// TestEntityTopUpEntityWide needs the entity-wide resource of the library
// ('*'): a top-up without -r adds to the entity-wide balance, which an
// acquire on any model then spends.
func TestEntityTopUpEntityWide(t *testing.T) {
	e := newEnv(t)
	_, err := e.repo.Admin().CreateEntity(e.ctx, limiter.Entity{ID: "cust"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "cust", "-r", "*", "-l", "usd:prepaid")
	require.Equal(t, "Topped up usd of entity 'cust' on every resource ('*') by $10 (top-up 'p1')\n  Balance: $10\n",
		e.ok("entity", "top-up", "cust", "--limit", "usd", "--dollars", "10", "--id", "p1"))
	e.ok("entity", "set-limits", "cust", "-r", "gpt-4o", "-l", "rpm:100")
	e.ok("entity", "set-limits", "cust", "-r", "claude", "-l", "rpm:100")
	for _, model := range []string{"gpt-4o", "claude"} {
		lease, err := e.repo.Acquire(e.ctx, "cust", model, limiter.Consume{"rpm": 1, "usd": 4 * llmhttp.USD})
		require.NoError(t, err, model)
		require.NoError(t, lease.Commit(e.ctx))
	}
	av, err := e.repo.Available(e.ctx, "cust", limiter.AllResources)
	require.NoError(t, err)
	require.Equal(t, int64(2*llmhttp.USD), av["usd"], "one balance for both models")
}
