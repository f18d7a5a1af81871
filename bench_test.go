package limiter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

// BenchmarkBuildSpeculativeUpdate measures building the hot path's request.
func BenchmarkBuildSpeculativeUpdate(b *testing.B) {
	key := store.BucketKey{EntityID: "api-key-1", Resource: "gpt-4"}
	c := Consume{"rpm": 1, "tpm": 500}
	b.ReportAllocs()
	for b.Loop() {
		buildSpeculativeUpdate("zae-limiter", "ns000000001", store.SpeculativeRequest{Key: key, Consume: c, NowMs: 1_700_000_000_000})
	}
}

// BenchmarkAcquireCommit measures a full Acquire + Commit against DynamoDB
// Local, on each path (mostly DynamoDB Local's own latency).
func BenchmarkAcquireCommit(b *testing.B) {
	for _, spec := range []bool{true, false} {
		b.Run(map[bool]string{true: "speculative", false: "read-then-write"}[spec], func(b *testing.B) {
			ctx := context.Background()
			client := ddblocal.Client(b)
			repo, err := OpenDynamoDB(ctx, client, func(o *DynamoDBOptions) {
				o.Table = ddblocal.TableName(b)
				o.CreateTable = true
			})
			require.NoError(b, err)
			rl := New(repo, WithSpeculativeWrites(spec))
			lim := WithLimits(PerSecond("rps", 1_000_000_000), PerSecond("tps", 1_000_000_000))
			b.ReportAllocs()
			for b.Loop() {
				l, err := rl.Acquire(ctx, "bench", "gpt-4", Consume{"rps": 1, "tps": 100}, lim)
				require.NoError(b, err)
				if err := l.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
