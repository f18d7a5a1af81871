package loadtest

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The HTML report is one self-contained file: inline CSS and SVG charts, no
// script and nothing fetched from the network. Its markup is well-formed
// XML (every element closed, attributes quoted), and it embeds the merged
// Result as JSON in <script type="application/json" id="result">, so that
// programs can read the numbers back.

// maxChartPoints bounds the points of a time chart; longer runs are
// grouped into intervals of several seconds.
const maxChartPoints = 600

// Chart geometry, in SVG user units.
const (
	chartW, chartH             = 900, 260
	padL, padR, padT, padB     = 70, 20, 20, 40
	plotW, plotH               = chartW - padL - padR, chartH - padT - padB
	colorAdmitted, colorDenied = "#2e7d32", "#ef6c00"
	colorFailed                = "#c62828"
)

// point is one interval of the time charts.
type point struct {
	t                        float64 // seconds since the start: the middle of the interval's part within the run
	admitted, denied, failed float64 // per second of that part
	lat                      *Histogram
}

// timePoints groups the series (counts per second of completion) into at
// most maxChartPoints intervals of whole seconds. An interval's rates are
// its counts over the part of it that lies within the run, from Start to
// End, and it is placed at the middle of that part, so the charts end at
// the run's end. An interval less than half within the run (the partial
// second a run starts or ends in) is left out: its few completions over a
// fraction of a second would be drawn as a spike or a collapse.
func timePoints(r *Result) []point {
	secs := r.Seconds()
	if len(secs) == 0 {
		return nil
	}
	start, end := r.Start, r.End
	if start.IsZero() {
		start = time.Unix(secs[0], 0)
	}
	if !end.After(start) {
		end = time.Unix(secs[len(secs)-1]+1, 0)
	}
	first, last := min(secs[0], start.Unix()), max(secs[len(secs)-1], end.Unix())
	span := last - first + 1
	step := max(1, (span+maxChartPoints-1)/maxChartPoints)
	all := make([]point, (span+step-1)/step)
	for i := range all {
		all[i].lat = NewHistogram(CoarsePrecision)
	}
	for _, s := range secs {
		p := &all[(s-first)/step]
		sec := r.Series[s]
		p.admitted += float64(sec.Admitted)
		p.denied += float64(sec.Denied)
		p.failed += float64(sec.Failed)
		_ = p.lat.Merge(sec.Latency)
	}
	origin := time.Unix(first, 0)
	from, to := start.Sub(origin).Seconds(), end.Sub(origin).Seconds()
	out := all[:0]
	for i, p := range all {
		lo := float64(int64(i) * step)
		a, b := max(lo, from), min(lo+float64(step), to)
		if b-a < float64(step)/2 {
			continue
		}
		p.t = (a+b)/2 - from
		p.admitted, p.denied, p.failed = p.admitted/(b-a), p.denied/(b-a), p.failed/(b-a)
		out = append(out, p)
	}
	return out
}

// tickLabel formats an axis value, rounded to 6 decimals (so that 3 × 0.2
// reads 0.6), without an exponent.
func tickLabel(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

// niceStep returns a round tick step for an axis from 0 to top.
func niceStep(top float64, ticks int) float64 {
	if top <= 0 {
		return 1
	}
	raw := top / float64(ticks)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// series is one line of a chart.
type series struct {
	name, color string
	ys          []float64
}

// axes names the axes of a chart and the extent of its x axis.
type axes struct {
	x, y  string  // titles, with units
	right float64 // the x axis ends here (at least the largest x)
}

// lineChart draws lines over xs with a y axis from 0, labelled by yFmt.
func lineChart(w io.Writer, id, title string, xs []float64, lines []series, yFmt func(float64) string, ax axes) {
	top, right := 0.0, math.Max(1, ax.right)
	for _, l := range lines {
		for _, y := range l.ys {
			if !math.IsNaN(y) {
				top = math.Max(top, y)
			}
		}
	}
	for _, x := range xs {
		right = math.Max(right, x)
	}
	step := niceStep(top, 5)
	top = math.Max(step*math.Ceil(top/step), step)
	xStep := niceStep(right, 8)
	px := func(x float64) float64 { return padL + x/right*plotW }
	py := func(y float64) float64 { return padT + plotH - y/top*plotH }
	fmt.Fprintf(w, `<figure><figcaption>%s</figcaption><svg id="%s" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`+"\n",
		esc(title), id, chartW, chartH, chartW, chartH)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="#ffffff" stroke="#999999"/>`+"\n", padL, padT, plotW, plotH)
	for k := 0.0; k*step <= top+step/2; k++ {
		y := k * step
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end" class="tick">%s</text>`+"\n",
			padL, padL+plotW, py(y), py(y), padL-6, py(y)+4, esc(yFmt(y)))
	}
	for k := 0.0; k*xStep <= right*(1+1e-9); k++ { // no tick past the axis's end
		x := k * xStep
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" class="tick">%s</text>`+"\n", px(x), padT+plotH+16, esc(tickLabel(x)))
	}
	axisTitles(w, ax)
	for i, l := range lines {
		var pts strings.Builder
		for j, y := range l.ys {
			if !math.IsNaN(y) { // NaN: no data in this interval
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(xs[j]), py(y))
			}
		}
		fmt.Fprintf(w, `<polyline class="series" data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
			esc(l.name), strings.TrimSpace(pts.String()), l.color)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`+"\n",
			padL+10+i*150, padT+6, l.color, padL+26+i*150, padT+16, esc(l.name))
	}
	fmt.Fprint(w, "</svg></figure>\n")
}

