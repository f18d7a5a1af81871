package loadtest

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Prices are DynamoDB on-demand request prices in US dollars per million
// request units.
type Prices struct {
	WriteUnit float64 `json:"write_unit"`
	ReadUnit  float64 `json:"read_unit"`
}

// DefaultPrices are us-east-1's on-demand prices: $0.625 per million write
// request units, $0.125 per million read request units.
var DefaultPrices = Prices{WriteUnit: 0.625, ReadUnit: 0.125}

// writeOps are the single-item writes a refused condition still charges.
var writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true}

// Capacity is the capacity a run consumed, from the ConsumedCapacity of
// its DynamoDB calls, and what AWS would charge for it.
type Capacity struct {
	Calls      uint64
	Successful uint64
	// Reported counts the successful calls that carried ConsumedCapacity.
	Reported    uint64
	RCU, WCU    float64 // as reported
	RefusedPuts uint64  // single-item writes refused by their condition
	TransactWCU float64 // reported write units of TransactWriteItems
	// EstRCU and EstWCU are the units AWS charges: the reported ones, plus
	// one write unit per refused single-item write (AWS charges it, and no
	// response reports it), plus — on DynamoDB Local, which does not charge
	// transactions double as AWS does — the transactions' units again.
	EstRCU, EstWCU float64
	Local          bool
}

// Capacity sums the run's DynamoDB calls; local says the endpoint is
// DynamoDB Local.
func (r *Result) Capacity(local bool) Capacity {
	c := Capacity{Local: local}
	for op, s := range r.Ops {
		c.Calls += s.Calls
		c.Successful += s.Calls - s.Errors
		c.Reported += s.Reported
		c.RCU += s.RCU
		c.WCU += s.WCU
		if writeOps[op] {
			c.RefusedPuts += s.ConditionalFailures
		}
		if op == "TransactWriteItems" {
			c.TransactWCU += s.WCU
		}
	}
	c.EstRCU = c.RCU
	c.EstWCU = c.WCU + float64(c.RefusedPuts)
	if local {
		c.EstWCU += c.TransactWCU
	}
	return c
}

// RefusedWrites returns the writes of the run that their condition
// refused: single-item writes and transactions (one a cancelled
// transaction) that lost to another writer, or a fast-path write the
// bucket did not cover. Each costs a round trip and a write unit, and
// usually another attempt; per acquire it measures how much the writers
// of a run get in each other's way.
func (r *Result) RefusedWrites() uint64 {
	var n uint64
	for _, s := range r.Ops {
		n += s.ConditionalFailures
	}
	return n
}

// Known reports whether the endpoint reported consumed capacity at all.
func (c Capacity) Known() bool { return c.Reported > 0 }

// CostPerMillion returns the estimated on-demand cost, in dollars, of a
// million acquires when n acquires consumed c: the units per acquire times
// the price per million units.
func (c Capacity) CostPerMillion(p Prices, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return (c.EstRCU*p.ReadUnit + c.EstWCU*p.WriteUnit) / float64(n)
}

// FormatDuration formats a latency with three significant digits.
func FormatDuration(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	switch {
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2fms", us/1000)
	case us < 100_000:
		return fmt.Sprintf("%.1fms", us/1000)
	case us < 1_000_000:
		return fmt.Sprintf("%.0fms", us/1000)
	}
	return fmt.Sprintf("%.2fs", us/1e6)
}

// Quantiles are the percentiles a report shows.
var Quantiles = []struct {
	Name string
	Q    float64
}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p99.9", 0.999}}

// DisplayBin is a range of latencies and how many fell in it.
type DisplayBin struct {
	Low, High time.Duration
	Count     uint64
}

// DisplayBins groups h's buckets into at most n bins of equal width on a
// log scale between the smallest and largest value, for drawing.
func DisplayBins(h *Histogram, n int) []DisplayBin {
	bs := h.Buckets()
	if len(bs) == 0 || n < 1 {
		return nil
	}
	lo := math.Max(float64(bs[0].Low), 1)
	hi := math.Max(float64(bs[len(bs)-1].Low+bs[len(bs)-1].Width), lo*1.0001)
	ratio := math.Pow(hi/lo, 1/float64(n))
	bins := make([]DisplayBin, n)
	for i := range bins {
		bins[i].Low = time.Duration(lo*math.Pow(ratio, float64(i))) * time.Microsecond
		bins[i].High = time.Duration(lo*math.Pow(ratio, float64(i+1))) * time.Microsecond
	}
	for _, b := range bs {
		v := math.Max(float64(b.Low)+float64(b.Width)/2, lo)
		i := min(max(int(math.Log(v/lo)/math.Log(ratio)), 0), n-1)
		bins[i].Count += b.Count
	}
	return bins
}

