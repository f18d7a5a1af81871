package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

func calTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

func TestCalendarLimitValidate(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	for _, l := range []Limit{
		PerCalendarDay("usd", 1), PerCalendarWeek("usd", 1), PerCalendarMonth("usd", 500_000_000).InLocation(ny),
	} {
		assert.NoError(t, l.Validate(), l)
		assert.True(t, store.Limit(l).IsCalendar())
		assert.Zero(t, store.Limit(l).RefillRate())
	}
	assert.Nil(t, PerCalendarDay("usd", 1).InLocation(time.UTC).Location, "UTC is stored as nil")

	bad := map[string]Limit{
		"calendar limit with a refill":  {Name: "usd", Capacity: 10, RefillAmount: 10, RefillPeriod: time.Hour, Calendar: store.CalendarMonth},
		"calendar limit with an amount": {Name: "usd", Capacity: 10, RefillAmount: 10, Calendar: store.CalendarDay},
		"calendar limit with a period":  {Name: "usd", Capacity: 10, RefillPeriod: time.Hour, Calendar: store.CalendarDay},
		"undefined period":              {Name: "usd", Capacity: 10, Calendar: 9},
		"zero capacity":                 PerCalendarMonth("usd", 0),
		"time.Local":                    PerCalendarDay("usd", 1).InLocation(time.Local),
		"rolling limit with a location": PerMinute("rpm", 10).InLocation(ny),
		"rolling limit without refill":  {Name: "rpm", Capacity: 10},
	}
	for name, l := range bad {
		err := l.Validate()
		var ve *ValidationError
		assert.ErrorAs(t, err, &ve, name)
		assert.ErrorIs(t, err, ErrValidation, name)
	}
	assert.ErrorContains(t, bad["calendar limit with a refill"].Validate(), "has no refill")
	// A rolling limit keeps today's rules.
	assert.NoError(t, PerMinute("rpm", 10).Validate())
	err = Limit{Name: "rpm", Capacity: 10, RefillAmount: 0, RefillPeriod: time.Minute}.Validate()
	assert.ErrorContains(t, err, "refill_amount must be positive")

	// Acquire checks the limits given per call the same way.
	rl := New(newMemory())
	defer rl.Close()
	_, err = rl.Acquire(context.Background(), "k", "r", Consume{"usd": 1}, WithLimits(bad["calendar limit with a refill"]))
	assert.ErrorIs(t, err, ErrValidation)
	// A location that does not load by its name cannot be stored.
	err = rl.Admin().SetLimits(context.Background(), Scope{Entity: "k", Resource: "r"}, []Limit{PerCalendarDay("usd", 1).InLocation(time.FixedZone("XYZ", 3600))})
	assert.ErrorIs(t, err, ErrValidation)
}

