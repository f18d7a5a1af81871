package redisstore

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/store"
)

// BenchmarkConsumeEachServerCPUVersus is BenchmarkConsumeEachServerCPU
// for two versions of the consume functions on one redis-server: this
// tree's and the Lua files of the directory ZAEL_LUA_BASELINE (another
// commit's redisstore/lua, e.g. extracted with `git archive <commit>
// redisstore/lua | tar -x -C /tmp/base`), each loaded as a library of its
// own. The calls alternate between the two, a pipeline at a time, the
// side that goes first alternating too, and the server's CPU time is read
// around each pipeline: both see the same moments of the machine, whose
// load moves the absolute figures by a tenth from one run to the next
// while their ratio (new/baseline) stays within a few hundredths (this
// tree against itself: 0.96–1.01 over three runs on a loaded VM). Both
// get the same arguments, in the form every version reads (a request of
// the previous request's now, limits and amounts as its now and '*'), so
// the ratio is the Lua code's. Each call has 16 requests, each on an item
// of its own, of two limits of 2^30 a minute refilled by every call (the
// request's now moves a millisecond a call), or of one limit of the same
// millisecond ("one limit").
//
//	ZAEL_LUA_BASELINE=/tmp/base/redisstore/lua go test -run '^$' -bench ConsumeEachServerCPUVersus -benchtime 40000x -count 4 ./redisstore/
func BenchmarkConsumeEachServerCPUVersus(b *testing.B) {
	dir := os.Getenv("ZAEL_LUA_BASELINE")
	if dir == "" {
		b.Skip("ZAEL_LUA_BASELINE names no directory of Lua files to compare with")
	}
	entries := [][]string{{"consume_each", "int", "expired", "bucket", "consume_lib", "writeid"}}
	baseName, baseSrc := buildLibrary(func(name string) string {
		src, err := os.ReadFile(filepath.Join(dir, name+".lua"))
		require.NoError(b, err)
		return string(src)
	}, entries)
	newName, newSrc := buildLibrary(readLua, entries)
	ctx := context.Background()
	c := redisserver.Client(b)
	for _, src := range []string{baseSrc, newSrc} {
		require.NoError(b, c.Do(ctx, "function", "load", "replace", src).Err())
	}
	s, err := New(c, func(o *Options) { o.Namespace = "versus" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) })
	require.NoError(b, err)
	const per = 16
	info := func(ctx context.Context) (string, error) { return c.Info(ctx, "cpu").Result() }
	runs := 0 // each run of a sub-benchmark (b.N grows) has items of its own
	for _, bc := range eachCases {
		b.Run(bc.name, func(b *testing.B) {
			runs++
			states, lims, consume := eachCase(bc.limits)
			now := time.Now().UnixMilli()
			type side struct {
				fn   string
				keys []store.BucketKey
				cpu  float64
				n    int
			}
			sides := []*side{{fn: baseName + "_consume_each"}, {fn: newName + "_consume_each"}}
			for si, sd := range sides {
				sd.keys = make([]store.BucketKey, per)
				for k := range sd.keys {
					sd.keys[k] = store.BucketKey{EntityID: strconv.Itoa(runs) + "-" + strconv.Itoa(si) + "-" + strconv.Itoa(k), Resource: "api"}
					require.NoError(b, s.WriteBuckets(ctx, []store.BucketWrite{{Kind: store.WriteCreate, Key: sd.keys[k], NowMs: now, Incarnation: 7,
						TTL: store.TTLSet, TTLSeconds: 3600, States: states}}))
				}
			}
			reqs := make([]store.SpeculativeRequest, per)
			const calls = 50 // a pipeline
			b.ResetTimer()
			for round := 0; sides[1].n < b.N; round++ {
				order := sides
				if round%2 == 1 {
					order = []*side{sides[1], sides[0]}
				}
				for _, sd := range order {
					pipe := c.Pipeline()
					t := now
					for range calls {
						t += bc.step
						for k := range reqs {
							reqs[k] = store.SpeculativeRequest{Key: sd.keys[k], Consume: consume, Limits: lims, NowMs: t}
						}
						var args []any
						for i, a := range s.consumeArgs(reqs) {
							if v, ok := a.(string); ok && v == `"` && i > 3+per {
								at := t
								args = append(args, &at, "*")
								continue
							}
							args = append(args, a)
						}
						args[0], args[1] = "fcall", sd.fn
						pipe.Do(ctx, args...)
					}
					cpu0 := serverCPU(ctx, b, info)
					cmds, err := pipe.Exec(ctx)
					sd.cpu += serverCPU(ctx, b, info) - cpu0
					require.NoError(b, err)
					reply, _ := cmds[len(cmds)-1].(interface{ Text() (string, error) }).Text()
					require.True(b, strings.HasPrefix(reply, "1\n"), "%s refused: %q", sd.fn, reply)
					sd.n += calls * per
				}
				now += 2 * calls * bc.step
			}
			base, cur := sides[0].cpu*1e6/float64(sides[0].n), sides[1].cpu*1e6/float64(sides[1].n)
			b.ReportMetric(base, "baseline-server-µs/request")
			b.ReportMetric(cur, "server-µs/request")
			b.ReportMetric(cur/base, "new/baseline")
		})
	}
}