// WriteText writes the end-of-run report for people.
func WriteText(w io.Writer, r *Result, local bool, p Prices) error {
	ew := &errWriter{w: w}
	secs := r.Duration().Seconds()
	n := r.Acquires()
	ew.printf("zae-limiter load: %s\n", r.Scenario.Describe())
	ew.printf("endpoint %s, %d process(es), %.1fs\n\n", r.Endpoint, r.Procs, secs)
	ew.printf("acquires  %12s  (%.1f/s)\n", thousands(n), float64(n)/math.Max(secs, 1e-9))
	ew.printf("  admitted %11s  %s\n", thousands(r.Admitted), pct(r.Admitted, n))
	ew.printf("  denied   %11s  %s\n", thousands(r.Denied), pct(r.Denied, n))
	ew.printf("  failed   %11s  %s\n", thousands(r.Failed), pct(r.Failed, n))
	for _, e := range topErrors(r.Errors, 5) {
		ew.printf("    %6d× %s\n", e.n, e.msg)
	}
	ew.printf("\n")
	for _, h := range []struct {
		name string
		h    *Histogram
	}{{"acquire latency", r.Acquire}, {"lease latency  ", r.Lease}} {
		if h.h.Count() == 0 {
			continue
		}
		ew.printf("%s", h.name)
		for _, q := range Quantiles {
			ew.printf("  %s %s", q.Name, FormatDuration(h.h.Quantile(q.Q)))
		}
		ew.printf("  max %s  mean %s\n", FormatDuration(h.h.Max()), FormatDuration(h.h.Mean()))
	}
	ew.printf("(lease: acquire, adjust and commit of the admitted)\n")
	if bins := DisplayBins(r.Acquire, 12); len(bins) > 0 {
		ew.printf("\nacquire latency histogram\n")
		var top uint64
		for _, b := range bins {
			top = max(top, b.Count)
		}
		for _, b := range bins {
			bar := int(math.Round(float64(b.Count) / float64(top) * 40))
			ew.printf("  %8s - %-8s %-40s %s\n", FormatDuration(b.Low), FormatDuration(b.High), strings.Repeat("█", bar), thousands(b.Count))
		}
	}
	ew.printf("\nDynamoDB calls during the run (per acquire)\n")
	tw := tabwriter.NewWriter(ew, 0, 8, 2, ' ', tabwriter.AlignRight)
	ops := make([]string, 0, len(r.Ops))
	for op := range r.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	c := r.Capacity(local)
	refused := false
	for _, op := range ops {
		s := r.Ops[op]
		fmt.Fprintf(tw, "  %s\t%s\t%.3f\t  %s\t\n", op, thousands(s.Calls), per(float64(s.Calls), n), callOutcomes(s))
		refused = refused || s.ConditionalFailures > 0
	}
	fmt.Fprintf(tw, "  total\t%s\t%.3f\t\t\n", thousands(c.Calls), per(float64(c.Calls), n))
	fmt.Fprintf(tw, "  refused writes\t%s\t%.3f\t\t\n", thousands(r.RefusedWrites()), per(float64(r.RefusedWrites()), n))
	_ = tw.Flush()
	if refused {
		ew.printf("  A write refused by its condition is not a failure: it is how the limiter decides (a fast-path\n" +
			"  write the bucket did not cover, or a write that lost a race and was decided again). It still\n" +
			"  costs a write unit, counted in the charged estimate below.\n")
	}
	ew.printf("\ncapacity units (ConsumedCapacity: table and indexes)\n")
	if !c.Known() {
		ew.printf("  the endpoint reported no ConsumedCapacity: RCU, WCU and cost unknown\n")
		return ew.err
	}
	ew.printf("  reported   RCU %.3f  WCU %.3f per acquire  (%s of %s successful calls reported it)\n",
		per(c.RCU, n), per(c.WCU, n), thousands(c.Reported), thousands(c.Successful))
	ew.printf("  charged    RCU %.3f  WCU %.3f per acquire  (estimate: + %s refused conditional writes at 1 WCU",
		per(c.EstRCU, n), per(c.EstWCU, n), thousands(c.RefusedPuts))
	if local {
		ew.printf("; + %.0f WCU as DynamoDB Local does not charge transactions twice", c.TransactWCU)
	}
	ew.printf(")\n")
	ew.printf("\ncost  $%.3f per million acquires ($%.3f per million admitted) at on-demand prices\n",
		c.CostPerMillion(p, n), c.CostPerMillion(p, r.Admitted))
	ew.printf("      ($%g per million write units, $%g per million read units; storage, streams and the aggregator not included)\n", p.WriteUnit, p.ReadUnit)
	return ew.err
}

// refusedNote says what a write refused by its condition is.
const refusedNote = "A write refused by its condition is not a failure: it is how the limiter decides " +
	"(a fast-path write the bucket did not cover, or a write that lost a race and was decided again). " +
	"It still costs a write unit, counted in the charged estimate."

// callOutcomes describes the calls of one operation that did not succeed:
// the writes refused by their condition apart from the calls that failed.
func callOutcomes(s *OpStats) string {
	var parts []string
	if s.ConditionalFailures > 0 {
		parts = append(parts, thousands(s.ConditionalFailures)+" refused by condition (expected under contention)")
	}
	if failed := s.Errors - min(s.Errors, s.ConditionalFailures); failed > 0 {
		parts = append(parts, thousands(failed)+" failed")
	}
	return strings.Join(parts, ", ")
}

func per(v float64, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return v / float64(n)
}

func pct(a, n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", float64(a)/float64(n)*100)
}

type errCount struct {
	msg string
	n   uint64
}

func topErrors(m map[string]uint64, k int) []errCount {
	out := make([]errCount, 0, len(m))
	for msg, n := range m {
		out = append(out, errCount{msg, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n || (out[i].n == out[j].n && out[i].msg < out[j].msg) })
	if len(out) > k {
		out = out[:k]
	}
	return out
}

// thousands formats n with comma separators.
func thousands(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }
