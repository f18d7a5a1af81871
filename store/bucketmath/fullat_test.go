package bucketmath

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFullAtMs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		tk, rf, cp, ra, rp int64
		want               int64
	}{
		{"one token short of 100/min", 99_000, 1_000, 100_000, 100_000, 60_000, 1_600},
		{"rounded up", 99_999, 0, 100_000, 100_000, 60_000, 1}, // 0.6 ms
		{"empty", 0, 5, 100_000, 100_000, 60_000, 60_005},
		{"in debt", -100_000, 0, 100_000, 100_000, 60_000, 120_000},
		{"full", 100_000, 7, 100_000, 100_000, 60_000, math.MinInt64},
		{"above capacity", 100_001, 7, 100_000, 100_000, 60_000, math.MinInt64},
		{"no refill amount", 0, 7, 100_000, 0, 60_000, math.MaxInt64},
		{"no refill period", 0, 7, 100_000, 100_000, 0, math.MaxInt64},
		{"saturates", math.MinInt64, math.MaxInt64 - 5, math.MaxInt64, 1, math.MaxInt64, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, FullAtMs(tc.tk, tc.rf, tc.cp, tc.ra, tc.rp))
		})
	}
}

// TestFullAtMsIsWhereRefillCaps checks the definition on random buckets: at
// FullAtMs − 1 the refill is below the capacity, at FullAtMs it reaches it;
// and the delays keep a lower bound of it through takes and give-backs.
func TestFullAtMsIsWhereRefillCaps(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(max int64) int64 { return r.Int64N(max) + 1 }
	for range 20_000 {
		var cp, ra, rp int64
		switch r.IntN(3) {
		case 0: // small
			cp, ra, rp = pick(1_000_000), pick(1_000_000), pick(100_000)
		case 1: // LLM-sized
			cp, ra, rp = pick(1e13), pick(1e13), pick(1e8)
		default: // extreme
			cp, ra, rp = pick(math.MaxInt64-1), pick(math.MaxInt64-1), pick(math.MaxInt64-1)
		}
		tk := cp - pick(cp) - r.Int64N(1_000_000)
		rf := r.Int64N(1 << 50)
		fa := FullAtMs(tk, rf, cp, ra, rp)
		require.Greater(t, fa, rf, "tk %d < cp %d", tk, cp)
		if fa < math.MaxInt64 {
			got, _ := RefillExact(tk, rf, fa, cp, ra, rp)
			require.Equal(t, 0, got.Cmp(Int128From(cp)), "at FullAtMs %d: %+v, want cp %d (tk %d rf %d ra %d rp %d)", fa, got, cp, tk, rf, ra, rp)
			got, _ = RefillExact(tk, rf, fa-1, cp, ra, rp)
			require.Equal(t, -1, got.Cmp(Int128From(cp)), "before FullAtMs %d: %+v, want < cp %d", fa, got, cp)
		}
		a := pick(cp)
		if after := FullAtMs(tk-a, rf, cp, ra, rp); tk-a < tk && fa < math.MaxInt64 && after < math.MaxInt64 {
			require.GreaterOrEqual(t, after, AddSat(fa, TakeDelayMs(a, ra, rp)), "take %d", a)
		}
		if g := pick(cp); tk+g < cp && fa < math.MaxInt64 {
			require.GreaterOrEqual(t, FullAtMs(tk+g, rf, cp, ra, rp), fa-GiveDelayMs(g, ra, rp), "give %d", g)
		}
	}
}

func TestDelays(t *testing.T) {
	t.Parallel()
	assert.Equal(t, int64(600), TakeDelayMs(1000, 100_000, 60_000))
	assert.Equal(t, int64(0), TakeDelayMs(500_000, 1e12, 60_000)) // 0.03 ms
	assert.Equal(t, int64(1), GiveDelayMs(500_000, 1e12, 60_000))
	assert.Equal(t, int64(600), GiveDelayMs(1000, 100_000, 60_000))
	assert.Equal(t, int64(0), TakeDelayMs(-5, 1, 1))
	assert.Equal(t, int64(0), GiveDelayMs(0, 1, 1))
	assert.Equal(t, int64(math.MaxInt64), GiveDelayMs(5, 0, 1))
	assert.Equal(t, int64(math.MaxInt64), TakeDelayMs(math.MaxInt64, 1, math.MaxInt64))
}
