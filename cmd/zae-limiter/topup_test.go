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
	_, err := e.repo.CreateEntity(ctx, limiter.Entity{ID: "acct"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "acct", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:prepaid", "-l", "credits:prepaid:5000")
	stored, err := e.repo.GetLimits(ctx, "acct", "gpt-4o")
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
	_, err = e.repo.CreateEntity(ctx, limiter.Entity{ID: "cust-42"})
	require.NoError(t, err)
	e.ok("entity", "set-limits", "cust-42", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:500000000/calendar-month@America/New_York")
	stored, err = e.repo.GetLimits(ctx, "cust-42", "gpt-4o")
	require.NoError(t, err)
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	require.ElementsMatch(t, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerCalendarMonth("usd", 500_000_000).InLocation(ny)}, stored)
	e.ok("entity", "set-limits", "acct-7", "-r", "gpt-4o", "-l", "rpm:100", "-l", "usd:prepaid")
	e.json(&got, "entity", "top-up", "acct-7", "-r", "gpt-4o", "--limit", "usd", "--dollars", "25", "--id", "pay-001")
	require.Equal(t, int64(25*llmhttp.USD), got.Balance)

	av, err := e.repo.Available(ctx, "acct", "gpt-4o")
	require.NoError(t, err)
	require.Equal(t, int64(1000), av["credits"], "no refused call added anything")
	require.Equal(t, int64(30_500_000), av["usd"])
}
