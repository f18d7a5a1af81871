package redisstore

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/zaelimiter/limiter/internal/redisserver"
)

// vectorsLua runs the bucket math of lua/bucket.lua on many calls at
// once. ARGV: the number of calls, then per call its function, its number
// of inputs and the inputs. It returns one comma-separated line per call.
const vectorsLua = `
local out = {}
for _ = 1, nxtn() do
  local fn, a = nxt(), {}
  for i = 1, nxtn() do a[i] = nxt() end
  local r
  if fn == 'refill' then
    r = {refill(a[1], a[2], a[3], a[4], a[5], a[6])}
  elseif fn == 'try_consume' then
    local ok, tk, last, avail, retry = try_consume(a[1], a[2], a[3], a[4], a[5], a[6], a[7])
    r = {ok and '1' or '0', tk, last, avail, retry or 'never'}
  elseif fn == 'force_consume' then
    r = {force_consume(a[1], a[2], a[3], a[4], a[5], a[6], a[7])}
  elseif fn == 'available' then
    r = {available(a[1], a[2], a[3], a[4], a[5], a[6])}
  elseif fn == 'time_until_available' then
    r = {time_until_available(a[1], a[2], a[3], a[4], a[5], a[6], a[7]) or 'never'}
  elseif fn == 'retry_after' then
    r = {retry_after_exact(parse(a[1]), a[2], a[3]) or 'never'}
  end
  out[#out + 1] = table.concat(r, ',')
end
return out
`

// TestBucketMathGoldenVectors passes the golden vectors of the limiter's
// bucket math (../testdata/bucket_vectors.json, written from bucket.go)
// through the Lua implementation on a real redis-server: every output
// must be identical. Durations come back in milliseconds and are converted
// as the store converts them.
func TestBucketMathGoldenVectors(t *testing.T) {
	raw, err := os.ReadFile("../testdata/bucket_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Fn  string   `json:"fn"`
		In  []string `json:"in"`
		Out []string `json:"out"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) < 1000 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	src := newScript("vectors", "int", "bucket").src + vectorsLua
	c := redisserver.Client(t)
	ctx := context.Background()
	const chunk = 500
	for start := 0; start < len(vectors); start += chunk {
		part := vectors[start:min(start+chunk, len(vectors))]
		args := []any{len(part)}
		for _, v := range part {
			args = append(args, v.Fn, len(v.In))
			for _, x := range v.In {
				args = append(args, x)
			}
		}
		res, err := c.Eval(ctx, src, nil, args...).StringSlice()
		if err != nil {
			t.Fatalf("eval: %v", err)
		}
		for i, v := range part {
			got := strings.Split(res[i], ",")
			// Durations: the last output of try_consume and the only one
			// of time_until_available and retry_after.
			switch v.Fn {
			case "try_consume", "time_until_available", "retry_after":
				got[len(got)-1] = itoa(int64(durationFromMillis(got[len(got)-1])))
			}
			if strings.Join(got, ",") != strings.Join(v.Out, ",") {
				t.Errorf("vector %d: %s(%s) = %v, want %v", start+i, v.Fn, strings.Join(v.In, ", "), got, v.Out)
			}
		}
	}
	t.Logf("%d vectors identical", len(vectors))
}
