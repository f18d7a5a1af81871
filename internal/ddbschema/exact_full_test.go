package ddbschema

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// TestFullRungImpliesFull: every state a rung of the ladder admits is full
// by now as the refill computes it (the write sets the capacity less what
// it takes, which is exact only then), and a state one millitoken short of
// a rung's corner, refilled for exactly its k ms, is not: the bounds are
// the tightest the refill allows. The rungs double, as many as asked, up
// to the first at which the limit fills from empty.
func TestFullRungImpliesFull(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, p := range [][3]int64{
		{100_000, 100_000, 60_000}, {600_000, 600_000, 60_000}, {5_000_000_000, 5_000_000_000, 60_000},
		{1000, 1000, 3_600_000}, {7, 3, 11}, {1_000_000, 1_000_000, 1000}, {1000, 0, 60_000}, {2000, 1000, 0},
	} {
		cp, ra, rp := p[0], p[1], p[2]
		now := 1_700_000_000_000 + r.Int64N(1_000_000)
		var ks []int64
		fullRungs(now, 18, cp, ra, rp, func(rfMax, tkMin int64, exact bool) {
			k := now - rfMax
			ks = append(ks, k)
			for range 300 {
				rf := rfMax - r.Int64N(2*k+1)
				tk := tkMin + r.Int64N(cp+1)
				if exact {
					tk = tkMin
				}
				got, _ := bucketmath.Refill(tk, rf, now, cp, ra, rp)
				require.Equal(t, cp, got, "cp %d ra %d rp %d k %d: tk %d rf %d now %d", cp, ra, rp, k, tk, rf, now)
			}
			got, _ := bucketmath.Refill(tkMin-1, rfMax, now, cp, ra, rp)
			assert.Less(t, got, cp, "below the corner: cp %d ra %d rp %d k %d", cp, ra, rp, k)
			if exact {
				got, _ = bucketmath.Refill(cp+1, rfMax, now, cp, ra, rp)
				assert.Equal(t, cp+1, got, "a rung that refills nothing: above the capacity is not full")
			}
		})
		require.NotEmpty(t, ks)
		assert.EqualValues(t, 1, ks[0])
		for i := 1; i < len(ks); i++ {
			assert.Equal(t, 2*ks[i-1], ks[i], "cp %d ra %d rp %d: %v", cp, ra, rp, ks)
		}
		if ra > 0 && rp > 0 && bucketmath.GiveDelayMs(cp, ra, rp) <= 1<<17 {
			fill := bucketmath.GiveDelayMs(cp, ra, rp)
			last := ks[len(ks)-1]
			assert.True(t, last >= fill && last < 2*fill, "cp %d ra %d rp %d: the last rung %d, the fill %d", cp, ra, rp, last, fill)
		} else {
			assert.Len(t, ks, 18)
		}
	}
}

// TestExactInputFull: a Full write is conditioned on every limit and wcu
// being full by now (one disjunction over the rungs of their ladders), not
// on rf and the balances read, and sets wcu's balance. The read rung is
// the item as read (rf 1000, a minute before now: any balance of rpm is
// full by then).
func TestExactInputFull(t *testing.T) {
	t.Parallel()
	u := NewExactUpdates("tbl")
	w := ExactWrite{
		OldRefillMs: 1000, NewRefillMs: 61_000, NowMs: 61_000, Full: true,
		Limits: []ExactLimit{
			{Name: "rpm", OldMilli: 1000, NewMilli: 99_000, TakenMilli: 1000, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000, FullAtMs: 61_600},
		},
		WCU:    ExactWCU{TakenMilli: 1000, NewMilli: 999_000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000},
		HasWCU: true,
	}
	in := u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	assert.Equal(t, "SET rf = 61000, b_rpm_tk = 99000, b_rpm_ts = 99000, b_rpm_fa = 61600, b_rpm_fp = 100000000000001000000000060000, b_wcu_tk = 999000"+
		" ADD b_rpm_tc 1000, b_wcu_tc 1000", renderSpec(in.UpdateExpression, in))
	cond := renderSpec(in.ConditionExpression, in)
	assert.NotContains(t, cond, "rf = ")
	assert.NotContains(t, cond, "b_rpm_tk = ")
	// One disjunction over the rungs, each testing rf once and every
	// balance: rpm refills 1⅔ millitokens a ms (rung 1 allows 1 millitoken
	// short of full, rung 4 six); wcu one token a ms.
	assert.Contains(t, cond, "((rf <= 60999 AND b_rpm_tk >= 99999 AND b_wcu_tk >= 999000) OR (rf <= 60998 AND b_rpm_tk >= 99997 AND b_wcu_tk >= 998000) OR (rf <= 60996 AND b_rpm_tk >= 99994 AND b_wcu_tk >= 996000) OR")
	assert.Contains(t, cond, " OR (rf <= 59976 AND b_rpm_tk >= 98294 AND b_wcu_tk >= -24000) OR (rf <= 58952 AND b_rpm_tk >= 96587 AND b_wcu_tk >= -24000) OR",
		"wcu fills in a second: its last rung (1024 ms) tests it at the later ones; rpm's last 2048 ms, the most a rung looks back (maxRungMs)")
	assert.Contains(t, cond, " OR (rf <= 1000 AND (b_rpm_tk >= 0 OR b_rpm_tk >= 96587) AND (b_wcu_tk >= -59000000 OR b_wcu_tk >= -24000))) AND b_rpm_cp = 100000 AND b_rpm_ra = 100000 AND b_rpm_rp = 60000",
		"the rung of the item as read, last: each balance on its own read test or its last rung's")
	assert.Len(t, in.ExpressionAttributeValues, 13+13+12+1+3+4+2, "values: the rungs' rf (the one read and 12), rpm's bounds (the read's and 12), wcu's (the read's and 11), rf, rpm's balance, fa and taken, its parameters and signature, wcu's balance and taken")

	// Read 2 ms ago (a bucket written as fast as it fills): one rung
	// besides the item's as read; another shape.
	w.OldRefillMs = 60_998
	in = u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	cond = renderSpec(in.ConditionExpression, in)
	assert.Contains(t, cond, "((rf <= 60999 AND b_rpm_tk >= 99999 AND b_wcu_tk >= 999000) OR (rf <= 60998 AND (b_rpm_tk >= 99997 OR b_rpm_tk >= 99999) AND (b_wcu_tk >= 998000 OR b_wcu_tk >= 999000))) AND b_rpm_cp", cond)
	assert.Len(t, *u.templates.Load(), 2)

	// Read 1 ms ago: the rung of the item as read alone, in no parentheses
	// of its own (DynamoDB refuses redundant ones).
	w.OldRefillMs = 60_999
	in = u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	cond = renderSpec(in.ConditionExpression, in)
	assert.True(t, strings.HasPrefix(cond, "(rf <= 60999 AND b_rpm_tk >= 99999 AND b_wcu_tk >= 999000) AND b_rpm_cp"), cond)
}
