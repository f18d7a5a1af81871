package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/redisserver"
)

// vectorsLua runs the bucket math of lua/bucket.lua on many calls at
// once, on the path ARGV[1] names: "auto" (numbers when they stay exact,
// else exact integers: what the store runs), "big" (exact integers only)
// or "fast" (numbers only; "skip" where that path gives up). ARGV[2] is
// the number of calls, then per call its function, its number of inputs
// and the inputs. It returns one comma-separated line per call.
const vectorsLua = `
local argi = 0
local function nxt() argi = argi + 1; return ARGV[argi] end
local mode = nxt()
local out = {}
for _ = 1, tonumber(nxt()) do
  local fn, a = nxt(), {}
  for i = 1, tonumber(nxt()) do a[i] = nxt() end
  local r
  if mode == 'fast' then
    local nums, exact = {}, true
    for i = 1, #a do
      nums[i] = num(a[i])
      if not nums[i] then exact = false end
    end
    if exact then r = {bucket_fast[fn](unpack(nums))} else r = {} end
    if r[1] == nil then
      r = {'skip'}
    else
      for i = 1, #r do
        if r[i] == true then r[i] = '1' elseif r[i] == false then r[i] = '0'
        elseif r[i] == math.huge then r[i] = 'never' else r[i] = fmt(r[i]) end
      end
    end
  else
    local call = bucket_call
    if mode == 'big' then call = function(f, ...) return bucket_big()[f](...) end end
    local n = 7
    if fn == 'refill' or fn == 'available' then n = 6 elseif fn == 'retry_after' then n = 3 end
    local res = {call(fn, unpack(a, 1, n))}
    r = {}
    for i = 1, math.max(#res, fn == 'try_consume' and 5 or 1) do
      local v = res[i]
      if v == true then v = '1' elseif v == false then v = '0' elseif v == nil then v = 'never' end
      r[i] = v
    end
  end
  out[#out + 1] = table.concat(r, ',')
end
return out
`

// bucketVector is one golden vector of the limiter's bucket math.
type bucketVector struct {
	Fn  string   `json:"fn"`
	In  []string `json:"in"`
	Out []string `json:"out"`
}

// runVectors runs vectors through vectorsLua on path mode and returns one
// output per vector (nil for "skip"), durations converted from
// milliseconds to nanoseconds as the store converts them.
func runVectors(t *testing.T, mode string, vectors []bucketVector) [][]string {
	t.Helper()
	src := luaSource("int", "bucket") + vectorsLua
	c := redisserver.Client(t)
	const chunk = 500
	var out [][]string
	for start := 0; start < len(vectors); start += chunk {
		part := vectors[start:min(start+chunk, len(vectors))]
		args := []any{mode, len(part)}
		for _, v := range part {
			args = append(args, v.Fn, len(v.In))
			for _, x := range v.In {
				args = append(args, x)
			}
		}
		res, err := c.Eval(context.Background(), src, nil, args...).StringSlice()
		require.NoError(t, err)
		for i, v := range part {
			if res[i] == "skip" {
				out = append(out, nil)
				continue
			}
			got := strings.Split(res[i], ",")
			switch v.Fn { // durations: the last output of these
			case "try_consume", "time_until_available", "retry_after":
				got[len(got)-1] = itoa(int64(durationFromMillis(got[len(got)-1])))
			}
			out = append(out, got)
		}
	}
	return out
}

// TestBucketMathGoldenVectors passes the golden vectors of the limiter's
// bucket math (../testdata/bucket_vectors.json, written from bucket.go)
// through the Lua implementation on a real redis-server, on each path:
// the store's (numbers, falling back to exact integers), exact integers
// alone, and numbers alone, which must give up rather than differ. Every
// output must be identical to bucket.go's.
func TestBucketMathGoldenVectors(t *testing.T) {
	raw, err := os.ReadFile("../testdata/bucket_vectors.json")
	require.NoError(t, err)
	var vectors []bucketVector
	require.NoError(t, json.Unmarshal(raw, &vectors))
	require.GreaterOrEqual(t, len(vectors), 1000)

	fastRan := 0
	for _, mode := range []string{"auto", "big", "fast"} {
		got := runVectors(t, mode, vectors)
		require.Len(t, got, len(vectors))
		for i, v := range vectors {
			if got[i] == nil && mode == "fast" {
				continue
			}
			if mode == "fast" {
				fastRan++
			}
			assert.Equal(t, v.Out, got[i], "%s path, vector %d: %s(%s)", mode, i, v.Fn, strings.Join(v.In, ", "))
		}
	}
	t.Logf("%d vectors identical on every path; %d of them ran on numbers alone", len(vectors), fastRan)
	// The sample of realistic limits runs on numbers; only the edges of
	// int64 need the exact integers.
	assert.Greater(t, fastRan, len(vectors)/4, "too few vectors on the fast path")
}

