package loadtest

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// histOps is what BenchmarkHistogram measures of one implementation.
type histOps struct {
	record    func(time.Duration)
	merge     func() // a part of 10,000 values into an accumulator
	quantiles func() // p50, p90, p99, p99.9 of 100,000 values
	roundTrip func() // JSON encode and decode of a part (how --procs sends it)
}

// latencies returns n acquire-like latencies: about 2 ms with a long tail.
func latencies(n int) []time.Duration {
	r := rand.New(rand.NewPCG(7, 8))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(r.ExpFloat64()*2000+300) * time.Microsecond
	}
	return out
}

func hdrOps(vals []time.Duration) histOps {
	rec, part, full, acc := NewHistogram(FinePrecision), NewHistogram(FinePrecision), NewHistogram(FinePrecision), NewHistogram(FinePrecision)
	for i, v := range vals {
		full.Record(v)
		if i < 10_000 {
			part.Record(v)
		}
	}
	return histOps{
		record: rec.Record,
		merge:  func() { _ = acc.Merge(part) },
		quantiles: func() {
			for _, q := range Quantiles {
				_ = full.Quantile(q.Q)
			}
		},
		roundTrip: func() {
			b, _ := json.Marshal(part)
			var back Histogram
			_ = json.Unmarshal(b, &back)
		},
	}
}

func ownOps(vals []time.Duration) histOps {
	const sub = 7 // the former FinePrecision
	rec, part, full, acc := newOwnHistogram(sub), newOwnHistogram(sub), newOwnHistogram(sub), newOwnHistogram(sub)
	for i, v := range vals {
		full.Record(v)
		if i < 10_000 {
			part.Record(v)
		}
	}
	return histOps{
		record: rec.Record,
		merge:  func() { _ = acc.Merge(part) },
		quantiles: func() {
			for _, q := range Quantiles {
				_ = full.Quantile(q.Q)
			}
		},
		roundTrip: func() {
			b, _ := json.Marshal(part)
			var back ownHistogram
			_ = json.Unmarshal(b, &back)
		},
	}
}

// BenchmarkHistogram compares the HdrHistogram-based Histogram ("hdr")
// with the package's former histogram of the same layout ("own"): record
// one value, merge a part, read four quantiles, send a part through JSON.
// Run it with -count to alternate the two in rounds.
func BenchmarkHistogram(b *testing.B) {
	vals := latencies(100_000)
	impls := []struct {
		name string
		ops  func([]time.Duration) histOps
	}{{"own", ownOps}, {"hdr", hdrOps}}
	for _, op := range []string{"record", "merge", "quantiles", "json"} {
		for _, impl := range impls {
			b.Run(op+"/"+impl.name, func(b *testing.B) {
				o := impl.ops(vals)
				b.ReportAllocs()
				b.ResetTimer()
				switch op {
				case "record":
					for i := range b.N {
						o.record(vals[i%len(vals)])
					}
				case "merge":
					for range b.N {
						o.merge()
					}
				case "quantiles":
					for range b.N {
						o.quantiles()
					}
				case "json":
					for range b.N {
						o.roundTrip()
					}
				}
			})
		}
	}
}
