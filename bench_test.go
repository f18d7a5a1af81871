package limiter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// BenchmarkBuildSpeculativeUpdate measures building the hot path's request:
// the take from the stored balances.
func BenchmarkBuildSpeculativeUpdate(b *testing.B) {
	key := store.BucketKey{EntityID: "api-key-1", Resource: "gpt-4"}
	c := Consume{"rpm": 1, "tpm": 500}
	limits := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000)}
	spec := ddbschema.NewSpeculativeUpdates("zae-limiter")
	b.ReportAllocs()
	for b.Loop() {
		buildSpeculativeUpdate(spec, "ns000000001", store.SpeculativeRequest{Key: key, Consume: c, Limits: storeLimits(limits), NowMs: 1_700_000_000_000}, 1)
	}
}

// BenchmarkBuildExactUpdate measures building the hot path's other
// request: the refilled state of a full bucket, from the item kept
// (the key value is kept with it), planned and built.
func BenchmarkBuildExactUpdate(b *testing.B) {
	const rf = 1_700_000_000_000
	key := store.BucketKey{EntityID: "api-key-1", Resource: "gpt-4"}
	req := store.SpeculativeRequest{Key: key, Consume: Consume{"rpm": 1, "tpm": 500},
		Limits: storeLimits([]Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000)}), NowMs: rf + 60_000}
	item := bucketItem("ns000000001", &store.Bucket{Key: key, RefillMs: rf, States: []store.BucketState{
		{LimitName: "rpm", TokensMilli: 99_000, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000},
		{LimitName: "tpm", TokensMilli: 9_500_000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000},
	}})
	_, base, err := bucketFromItem(item)
	require.NoError(b, err)
	exact := ddbschema.NewExactUpdates("zae-limiter")
	keyValue := ddbschema.BucketKeyValue("ns000000001", key.EntityID, key.Resource, 0)
	b.ReportAllocs()
	for b.Loop() {
		var ebuf [8]ddbschema.ExactLimit
		var pbuf [8]ddbschema.SpecLimit
		w, reason, direct := planSpec(base, req, ebuf[:0], pbuf[:0])
		if reason != store.RefusedNone || !direct {
			b.Fatal(reason, direct)
		}
		exact.Input(keyValue, &w)
	}
}

// BenchmarkAcquireCommit measures a full Acquire + Commit against DynamoDB
// Local, on each path (mostly DynamoDB Local's own latency).
func BenchmarkAcquireCommit(b *testing.B) {
	for _, spec := range []bool{true, false} {
		b.Run(map[bool]string{true: "speculative", false: "read-then-write"}[spec], func(b *testing.B) {
			ctx := context.Background()
			client := ddblocal.Client(b)
			repo, err := openDynamo(ctx, client, func(o *DynamoDBOptions) {
				o.Table = ddblocal.TableName(b)
				o.CreateTable = true
			})
			require.NoError(b, err)
			rl := New(repo, func(o *Options) { o.SpeculativeWrites = spec })
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
