package limiter

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRefusalNamesThePeriod: a refusal by a spent monthly budget names the
// limit and the month and gives the wait as a person reads it, never the
// bucket that holds the period or the wait in seconds; the error's fields
// keep their values (the period bucket in Resource, the exact RetryAfter).
func TestRefusalNamesThePeriod(t *testing.T) {
	clk := &fakeClock{}
	clk.set(calTime(t, "2026-11-29T00:10:31Z"))
	rl := New(newMemory(), func(o *Options) { o.Clock = clk.now })
	defer rl.Close()
	ctx := context.Background()
	limits := WithLimits(PerMinute("rpm", 100), PerCalendarMonth("usd", 100))
	lease, err := rl.Acquire(ctx, "proj-1", "gpt-4o", Consume{"rpm": 1, "usd": 100}, limits)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	_, err = rl.Acquire(ctx, "proj-1", "gpt-4o", Consume{"rpm": 1, "usd": 1}, limits)
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	require.ErrorIs(t, err, ErrRateLimited)
	assert.NotErrorIs(t, err, ErrBalanceExhausted)
	require.EqualError(t, err, "limiter: rate limit exceeded for proj-1 on gpt-4o: usd, the November 2026 budget; retry in 47h50m")
	assert.Equal(t, "gpt-4o/usd.m2026-11", rle.Primary.Resource, "the field keeps the bucket")
	assert.Equal(t, 47*time.Hour+49*time.Minute+29*time.Second, rle.RetryAfter, "until 1 December 00:00 UTC")
	assert.Equal(t, "172170", rle.RetryAfterHeader())
	assert.NotContains(t, err.Error(), "m2026-11")
}

// TestRefusalPrepaidSaysTopUp: a prepaid balance that cannot cover the
// amount says what was asked, what is left and that a top-up is what helps;
// no retry time is offered in the text (RetryAfter stays BalanceRetryAfter, a
// back-off for clients that retry on their own).
func TestRefusalPrepaidSaysTopUp(t *testing.T) {
	rl := New(newMemory())
	defer rl.Close()
	ctx := context.Background()
	limits := WithLimits(Prepaid("usd"))
	_, err := rl.TopUp(ctx, TopUpRequest{Entity: "cust-1", Resource: "gpt-4o", Limit: "usd", Amount: 3, ID: "t1"}, limits)
	require.NoError(t, err)
	_, err = rl.Acquire(ctx, "cust-1", "gpt-4o", Consume{"usd": 5}, limits)
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	require.ErrorIs(t, err, ErrBalanceExhausted)
	require.EqualError(t, err, "limiter: rate limit exceeded for cust-1 on gpt-4o: usd, the prepaid balance; 5 usd requested, 3 left in the balance: top up to continue")
	assert.Equal(t, BalanceRetryAfter, rle.RetryAfter)
	assert.Equal(t, "gpt-4o/usd.balance", rle.Primary.Resource, "the field keeps the bucket")
}

// TestRefusalMessageForms: the message of statuses of several limits,
// entities, kinds and zones, built directly.
func TestRefusalMessageForms(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	rpm := PerMinute("rpm", 10)
	day := PerCalendarDay("usd", 100)
	week := PerCalendarWeek("usd", 100).InLocation(ny)
	cases := []struct {
		name     string
		statuses []LimitStatus
		want     string
	}{
		{"two limits, two entities", []LimitStatus{
			{EntityID: "key-1", Resource: "gpt-4o", LimitName: "rpm", Limit: rpm, Requested: 1, Exceeded: true, RetryAfter: 2 * time.Second},
			{EntityID: "acme", Resource: "gpt-4o/usd.d2026-11-28", LimitName: "usd", Limit: day, Requested: 5, Exceeded: true, RetryAfter: 5 * time.Hour},
		}, "limiter: rate limit exceeded for acme on gpt-4o: rpm of key-1 and usd (the budget of 28 November 2026); retry in 5h0m"},
		{"a week in a zone", []LimitStatus{
			{EntityID: "k", Resource: "r/usd.w2026-11-23", LimitName: "usd", Limit: week, Requested: 5, Exceeded: true, RetryAfter: 50 * time.Hour},
		}, "limiter: rate limit exceeded for k on r: usd, the budget of the week of 23 November 2026 (America/New_York); retry in 2d2h"},
		{"entity-wide", []LimitStatus{
			{EntityID: "acme", Resource: AllResources + "/usd.m2026-11", LimitName: "usd", Limit: PerCalendarMonth("usd", 9), Requested: 5, Exceeded: true, RetryAfter: 90 * time.Second},
			{EntityID: "acme", Resource: "gpt-4o", LimitName: "rpm", Limit: rpm, Requested: 1, Exceeded: true, RetryAfter: time.Second},
		}, "limiter: rate limit exceeded for acme across every resource: usd (the November 2026 budget) and rpm on gpt-4o; retry in 1m30s"},
		{"no resource", []LimitStatus{
			{EntityID: "k", LimitName: "rpm", Limit: rpm, Requested: 1, Exceeded: true, RetryAfter: time.Second},
		}, "limiter: rate limit exceeded for k: rpm; retry in 1.0s"},
		{"an endless wait", []LimitStatus{
			{EntityID: "k", Resource: "r", LimitName: "rpm", Limit: rpm, Requested: 1, Exceeded: true, RetryAfter: math.MaxInt64},
		}, "limiter: rate limit exceeded for k on r: rpm; the request can never fit"},
		{"a sub-second wait", []LimitStatus{
			{EntityID: "k", Resource: "r", LimitName: "rpm", Limit: rpm, Requested: 1, Exceeded: true, RetryAfter: 1 * time.Millisecond},
		}, "limiter: rate limit exceeded for k on r: rpm; retry in 0.1s"},
	}
	for _, c := range cases {
		assert.EqualError(t, newRateLimitExceededError(c.statuses), c.want, c.name)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                                "0s",
		time.Millisecond:                 "0.1s",
		2400 * time.Millisecond:          "2.4s",
		2401 * time.Millisecond:          "2.5s",
		66001 * time.Millisecond:         "1m7s",
		time.Hour:                        "1h0m",
		172169200 * time.Millisecond:     "47h50m",
		48 * time.Hour:                   "2d",
		29*24*time.Hour + 90*time.Minute: "29d2h",
		math.MaxInt64:                    "106751d23h",
	} {
		got := humanDuration(d)
		assert.Equal(t, want, got, "%v", d)
		if d > 0 {
			// Never shorter than d: a client that waits the time shown
			// is not refused for want of time.
			parsed, err := time.ParseDuration(got)
			if err == nil {
				assert.GreaterOrEqual(t, parsed, d, "%v shown as %s", d, got)
			}
		}
	}
}

// TestTopUpDefaultResourceNamesAllResources: a top-up on DefaultResource
// (what a caller tries for "every resource") is refused with a reason that
// names AllResources, before any call of the store.
func TestTopUpDefaultResourceNamesAllResources(t *testing.T) {
	rl := New(newMemory())
	defer rl.Close()
	_, err := rl.TopUp(context.Background(), TopUpRequest{Entity: "cust-1", Resource: DefaultResource, Limit: "usd", Amount: 5, ID: "t1"})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, ErrInvalidName)
	assert.Equal(t, "resource", ve.Field)
	assert.Contains(t, err.Error(), `AllResources ("*")`)
	assert.NotContains(t, err.Error(), "must start with a letter")
}
