package ddbschema

import (
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var specPlaceholder = regexp.MustCompile(`[#:][av][0-9]+|#wid[0-9]|:wid`)

// renderSpec writes an expression of in with its names and values in place.
func renderSpec(expr *string, in *dynamodb.UpdateItemInput) string {
	return specPlaceholder.ReplaceAllStringFunc(aws.ToString(expr), func(p string) string {
		if n, ok := in.ExpressionAttributeNames[p]; ok {
			return n
		}
		switch v := in.ExpressionAttributeValues[p].(type) {
		case *types.AttributeValueMemberN:
			return v.Value
		case *types.AttributeValueMemberB:
			return "ID"
		}
		return "?" + p
	})
}

// TestSpeculativeInput: the speculative write of two limits and three
// amounts (positive, zero, negative), rendered. A positive amount is
// conditioned on its limit's exact state (fa after now, ts = tk, fp its
// parameters) and moves fa by the time the take delays it (rpm: 1 token
// at 10/min, 6 s; tpm: 100 at 5,000/min, 1.2 s); a negative one moves ts
// and removes fa. It carries its write identifier (ID): the slots shift,
// and the write is refused when one holds it.
func TestSpeculativeInput(t *testing.T) {
	u := NewSpeculativeUpdates("tbl")
	limits := []SpecLimit{{"rpm", 10_000, 10_000, 60_000}, {"tpm", 5_000_000, 5_000_000, 60_000}}
	amounts := []SpecAmount{{"back", -3000}, {"rpm", 1000}, {"tpm", 100_000}, {"x", 0}}
	require.True(t, Exact(limits, amounts))
	require.False(t, Exact(limits[:1], amounts), "tpm's parameters unknown")
	in := u.Input(BucketKeyValue("ns", "e", "r", 2), limits, amounts, 1_700_000_000_999, 7)
	assert.Equal(t, ringSet+" ADD b_back_tk 3000, b_back_ts 3000, b_back_tc -3000, b_rpm_fa 6000, b_rpm_tk -1000, b_rpm_ts -1000, b_rpm_tc 1000,"+
		" b_tpm_fa 1200, b_tpm_tk -100000, b_tpm_ts -100000, b_tpm_tc 100000, b_wcu_tk -1000, b_wcu_tc 1000 REMOVE b_back_fa",
		renderSpec(in.UpdateExpression, in))
	assert.Equal(t, "attribute_exists(PK) AND b_rpm_cp = 10000 AND b_rpm_ra = 10000 AND b_rpm_rp = 60000"+
		" AND b_tpm_cp = 5000000 AND b_tpm_ra = 5000000 AND b_tpm_rp = 60000"+
		" AND attribute_exists(b_back_tk)"+
		" AND b_rpm_tk >= 1000 AND (b_rpm_fa > 1700000000999 OR rf >= 1700000000999) AND b_rpm_tk = b_rpm_ts AND b_rpm_fp = 10000000000000100000000060000"+
		" AND b_tpm_tk >= 100000 AND (b_tpm_fa > 1700000000999 OR rf >= 1700000000999) AND b_tpm_tk = b_tpm_ts AND b_tpm_fp = 5000000000000050000000000060000"+
		" AND attribute_exists(b_x_tk) AND b_wcu_tk >= 1000 AND (attribute_not_exists(ttl) OR ttl > 1700000000) AND "+ringCond, renderSpec(in.ConditionExpression, in))
	assert.Equal(t, "tbl", aws.ToString(in.TableName))
	assert.Equal(t, types.ReturnValueAllNew, in.ReturnValues)
	assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, in.ReturnValuesOnConditionCheckFailure)
	assert.Equal(t, BucketPrimaryKey("ns", "e", "r", 2), in.Key)
	assert.Equal(t, WriteID(7).Value(), in.ExpressionAttributeValues[":wid"])

	// The same shape with other amounts and another second: the template
	// is reused, the values are the request's.
	in2 := u.Input(BucketKeyValue("ns", "f", "r", 0), limits, []SpecAmount{{"back", -1}, {"rpm", 2000}, {"tpm", 7}, {"x", 0}}, 1_700_000_001_000, 8)
	assert.Same(t, in.ConditionExpression, in2.ConditionExpression)
	assert.Equal(t, ringSet+" ADD b_back_tk 1, b_back_ts 1, b_back_tc -1, b_rpm_fa 12000, b_rpm_tk -2000, b_rpm_ts -2000, b_rpm_tc 2000,"+
		" b_tpm_fa 0, b_tpm_tk -7, b_tpm_ts -7, b_tpm_tc 7, b_wcu_tk -1000, b_wcu_tc 1000 REMOVE b_back_fa",
		renderSpec(in2.UpdateExpression, in2))
	assert.Contains(t, renderSpec(in2.ConditionExpression, in2), "b_tpm_tk >= 7 AND (b_tpm_fa > 1700000001000 OR rf >= 1700000001000) AND")
	assert.Contains(t, renderSpec(in2.ConditionExpression, in2), "ttl > 1700000001)")
	// The first request's values did not change.
	assert.Contains(t, renderSpec(in.ConditionExpression, in), "b_tpm_tk >= 100000 AND")
	assert.Equal(t, WriteID(7).Value(), in.ExpressionAttributeValues[":wid"])

	// Other parameters are another shape.
	in3 := u.Input(BucketKeyValue("ns", "e", "r", 0), []SpecLimit{{"rpm", 20_000, 10_000, 60_000}}, amounts[1:2], 1000, 9)
	assert.Contains(t, renderSpec(in3.ConditionExpression, in3), "b_rpm_cp = 20000 AND")
	assert.Len(t, *u.templates.Load(), 2)
}

