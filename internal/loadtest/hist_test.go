package loadtest

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// TestHistogramBuckets: every value falls in a bucket whose bounds hold it,
// buckets never overlap, and a bucket is at most 1/2^sub of its values wide.
func TestHistogramBuckets(t *testing.T) {
	for _, sub := range []uint{CoarsePrecision, FinePrecision} {
		h := NewHistogram(sub)
		prevHigh := int64(0)
		for i := range h.counts {
			low, width := h.bounds(i)
			if low != prevHigh {
				t.Fatalf("sub %d: bucket %d starts at %d, the previous ended at %d", sub, i, low, prevHigh)
			}
			if low >= 1<<sub && float64(width) > float64(low)/float64(int64(1)<<sub) {
				t.Fatalf("sub %d: bucket %d [%d,+%d) wider than 1/%d", sub, i, low, width, 1<<sub)
			}
			prevHigh = low + width
		}
		if prevHigh <= maxMicros {
			t.Fatalf("sub %d: buckets end at %d, below maxMicros", sub, prevHigh)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 100_000 {
			v := r.Int64N(maxMicros + 1)
			if r.IntN(2) == 0 {
				v = r.Int64N(100_000)
			}
			low, width := h.bounds(h.index(v))
			if v < low || v >= low+width {
				t.Fatalf("sub %d: %d in bucket [%d,+%d)", sub, v, low, width)
			}
		}
	}
}

// TestHistogramQuantiles compares quantiles with the exact ones of the
// recorded values: within a bucket's width.
func TestHistogramQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := NewHistogram(FinePrecision)
	var vals []int64
	for range 50_000 {
		v := int64(r.ExpFloat64()*2000) + 100 // µs, a long tail
		vals = append(vals, v)
		h.Record(time.Duration(v) * time.Microsecond)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := float64(vals[int(q*float64(len(vals)))-1])
		got := float64(h.Quantile(q).Microseconds())
		if d := got - exact; d > exact/64+1 || -d > exact/64+1 {
			t.Errorf("q%.3f = %.0fµs, exact %.0fµs", q, got, exact)
		}
	}
	if h.Min() != time.Duration(vals[0])*time.Microsecond || h.Max() != time.Duration(vals[len(vals)-1])*time.Microsecond {
		t.Errorf("min/max %v/%v, want %dµs/%dµs", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
	if NewHistogram(FinePrecision).Quantile(0.5) != 0 {
		t.Error("empty histogram quantile not 0")
	}
}

// TestHistogramMergeExact: the merge of the histograms of parts equals the
// histogram of the whole, also through JSON (how processes send them).
func TestHistogramMergeExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	whole := NewHistogram(FinePrecision)
	parts := []*Histogram{NewHistogram(FinePrecision), NewHistogram(FinePrecision), NewHistogram(FinePrecision)}
	for i := range 30_000 {
		d := time.Duration(r.Int64N(int64(time.Second)))
		whole.Record(d)
		parts[i%3].Record(d)
	}
	merged := NewHistogram(FinePrecision)
	for _, p := range parts {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back Histogram
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := merged.Merge(&back); err != nil {
			t.Fatal(err)
		}
	}
	for i := range whole.counts {
		if whole.counts[i] != merged.counts[i] {
			t.Fatalf("bucket %d: whole %d, merged %d", i, whole.counts[i], merged.counts[i])
		}
	}
	if whole.Count() != merged.Count() || whole.Min() != merged.Min() || whole.Max() != merged.Max() || whole.Quantile(0.99) != merged.Quantile(0.99) {
		t.Errorf("merged %d %v %v, whole %d %v %v", merged.Count(), merged.Min(), merged.Max(), whole.Count(), whole.Min(), whole.Max())
	}
	if err := merged.Merge(NewHistogram(CoarsePrecision)); err != nil {
		t.Errorf("merging an empty histogram of another precision: %v", err)
	}
	other := NewHistogram(CoarsePrecision)
	other.Record(time.Millisecond)
	if err := merged.Merge(other); err == nil {
		t.Error("merged histograms of different precision")
	}
}