func TestCalendarPeriods(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	cases := []struct {
		l          Limit
		at         string
		tag        string
		start, end string
	}{
		{PerCalendarDay("usd", 1), "2026-11-28T13:00:00Z", "d2026-11-28", "2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z"},
		{PerCalendarWeek("usd", 1), "2026-11-28T13:00:00Z", "w2026-11-23", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{PerCalendarWeek("usd", 1), "2026-11-30T00:00:00Z", "w2026-11-30", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{PerCalendarWeek("usd", 1), "2026-11-29T23:59:59Z", "w2026-11-23", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{PerCalendarMonth("usd", 1), "2026-11-28T13:00:00Z", "m2026-11", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{PerCalendarMonth("usd", 1), "2026-12-31T23:59:59Z", "m2026-12", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		// New York: still November at 04:59:59Z on December 1st.
		{PerCalendarMonth("usd", 1).InLocation(ny), "2026-12-01T04:59:59Z", "m2026-11", "2026-11-01T04:00:00Z", "2026-12-01T05:00:00Z"},
		{PerCalendarMonth("usd", 1).InLocation(ny), "2026-12-01T05:00:00Z", "m2026-12", "2026-12-01T05:00:00Z", "2027-01-01T05:00:00Z"},
		// The day of the spring change has 23 hours, of the fall change 25.
		{PerCalendarDay("usd", 1).InLocation(ny), "2026-03-08T12:00:00Z", "d2026-03-08", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		{PerCalendarDay("usd", 1).InLocation(ny), "2026-11-01T12:00:00Z", "d2026-11-01", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},
	}
	for _, c := range cases {
		start, next, tag := store.Limit(c.l).CalendarPeriodAt(calTime(t, c.at))
		assert.Equal(t, c.tag, tag, c.at)
		assert.True(t, calTime(t, c.start).Equal(start), "%s: start %v", c.at, start)
		assert.True(t, calTime(t, c.end).Equal(next), "%s: next %v", c.at, next)
		res, _, err := store.Limit(c.l).CalendarBucket("gpt-4o", calTime(t, c.at))
		require.NoError(t, err)
		assert.Equal(t, "gpt-4o/usd."+c.tag, res)
	}
	assert.Equal(t, store.Limit{Name: "usd", Capacity: 7, RefillAmount: 1, RefillPeriod: store.CalendarBucketRefillPeriod},
		store.Limit(PerCalendarMonth("usd", 7)).CalendarBucketLimit())
	assert.NoError(t, store.Limit(PerCalendarMonth("usd", 7)).CalendarBucketLimit().Validate())
}

// TestCalendarDerivedNameTooLong: a period bucket's resource longer than a
// resource name may be is refused, naming the limit and the resource, and
// nothing is taken.
func TestCalendarDerivedNameTooLong(t *testing.T) {
	rl := New(newMemory())
	defer rl.Close()
	ctx := context.Background()
	resource := strings.Repeat("r", 50) // fits, but not with "/usd.d2026-11-28"
	limits := WithLimits(PerMinute("rpm", 10), PerCalendarDay("usd", 100))
	_, err := rl.Acquire(ctx, "k", resource, Consume{"rpm": 1, "usd": 1}, limits)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	assert.ErrorIs(t, err, ErrValidation)
	assert.Contains(t, err.Error(), `calendar limit "usd"`)
	assert.Contains(t, err.Error(), resource)
	avail, err := rl.Available(ctx, "k", resource, WithLimits(PerMinute("rpm", 10)))
	require.NoError(t, err)
	assert.Equal(t, int64(10), avail["rpm"], "nothing was taken")
	_, _, err = rl.AcquireAll(ctx, []AcquireRequest{{EntityID: "k", Resource: resource, Consume: Consume{"usd": 1}}}, limits)
	assert.ErrorAs(t, err, &ve)
}

// TestCalendarWait: Wait on a spent monthly budget sleeps until the next
// month, then is admitted; with a context deadline before it, it fails at
// once.
func TestCalendarWait(t *testing.T) {
	clk := &fakeClock{}
	clk.set(calTime(t, "2026-11-30T23:00:00Z"))
	rl := New(newMemory(), func(o *Options) { o.Clock = clk.now })
	defer rl.Close()
	var slept []time.Duration
	rl.sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		clk.set(clk.now().Add(d))
		return nil
	}
	ctx := context.Background()
	limits := WithLimits(PerCalendarMonth("usd", 100))
	lease, err := rl.Acquire(ctx, "w", "r", Consume{"usd": 100}, limits)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = rl.Wait(dctx, "w", "r", Consume{"usd": 10}, limits)
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, slept)

	lease, err = rl.Wait(ctx, "w", "r", Consume{"usd": 10}, limits)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))
	require.Len(t, slept, 1)
	assert.GreaterOrEqual(t, slept[0], time.Hour)
	assert.LessOrEqual(t, slept[0], time.Hour+maxWaitJitter)
	assert.False(t, clk.now().Before(calTime(t, "2026-12-01T00:00:00Z")))

	// A request larger than the budget never fits.
	_, err = rl.Wait(ctx, "w", "r", Consume{"usd": 101}, limits)
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	assert.True(t, rle.NeverFits())
	assert.Contains(t, rle.Error(), "can never fit")
}

// TestCalendarLeaseEntries: a lease holds the rolling limits on the
// resource and each calendar limit on its period's bucket; a name reaches
// only the entries that hold it, and the statuses show the calendar limit.
func TestCalendarLeaseEntries(t *testing.T) {
	clk := &fakeClock{}
	clk.set(calTime(t, "2026-11-30T23:00:00Z"))
	rl := New(newMemory(), func(o *Options) { o.Clock = clk.now })
	defer rl.Close()
	ctx := context.Background()
	month := PerCalendarMonth("usd", 1000)
	limits := WithLimits(PerMinute("tpm", 10_000), month, PerCalendarDay("usd_day", 100))
	lease, err := rl.Acquire(ctx, "k", "gpt-4o", Consume{"tpm": 500, "usd": 300}, limits)
	require.NoError(t, err)
	st := lease.Statuses()
	require.Len(t, st, 2, "usd_day has no amount: not charged")
	assert.Equal(t, "gpt-4o", st[0].Resource)
	assert.Equal(t, "tpm", st[0].Limit.Name)
	assert.Equal(t, "gpt-4o/usd.m2026-11", st[1].Resource)
	assert.Equal(t, month, st[1].Limit)
	assert.Equal(t, int64(700), st[1].Remaining)
	assert.Equal(t, time.Hour, st[1].Reset)
	require.NoError(t, lease.Adjust(Consume{"tpm": -200}))
	require.NoError(t, lease.Adjust(Consume{"usd": -100}))
	assert.Equal(t, map[string]int64{"tpm": 300, "usd": 200}, lease.Consumed())
	err = lease.Adjust(Consume{"usd_day": 1})
	assert.ErrorIs(t, err, ErrValidation, "the lease holds no usd_day")
	require.NoError(t, lease.Commit(ctx))
	avail, err := rl.Available(ctx, "k", "gpt-4o", limits)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"tpm": 9700, "usd": 800, "usd_day": 100}, avail)

	// The refused acquire names the calendar limit and waits for the
	// next period, on the Acquire and on the AcquireAll path alike.
	_, err = rl.Acquire(ctx, "k", "gpt-4o", Consume{"tpm": 1, "usd": 900}, limits)
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, month, rle.Primary.Limit)
	assert.Equal(t, time.Hour, rle.RetryAfter)
	assert.Equal(t, "3601", rle.RetryAfterHeader())
	_, statuses, err := rl.AcquireAll(ctx, []AcquireRequest{{EntityID: "k", Resource: "gpt-4o", Consume: Consume{"usd": 900}}}, limits)
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, time.Hour, rle.RetryAfter)
	require.Len(t, statuses, 1)

	// Without speculative writes (the read-then-write path) alike.
	rl2 := New(rl.repo, func(o *Options) { o.Clock = clk.now }, func(o *Options) { o.SpeculativeWrites = false })
	defer rl2.Close()
	_, err = rl2.Acquire(ctx, "k", "gpt-4o", Consume{"tpm": 1, "usd": 900}, limits)
	require.ErrorAs(t, err, &rle)
	assert.Equal(t, time.Hour, rle.RetryAfter)
	lease, err = rl2.Acquire(ctx, "k", "gpt-4o", Consume{"tpm": 1, "usd": 800}, limits)
	require.NoError(t, err)
	require.NoError(t, lease.Rollback(ctx))
}