// TestSpeculativeInputConcurrent builds inputs of one shape with different
// amounts from many goroutines (run with -race): each gets its own.
func TestSpeculativeInputConcurrent(t *testing.T) {
	u := NewSpeculativeUpdates("tbl")
	limits := []SpecLimit{{"tpm", 1 << 40, 1 << 40, 60_000}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				m := int64(1 + g*1000 + i)
				in := u.Input(BucketKeyValue("ns", "e", "r", 0), limits, []SpecAmount{{"tpm", m}}, int64(i), NewWriteID())
				if got := renderSpec(in.UpdateExpression, in); !assert.Contains(t, got, "b_tpm_tc "+itoa(m)+",") {
					return
				}
			}
		})
	}
	wg.Wait()
}

// ringSet and ringCond are the write identifier's clauses, rendered.
const (
	ringSet  = "SET wid3 = if_not_exists(wid2, ID), wid2 = if_not_exists(wid1, ID), wid1 = if_not_exists(wid0, ID), wid0 = ID"
	ringCond = "NOT (wid0 = ID OR wid1 = ID OR wid2 = ID OR wid3 = ID)"
)

func itoa(n int64) string { return N(n).(*types.AttributeValueMemberN).Value }

// TestSpeculativeInputAllocs: a request of a known shape whose amounts and
// second repeat costs the input, its value map, its key and its write
// identifier.
func TestSpeculativeInputAllocs(t *testing.T) {
	u := NewSpeculativeUpdates("tbl")
	limits := []SpecLimit{{"rpm", 10_000, 10_000, 60_000}, {"tpm", 5_000_000, 5_000_000, 60_000}}
	amounts := []SpecAmount{{"rpm", 1000}, {"tpm", 100_000}}
	u.Input(BucketKeyValue("ns", "e", "r", 0), limits, amounts, 5, 1)
	allocs := testing.AllocsPerRun(100, func() {
		u.Input(BucketKeyValue("ns", "e", "r", 0), limits, amounts, 5, 1)
	})
	require.LessOrEqual(t, allocs, 11.0)
	t.Logf("%.0f allocations", allocs)
}

// TestSpeculativeInputLongPeriod: a limit of LongRefillPeriodMs (one
// token a century, a generation of in-flight slots) is signed, and its
// take is conditioned on fa after now or on rf within QuietMs (36 days)
// of now: less than a millitoken has refilled since, so a full limit is
// taken from too. Its take delays fa by a century a token.
func TestSpeculativeInputLongPeriod(t *testing.T) {
	u := NewSpeculativeUpdates("tbl")
	limits := []SpecLimit{{"calls.slots.9", 8_000, 1_000, LongRefillPeriodMs}}
	amounts := []SpecAmount{{"calls.slots.9", 1000}}
	require.True(t, Exact(limits, amounts))
	require.Equal(t, int64(3_155_759_999), QuietMs(1_000, LongRefillPeriodMs))
	require.Equal(t, int64(0), QuietMs(1_000, 60_000))
	const now = 1_700_000_000_999
	in := u.Input(BucketKeyValue("ns", "e", "r", 0), limits, amounts, now, 7)
	assert.Contains(t, renderSpec(in.ConditionExpression, in),
		" AND b_calls.slots.9_tk >= 1000 AND (b_calls.slots.9_fa > 1700000000999 OR rf >= 1696844241000) AND b_calls.slots.9_tk = b_calls.slots.9_ts AND b_calls.slots.9_fp = 8000000000000010009999999999")
	assert.Contains(t, renderSpec(in.UpdateExpression, in), "b_calls.slots.9_fa 3155760000000")
}

// TestTemplatesKeptPastTheBound: the speculative and exact writes of one
// in-flight slot generation after another (each a shape of its own, as
// every half slot TTL brings) keep being built from kept templates past
// maxSpecTemplates shapes: a full cache starts afresh rather than
// keeping its first shapes only, and never holds more than the bound.
func TestTemplatesKeptPastTheBound(t *testing.T) {
	spec, exact := NewSpeculativeUpdates("tbl"), NewExactUpdates("tbl")
	key := BucketKeyValue("ns", "e", "r", 0)
	for gen := range 3*maxSpecTemplates + 7 {
		name := "calls.slots." + strconv.Itoa(gen)
		limits := []SpecLimit{{name, 8000, 1000, LongRefillPeriodMs}}
		amounts := []SpecAmount{{name, 1000}}
		in := spec.Input(key, limits, amounts, 1_700_000_000_000, 1)
		again := spec.Input(key, limits, amounts, 1_700_000_000_001, 2)
		require.Same(t, in.ConditionExpression, again.ConditionExpression, "generation %d: its template is kept", gen)
		require.LessOrEqual(t, len(*spec.templates.Load()), maxSpecTemplates)

		w := ExactWrite{OldRefillMs: 1000, NewRefillMs: 1000, Limits: []ExactLimit{{Name: name, OldMilli: 8000, NewMilli: 7000, TakenMilli: 1000,
			CapacityMilli: 8000, RefillAmountMilli: 1000, RefillPeriodMs: LongRefillPeriodMs}}}
		ein := exact.Input(key, &w)
		w.Limits[0].NewMilli = 6000
		require.Same(t, ein.ConditionExpression, exact.Input(key, &w).ConditionExpression, "generation %d: its exact template is kept", gen)
		require.LessOrEqual(t, len(*exact.templates.Load()), maxSpecTemplates)
	}
}
