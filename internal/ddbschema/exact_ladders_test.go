package ddbschema

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store/bucketmath"
)

// TestFullLaddersEqualEachLimitsLadder: the condition of a Full write, one
// disjunction over the rungs, holds on exactly the items on which every
// limit's own ladder (FullLadder: the read rung, then the rungs of
// fullRungs) holds. The write's condition expression, as sent, is
// evaluated on random items around the rungs' corners (balances a
// millitoken either side, at, above and far below the capacity; rf either
// side of each rung's bound), for random limits and times since the read.
func TestFullLaddersEqualEachLimitsLadder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	params := [][3]int64{
		{100_000, 100_000, 60_000}, {600_000, 600_000, 60_000}, {5_000_000_000, 5_000_000_000, 60_000},
		{1000, 1000, 3_600_000}, {7, 3, 11}, {1_000_000, 1_000_000, 1000}, {1000, 0, 60_000}, {2000, 1000, 0},
		{10_000, 10_000, 10}, {1_000_000_000, 1_000_000_000, 60_000},
	}
	u := NewExactUpdates("tbl")
	held, refused := 0, 0
	for range 400 {
		now := 1_700_000_000_000 + r.Int64N(1_000_000)
		elapsed := []int64{1, 2, 3, 5, 9, 100, 777, 2048, 5000, 90_000}[r.IntN(10)]
		w := ExactWrite{OldRefillMs: now - elapsed, NewRefillMs: now, NowMs: now, Full: true, HasWCU: true}
		for i := range 1 + r.IntN(4) {
			p := params[r.IntN(len(params))]
			w.Limits = append(w.Limits, ExactLimit{Name: fmt.Sprintf("l%d", i), NewMilli: 1, CapacityMilli: p[0], RefillAmountMilli: p[1], RefillPeriodMs: p[2]})
		}
		p := params[r.IntN(len(params))]
		w.WCU = ExactWCU{NewMilli: 1, CapacityMilli: p[0], RefillAmountMilli: p[1], RefillPeriodMs: p[2]}
		in := u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
		type lim struct {
			attr       string
			cp, ra, rp int64
		}
		lims := []lim{{BucketAttr(WCULimitName, FieldTokens), w.WCU.CapacityMilli, w.WCU.RefillAmountMilli, w.WCU.RefillPeriodMs}}
		for _, l := range w.Limits {
			lims = append(lims, lim{BucketAttr(l.Name, FieldTokens), l.CapacityMilli, l.RefillAmountMilli, l.RefillPeriodMs})
		}
		for range 40 {
			item := map[string]int64{}
			for _, l := range w.Limits {
				item[BucketAttr(l.Name, FieldCapacity)] = l.CapacityMilli
				item[BucketAttr(l.Name, FieldRefillAmount)] = l.RefillAmountMilli
				item[BucketAttr(l.Name, FieldRefillPeriod)] = l.RefillPeriodMs
			}
			// rf near one of the rungs' bounds (or the read's)
			k := int64(1) << r.IntN(13)
			rf := now - k + r.Int64N(3) - 1
			if r.IntN(4) == 0 {
				rf = w.OldRefillMs + r.Int64N(3) - 1
			}
			item[AttrRefill] = rf
			for _, l := range lims {
				add, _ := bucketmath.Refill(0, rf, now, bucketmath.AddSat(l.cp, 0), l.ra, l.rp)
				tk := []int64{l.cp, l.cp + 1, l.cp - 1, l.cp - add, l.cp - add - 1, l.cp - add + 1, -l.cp, l.cp - r.Int64N(l.cp+1)}[r.IntN(8)]
				item[l.attr] = tk
			}
			want := true
			for _, l := range lims {
				ok := false
				FullLadder(w.OldRefillMs, now, l.cp, l.ra, l.rp, func(rfMax, tkMin int64, exact bool) {
					if rf <= rfMax && (tk(item, l.attr) >= tkMin && !exact || exact && tk(item, l.attr) == tkMin) {
						ok = true
					}
				})
				want = want && ok
			}
			got := evalCond(t, *in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, item)
			require.Equal(t, want, got, "elapsed %d rf %d item %v\n%s", elapsed, now-rf, item, renderedCond{in})
			if want {
				held++
			} else {
				refused++
			}
		}
	}
	require.Greater(t, held, 1000, "items full")
	require.Greater(t, refused, 1000, "items not full")
}

func tk(item map[string]int64, attr string) int64 { return item[attr] }

// renderedCond prints an input's condition with its names and values in
// place, when a failed assertion formats its message (and only then: the
// rendering is most of the cost of a check).
type renderedCond struct{ in *dynamodb.UpdateItemInput }

func (r renderedCond) String() string { return renderSpec(r.in.ConditionExpression, r.in) }

// evalCond evaluates a condition expression of the forms the exact writes
// use (AND, OR, NOT, parentheses, comparisons of an attribute with a
// number or a binary value, attribute_exists, attribute_not_exists) on
// item, whose attributes are numbers; a comparison with an attribute the
// item lacks is false.
func evalCond(t *testing.T, expr string, names map[string]string, values map[string]types.AttributeValue, item map[string]int64) bool {
	t.Helper()
	toks := strings.Fields(strings.NewReplacer("(", " ( ", ")", " ) ").Replace(expr))
	pos := 0
	next := func() string { s := toks[pos]; pos++; return s }
	peek := func() string {
		if pos < len(toks) {
			return toks[pos]
		}
		return ""
	}
	num := func(tok string) (int64, bool) {
		if strings.HasPrefix(tok, "#") {
			v, ok := item[names[tok]]
			return v, ok
		}
		n, ok := values[tok].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		require.NoError(t, err)
		return v, true
	}
	var or func() bool
	primary := func() bool {
		switch tok := next(); tok {
		case "(":
			v := or()
			require.Equal(t, ")", next())
			return v
		case "NOT":
			return !primaryNot(next, or)
		case "attribute_exists", "attribute_not_exists":
			require.Equal(t, "(", next())
			_, ok := item[names[next()]]
			require.Equal(t, ")", next())
			return ok == (tok == "attribute_exists")
		default:
			op, rhs := next(), next()
			a, okA := num(tok)
			b, okB := num(rhs)
			if !okA || !okB {
				return false
			}
			switch op {
			case "<=":
				return a <= b
			case ">=":
				return a >= b
			case "=":
				return a == b
			case ">":
				return a > b
			case "<":
				return a < b
			case "<>":
				return a != b
			}
			t.Fatalf("operator %q", op)
			return false
		}
	}
	and := func() bool {
		v := primary()
		for peek() == "AND" {
			next()
			v = primary() && v
		}
		return v
	}
	or = func() bool {
		v := and()
		for peek() == "OR" {
			next()
			v = and() || v
		}
		return v
	}
	v := or()
	require.Equal(t, len(toks), pos, "trailing tokens in %s", expr)
	return v
}

// primaryNot evaluates the parenthesised operand of a NOT.
func primaryNot(next func() string, or func() bool) bool {
	if tok := next(); tok != "(" {
		panic("NOT without parentheses: " + tok)
	}
	v := or()
	if tok := next(); tok != ")" {
		panic("unbalanced NOT: " + tok)
	}
	return v
}
