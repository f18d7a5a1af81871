package crossbackend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// TestCalendarSkippedMidnight: in a zone whose daylight saving time skips
// midnight, a daily budget spent the day before waits until the real
// start of the next day (01:00 local): RetryAfter, TimeUntilAvailable and
// Wait (which fails at once when that is past its deadline) say so, the
// spent day's bucket expires a day after the next day ends, and the next
// day's budget is whole from its first second, in a bucket of its own.
func TestCalendarSkippedMidnight(t *testing.T) {
	cases := []struct {
		zone  string
		spend string // noon local on the day before
		start string // the first instant of the day whose midnight is skipped
		end   string // the first instant of the day after it
		tag   string
	}{
		{"America/Santiago", "2026-09-05T16:00:00Z", "2026-09-06T04:00:00Z", "2026-09-07T03:00:00Z", "d2026-09-06"},
		{"America/Havana", "2026-03-07T17:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", "d2026-03-08"},
		{"Atlantic/Azores", "2026-03-28T13:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "d2026-03-29"},
	}
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		for i, c := range cases {
			t.Run(c.zone, func(t *testing.T) {
				ctx := context.Background()
				loc, err := time.LoadLocation(c.zone)
				require.NoError(t, err)
				clk := &fakeClock{}
				rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
				defer rl.Close()
				key := fmt.Sprintf("dst-%d", i)
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: key, Resource: "gpt-4o"}, []limiter.Limit{limiter.PerCalendarDay("usd", 1000).InLocation(loc)}))
				spendAt(t, rl, clk, c.spend, key, limiter.Consume{"usd": 1000})

				start := mustTime(c.start)
				clk.set(start.Add(-30 * time.Minute)) // 23:30 local
				_, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"usd": 1})
				var rle *limiter.RateLimitExceededError
				require.ErrorAs(t, err, &rle)
				require.Equal(t, 30*time.Minute, rle.RetryAfter)
				wait, err := rl.TimeUntilAvailable(ctx, key, "gpt-4o", limiter.Consume{"usd": 1})
				require.NoError(t, err)
				require.Equal(t, 30*time.Minute, wait)

				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err = rl.Wait(wctx, key, "gpt-4o", limiter.Consume{"usd": 1})
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.ErrorAs(t, err, &rle, "Wait fails at once on a retry past its deadline: %v", err)
				require.Equal(t, 30*time.Minute, rle.RetryAfter)

				day := mustTime(c.spend).In(loc).Format("2006-01-02")
				b, err := repo.GetBucket(ctx, store.BucketKey{EntityID: key, Resource: "gpt-4o/usd.d" + day})
				require.NoError(t, err)
				require.NotNil(t, b)
				if b.TTL != 0 {
					require.Equal(t, mustTime(c.end).Add(24*time.Hour).Unix(), b.TTL, "the spent day's bucket expires a day after the next day")
				}

				clk.set(start.Add(-time.Second))
				_, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"usd": 1})
				require.ErrorAs(t, err, &rle)
				require.Equal(t, time.Second, rle.RetryAfter)

				spendAt(t, rl, clk, c.start, key, limiter.Consume{"usd": 1000})
				b, err = repo.GetBucket(ctx, store.BucketKey{EntityID: key, Resource: "gpt-4o/usd." + c.tag})
				require.NoError(t, err)
				require.NotNil(t, b, "the day has a bucket of its own")
				_, err = rl.Acquire(ctx, key, "gpt-4o", limiter.Consume{"usd": 1})
				require.ErrorAs(t, err, &rle, "the day's budget is spent")
				require.Equal(t, mustTime(c.end).Sub(start), rle.RetryAfter)
			})
		}
	})
}