// TestCalendarConfigCodec: the DynamoDB config item of a calendar limit:
// ra 0, rp its period's code, tz unless UTC; read back equal; an unknown
// code or a zone on a rolling limit is a validation error.
func TestCalendarConfigCodec(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	limits := []Limit{PerCalendarDay("d", 5), PerCalendarMonth("m", 7).InLocation(tokyo), PerCalendarWeek("w", 6), PerMinute("rpm", 3)}
	item := entityConfigItem("ns", "e", "r", storeLimits(limits))
	n := func(attr string) string { return item[attr].(*types.AttributeValueMemberN).Value }
	assert.Equal(t, []string{"0", "-1"}, []string{n("l_d_ra"), n("l_d_rp")})
	assert.Equal(t, []string{"0", "-2"}, []string{n("l_w_ra"), n("l_w_rp")})
	assert.Equal(t, []string{"0", "-3"}, []string{n("l_m_ra"), n("l_m_rp")})
	assert.Equal(t, &types.AttributeValueMemberS{Value: "Asia/Tokyo"}, item["l_m_tz"])
	assert.NotContains(t, item, "l_d_tz")
	got, err := limitsFromItem(item)
	require.NoError(t, err)
	assert.Len(t, got, 4)
	for _, l := range got {
		switch l.Name {
		case "m":
			assert.Equal(t, "Asia/Tokyo", l.Location.String())
			l.Location = tokyo
			assert.Equal(t, store.Limit(limits[1]), l)
		case "d":
			assert.Equal(t, store.Limit(limits[0]), l)
		case "w":
			assert.Equal(t, store.Limit(limits[2]), l)
		case "rpm":
			assert.Equal(t, store.Limit(limits[3]), l)
		}
	}

	item["l_d_rp"] = ddbschema.N(-7)
	_, err = limitsFromItem(item)
	assert.ErrorIs(t, err, ErrValidation)
	assert.ErrorContains(t, err, "unknown calendar period code")
	item["l_d_rp"] = ddbschema.N(-1)
	item["l_rpm_tz"] = ddbschema.S("Asia/Tokyo")
	_, err = limitsFromItem(item)
	assert.ErrorIs(t, err, ErrValidation)
	delete(item, "l_rpm_tz")
	item["l_m_tz"] = ddbschema.S("Not/AZone")
	_, err = limitsFromItem(item)
	assert.ErrorIs(t, err, ErrValidation)
	assert.True(t, errors.Is(err, ErrValidation))
}
