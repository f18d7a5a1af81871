package crossbackend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// fakeClock is a settable clock for limiter.Options.Clock.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time     { return time.UnixMilli(c.ms.Load()).UTC() }
func (c *fakeClock) set(t time.Time)    { c.ms.Store(t.UnixMilli()) }
func (c *fakeClock) at(s string) string { c.set(mustTime(s)); return s }

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// eachBackend runs f on DynamoDB Local, the memory store and redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, repo limiter.Repository)) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) limiter.Repository
	}{
		{"memory", func(*testing.T) limiter.Repository { return memorystore.New() }},
		{"redis", openRedis},
		{"dynamodb", openDynamoDB},
	} {
		t.Run(b.name, func(t *testing.T) { f(t, b.open(t)) })
	}
}

func newYork(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	return loc
}

// boundaryCase spends a calendar budget of 1,000 at spend, is refused one
// second before boundary (RetryAfter exactly 1 s, the calendar limit in
// the refusal) and admitted in full at boundary.
type boundaryCase struct {
	name            string
	limit           limiter.Limit
	spend, boundary string
}

func TestCalendarResetsAtBoundary(t *testing.T) {
	ny := newYork(t)
	cases := []boundaryCase{
		{"month", limiter.PerCalendarMonth("usd", 1000), "2026-11-30T10:00:00Z", "2026-12-01T00:00:00Z"},
		{"day", limiter.PerCalendarDay("usd", 1000), "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z"},
		// 2026-11-28 is a Saturday: the week ends on Monday 2026-11-30.
		{"week", limiter.PerCalendarWeek("usd", 1000), "2026-11-28T12:00:00Z", "2026-11-30T00:00:00Z"},
		{"month-new-york-winter", limiter.PerCalendarMonth("usd", 1000).InLocation(ny), "2026-11-30T10:00:00Z", "2026-12-01T05:00:00Z"},
		{"month-new-york-summer", limiter.PerCalendarMonth("usd", 1000).InLocation(ny), "2026-07-31T10:00:00Z", "2026-08-01T04:00:00Z"},
		// 2026-03-08 is the day New York moves to daylight time: it began
		// at 05:00Z and ends at 04:00Z.
		{"day-new-york-dst", limiter.PerCalendarDay("usd", 1000).InLocation(ny), "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
	}
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				clk := &fakeClock{}
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
				defer rl.Close()
				key := "cal-" + c.name
				limits := limiter.WithLimits(limiter.PerMinute("rpm", 100), c.limit)
				clk.at(c.spend)
				lease, err := rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1000}, limits)
				require.NoError(t, err)
				require.NoError(t, lease.Commit(ctx))

				boundary := mustTime(c.boundary)
				clk.set(boundary.Add(-time.Second))
				_, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1}, limits)
				var rle *limiter.RateLimitExceededError
				require.ErrorAs(t, err, &rle)
				assert.Equal(t, time.Second, rle.RetryAfter)
				assert.False(t, rle.NeverFits())
				assert.Equal(t, "usd", rle.Primary.LimitName)
				assert.Equal(t, c.limit, rle.Primary.Limit)
				assert.Equal(t, int64(0), rle.Primary.Available)
				avail, err := rl.Available(ctx, key, "gpt-4o", limits)
				require.NoError(t, err)
				assert.Equal(t, int64(0), avail["usd"])
				wait, err := rl.TimeUntilAvailable(ctx, key, "gpt-4o", limiter.Consume{"usd": 1}, limits)
				require.NoError(t, err)
				assert.Equal(t, time.Second, wait)

				clk.set(boundary)
				lease, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"rpm": 1, "usd": 1000}, limits)
				require.NoError(t, err, "the new period starts full")
				require.NoError(t, lease.Commit(ctx))
				_, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"usd": 1}, limits)
				require.ErrorAs(t, err, &rle, "the new period is spent")
			})
		}
	})
}

