package loadtest

import (
	"encoding/json"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// precisionBits is the log2 of the buckets per power of two of each
// precision: a bucket is never wider than 1/2^bits of its values.
var precisionBits = map[int]int64{FinePrecision: 7, CoarsePrecision: 4}

// TestHistogramBuckets: a value falls in the one bucket of a histogram
// holding it alone, buckets come in order without overlapping, and a bucket
// is at most 1/2^bits of its values wide.
func TestHistogramBuckets(t *testing.T) {
	for digits, bits := range precisionBits {
		r := rand.New(rand.NewPCG(1, 2))
		all := NewHistogram(digits)
		for range 1_000 {
			v := r.Int64N(maxMicros + 1)
			if r.IntN(2) == 0 {
				v = r.Int64N(100_000)
			}
			all.Record(time.Duration(v) * time.Microsecond)
			one := NewHistogram(digits)
			one.Record(time.Duration(v) * time.Microsecond)
			bs := one.Buckets()
			require.Len(t, bs, 1, "digits %d, value %d", digits, v)
			assert.GreaterOrEqual(t, v, bs[0].Low, "digits %d: value below its bucket %+v", digits, bs[0])
			assert.Less(t, v, bs[0].Low+bs[0].Width, "digits %d: value past its bucket %+v", digits, bs[0])
		}
		var n uint64
		prevHigh := int64(0)
		for _, b := range all.Buckets() {
			assert.GreaterOrEqual(t, b.Low, prevHigh, "digits %d: bucket %+v overlaps the previous", digits, b)
			if b.Low >= 1<<bits {
				assert.LessOrEqual(t, b.Width, b.Low>>bits, "digits %d: bucket %+v wider than 1/%d", digits, b, 1<<bits)
			}
			prevHigh = b.Low + b.Width
			n += b.Count
		}
		assert.Equal(t, all.Count(), n, "digits %d: the buckets' counts", digits)
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
		assert.InDelta(t, exact, got, exact/64+1, "q%.3f", q)
	}
	assert.Equal(t, time.Duration(vals[0])*time.Microsecond, h.Min())
	assert.Equal(t, time.Duration(vals[len(vals)-1])*time.Microsecond, h.Max())
	assert.Equal(t, h.Max(), h.Quantile(1))
	assert.Zero(t, NewHistogram(FinePrecision).Quantile(0.5), "empty histogram quantile")
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
		require.NoError(t, err)
		var back Histogram
		require.NoError(t, json.Unmarshal(b, &back))
		require.NoError(t, merged.Merge(&back))
	}
	assert.Equal(t, whole.Buckets(), merged.Buckets())
	assert.Equal(t, whole.Count(), merged.Count())
	assert.Equal(t, whole.Min(), merged.Min())
	assert.Equal(t, whole.Max(), merged.Max())
	assert.Equal(t, whole.Mean(), merged.Mean())
	assert.Equal(t, whole.Quantile(0.99), merged.Quantile(0.99))

	assert.NoError(t, merged.Merge(NewHistogram(CoarsePrecision)), "merging an empty histogram of another precision")
	other := NewHistogram(CoarsePrecision)
	other.Record(time.Millisecond)
	assert.Error(t, merged.Merge(other), "merged histograms of different precision")
}

// TestHistogramJSONRejects: what is not a histogram of this package's
// geometry does not decode.
func TestHistogramJSONRejects(t *testing.T) {
	var h Histogram
	assert.Error(t, json.Unmarshal([]byte(`{"min_us":1}`), &h))
	assert.Error(t, json.Unmarshal([]byte(`{"hdr":"bm90IGEgaGlzdG9ncmFt"}`), &h))
	// The sparse form of the package's former histogram.
	assert.Error(t, json.Unmarshal([]byte(`{"sub":7,"counts":{"3":1},"min_us":3,"max_us":3,"sum_us":3}`), &h))
}
