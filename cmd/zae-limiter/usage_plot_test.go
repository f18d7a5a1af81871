package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	assert.Equal(t, want, got, "asciiChart")
	// A flat series is one line at its value; labels are right-aligned.
	assert.Equal(t, []string{"1,500 ┼──"}, asciiChart([]float64{1500, 1500}, 10), "flat chart")
	labels := asciiChart([]float64{1000, 5}, 2)
	require.Len(t, labels, 3)
	assert.Equal(t, "1,000 ┼─╮", labels[0], "labels")
	assert.Equal(t, "    5 ┤ ╰", labels[2], "labels")
}

func TestDownsample(t *testing.T) {
	assert.Equal(t, []float64{2, 6, 10}, downsample([]float64{1, 3, 5, 7, 9, 11}, 3))
	assert.Equal(t, []float64{1, 2}, downsample([]float64{1, 2}, 60), "short series downsampled")
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
		assert.Contains(t, out, want, "plot")
	}
	// RPD and RPM side by side on one header line, TPM alone below.
	assert.Equal(t, 2, strings.Count(out, "RPM"), "layout:\n%s", out)
	assert.Contains(t, out, "    RPM", "layout")
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		d    int
		want string
	}{{1234567, 0, "1,234,567"}, {1.25, 1, "1.2"}, {-2500.5, 1, "-2,500.5"}, {-0.01, 1, "0.0"}, {0.125, 3, "0.125"}} {
		assert.Equal(t, tc.want, formatNumber(tc.v, tc.d), "formatNumber(%v, %d)", tc.v, tc.d)
	}
}
