package bucketmath

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDivModFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		a     Int128
		d     int64
		wantQ Int128
		wantR int64
	}{
		{"positive", Int128From(7), 2, Int128From(3), 1},
		{"negative dividend", Int128From(-7), 2, Int128From(-4), 1},
		{"negative divisor", Int128From(7), -2, Int128From(-4), -1},
		{"both negative", Int128From(-7), -2, Int128From(3), -1},
		{"exact negative", Int128From(-1500), 1000, Int128From(-2), 500},
		{"zero", Int128{}, -3, Int128{}, 0},
		{"max by one", maxInt128, 1, maxInt128, 0},
		{"min by one", minInt128, 1, minInt128, 0},
		// −2^127 // 2^63 = −2^64.
		{"min by MinInt64", minInt128, math.MinInt64, Int128{hi: 1}, 0},
		// (2^127 − 1) // −2 = −2^126 (floor of −2^126 + 0.5 ... − 1).
		{"max by minus two", maxInt128, -2, Int128{hi: 0xC000000000000000}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, r := DivModFloor(tc.a, tc.d)
			assert.Equal(t, tc.wantQ, q, "DivModFloor(%+v, %d) quotient", tc.a, tc.d)
			assert.Equal(t, tc.wantR, r, "DivModFloor(%+v, %d) remainder", tc.a, tc.d)
		})
	}
}

func TestMulInt128(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		a      Int128
		b      int64
		want   Int128
		wantOK bool
	}{
		{"small", Int128From(-3), 4, Int128From(-12), true},
		{"int64 squared", Int128From(math.MinInt64), math.MinInt64, Int128{hi: 1 << 62}, true},
		{"min by one", minInt128, 1, minInt128, true},
		{"min by minus one overflows", minInt128, -1, Int128{}, false},
		{"max by minus one", maxInt128, -1, minInt128.Add(Int128From(1)), true},
		{"max by two overflows", maxInt128, 2, Int128{}, false},
		// 2^126 × −2 = −2^127 exactly fits.
		{"exactly min", Int128{hi: 1 << 62}, -2, minInt128, true},
		{"exactly 2^127 overflows", Int128{hi: 1 << 62}, 2, Int128{}, false},
		{"zero", minInt128, 0, Int128{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := MulInt128(tc.a, tc.b)
			assert.Equal(t, tc.want, got, "MulInt128(%+v, %d)", tc.a, tc.b)
			assert.Equal(t, tc.wantOK, ok, "MulInt128(%+v, %d) ok", tc.a, tc.b)
		})
	}
}
