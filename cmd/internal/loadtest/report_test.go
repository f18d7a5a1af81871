package loadtest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// steadyRun is a 10-second run that starts and ends 0.7 s into a second,
// with 100 acquires completing in every full second and 70 and 30 in the
// partial first and last ones: 100 per second throughout.
func steadyRun() *Result {
	r := NewResult()
	start := time.Date(2026, 1, 2, 3, 4, 5, 300e6, time.UTC)
	r.Start, r.End = start, start.Add(10*time.Second)
	rec := NewRecorder(r)
	sec0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for s := range 11 { // seconds 5 (from .3) to 15 (until .3)
		n := 100
		switch s {
		case 0:
			n = 70
		case 10:
			n = 30
		}
		for range n {
			rec.Record(sec0.Add(time.Duration(s)*time.Second+500*time.Millisecond), Admitted, time.Millisecond, 2*time.Millisecond, nil, nil, nil)
		}
	}
	return r
}

// TestTimePointsWithinTheRun: the throughput chart's points lie within the
// run and show its steady rate, without a spike or collapse at either end
// for the partial seconds.
func TestTimePointsWithinTheRun(t *testing.T) {
	r := steadyRun()
	pts := timePoints(r)
	require.Len(t, pts, 10, "the 10 s run touches 11 seconds: the first is 0.7 s in the run, kept; the last 0.3 s, left out")
	for i, p := range pts {
		assert.InDelta(t, 100, p.admitted, 1e-6, "point %d at %.2f s: admitted per second", i, p.t)
		assert.LessOrEqual(t, p.t, r.Duration().Seconds(), "point %d past the run's end", i)
		assert.GreaterOrEqual(t, p.t, 0.0, "point %d before the run's start", i)
	}
	assert.InDelta(t, 0.35, pts[0].t, 1e-6, "the first point: the middle of the run's part of its first second")
	assert.InDelta(t, 9.2, pts[len(pts)-1].t, 1e-6, "the last point: the last full second")

	// A run whose end falls on a second boundary with nothing completed in
	// the second after: no zero point there.
	r = NewResult()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Start, r.End = start, start.Add(3*time.Second)
	rec := NewRecorder(r)
	for s := range 3 {
		for range 10 {
			rec.Record(start.Add(time.Duration(s)*time.Second), Denied, time.Millisecond, 0, nil, nil, nil)
		}
	}
	pts = timePoints(r)
	require.Len(t, pts, 3)
	assert.InDelta(t, 10, pts[2].denied, 1e-6)
	assert.InDelta(t, 2.5, pts[2].t, 1e-6)
}

// TestReportWording: writes refused by their condition are reported apart
// from failed calls, with what they mean, in the text and the HTML report;
// every chart's axes carry titles with units.
func TestReportWording(t *testing.T) {
	r := steadyRun()
	rec := NewRecorder(r)
	rec.recordCall("UpdateItem", OpStats{Calls: 1000, Errors: 53, ConditionalFailures: 50, Reported: 947, WCU: 1894})
	rec.recordCall("BatchGetItem", OpStats{Calls: 10, Reported: 10, RCU: 5, Items: 20})

	var text bytes.Buffer
	require.NoError(t, WriteText(&text, r, true, DefaultPrices))
	out := text.String()
	assert.Contains(t, out, "50 refused by condition (expected under contention), 3 failed")
	assert.Contains(t, out, "A write refused by its condition is not a failure")
	assert.NotContains(t, out, "errors (")
	assert.Regexp(t, `(?m)^ +refused writes +50 +0\.050 *$`, out, "refused writes per acquire (1,000 acquires)")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "BatchGetItem") {
			assert.NotContains(t, line, "refused", "an operation without refusals")
		}
	}

	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r, true, DefaultPrices))
	html := page.String()
	assert.Contains(t, html, `<th>refused by condition</th><th>failed</th>`)
	assert.Contains(t, html, `<tr><td class="l">UpdateItem</td><td>1000</td><td>1.000</td><td>50</td><td>3</td>`)
	assert.Contains(t, html, `<p id="refused">A write refused by its condition is not a failure`)
	assert.Contains(t, html, `<p id="refused-per-acquire">Refused writes: 50, 0.050 per acquire.</p>`)
	for _, title := range []string{">seconds since the start<", ">acquires per second<", ">milliseconds<", ">acquire latency (log scale)<", ">acquires<"} {
		assert.Contains(t, html, title, "axis title")
	}
	assert.NotContains(t, html, "0000001<", "tick labels rounded")
	checkHTML(t, r)
}

// TestTickLabel: axis values print without float noise or exponents.
func TestTickLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 3 * 0.2: "0.6", 2.5: "2.5", 1e6: "1000000", 0.125: "0.125"} {
		assert.Equal(t, want, tickLabel(v), "%v", v)
	}
}
