package main

// `usage list --plot`: terminal charts of usage over time,
// one line chart per counter, two side by side, for each (entity, resource,
// window) series of the snapshots listed.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	limiter "github.com/zaelimiter/limiter"
)

// Plot layout.
const (
	plotHeight    = 10 // rows of a chart
	plotMaxPoints = 60 // more points are averaged down to this many
	plotGap       = "    "
)

// usageSeries is the snapshots of one entity, resource and window, oldest
// first.
type usageSeries struct {
	entity, resource, window string
	snaps                    []limiter.UsageSnapshot
}

// groupSeries splits snapshots (newest first, as listed) into series, in
// the order their newest snapshots are listed, each oldest first.
func groupSeries(snaps []limiter.UsageSnapshot) []usageSeries {
	var out []usageSeries
	index := map[[3]string]int{}
	for _, s := range snaps {
		k := [3]string{s.EntityID, s.Resource, s.WindowType}
		j, ok := index[k]
		if !ok {
			j = len(out)
			index[k] = j
			out = append(out, usageSeries{entity: s.EntityID, resource: s.Resource, window: s.WindowType})
		}
		out[j].snaps = append(out[j].snaps, s)
	}
	for _, series := range out {
		slices.Reverse(series.snaps)
	}
	return out
}

// plotUsage renders the charts of snapshots (newest first).
func plotUsage(snaps []limiter.UsageSnapshot) string {
	var b strings.Builder
	for _, s := range groupSeries(snaps) {
		b.WriteString(plotSeriesCharts(s))
	}
	return b.String()
}

func plotSeriesCharts(s usageSeries) string {
	var b strings.Builder
	names := map[string]bool{}
	for _, snap := range s.snaps {
		for k := range snap.Counters {
			names[k] = true
		}
	}
	fmt.Fprintf(&b, "\nUsage Plot: %s (%s)\nEntity: %s\n", s.resource, s.window, s.entity)
	n := len(s.snaps)
	if n > plotMaxPoints {
		fmt.Fprintf(&b, "Note: %d points downsampled to %d\n", n, plotMaxPoints)
	}
	b.WriteString(strings.Repeat("=", 80) + "\n")
	if len(names) == 0 {
		b.WriteString("No counter data to plot\n")
		return b.String()
	}
	type chart struct {
		name  string
		lines []string
	}
	var charts []chart
	for _, name := range sortedKeys(names) {
		values := make([]float64, n)
		for i, snap := range s.snaps {
			values[i] = float64(snap.Counters[name])
		}
		charts = append(charts, chart{strings.ToUpper(name), asciiChart(downsample(values, plotMaxPoints), plotHeight)})
	}
	for i := 0; i < len(charts); i += 2 {
		left := charts[i]
		lw := maxWidth(left.lines)
		b.WriteString("\n")
		if i+1 == len(charts) {
			fmt.Fprintf(&b, "%s\n%s\n%s\n", left.name, strings.Repeat("-", lw), strings.Join(left.lines, "\n"))
			continue
		}
		right := charts[i+1]
		rw := maxWidth(right.lines)
		fmt.Fprintf(&b, "%s%s%s\n%s%s%s\n", padRight(left.name, lw), plotGap, right.name, strings.Repeat("-", lw), plotGap, strings.Repeat("-", rw))
		for j := range max(len(left.lines), len(right.lines)) {
			var l, r string
			if j < len(left.lines) {
				l = left.lines[j]
			}
			if j < len(right.lines) {
				r = right.lines[j]
			}
			fmt.Fprintf(&b, "%s%s%s\n", padRight(l, lw), plotGap, r)
		}
	}
	fmt.Fprintf(&b, "\nTime range: %s to %s\nData points: %d\n", formatTime(s.snaps[0].WindowStart), formatTime(s.snaps[n-1].WindowStart), n)
	return b.String()
}

// downsample averages adjacent values down to at most target points.
func downsample(values []float64, target int) []float64 {
	if len(values) <= target || target <= 0 {
		return values
	}
	size := float64(len(values)) / float64(target)
	out := make([]float64, 0, target)
	for i := range target {
		lo, hi := int(float64(i)*size), int(float64(i+1)*size)
		if hi > lo {
			sum := 0.0
			for _, v := range values[lo:hi] {
				sum += v
			}
			out = append(out, sum/float64(hi-lo))
		}
	}
	return out
}

// asciiChart draws values as a line chart height rows tall (height+1
// lines), with the values of the rows as labels on a left axis, in the
// box-drawing style of asciichart.
func asciiChart(values []float64, height int) []string {
	if len(values) == 0 {
		return nil
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	span := hi - lo
	row := func(v float64) int { // 0 at the bottom
		if span == 0 {
			return 0
		}
		return int(math.Round((v - lo) / span * float64(height)))
	}
	rows := height
	if span == 0 {
		rows = 0
	}
	// Enough decimals to tell the rows apart.
	decimals := 0
	if rows > 0 {
		for step := span / float64(rows); step < 1 && decimals < 3; step *= 10 {
			decimals++
		}
	}
	labels := make([]string, rows+1)
	width := 0
	for r := range labels {
		v := hi
		if rows > 0 {
			v = hi - float64(r)*span/float64(rows)
		}
		labels[r] = formatNumber(v, decimals)
		width = max(width, len(labels[r]))
	}
	grid := make([][]rune, rows+1)
	for r := range grid {
		grid[r] = []rune(strings.Repeat(" ", len(values)))
	}
	set := func(y, x int, c rune) { grid[rows-y][x] = c }
	for x := range values {
		y := row(values[x])
		if x == 0 {
			set(y, 0, '─')
			continue
		}
		prev := row(values[x-1])
		switch {
		case y == prev:
			set(y, x, '─')
		case y > prev: // up: leave the previous level, arrive above
			set(prev, x, '╯')
			set(y, x, '╭')
			for k := prev + 1; k < y; k++ {
				set(k, x, '│')
			}
		default: // down
			set(prev, x, '╮')
			set(y, x, '╰')
			for k := y + 1; k < prev; k++ {
				set(k, x, '│')
			}
		}
	}
	first := row(values[0])
	lines := make([]string, rows+1)
	for r := range grid {
		axis := '┤'
		if rows-r == first {
			axis = '┼'
		}
		lines[r] = strings.Repeat(" ", width-len(labels[r])) + labels[r] + " " + string(axis) + strings.TrimRight(string(grid[r]), " ")
	}
	return lines
}

// formatNumber formats v with comma separators and the given decimals.
func formatNumber(v float64, decimals int) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	out := thousands(n)
	if frac != "" {
		out += "." + frac
	}
	if v < 0 && strings.Trim(s, "0.") != "" {
		out = "-" + out
	}
	return out
}

func maxWidth(lines []string) int {
	w := 0
	for _, l := range lines {
		w = max(w, len([]rune(l)))
	}
	return w
}

func padRight(s string, w int) string {
	if n := len([]rune(s)); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}
