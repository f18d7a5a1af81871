package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/store"
)

// spend acquires and commits usd micro-dollars for key-1 on gpt-4o with
// rl.
func spend(t *testing.T, rl *limiter.RateLimiter, usd int64) {
	t.Helper()
	lease, err := rl.Acquire(t.Context(), "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "usd": usd})
	require.NoError(t, err)
	require.NoError(t, lease.Commit(t.Context()))
}

// TestUsagePeriods: usage periods shows the spend of an entity's calendar
// limits and of its parent's, per period, from the period buckets the
// library wrote.
func TestUsagePeriods(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	_, err = e.repo.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
	require.NoError(t, err)
	_, err = e.repo.Admin().CreateEntity(ctx, limiter.Entity{ID: "key-1", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	day := limiter.PerCalendarDay("usd", 10*llmhttp.USD)
	month := limiter.PerCalendarMonth("usd", 500*llmhttp.USD).InLocation(ny)
	require.NoError(t, e.repo.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-1", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100), day}))
	require.NoError(t, e.repo.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 1000), month}))

	// Two days ago, $2 (key-1's day then, and proj's month then); now,
	// $3.25 and a call refunded down to $1.
	now := time.Now()
	past := now.Add(-48 * time.Hour)
	spend(t, limiter.New(e.repo.repo, func(o *limiter.Options) { o.Clock = func() time.Time { return past } }), 2*llmhttp.USD)
	spend(t, e.repo.RateLimiter, 3_250_000)
	lease, err := e.repo.Acquire(ctx, "key-1", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 4 * llmhttp.USD})
	require.NoError(t, err)
	require.NoError(t, lease.Adjust(limiter.Consume{"usd": -3 * llmhttp.USD}))
	require.NoError(t, lease.Commit(ctx))

	var got periodsJSON
	e.json(&got, "usage", "periods", "--entity-id", "key-1", "--resource", "gpt-4o")
	_, dayEnd, dayTag := store.Limit(day).CalendarPeriodAt(now)
	dayStart, _, _ := store.Limit(day).CalendarPeriodAt(now)
	monthStart, monthEnd, monthTag := store.Limit(month).CalendarPeriodAt(now)
	_, _, pastMonthTag := store.Limit(month).CalendarPeriodAt(past)
	monthSpent := int64(4_250_000)
	if pastMonthTag == monthTag {
		monthSpent += 2 * llmhttp.USD
	}
	require.Equal(t, periodsJSON{EntityID: "key-1", Resource: "gpt-4o", Periods: []periodJSON{
		{EntityID: "key-1", Source: "entity", Limit: "usd", Calendar: "day", Period: dayTag, Bucket: "gpt-4o/usd." + dayTag,
			Start: dayStart.Format(time.RFC3339), End: dayEnd.Format(time.RFC3339), Current: true,
			Capacity: 10 * llmhttp.USD, Spent: 4_250_000, Remaining: 5_750_000},
		{EntityID: "proj", Source: "entity", Limit: "usd", Calendar: "month", Timezone: "America/New_York", Period: monthTag, Bucket: "gpt-4o/usd." + monthTag,
			Start: monthStart.Format(time.RFC3339), End: monthEnd.Format(time.RFC3339), Current: true,
			Capacity: 500 * llmhttp.USD, Spent: monthSpent, Remaining: 500*llmhttp.USD - monthSpent},
	}}, got)

	// With --previous, the earlier periods found in the table: key-1's
	// day two days ago (not yesterday: no bucket), and proj's previous
	// month when the $2 fell in it.
	e.json(&got, "usage", "periods", "-e", "key-1", "-r", "gpt-4o", "--previous", "3")
	var seen []string
	for _, p := range got.Periods {
		seen = append(seen, p.EntityID+" "+p.Period)
		if !p.Current {
			require.Equal(t, int64(2*llmhttp.USD), p.Spent, p.Period)
			require.Equal(t, p.Capacity-2*llmhttp.USD, p.Remaining, p.Period)
		}
	}
	_, _, pastDayTag := store.Limit(day).CalendarPeriodAt(past)
	want := []string{"key-1 " + dayTag, "key-1 " + pastDayTag, "proj " + monthTag}
	if pastMonthTag != monthTag {
		want = append(want, "proj "+pastMonthTag)
	}
	require.Equal(t, want, seen)

	// The table shows dollars.
	out := e.ok("usage", "periods", "-e", "key-1", "-r", "gpt-4o")
	contains(t, out, "Calendar limits in force for entity 'key-1' on resource 'gpt-4o':",
		dayTag+" (current)", "$10", "$4.25", "$5.75", "$500")

	// Without calendar limits, and without any limits.
	require.NoError(t, e.repo.Admin().SetLimits(ctx, limiter.Scope{Entity: "key-2", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
	contains(t, e.ok("usage", "periods", "-e", "key-2", "-r", "gpt-4o"), "No calendar limits in force for entity 'key-2' on resource 'gpt-4o'")
	e.json(&got, "usage", "periods", "-e", "nobody", "-r", "gpt-4o")
	require.Equal(t, periodsJSON{EntityID: "nobody", Resource: "gpt-4o", Periods: []periodJSON{}}, got)

	contains(t, e.fail("usage", "periods", "-r", "gpt-4o"), "usage periods: --entity-id and --resource are required")
	contains(t, e.fail("usage", "periods", "-e", "key-1", "-r", "gpt-4o", "--previous", "37"), "invalid --previous 37: use 0 to 36")
}
