package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/store"
)

// serverCPU returns the CPU time of the server's main thread (user and
// system, INFO cpu) in seconds.
func serverCPU(ctx context.Context, b *testing.B, info func(context.Context) (string, error)) float64 {
	s, err := info(ctx)
	require.NoError(b, err)
	var t float64
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range []string{"used_cpu_sys_main_thread:", "used_cpu_user_main_thread:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				require.NoError(b, err)
				t += f
			}
		}
	}
	return t
}

// BenchmarkConsumeServerCPU is the server's CPU time per consume call
// (the metric server-µs/call), without the round trip: the calls go in
// pipelines of 500 on one item of limits of 2^30 a minute, each with a
// write identifier of its own, and the server's main thread's CPU time
// (INFO cpu) is read around them. On a machine shared with other work the
// CPU time of the server moves far less than the wall time of a round
// trip, which is what makes a change of a fraction of a microsecond in the
// consume function measurable: run it with -count and compare the
// smallest values. "refill due" advances the request's now by a
// millisecond a call, so that every call refills its limits first (as at
// c=32, where each worker's item sees about one request a millisecond).
//
//	go test -run '^$' -bench ConsumeServerCPU -count 5 ./redisstore/
func BenchmarkConsumeServerCPU(b *testing.B) {
	ctx := context.Background()
	c := redisserver.Client(b)
	s, err := New(c, func(o *Options) { o.Namespace = "servercpu" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) })
	require.NoError(b, err)
	runs := 0 // each run of a sub-benchmark (b.N grows) has an item of its own
	for _, bc := range []struct {
		name   string
		limits []string
		step   int64
	}{
		{"one limit", []string{"rpm"}, 0},
		{"one limit, refill due", []string{"rpm"}, 1},
		{"two limits", []string{"rpm", "tpm"}, 0},
		{"two limits, refill due", []string{"rpm", "tpm"}, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			runs++
			key := store.BucketKey{EntityID: "u" + strconv.Itoa(runs), Resource: "api"}
			states, lims, consume := eachCase(bc.limits)
			now := time.Now().UnixMilli()
			require.NoError(b, s.WriteBuckets(ctx, []store.BucketWrite{{Kind: store.WriteCreate, Key: key, NowMs: now, Incarnation: 7,
				TTL: store.TTLSet, TTLSeconds: 3600, States: states}}))
			// The library loaded, and the item's values kept by the function.
			res, err := s.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: key, Consume: consume, Limits: lims, NowMs: now})
			require.NoError(b, err)
			require.True(b, res.Applied, res.Reason)
			info := func(ctx context.Context) (string, error) { return c.Info(ctx, "cpu").Result() }
			b.ResetTimer()
			cpu0 := serverCPU(ctx, b, info)
			for done := 0; done < b.N; {
				pipe := c.Pipeline()
				n := min(500, b.N-done)
				for range n {
					now += bc.step
					args := s.consumeArgs([]store.SpeculativeRequest{{Key: key, Consume: consume, Limits: lims, NowMs: now}})
					args[0], args[1] = "fcall", scriptConsume.fn
					pipe.Do(ctx, args...)
				}
				cmds, err := pipe.Exec(ctx)
				require.NoError(b, err)
				reply, _ := cmds[len(cmds)-1].(interface{ Text() (string, error) }).Text()
				require.True(b, strings.HasPrefix(reply, "1\n"), "refused: %q", reply)
				done += n
			}
			b.ReportMetric((serverCPU(ctx, b, info)-cpu0)*1e6/float64(b.N), "server-µs/call")
		})
	}
}

// BenchmarkConsumeEachServerCPU is BenchmarkConsumeServerCPU for the
// batched consume (consume_each, see batcher.go): calls of 16 requests,
// each on an item of its own (as at c=32), in pipelines of 50 calls; the
// metric is the server's CPU time per request.
//
//	go test -run '^$' -bench ConsumeEachServerCPU -count 5 ./redisstore/
func BenchmarkConsumeEachServerCPU(b *testing.B) {
	ctx := context.Background()
	c := redisserver.Client(b)
	s, err := New(c, func(o *Options) { o.Namespace = "eachcpu" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) })
	require.NoError(b, err)
	const per = 16
	runs := 0
	for _, bc := range eachCases {
		b.Run(bc.name, func(b *testing.B) {
			runs++
			states, lims, consume := eachCase(bc.limits)
			now := time.Now().UnixMilli()
			keys := make([]store.BucketKey, per)
			for k := range keys {
				keys[k] = store.BucketKey{EntityID: "u" + strconv.Itoa(runs) + "-" + strconv.Itoa(k), Resource: "api"}
				require.NoError(b, s.WriteBuckets(ctx, []store.BucketWrite{{Kind: store.WriteCreate, Key: keys[k], NowMs: now, Incarnation: 7,
					TTL: store.TTLSet, TTLSeconds: 3600, States: states}}))
			}
			info := func(ctx context.Context) (string, error) { return c.Info(ctx, "cpu").Result() }
			reqs := make([]store.SpeculativeRequest, per)
			b.ResetTimer()
			cpu0 := serverCPU(ctx, b, info)
			for done := 0; done < b.N; {
				pipe := c.Pipeline()
				n := 0
				for n < 50*per && done+n < b.N {
					now += bc.step
					for k := range reqs {
						reqs[k] = store.SpeculativeRequest{Key: keys[k], Consume: consume, Limits: lims, NowMs: now}
					}
					args := s.consumeArgs(reqs)
					args[0], args[1] = "fcall", scriptConsumeEach.fn
					pipe.Do(ctx, args...)
					n += per
				}
				cmds, err := pipe.Exec(ctx)
				require.NoError(b, err)
				reply, _ := cmds[len(cmds)-1].(interface{ Text() (string, error) }).Text()
				require.True(b, strings.HasPrefix(reply, "1\n"), "refused: %q", reply)
				done += n
			}
			b.ReportMetric((serverCPU(ctx, b, info)-cpu0)*1e6/float64(b.N), "server-µs/request")
		})
	}
}

// eachCase returns the stored states, the limits and the amounts of a
// consume benchmark of limits: every limit so large that no request is
// refused, the second and later taking more than the first.
func eachCase(limits []string) ([]store.BucketState, []store.Limit, store.Consume) {
	big := store.MilliTokens(1 << 30)
	var states []store.BucketState
	var lims []store.Limit
	consume := store.Consume{}
	for i, n := range limits {
		states = append(states, store.BucketState{LimitName: n, TokensMilli: big, CapacityMilli: big, RefillAmountMilli: big, RefillPeriodMs: 60_000})
		lims = append(lims, store.Limit{Name: n, Capacity: 1 << 30, RefillAmount: 1 << 30, RefillPeriod: time.Minute})
		consume[n] = int64(1 + 499*i)
	}
	return states, lims, consume
}

// eachCases are the cases of the batched server CPU benchmarks: the
// limits of the items, and the milliseconds between calls (a positive
// step makes a refill due on every request).
var eachCases = []struct {
	name   string
	limits []string
	step   int64
}{
	{"one limit", []string{"rpm"}, 0},
	{"two limits, refill due", []string{"rpm", "tpm"}, 1},
}
