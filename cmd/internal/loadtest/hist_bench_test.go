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

// benchHist is what the benchmark uses of a histogram type.
type benchHist[H any] interface {
	Record(time.Duration)
	Merge(H) error
	Quantile(float64) time.Duration
}

// opsOf builds the benchmark's operations on histograms made by newHist
// (the values recorded into a full one and, the first 10,000, a part); a
// round trip decodes into a zero T.
func opsOf[T any, H interface {
	*T
	benchHist[H]
}](vals []time.Duration, newHist func() H) histOps {
	rec, part, full, acc := newHist(), newHist(), newHist(), newHist()
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
			var back T
			_ = json.Unmarshal(b, H(&back))
		},
	}
}

func hdrOps(vals []time.Duration) histOps {
	return opsOf(vals, func() *Histogram { return NewHistogram(FinePrecision) })
}

func ownOps(vals []time.Duration) histOps {
	const sub = 7 // the former FinePrecision
	return opsOf(vals, func() *ownHistogram { return newOwnHistogram(sub) })
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