// TestAllowPathsAgree runs Store.Allow's two scripts (token bucket and
// GCRA) on sequences of requests, each twice: as the store runs them
// (numbers while they stay exact) and with the exact integers alone. The
// replies and the stored state must be identical after every request;
// the limits range from 100 per minute to past 2^53 millitokens, so both
// the fast path and its fallback run. The key's lifetime may differ (the
// fast path's is an upper bound), but never ends before the bucket is
// full again (within the time between the two calls).
func TestAllowPathsAgree(t *testing.T) {
	c := redisserver.Client(t)
	ctx := context.Background()
	prefix := redisserver.Prefix(t)
	// No number exact: the exact path only.
	bigOnly := "local B53 = 0\nlocal function num() return nil end\n"
	rng := rand.New(rand.NewPCG(27, 53))
	limits := [][3]int64{ // capacity, refill amount (tokens), period (ms)
		{100, 100, 60_000}, {2_000_000, 2_000_000, 60_000}, {1_000_000, 1_000_000, 86_400_000},
		{1 << 30, 1 << 30, 60_000}, {1 << 30, 1 << 30, 86_400_000}, {5, 1, 1000},
		{1 << 42, 1 << 42, 3_600_000}, {1 << 50, 1 << 40, 604_800_000}, {9_007_199_254_740, 7, 1000},
	}
	fastReplies, total := 0, 0
	for _, entry := range []string{"token_bucket", "gcra"} {
		body := entryDef(entry) + "return entry_" + entry + "(KEYS, ARGV)\n"
		lib := map[string]string{"token_bucket": "allow_tb", "gcra": "allow_gcra"}[entry]
		auto := luaSource("int", "bucket", lib) + body
		big := luaSource("int", "bucket") + bigOnly + luaSource(lib) + body
		for li, l := range limits {
			for seq := range 6 {
				keyA := fmt.Sprintf("%s%s:%d:%d:a", prefix, entry, li, seq)
				keyB := fmt.Sprintf("%s%s:%d:%d:b", prefix, entry, li, seq)
				now := int64(1_767_225_600_000) + rng.Int64N(1<<40)
				for step := range 12 {
					now += rng.Int64N(int64(float64(l[2])*float64(l[0])/float64(l[1])/3) + 2) // up to a third of a refill
					n := 1 + rng.Int64N(max(l[0]/3, 1))
					if step%4 == 3 {
						n = l[0] // a burst of the whole capacity
					}
					capArg, amtArg := l[0], l[1]
					if entry == "token_bucket" {
						capArg, amtArg = l[0]*1000, l[1]*1000
					}
					args := []any{now, capArg, amtArg, l[2], n}
					ra, err := c.Eval(ctx, auto, []string{keyA}, args...).Int64Slice()
					require.NoError(t, err)
					rb, err := c.Eval(ctx, big, []string{keyB}, args...).Int64Slice()
					require.NoError(t, err)
					require.Equal(t, rb, ra, "%s %v step %d: %v", entry, l, step, args)
					sa, _ := c.Get(ctx, keyA).Result()
					sb, _ := c.Get(ctx, keyB).Result()
					require.Equal(t, sb, sa, "%s %v step %d: state", entry, l, step)
					ta, _ := c.PTTL(ctx, keyA).Result()
					tb, _ := c.PTTL(ctx, keyB).Result()
					assert.GreaterOrEqual(t, ta+200*time.Millisecond, tb, "%s %v step %d: lifetime", entry, l, step)
					total++
					if num64(sa) {
						fastReplies++
					}
				}
			}
		}
	}
	t.Logf("%d of %d requests with states in the exact range of numbers", fastReplies, total)
	assert.Greater(t, fastReplies, total/2)
	assert.Less(t, fastReplies, total, "no state past 2^53: the fallback did not run")
}

// num64 reports whether every number of a stored state is below 2^53.
func num64(state string) bool {
	for _, f := range strings.Fields(state) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v >= 1<<53 || v <= -1<<53 {
			return false
		}
	}
	return state != ""
}

// TestResends: only a standalone client with go-redis's retries off sends
// each command once; the default client, a Cluster client and a Ring
// client (which move a command to another node on a broken connection)
// may send a call again after it ran, so their calls carry write
// identifiers.
func TestResends(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   bool
	}{
		{"client, MaxRetries -1", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), false},
		{"client, default retries", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), true},
		{"client, MaxRetries 1", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 1}), true},
		{"cluster, MaxRetries -1", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, MaxRedirects: -1}), true},
		{"ring, MaxRetries -1", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, MaxRetries: -1}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.client.Close()
			require.Equal(t, tc.want, resends(tc.client))
		})
	}
}
