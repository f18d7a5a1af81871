package limiter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// BenchmarkHotKeys measures group commit and the over-limit cache against
// DynamoDB Local: DynamoDB calls per acquire (calls/acquire) and acquires
// per second (acquires/s) for four workloads, each with the options off
// (before) and on (after), in the same run:
//
//   - one-key-1g: one goroutine, Acquire + Commit on one bucket;
//   - one-key-32g: 32 goroutines, Acquire + Commit on one bucket;
//   - 32-keys-32g: 32 goroutines, each on its own bucket;
//   - denial-storm: 32 goroutines retrying an exhausted bucket (every
//     acquire refused).
//
// Run with: go test -run='^$' -bench=HotKeys -benchtime=3s .
func BenchmarkHotKeys(b *testing.B) {
	type mode struct {
		name string
		opts []func(*Options)
	}
	benchHotWarmUp(b)
	off := mode{"off", []func(*Options){func(o *Options) { o.GroupCommit = false }}}
	gc := mode{"group-commit", []func(*Options){func(o *Options) { o.GroupCommit = true }}}
	both := mode{"group-commit+cache", []func(*Options){func(o *Options) { o.GroupCommit = true }, func(o *Options) { o.OverLimitCacheMaxWait = time.Second }}}
	for _, sc := range []struct {
		name       string
		goroutines int
		keys       int
		storm      bool
		modes      []mode
	}{
		{"one-key-1g", 1, 1, false, []mode{off, both}},
		{"one-key-32g", 32, 1, false, []mode{off, both}},
		{"32-keys-32g", 32, 32, false, []mode{off, both}},
		{"denial-storm", 32, 1, true, []mode{off, gc, both}},
	} {
		for _, m := range sc.modes {
			b.Run(sc.name+"/"+m.name, func(b *testing.B) {
				benchHot(b, sc.goroutines, sc.keys, sc.storm, m.opts)
			})
		}
	}
}

// benchHot runs one BenchmarkHotKeys case.
func benchHot(b *testing.B, goroutines, keys int, storm bool, opts []func(*Options)) {
	ctx := context.Background()
	rec := &ddblocal.Recorder{}
	repo, err := openDynamo(ctx, ddblocal.Client(b, rec.Option()), func(o *DynamoDBOptions) {
		o.Table = ddblocal.TableName(b)
		o.CreateTable = true
	})
	require.NoError(b, err)
	rl := New(repo, opts...)
	lim := WithLimits(PerSecond("rps", 1_000_000_000), PerSecond("tps", 1_000_000_000))
	consume := Consume{"rps": 1, "tps": 100}
	if storm {
		lim = WithLimits(PerHour("rph", 1))
		consume = Consume{"rph": 1}
	}
	for k := range keys { // create the buckets (and drain the storm's)
		l, err := rl.Acquire(ctx, fmt.Sprintf("bench-%d", k), "gpt-4", consume, lim)
		require.NoError(b, err)
		if err := l.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	op := func(entity string) {
		l, err := rl.Acquire(ctx, entity, "gpt-4", consume, lim)
		switch {
		case storm && errors.Is(err, ErrRateLimited):
		case err != nil:
			b.Error(err)
		case storm:
			b.Error("admitted from an exhausted bucket")
		default:
			if err := l.Commit(ctx); err != nil {
				b.Error(err)
			}
		}
	}
	rec.Reset()
	b.ResetTimer()
	if goroutines == 1 {
		for b.Loop() {
			op("bench-0")
		}
	} else {
		b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			entity := fmt.Sprintf("bench-%d", int(next.Add(1)-1)%keys)
			for pb.Next() {
				op(entity)
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(len(rec.Calls()))/float64(b.N), "calls/acquire")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acquires/s")
}

// benchHotWarmUp runs a few hundred acquires first, so that DynamoDB Local's
// JIT warm-up does not land on the first case.
func benchHotWarmUp(b *testing.B) {
	ctx := context.Background()
	repo, err := openDynamo(ctx, ddblocal.Client(b), func(o *DynamoDBOptions) {
		o.Table = ddblocal.TableName(b)
		o.CreateTable = true
	})
	require.NoError(b, err)
	rl := New(repo, func(o *Options) { o.GroupCommit = false })
	lim := WithLimits(PerSecond("rps", 1_000_000_000))
	for i := range 500 {
		l, err := rl.Acquire(ctx, fmt.Sprintf("warm-%d", i%8), "gpt-4", Consume{"rps": 1}, lim)
		require.NoError(b, err)
		if err := l.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
