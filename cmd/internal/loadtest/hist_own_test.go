package loadtest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"time"
)

// ownHistogram is the histogram the package kept by hand before it used
// hdrhistogram-go, kept as the baseline of BenchmarkHistogram. It counts
// durations, in microseconds, in HdrHistogram's layout: values below 2^sub
// have a bucket each, and every further power-of-two range is split into
// 2^sub equal buckets; histograms of the same precision merge by adding
// their counts. It is not safe for concurrent use; call [newOwnHistogram].
type ownHistogram struct {
	sub    uint // log2 of the buckets per power of two
	counts []uint64
	total  uint64
	min    int64 // exact, microseconds; valid when total > 0
	max    int64
	sum    float64 // microseconds, for the mean
}

// newOwnHistogram returns an empty histogram with 2^sub buckets per power of
// two.
func newOwnHistogram(sub uint) *ownHistogram {
	return &ownHistogram{sub: sub, counts: make([]uint64, (36-sub+2)<<sub)}
}

// index returns the bucket of v (microseconds, 0 ≤ v ≤ maxMicros).
func (h *ownHistogram) index(v int64) int {
	if v < 1<<h.sub {
		return int(v)
	}
	e := uint(bits.Len64(uint64(v))) - 1
	return int((e-h.sub+1)<<h.sub) + int(uint64(v)>>(e-h.sub)) - 1<<h.sub
}

// bounds returns the smallest value of bucket i and its width.
func (h *ownHistogram) bounds(i int) (low, width int64) {
	if i < 1<<h.sub {
		return int64(i), 1
	}
	g := uint(i) >> h.sub
	sub := int64(i) & (1<<h.sub - 1)
	return (1<<h.sub + sub) << (g - 1), 1 << (g - 1)
}

// Record counts one duration (negative ones as zero).
func (h *ownHistogram) Record(d time.Duration) {
	v := min(max(d.Microseconds(), 0), maxMicros)
	h.counts[h.index(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if h.total == 0 || v > h.max {
		h.max = v
	}
	h.total++
	h.sum += float64(v)
}

// Quantile returns the value at quantile q (0..1): the midpoint of the
// bucket holding the ⌈q·n⌉-th smallest value, clamped to the exact minimum
// and maximum. Zero when empty.
func (h *ownHistogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			low, width := h.bounds(i)
			v := low + (width-1)/2
			return time.Duration(min(max(v, h.min), h.max)) * time.Microsecond
		}
	}
	return time.Duration(h.max) * time.Microsecond
}

// Merge adds o's counts to h. Both must have the same precision.
func (h *ownHistogram) Merge(o *ownHistogram) error {
	if o == nil || o.total == 0 {
		return nil
	}
	if o.sub != h.sub {
		return fmt.Errorf("merge histograms of precision %d and %d", h.sub, o.sub)
	}
	for i, c := range o.counts {
		h.counts[i] += c
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

// Buckets returns the non-empty buckets in increasing order.
func (h *ownHistogram) Buckets() []Bucket {
	var out []Bucket
	for i, c := range h.counts {
		if c > 0 {
			low, width := h.bounds(i)
			out = append(out, Bucket{low, width, c})
		}
	}
	return out
}

// ownHistogramJSON is the wire form of an ownHistogram: the non-empty buckets by
// index, so that a process can send its histogram to another exactly.
type ownHistogramJSON struct {
	Sub    uint              `json:"sub"`
	Counts map[string]uint64 `json:"counts"`
	Min    int64             `json:"min_us"`
	Max    int64             `json:"max_us"`
	Sum    float64           `json:"sum_us"`
}

// MarshalJSON encodes the histogram sparsely.
func (h *ownHistogram) MarshalJSON() ([]byte, error) {
	j := ownHistogramJSON{Sub: h.sub, Counts: map[string]uint64{}, Min: h.min, Max: h.max, Sum: h.sum}
	for i, c := range h.counts {
		if c > 0 {
			j.Counts[strconv.Itoa(i)] = c
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (h *ownHistogram) UnmarshalJSON(b []byte) error {
	var j ownHistogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Sub < 1 || j.Sub > 12 {
		return fmt.Errorf("histogram precision %d out of range", j.Sub)
	}
	*h = *newOwnHistogram(j.Sub)
	keys := make([]string, 0, len(j.Counts))
	for k := range j.Counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= len(h.counts) {
			return fmt.Errorf("histogram bucket %q out of range", k)
		}
		h.counts[i] += j.Counts[k]
		h.total += j.Counts[k]
	}
	h.min, h.max, h.sum = j.Min, j.Max, j.Sum
	return nil
}