// TestCalendarConcurrentExact: 50 goroutines acquire random amounts of a
// monthly budget at once: the admitted total never exceeds it, it is what
// the budget lost, and no refusal came while the budget covered the
// request.
func TestCalendarConcurrentExact(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-28T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		const capacity = 1000
		limits := limiter.WithLimits(limiter.PerCalendarMonth("usd", capacity))
		var admitted, refused atomic.Int64
		var mu sync.Mutex
		var bad []string
		var wg sync.WaitGroup
		for g := range 50 {
			amount := int64(rand.New(rand.NewPCG(uint64(g), 7)).IntN(40) + 1)
			wg.Go(func() {
				lease, err := rl.Acquire(ctx, "conc", "gpt-4o", limiter.Consume{"usd": amount}, limits)
				var rle *limiter.RateLimitExceededError
				switch {
				case err == nil:
					admitted.Add(amount)
					if err := lease.Commit(ctx); err != nil {
						mu.Lock()
						bad = append(bad, err.Error())
						mu.Unlock()
					}
				case errors.As(err, &rle):
					refused.Add(1)
					if rle.RetryAfter <= 0 || rle.Primary.Available >= rle.Primary.Requested {
						mu.Lock()
						bad = append(bad, fmt.Sprintf("false refusal: %v (available %d, requested %d)", err, rle.Primary.Available, rle.Primary.Requested))
						mu.Unlock()
					}
				default:
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		assert.Empty(t, bad)
		assert.LessOrEqual(t, admitted.Load(), int64(capacity))
		avail, err := rl.Available(ctx, "conc", "gpt-4o", limits)
		require.NoError(t, err)
		assert.Equal(t, capacity-admitted.Load(), avail["usd"], "the budget lost exactly what was admitted")
		t.Logf("admitted %d of %d, %d refusals", admitted.Load(), capacity, refused.Load())
	})
}

// TestCalendarLeaseKeepsItsPeriod: a lease acquired in November and
// adjusted and committed in December charges November's budget.
func TestCalendarLeaseKeepsItsPeriod(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		limits := limiter.WithLimits(limiter.PerMinute("rpm", 10), limiter.PerCalendarMonth("usd", 1000))
		clk.at("2026-11-30T23:00:00Z")
		lease, err := rl.Acquire(ctx, "lk", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 100}, limits)
		require.NoError(t, err)
		clk.at("2026-12-01T01:00:00Z")
		require.NoError(t, lease.Adjust(limiter.Consume{"usd": 50}))
		require.NoError(t, lease.Commit(ctx))
		assert.Equal(t, map[string]int64{"rpm": 1, "usd": 150}, lease.Consumed())

		avail, err := rl.Available(ctx, "lk", "gpt-4o", limits)
		require.NoError(t, err)
		assert.Equal(t, int64(1000), avail["usd"], "December is untouched")
		clk.at("2026-11-30T23:59:00Z")
		avail, err = rl.Available(ctx, "lk", "gpt-4o", limits)
		require.NoError(t, err)
		assert.Equal(t, int64(850), avail["usd"], "November is charged 150")

		// A refund reaches the November bucket too, in full.
		lease, err = rl.Acquire(ctx, "lk", "gpt-4o", limiter.Consume{"usd": 200}, limits)
		require.NoError(t, err)
		clk.at("2026-12-02T00:00:00Z")
		require.NoError(t, lease.Adjust(limiter.Consume{"usd": -200}))
		require.NoError(t, lease.Commit(ctx))
		clk.at("2026-11-30T23:59:00Z")
		avail, err = rl.Available(ctx, "lk", "gpt-4o", limits)
		require.NoError(t, err)
		assert.Equal(t, int64(850), avail["usd"])
	})
}

// TestCalendarCascade: a key cascades to its project, both with monthly
// budgets (the project's smaller): the project's refuses, and nothing is
// charged anywhere. Then the same with the budget only on the project.
func TestCalendarCascade(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-28T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
		require.NoError(t, err)
		for _, k := range []string{"key", "key2"} {
			_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: k, ParentID: "proj", Cascade: true})
			require.NoError(t, err)
		}
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerCalendarMonth("usd", 1000)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key2", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerCalendarMonth("usd", 300)}))

		lease, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 200})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		_, err = rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 200})
		var rle *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		assert.Equal(t, "proj", rle.Primary.EntityID)
		assert.Equal(t, "usd", rle.Primary.LimitName)
		assert.Equal(t, store.CalendarMonth, rle.Primary.Limit.Calendar)
		assert.Equal(t, mustTime("2026-12-01T00:00:00Z").Sub(clk.now()), rle.RetryAfter)
		require.Len(t, rle.Violations, 1)

		check := func(id string, want map[string]int64) {
			t.Helper()
			got, err := rl.Available(ctx, id, "gpt-4o")
			require.NoError(t, err)
			assert.Equal(t, want, got, id)
		}
		check("key", map[string]int64{"rpm": 99, "usd": 800})
		check("proj", map[string]int64{"rpm": 99, "usd": 100})

		// key2 has no budget of its own: its acquires take the project's.
		lease, err = rl.Acquire(ctx, "key2", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 60})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		_, err = rl.Acquire(ctx, "key2", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 60})
		require.ErrorAs(t, err, &rle)
		assert.Equal(t, "proj", rle.Primary.EntityID)
		check("key2", map[string]int64{"rpm": 99})
		check("proj", map[string]int64{"rpm": 98, "usd": 40})

		// AcquireAll: both keys at once, all or nothing.
		_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "key", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 30}},
			{EntityID: "key2", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 30}},
		})
		require.ErrorAs(t, err, &rle)
		check("key", map[string]int64{"rpm": 99, "usd": 800})
		check("proj", map[string]int64{"rpm": 98, "usd": 40})
		lease, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "key", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 20}},
			{EntityID: "key2", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 20}},
		})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		check("key", map[string]int64{"rpm": 98, "usd": 780})
		check("proj", map[string]int64{"rpm": 96, "usd": 0})
	})
}

