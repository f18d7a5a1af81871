package limiter

import (
	"bufio"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// The bucket math's golden vectors: inputs and outputs of every function
// of bucket.go, in testdata/bucket_vectors.json, for other
// implementations of the same math (the Redis backend's Lua scripts check
// themselves against them). The inputs are the fuzz seeds, the committed
// fuzz corpus and a fixed pseudo-random sample around the int64 edges; the
// outputs are this package's, which bucket_test.go checks against the
// original's numbers.

const vectorsFile = "testdata/bucket_vectors.json"

// bucketVector is one call: fn, its int64 inputs and its outputs, all as
// decimal strings (durations in nanoseconds, booleans as 0 or 1).
type bucketVector struct {
	Fn  string   `json:"fn"`
	In  []string `json:"in"`
	Out []string `json:"out"`
}

func strs(v ...int64) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.FormatInt(x, 10)
	}
	return out
}

func b01(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// vectorOf runs fn on in (a bucket's six numbers, then an amount where fn
// takes one).
func vectorOf(fn string, in []int64) bucketVector {
	v := bucketVector{Fn: fn, In: strs(in...)}
	if fn == "retry_after" {
		v.Out = strs(int64(bucketmath.RetryAfter(in[0], in[1], in[2])))
		return v
	}
	s := store.BucketState{TokensMilli: in[0], LastRefillMs: in[1], CapacityMilli: in[3], RefillAmountMilli: in[4], RefillPeriodMs: in[5]}
	now := in[2]
	switch fn {
	case "refill":
		tk, last := bucketmath.Refill(in[0], in[1], now, in[3], in[4], in[5])
		v.Out = strs(tk, last)
	case "try_consume":
		r := tryConsume(s, in[6], now)
		v.Out = strs(b01(r.Success), r.NewTokensMilli, r.NewLastRefillMs, r.Available, int64(r.RetryAfter))
	case "force_consume":
		tk, last := forceConsume(s, in[6], now)
		v.Out = strs(tk, last)
	case "available":
		v.Out = strs(calculateAvailable(s, now))
	case "time_until_available":
		v.Out = strs(int64(calculateTimeUntilAvailable(s, in[6], now)))
	}
	return v
}

// corpusInputs reads the int64 arguments of every committed corpus entry
// of fuzz target name.
func corpusInputs(t *testing.T, name string) [][]int64 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
	var out [][]int64
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		var in []int64
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if x, ok := strings.CutPrefix(sc.Text(), "int64("); ok {
				n, err := strconv.ParseInt(strings.TrimSuffix(x, ")"), 10, 64)
				require.NoError(t, err, "%s: %v", f, err)
				in = append(in, n)
			}
		}
		fh.Close()
		out = append(out, in)
	}
	return out
}

