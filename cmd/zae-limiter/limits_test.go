package main

import (
	"errors"
	"strings"
	"testing"
	"time"

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
		{in: "rpm:100/", wantErr: `period "/"`},
		{in: "rpm:100/0min", wantErr: "refill_period_seconds must be positive"},
		{in: "rpm:100/99999999999999999day", wantErr: "too long"},
		{in: "rpm:0", wantErr: "capacity must be positive"},
		{in: "rpm:-5", wantErr: "capacity must be positive"},
		{in: "rpm:100:0", wantErr: "capacity must be positive"},
		{in: ":100", wantErr: "cannot be empty"},
		{in: "r pm:100", wantErr: "must start with a letter"},
		{in: "wcu:100", wantErr: "reserved limit name"},
	} {
		got, err := parseLimit(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("parseLimit(%q): %v", tc.in, err)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("parseLimit(%q) = %+v, want %+v", tc.in, got, tc.want)
		case tc.wantErr != "" && err == nil:
			t.Errorf("parseLimit(%q) = %+v, want error %q", tc.in, got, tc.wantErr)
		case tc.wantErr != "" && (!strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), `invalid limit "`+tc.in+`": `)):
			t.Errorf("parseLimit(%q) error %q, want `invalid limit %q: ...%s...`", tc.in, err, tc.in, tc.wantErr)
		}
	}
	if _, err := parseLimits([]string{"rpm:1", "bad"}); err == nil || errors.Unwrap(err) != nil {
		t.Errorf("parseLimits with a bad value: %v, want one unwrapped error", err)
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
		if err != nil {
			t.Fatal(err)
		}
		if got := formatLimit(l); got != want {
			t.Errorf("formatLimit(parseLimit(%q)) = %q, want %q", in, got, want)
		}
	}
}
