package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram counts durations, in microseconds, in an HdrHistogram: fixed
// log-linear buckets (values below 2^k have a bucket each, and every
// further power-of-two range is split into 2^k equal buckets), so a bucket
// is never wider than 1/2^k of its values. Because the buckets are fixed,
// two histograms with the same precision merge exactly by adding their
// counts: the merge of the histograms of several processes is the
// histogram of all their values. Besides the buckets it keeps the exact
// minimum, maximum and sum, which HdrHistogram only approximates.
//
// A Histogram is not safe for concurrent use. The zero value is not usable;
// call [NewHistogram].
type Histogram struct {
	h     *hdrhistogram.Histogram
	total uint64
	min   int64 // exact, microseconds; valid when total > 0
	max   int64
	sum   float64 // microseconds, for the mean
}

// Histogram precisions: HdrHistogram's significant decimal digits, for
// [NewHistogram].
const (
	// FinePrecision keeps values within 1/128 (0.8 %; 2 digits): the run's
	// totals.
	FinePrecision = 2
	// CoarsePrecision keeps values within 1/16 (6 %; 1 digit): one
	// histogram per second of the run, for the charts.
	CoarsePrecision = 1
	// maxMicros caps recorded values (about 19 hours).
	maxMicros = 1<<36 - 1
)

// NewHistogram returns an empty histogram keeping digits significant
// decimal digits ([FinePrecision] or [CoarsePrecision]).
func NewHistogram(digits int) *Histogram {
	return &Histogram{h: hdrhistogram.New(1, maxMicros, digits)}
}

// Record counts one duration (negative ones as zero).
func (h *Histogram) Record(d time.Duration) {
	v := min(max(d.Microseconds(), 0), maxMicros)
	// v is within the histogram's range: RecordValue cannot fail.
	_ = h.h.RecordValue(v)
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if h.total == 0 || v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Min returns the smallest recorded value; zero when empty.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) * time.Microsecond }

// Max returns the largest recorded value; zero when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) * time.Microsecond }

// Mean returns the mean of the recorded values; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum/float64(h.total)) * time.Microsecond
}

// Quantile returns the value at quantile q (0..1): the highest value of
// the bucket holding it (HdrHistogram's ValueAtQuantile), clamped to the
// exact minimum and maximum. Zero when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	v := h.h.ValueAtQuantile(q * 100)
	return time.Duration(min(max(v, h.min), h.max)) * time.Microsecond
}

// Merge adds o's counts to h. Both must have the same precision.
func (h *Histogram) Merge(o *Histogram) error {
	if o == nil || o.total == 0 {
		return nil
	}
	if o.h.SignificantFigures() != h.h.SignificantFigures() {
		return fmt.Errorf("merge histograms of precision %d and %d", h.h.SignificantFigures(), o.h.SignificantFigures())
	}
	if dropped := h.h.Merge(o.h); dropped != 0 {
		return fmt.Errorf("merge histograms: %d values out of range", dropped)
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.total == 0 || o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
	return nil
}

// Bucket is one non-empty bucket: values in [Low, Low+Width) microseconds.
type Bucket struct {
	Low, Width int64
	Count      uint64
}

// Buckets returns the non-empty buckets in increasing order.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for _, b := range h.h.Distribution() {
		if b.Count > 0 {
			out = append(out, Bucket{Low: b.From, Width: b.To - b.From + 1, Count: uint64(b.Count)})
		}
	}
	return out
}

// histogramJSON is the wire form of a Histogram, so that a process can send
// its histogram to another exactly: the buckets in HdrHistogram's
// compressed encoding (base64; other HdrHistogram tools read it too) and
// the exact extremes and sum.
type histogramJSON struct {
	HDR string  `json:"hdr"` // hdrhistogram's Encode is base64 text
	Min int64   `json:"min_us"`
	Max int64   `json:"max_us"`
	Sum float64 `json:"sum_us"`
}

// MarshalJSON encodes the histogram.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	enc, err := h.h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		return nil, fmt.Errorf("encode histogram: %w", err)
	}
	return json.Marshal(histogramJSON{HDR: string(enc), Min: h.min, Max: h.max, Sum: h.sum})
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.HDR == "" {
		return errors.New("histogram without its hdr encoding")
	}
	hh, err := hdrhistogram.Decode([]byte(j.HDR))
	if err != nil {
		return fmt.Errorf("decode histogram: %w", err)
	}
	if d := hh.SignificantFigures(); d != FinePrecision && d != CoarsePrecision || hh.HighestTrackableValue() < maxMicros {
		return fmt.Errorf("histogram of precision %d up to %d, want %d or %d up to %d", d, hh.HighestTrackableValue(), FinePrecision, CoarsePrecision, maxMicros)
	}
	*h = Histogram{h: hh, total: uint64(hh.TotalCount()), min: j.Min, max: j.Max, sum: j.Sum}
	return nil
}