// bucketVectors computes every vector.
func bucketVectors(t *testing.T) []bucketVector {
	var out []bucketVector
	for _, s := range bucketSeeds {
		in := s[:]
		out = append(out, vectorOf("refill", in), vectorOf("available", in))
		for _, n := range amountSeeds {
			in := append(s[:], n)
			out = append(out, vectorOf("try_consume", in), vectorOf("force_consume", in), vectorOf("time_until_available", in))
		}
	}
	for _, c := range []struct{ fuzz, fn string }{
		{"FuzzRefillBucket", "refill"}, {"FuzzTryConsume", "try_consume"}, {"FuzzForceConsume", "force_consume"},
		{"FuzzCalculateAvailable", "available"}, {"FuzzCalculateTimeUntilAvailable", "time_until_available"},
		{"FuzzCalculateRetryAfter", "retry_after"},
	} {
		for _, in := range corpusInputs(t, c.fuzz) {
			out = append(out, vectorOf(c.fn, in))
		}
	}
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	for _, in := range [][]int64{
		{0, 100_000_000, 60_000}, {10_000_000, 100_000_000, 60_000}, {11_000, 10_000, 60_000}, {1, 3, 1000},
		{1 << 40, 1 << 40, 1 << 40}, {maxMs - 1, 1, 1}, {maxMs, 1, 1}, {math.MaxInt64, 1, math.MaxInt64},
		{1, 0, 60_000}, {1000, 1000, 0}, {1000, -1000, 1000}, {math.MaxInt64, -1, math.MaxInt64},
	} {
		out = append(out, vectorOf("retry_after", in))
	}
	// Around 2^53, where a Lua implementation on doubles must switch to
	// exact integers: values, products (elapsed × amount split into whole
	// periods and a remainder, deficit × period) and amounts × 1000 just
	// below and at 2^53.
	const p53 = int64(1) << 53
	for _, in := range [][]int64{
		{p53 - 1, 0, 1, p53 - 1, 1000, 1000, 1}, {p53, 0, 1, p53, 1000, 1000, 1},
		{0, 0, 1 << 20, p53 - 1, 1<<33 - 1, 1, 0}, {0, 0, 1 << 20, p53 - 1, 1 << 33, 1, 0},
		{0, 0, 1<<26 - 1, p53 - 1, 1<<26 - 1, 1 << 26, 0}, {0, 0, 1<<27 - 1, p53 - 1, 1<<27 - 1, 1 << 27, 0},
		{0, 5, 5, 1000, 1, 1<<43 - 1, 1 << 40}, {0, 5, 5, 1000, 1, 1 << 43, 1 << 40},
		{0, 5, 5, 1000, 1000, 60_000, p53/1000 - 1}, {0, 5, 5, 1000, 1000, 60_000, p53/1000 + 1},
		{-p53 + 1, 0, 1, 1000, 1000, 60_000, 1}, {1000, -p53 + 1, -p53 + 2, 1000, 3, 7, 1},
	} {
		out = append(out, vectorOf("refill", in[:6]), vectorOf("available", in[:6]), vectorOf("try_consume", in),
			vectorOf("force_consume", in), vectorOf("time_until_available", in), vectorOf("retry_after", []int64{in[0], in[4], in[5]}))
	}
	// A fixed sample: realistic limits, and values near the int64 edges.
	rng := rand.New(rand.NewPCG(16, 2026))
	pick := func() int64 {
		switch rng.IntN(6) {
		case 0:
			return math.MaxInt64 - rng.Int64N(1000)
		case 1:
			return math.MinInt64 + rng.Int64N(1000)
		case 2:
			return rng.Int64N(2_000_000) - 1_000_000
		case 3:
			return rng.Int64()
		case 4:
			return -rng.Int64()
		}
		return rng.Int64N(1 << 50)
	}
	for range 300 {
		now := int64(1_767_225_600_000) + rng.Int64N(30*24*3600*1000)
		capacity := (1 + rng.Int64N(10_000_000)) * 1000
		in := []int64{rng.Int64N(2*capacity) - capacity, now - rng.Int64N(20*24*3600*1000), now, capacity,
			(1 + rng.Int64N(10_000_000)) * 1000, []int64{1000, 60_000, 3_600_000, 86_400_000}[rng.IntN(4)], rng.Int64N(100_000)}
		out = append(out, vectorOf("try_consume", in), vectorOf("force_consume", in), vectorOf("time_until_available", in))
		edge := []int64{pick(), pick(), pick(), pick(), pick(), pick(), pick()}
		out = append(out, vectorOf("refill", edge[:6]), vectorOf("try_consume", edge), vectorOf("time_until_available", edge))
		out = append(out, vectorOf("retry_after", edge[:3]))
	}
	return out
}

// TestBucketVectorsGolden: testdata/bucket_vectors.json holds exactly what
// this package computes (go test -run TestBucketVectorsGolden -update
// rewrites it).
func TestBucketVectorsGolden(t *testing.T) {
	// One vector per line.
	got := []byte("[\n")
	vs := bucketVectors(t)
	for i, v := range vs {
		line, err := json.Marshal(v)
		require.NoError(t, err)
		got = append(got, line...)
		if i < len(vs)-1 {
			got = append(got, ',')
		}
		got = append(got, '\n')
	}
	got = append(got, "]\n"...)
	if schemaUpdateGolden() {
		err := os.WriteFile(vectorsFile, got, 0o644)
		require.NoError(t, err)
		return
	}
	want, err := os.ReadFile(vectorsFile)
	require.NoError(t, err, "%v (run with -update to create it)", err)
	require.Equal(t, string(want), string(got), "%s differs from the bucket math (run with -update after an intended change)", vectorsFile)
}
