package aggregator

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// BenchmarkPlanBatch measures the processor's CPU work for a batch of 100
// bucket records (decoding with type checks, snapshot grouping, bucket
// aggregation and refill math), without I/O.
func BenchmarkPlanBatch(b *testing.B) {
	var recs []events.DynamoDBEventRecord
	for i := range 100 {
		recs = append(recs, insertRecord(fmt.Sprintf("e%02d", i%10), i+1, 1))
	}
	p := &Processor{table: "t", opts: Options{Windows: DefaultWindows, Now: time.Now}}
	now := fixtureNow
	b.ReportAllocs()
	for b.Loop() {
		decoded := make([]record, 0, len(recs))
		for i, rec := range recs {
			r, err := decodeRecord(i, rec, now)
			if err != nil {
				b.Fatal(err)
			}
			decoded = append(decoded, r)
		}
		if c := p.snapshotChunks(decoded); len(c) != 1 || len(c[0].groups) != 20 {
			b.Fatalf("chunks = %+v", c)
		}
		for _, bk := range aggregateBuckets(decoded) {
			refillCredits(bk, now.UnixMilli())
			shouldShard(bk, now.UnixMilli())
		}
	}
}