// axisTitles writes the titles of a chart's axes: x below it, y along its
// left edge.
func axisTitles(w io.Writer, ax axes) {
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" class="axis">%s</text>`+"\n", padL+plotW/2, chartH-4, esc(ax.x))
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" class="axis" transform="rotate(-90 %d %d)">%s</text>`+"\n",
		14, padT+plotH/2, 14, padT+plotH/2, esc(ax.y))
}

// histogramChart draws the latency histogram as bars on a log scale.
func histogramChart(w io.Writer, h *Histogram) {
	bins := DisplayBins(h, 40)
	if len(bins) == 0 {
		return
	}
	var most uint64
	for _, b := range bins {
		most = max(most, b.Count)
	}
	step := math.Max(niceStep(float64(most), 4), 1) // counts: whole ticks
	top := math.Max(step*math.Ceil(float64(most)/step), step)
	bw := float64(plotW) / float64(len(bins))
	fmt.Fprintf(w, `<figure><figcaption>Acquire latency histogram (log scale)</figcaption><svg id="histogram" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="#ffffff" stroke="#999999"/>`+"\n", padL, padT, plotW, plotH)
	for k := 0.0; k*step <= top+step/2; k++ {
		y := k * step
		py := padT + plotH - y/top*plotH
		fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end" class="tick">%s</text>`+"\n",
			padL, padL+plotW, py, py, padL-6, py+4, tickLabel(y))
	}
	for i, b := range bins {
		hgt := float64(b.Count) / top * plotH
		fmt.Fprintf(w, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1565c0"><title>%s – %s: %d</title></rect>`+"\n",
			padL+float64(i)*bw+1, padT+plotH-hgt, math.Max(bw-2, 1), hgt, FormatDuration(b.Low), FormatDuration(b.High), b.Count)
		if i%5 == 0 {
			fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" class="tick">%s</text>`+"\n", padL+float64(i)*bw, padT+plotH+16, esc(FormatDuration(b.Low)))
		}
	}
	axisTitles(w, axes{x: "acquire latency (log scale)", y: "acquires"})
	fmt.Fprint(w, "</svg></figure>\n")
}