// TestCalendarStoredConfig: a calendar limit stored with SetLimits reads
// back equal, its location included, on every backend, and on DynamoDB
// the item holds ra 0, rp -3 and the zone.
func TestCalendarStoredConfig(t *testing.T) {
	ny := newYork(t)
	want := []limiter.Limit{limiter.PerMinute("rpm", 10), limiter.PerCalendarMonth("usd", 500_000_000).InLocation(ny), limiter.PerCalendarDay("usd_day", 20_000_000)}
	describe := func(ls []limiter.Limit) []string {
		var out []string
		for _, l := range ls {
			loc := "<nil>"
			if l.Location != nil {
				loc = l.Location.String()
			}
			out = append(out, fmt.Sprintf("%s cp=%d ra=%d rp=%v cal=%v loc=%s", l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod, l.Calendar, loc))
		}
		return out
	}
	roundTrip := func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, want))
		got, err := rl.Admin().Limits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"})
		require.NoError(t, err)
		assert.ElementsMatch(t, describe(want), describe(got))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, want))
		got, err = rl.Admin().Limits(ctx, limiter.Scope{Resource: "gpt-4o"})
		require.NoError(t, err)
		assert.ElementsMatch(t, describe(want), describe(got))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, want))
		got, _, err = rl.Admin().SystemDefaults(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, describe(want), describe(got))
		inForce, err := rl.LimitsInForce(ctx, "proj", "gpt-4o")
		require.NoError(t, err)
		require.Len(t, inForce, 3)
		// Acquires use the stored calendar limits.
		lease, err := rl.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 400_000_000})
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		_, err = rl.Acquire(ctx, "proj", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 200_000_000})
		require.ErrorIs(t, err, limiter.ErrRateLimited)
	}
	t.Run("memory", func(t *testing.T) {
		repo := memorystore.New()
		roundTrip(t, repo)
		ctx := context.Background()
		got, err := limiter.New(repo).Admin().Limits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"})
		require.NoError(t, err)
		assert.Equal(t, want, got, "the memory store keeps the limits as they are")
	})
	t.Run("redis", func(t *testing.T) { roundTrip(t, openRedis(t)) })
	t.Run("dynamodb", func(t *testing.T) {
		repo, client, table := openDynamoDBTable(t)
		roundTrip(t, repo)
		out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table),
			FilterExpression: aws.String("SK = :sk"), ExpressionAttributeValues: map[string]types.AttributeValue{
				":sk": &types.AttributeValueMemberS{Value: "#CONFIG#gpt-4o"}}})
		require.NoError(t, err)
		require.Len(t, out.Items, 1)
		item := out.Items[0]
		assert.Equal(t, &types.AttributeValueMemberN{Value: "500000000"}, item["l_usd_cp"])
		assert.Equal(t, &types.AttributeValueMemberN{Value: "0"}, item["l_usd_ra"])
		assert.Equal(t, &types.AttributeValueMemberN{Value: "-3"}, item["l_usd_rp"])
		assert.Equal(t, &types.AttributeValueMemberS{Value: "America/New_York"}, item["l_usd_tz"])
		assert.Equal(t, &types.AttributeValueMemberN{Value: "-1"}, item["l_usd_day_rp"])
		assert.NotContains(t, item, "l_usd_day_tz", "UTC is not written")
		assert.NotContains(t, item, "l_rpm_tz")
	})
}
