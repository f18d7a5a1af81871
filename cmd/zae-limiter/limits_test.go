package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
)

func TestParseLimit(t *testing.T) {
	t.Parallel()
	lim := func(name string, capacity, refill int64, period time.Duration) limiter.Limit {
		return limiter.Limit{Name: name, Capacity: capacity, RefillAmount: refill, RefillPeriod: period}
	}
	for _, tc := range []struct {
		in      string
		want    limiter.Limit
		wantErr string
	}{
		{in: "rpm:100", want: lim("rpm", 100, 100, time.Minute)},
		{in: "tpm:10000/min:20000", want: lim("tpm", 20000, 10000, time.Minute)},
		{in: "rph:500/hour", want: lim("rph", 500, 500, time.Hour)},
		{in: "rps:10/sec", want: lim("rps", 10, 10, time.Second)},
		{in: "rpd:1000/day", want: lim("rpd", 1000, 1000, 24*time.Hour)},
		{in: "x:5/5min", want: lim("x", 5, 5, 5*time.Minute)},
		{in: "x:5/2day:1", want: lim("x", 1, 5, 48*time.Hour)},
		{in: "rpm:100:50", want: lim("rpm", 50, 100, time.Minute)},
		{in: "rpm", wantErr: "expected name:rate[/period][:burst]"},
		{in: "rpm:1:2:3", wantErr: "expected name:rate[/period][:burst]"},
		{in: "rpm:", wantErr: `rate "" is not an integer`},
		{in: "rpm:abc", wantErr: `rate "abc" is not an integer`},
		{in: "rpm:1.5", wantErr: `rate "1.5" is not an integer`},
		{in: "rpm:100:big", wantErr: `burst "big" is not an integer`},
		{in: "rpm:100/fortnight", wantErr: `period "/fortnight": use /[N]sec`},
		{in: "usd:5/calendar-montth", wantErr: `period "/calendar-montth": did you mean /calendar-month? use /[N]sec, /[N]min, /[N]hour or /[N]day`},
		{in: "usd:5/calendar-montth@America/New_York", wantErr: "did you mean /calendar-month?"},
		{in: "usd:5/calendar-year", wantErr: "/calendar-day, /calendar-week or /calendar-month with an optional @Zone"},
		{in: "usd:5/calendar-year", wantErr: "a prepaid balance is name:prepaid[:ceiling]"},
		{in: "rpm:5/mni", wantErr: "did you mean /min?"},
		{in: "rpm:100/", wantErr: `period "/"`},
		{in: "rpm:100/0min", wantErr: "refill_period_seconds must be positive"},
		{in: "rpm:100/99999999999999999day", wantErr: "too long"},
		{in: "rpm:0", wantErr: "capacity must be positive"},
		{in: "rpm:-5", wantErr: "capacity must be positive"},
		{in: "rpm:100:0", wantErr: "capacity must be positive"},
		{in: ":100", wantErr: "cannot be empty"},
		{in: "r pm:100", wantErr: "must start with a letter"},
		{in: "wcu:100", wantErr: "reserved limit name"},
		{in: "usd:500000000/calendar-month", want: limiter.PerCalendarMonth("usd", 500_000_000)},
		{in: "rpd:5000/calendar-day", want: limiter.PerCalendarDay("rpd", 5000)},
		{in: "usd:100/calendar-week@America/New_York", want: limiter.PerCalendarWeek("usd", 100).InLocation(newYorkLoc(t))},
		{in: "usd:100/calendar-month:200", wantErr: "takes no burst"},
		{in: "usd:x/calendar-month", wantErr: `amount "x" is not an integer`},
		{in: "usd:100/calendar-month@Mars/Olympus", wantErr: `time zone "Mars/Olympus"`},
		{in: "usd:0/calendar-day", wantErr: "capacity must be positive"},
		{in: "credit:prepaid", want: limiter.Prepaid("credit")},
		{in: "credit:prepaid:5000", want: limiter.Prepaid("credit").WithBurst(5000)},
		{in: "credit:prepaid:lots", wantErr: `ceiling "lots" is not an integer`},
	} {
		got, err := parseLimit(tc.in)
		if tc.wantErr == "" {
			if assert.NoError(t, err, "parseLimit(%q)", tc.in) {
				assert.Equal(t, tc.want, got, "parseLimit(%q)", tc.in)
			}
			continue
		}
		if assert.Error(t, err, "parseLimit(%q) = %+v", tc.in, got) {
			assert.Contains(t, err.Error(), tc.wantErr, "parseLimit(%q)", tc.in)
			assert.True(t, strings.HasPrefix(err.Error(), `invalid limit "`+tc.in+`": `), "parseLimit(%q) error %q", tc.in, err)
		}
	}
	_, err := parseLimits([]string{"rpm:1", "bad"})
	if assert.Error(t, err, "parseLimits with a bad value") {
		assert.NoError(t, errors.Unwrap(err), "parseLimits with a bad value: want one unwrapped error")
	}
}

func TestFormatLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"rpm:100":             "rpm: 100/min",
		"tpm:10000/min:20000": "tpm: 10,000/min (burst: 20,000)",
		"x:1234567/5min":      "x: 1,234,567/5min",
		"rph:5/hour":          "rph: 5/hour",
		"a:1/90sec":           "a: 1/90sec",
		"d:7/2day":            "d: 7/2day",
	} {
		l, err := parseLimit(in)
		require.NoError(t, err)
		assert.Equal(t, want, formatLimit(l), "formatLimit(parseLimit(%q))", in)
	}
}

// newYorkLoc loads America/New_York.
func newYorkLoc(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	return loc
}
