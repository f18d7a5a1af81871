package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	limiter "github.com/zaelimiter/limiter"
)

func TestASCIIChart(t *testing.T) {
	got := strings.Join(asciiChart([]float64{0, 2, 4, 4, 1, 0}, 4), "\n")
	want := strings.Join([]string{
		"4 ┤  ╭─╮",
		"3 ┤  │ │",
		"2 ┤ ╭╯ │",
		"1 ┤ │  ╰╮",
		"0 ┼─╯   ╰",
	}, "\n")
	if got != want {
		t.Errorf("asciiChart =\n%s\nwant\n%s", got, want)
	}
	// A flat series is one line at its value; labels are right-aligned.
	if got := asciiChart([]float64{1500, 1500}, 10); len(got) != 1 || got[0] != "1,500 ┼──" {
		t.Errorf("flat chart = %q", got)
	}
	if got := asciiChart([]float64{1000, 5}, 2); got[0] != "1,000 ┼─╮" || got[2] != "    5 ┤ ╰" {
		t.Errorf("labels = %q", got)
	}
}

func TestDownsample(t *testing.T) {
	if got := downsample([]float64{1, 3, 5, 7, 9, 11}, 3); fmt.Sprint(got) != "[2 6 10]" {
		t.Errorf("downsample = %v", got)
	}
	if got := downsample([]float64{1, 2}, 60); len(got) != 2 {
		t.Errorf("short series downsampled: %v", got)
	}
}

func TestPlotUsage(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var snaps []limiter.UsageSnapshot // newest first, as listed
	for h := 70; h >= 0; h-- {
		snaps = append(snaps, limiter.UsageSnapshot{EntityID: "k", Resource: "gpt", WindowType: "hourly",
			WindowStart: t0.Add(time.Duration(h) * time.Hour), Counters: map[string]int64{"rpm": int64(h), "tpm": int64(100 * h), "rpd": 1}})
	}
	snaps = append(snaps, limiter.UsageSnapshot{EntityID: "k", Resource: "gpt", WindowType: "daily", WindowStart: t0, Counters: map[string]int64{"rpm": 9}})
	out := plotUsage(snaps)
	for _, want := range []string{
		"Usage Plot: gpt (hourly)\nEntity: k\nNote: 71 points downsampled to 60\n",
		"RPD", "RPM", "TPM", "6,950 ┤", // the last 2 of 71 hours averaged "Time range: 2026-01-02T00:00:00Z to 2026-01-04T22:00:00Z\nData points: 71\n",
		"Usage Plot: gpt (daily)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plot lacks %q:\n%s", want, out)
		}
	}
	// RPD and RPM side by side on one header line, TPM alone below.
	if !strings.Contains(out, "RPD") || strings.Count(out, "RPM") != 2 || !strings.Contains(out, "    RPM") {
		t.Errorf("layout:\n%s", out)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		d    int
		want string
	}{{1234567, 0, "1,234,567"}, {1.25, 1, "1.2"}, {-2500.5, 1, "-2,500.5"}, {-0.01, 1, "0.0"}, {0.125, 3, "0.125"}} {
		if got := formatNumber(tc.v, tc.d); got != tc.want {
			t.Errorf("formatNumber(%v, %d) = %q, want %q", tc.v, tc.d, got, tc.want)
		}
	}
}
