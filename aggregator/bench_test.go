package aggregator

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
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
			require.NoError(b, err)
			decoded = append(decoded, r)
		}
		c := p.snapshotChunks(decoded)
		require.Len(b, c, 1, "chunks = %+v", c)
		require.Len(b, c[0].groups, 20, "chunks = %+v", c)
		for _, bk := range aggregateBuckets(decoded) {
			refillCredits(bk, now.UnixMilli())
			shouldShard(bk, now.UnixMilli())
		}
	}
}
