package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// TestCalendarPeriodSkippedMidnight: in zones whose daylight saving time
// starts at midnight, the day that loses its midnight starts at 01:00,
// the day before ends then, and both have tags of their own dates.
func TestCalendarPeriodSkippedMidnight(t *testing.T) {
	cases := []struct {
		zone      string
		day       string // the day whose midnight is skipped
		dayBefore string // 23:30 local on the day before, UTC
		start     string // the first instant of day, UTC
		dayLen    time.Duration
	}{
		{"America/Santiago", "2026-09-06", "2026-09-06T03:30:00Z", "2026-09-06T04:00:00Z", 23 * time.Hour},
		{"America/Havana", "2026-03-08", "2026-03-08T04:30:00Z", "2026-03-08T05:00:00Z", 23 * time.Hour},
		{"Atlantic/Azores", "2026-03-29", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z", 23 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.zone, func(t *testing.T) {
			loc, err := time.LoadLocation(c.zone)
			require.NoError(t, err)
			before, err := time.Parse(time.RFC3339, c.dayBefore)
			require.NoError(t, err)
			start, err := time.Parse(time.RFC3339, c.start)
			require.NoError(t, err)
			require.Equal(t, c.day, start.In(loc).Format("2006-01-02"))
			require.Equal(t, 1, start.In(loc).Hour(), "the day starts at 01:00")
			require.NotEqual(t, c.day, start.Add(-time.Second).In(loc).Format("2006-01-02"))

			l := store.Limit{Name: "usd", Capacity: 10, Calendar: store.CalendarDay, Location: loc}
			_, next, tag := l.CalendarPeriodAt(before)
			require.Equal(t, start.UTC(), next.UTC(), "the day before ends when the day starts")
			require.NotEqual(t, "d"+c.day, tag)

			for _, at := range []time.Time{start, start.Add(time.Hour), start.Add(c.dayLen - time.Second)} {
				s, n, tag := l.CalendarPeriodAt(at)
				require.Equal(t, start.UTC(), s.UTC(), "start at %v", at)
				require.Equal(t, start.Add(c.dayLen).UTC(), n.UTC(), "next at %v", at)
				require.Equal(t, "d"+c.day, tag, "tag at %v", at)
			}
			// The week and the month containing the day start and end at
			// real local instants too.
			for _, p := range []store.CalendarPeriod{store.CalendarWeek, store.CalendarMonth} {
				l := store.Limit{Name: "usd", Capacity: 10, Calendar: p, Location: loc}
				for _, at := range []time.Time{before, start} {
					s, n, _ := l.CalendarPeriodAt(at)
					require.False(t, s.After(at), "%v start %v after %v", p, s, at)
					require.True(t, n.After(at), "%v next %v not after %v", p, n, at)
				}
			}
		})
	}
}

// TestCalendarPeriodRepeatedMidnight: where a clock set back at 01:00
// repeats midnight, the day starts at the first of the two midnights.
func TestCalendarPeriodRepeatedMidnight(t *testing.T) {
	// Atlantic/Azores sets clocks back from 01:00 to 00:00 on 2026-10-25.
	loc, err := time.LoadLocation("Atlantic/Azores")
	require.NoError(t, err)
	l := store.Limit{Name: "usd", Capacity: 10, Calendar: store.CalendarDay, Location: loc}
	at := time.Date(2026, 10, 25, 12, 0, 0, 0, time.UTC)
	start, next, tag := l.CalendarPeriodAt(at)
	require.Equal(t, "d2026-10-25", tag)
	require.Equal(t, time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), start.UTC(), "00:00 at UTC+0, the first midnight")
	require.Equal(t, time.Date(2026, 10, 26, 1, 0, 0, 0, time.UTC), next.UTC())
}