// WriteHTML writes the self-contained HTML report of r.
func WriteHTML(w io.Writer, r *Result, local bool, p Prices) error {
	ew := &errWriter{w: w}
	n := r.Acquires()
	secs := r.Duration().Seconds()
	c := r.Capacity(local)
	ew.printf(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>zae-limiter load report</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #212121; }
table { border-collapse: collapse; margin: 8px 0 16px; }
td, th { border: 1px solid #cccccc; padding: 4px 10px; text-align: right; }
th { background: #f5f5f5; }
td.l, th.l { text-align: left; }
figure { margin: 16px 0; }
figcaption { font-weight: bold; margin-bottom: 4px; }
.tick { font-size: 11px; fill: #555555; }
.axis, .legend { font-size: 12px; fill: #333333; }
</style></head><body>
`)
	ew.printf("<h1>zae-limiter load report</h1>\n<p>%s</p>\n", esc(r.Scenario.Describe()))
	ew.printf("<p>Endpoint %s, %d process(es), %.1f s from %s.</p>\n", esc(r.Endpoint), r.Procs, secs, esc(r.Start.UTC().Format(time.RFC3339)))
	ew.printf(`<table id="outcomes"><tr><th class="l">acquires</th><th>count</th><th>per second</th><th>share</th></tr>` + "\n")
	for _, row := range []struct {
		name string
		v    uint64
	}{{"all", n}, {"admitted", r.Admitted}, {"denied", r.Denied}, {"failed", r.Failed}} {
		ew.printf(`<tr><td class="l">%s</td><td>%d</td><td>%.1f</td><td>%s</td></tr>`+"\n", row.name, row.v, float64(row.v)/math.Max(secs, 1e-9), pct(row.v, n))
	}
	ew.printf("</table>\n")
	ew.printf(`<table id="latency"><tr><th class="l">latency</th>`)
	for _, q := range Quantiles {
		ew.printf("<th>%s</th>", q.Name)
	}
	ew.printf("<th>max</th><th>mean</th></tr>\n")
	for _, h := range []struct {
		name string
		h    *Histogram
	}{{"acquire", r.Acquire}, {"lease (acquire, adjust, commit)", r.Lease}} {
		ew.printf(`<tr><td class="l">%s</td>`, esc(h.name))
		for _, q := range Quantiles {
			ew.printf("<td>%s</td>", esc(FormatDuration(h.h.Quantile(q.Q))))
		}
		ew.printf("<td>%s</td><td>%s</td></tr>\n", esc(FormatDuration(h.h.Max())), esc(FormatDuration(h.h.Mean())))
	}
	ew.printf("</table>\n")

	pts := timePoints(r)
	xs := make([]float64, len(pts))
	var adm, den, fail, p50, p90, p99 []float64
	for i, pt := range pts {
		xs[i] = pt.t
		adm, den, fail = append(adm, pt.admitted), append(den, pt.denied), append(fail, pt.failed)
		ms := func(q float64) float64 {
			if pt.lat.Count() == 0 {
				return math.NaN()
			}
			return float64(pt.lat.Quantile(q)) / float64(time.Millisecond)
		}
		p50, p90, p99 = append(p50, ms(0.5)), append(p90, ms(0.9)), append(p99, ms(0.99))
	}
	overTime := func(y string) axes { return axes{x: "seconds since the start", y: y, right: secs} }
	lineChart(ew, "throughput", "Throughput (acquires per second)", xs, []series{
		{"admitted", colorAdmitted, adm}, {"denied", colorDenied, den}, {"failed", colorFailed, fail},
	}, tickLabel, overTime("acquires per second"))
	lineChart(ew, "latency-over-time", "Acquire latency over time (ms)", xs, []series{
		{"p50", "#1565c0", p50}, {"p90", "#6a1b9a", p90}, {"p99", colorFailed, p99},
	}, tickLabel, overTime("milliseconds"))
	histogramChart(ew, r.Acquire)

	ew.printf(`<h2>DynamoDB</h2><table id="calls"><tr><th class="l">operation</th><th>calls</th><th>per acquire</th><th>refused by condition</th><th>failed</th><th>RCU</th><th>WCU</th></tr>` + "\n")
	ops := make([]string, 0, len(r.Ops))
	for op := range r.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	refused := false
	for _, op := range ops {
		s := r.Ops[op]
		ew.printf(`<tr><td class="l">%s</td><td>%d</td><td>%.3f</td><td>%d</td><td>%d</td><td>%.1f</td><td>%.1f</td></tr>`+"\n",
			esc(op), s.Calls, per(float64(s.Calls), n), s.ConditionalFailures, s.Errors-min(s.Errors, s.ConditionalFailures), s.RCU, s.WCU)
		refused = refused || s.ConditionalFailures > 0
	}
	ew.printf("</table>\n")
	ew.printf(`<p id="refused-per-acquire">Refused writes: %d, %.3f per acquire.</p>`+"\n", r.RefusedWrites(), per(float64(r.RefusedWrites()), n))
	if refused {
		ew.printf(`<p id="refused">%s</p>`+"\n", esc(refusedNote))
	}
	if c.Known() {
		ew.printf(`<table id="capacity"><tr><th class="l">per acquire</th><th>RCU</th><th>WCU</th></tr>`+"\n"+
			`<tr><td class="l">reported (ConsumedCapacity)</td><td>%.3f</td><td>%.3f</td></tr>`+"\n"+
			`<tr><td class="l">charged (estimate)</td><td>%.3f</td><td>%.3f</td></tr></table>`+"\n",
			per(c.RCU, n), per(c.WCU, n), per(c.EstRCU, n), per(c.EstWCU, n))
		note := fmt.Sprintf("The estimate adds %d refused conditional writes at 1 WCU each", c.RefusedPuts)
		if local {
			note += fmt.Sprintf(", and %.0f WCU because DynamoDB Local does not charge transactions twice", c.TransactWCU)
		}
		ew.printf("<p>%s. %d of %d successful calls reported their capacity.</p>\n", esc(note), c.Reported, c.Successful)
		ew.printf(`<p id="cost">Estimated cost: <b>$%.3f per million acquires</b> ($%.3f per million admitted) at on-demand prices of $%g per million write units and $%g per million read units; storage, streams and the aggregator are not included.</p>`+"\n",
			c.CostPerMillion(p, n), c.CostPerMillion(p, r.Admitted), p.WriteUnit, p.ReadUnit)
	} else {
		ew.printf(`<p id="cost">The endpoint reported no ConsumedCapacity: capacity and cost unknown.</p>` + "\n")
	}
	if len(r.Errors) > 0 {
		ew.printf(`<h2>Errors</h2><table id="errors"><tr><th>count</th><th class="l">error</th></tr>` + "\n")
		for _, e := range topErrors(r.Errors, maxErrorKinds) {
			ew.printf(`<tr><td>%d</td><td class="l">%s</td></tr>`+"\n", e.n, esc(e.msg))
		}
		ew.printf("</table>\n")
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ew.printf(`<script type="application/json" id="result">%s</script>`+"\n</body></html>\n", data)
	return ew.err
}

func esc(s string) string { return html.EscapeString(s) }
