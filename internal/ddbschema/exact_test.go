package ddbschema

import (
	"fmt"
	"math"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParamsSig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cp, ra, rp int64
		want       string
		ok         bool
	}{
		{100_000, 100_000, 60_000, "100000000000001000000000060000", true},
		{1, 1, 1, "1000000000000010000000001", true},
		{99_999_999_999_999, 99_999_999_999_998, 9_999_999_998, "99999999999999999999999999989999999998", true}, // 38 digits
		{1, 1, 9_999_999_999, "", false},                                                                        // the code of LongRefillPeriodMs, not a period of its own
		{8_000, 1_000, LongRefillPeriodMs, "8000000000000010009999999999", true},
		{1, 1, LongRefillPeriodMs + 1, "", false},
		{100_000_000_000_000, 1, 1, "", false},
		{1, 100_000_000_000_000, 1, "", false},
		{1, 1, 10_000_000_000, "", false},
		{0, 1, 1, "", false},
		{1, -1, 1, "", false},
		{1, 1, 0, "", false},
	} {
		got, ok := ParamsSig(tc.cp, tc.ra, tc.rp)
		assert.Equal(t, tc.ok, ok, "%+v", tc)
		assert.Equal(t, tc.want, got, "%+v", tc)
	}
	// Distinct parameters, distinct signatures: the widths keep the fields
	// apart.
	a, _ := ParamsSig(1, 10, 100)
	b, _ := ParamsSig(10, 1, 100)
	assert.NotEqual(t, a, b)
}

// TestBucketExactStateLenient: the exact state is a hint. A value beyond
// int64 saturates, one that is not an integer reads as absent (the
// speculative write then refuses the limit), and neither makes the item
// unreadable; the limit's own fields stay strict.
func TestBucketExactStateLenient(t *testing.T) {
	t.Parallel()
	item := BucketItem(Bucket{Namespace: "ns", EntityID: "e", Resource: "r", RefillMs: 1000, Limits: []BucketLimit{
		{Name: "rpm", TokensMilli: 1000, CapacityMilli: 2000, RefillAmountMilli: 2000, RefillPeriodMs: 1000},
	}})
	item["b_rpm_fa"] = &types.AttributeValueMemberN{Value: "-99999999999999999999999"}
	item["b_rpm_ts"] = &types.AttributeValueMemberN{Value: "1.5"}
	b, err := BucketFromItem(item)
	require.NoError(t, err)
	l, _ := b.Limit("rpm")
	assert.Equal(t, int64(math.MinInt64), l.FullAtMs)
	assert.True(t, l.HasFullAt)
	assert.False(t, l.HasShadow)
	assert.False(t, l.ExactValid())

	item["b_rpm_ts"] = &types.AttributeValueMemberN{Value: "999"}
	b, _ = BucketFromItem(item)
	l, _ = b.Limit("rpm")
	assert.False(t, l.ExactValid(), "ts differs from tk")
	item["b_rpm_ts"] = &types.AttributeValueMemberN{Value: "1000"}
	item["b_rpm_fp"] = &types.AttributeValueMemberN{Value: "3000000000000020000000001000"}
	b, _ = BucketFromItem(item)
	l, _ = b.Limit("rpm")
	assert.False(t, l.ExactValid(), "fp of other parameters")
	delete(item, "b_rpm_fp")
	b, _ = BucketFromItem(item)
	l, _ = b.Limit("rpm")
	assert.False(t, l.ExactValid(), "no fp")

	item["b_rpm_tk"] = &types.AttributeValueMemberN{Value: "1.5"}
	_, err = BucketFromItem(item)
	assert.Error(t, err, "a malformed balance is an error")
}

// TestExactInput: the exact write of a bucket whose limit rpm may be full,
// refilled to now: every limit conditioned on its balance and parameters
// as read and set (tk, ts, fa, fp), rf moved, wcu refilled less a token;
// and one that takes without refilling.
func TestExactInput(t *testing.T) {
	u := NewExactUpdates("tbl")
	w := ExactWrite{
		OldRefillMs: 1000, NewRefillMs: 61_000, NowMs: 61_000, TTLCheck: true,
		Limits: []ExactLimit{
			{Name: "rpm", OldMilli: 1000, NewMilli: 99_000, TakenMilli: 1000, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000, FullAtMs: 61_600},
			{Name: "tpm", OldMilli: 5, NewMilli: 1_000_005, CapacityMilli: 1e13, RefillAmountMilli: 1e6, RefillPeriodMs: 60_000, FullAtMs: 1 << 40},
			{Name: "z", OldMilli: 1, NewMilli: 2, CapacityMilli: 1e15, RefillAmountMilli: 1, RefillPeriodMs: 1, FullAtMs: 3},
		},
		Params: []SpecLimit{{"q", 1, 2, 3}},
		WCU:    ExactWCU{DeltaMilli: 999_000 - 1000, TakenMilli: 1000, NeedMilli: 1000 - 999_000, HasNeed: true}, HasWCU: true,
	}
	in := u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	assert.Equal(t, "SET rf = 61000, b_rpm_tk = 99000, b_rpm_ts = 99000, b_rpm_fa = 61600, b_rpm_fp = 100000000000001000000000060000,"+
		" b_tpm_tk = 1000005, b_tpm_ts = 1000005, b_tpm_fa = 1099511627776, b_tpm_fp = 10000000000000000000010000000000060000,"+
		" b_z_tk = 2, b_z_ts = 2 ADD b_rpm_tc 1000, b_wcu_tk 998000, b_wcu_tc 1000 REMOVE b_z_fa", renderSpec(in.UpdateExpression, in))
	assert.Equal(t, "rf = 1000 AND (attribute_not_exists(ttl) OR ttl > 61)"+
		" AND b_rpm_tk = 1000 AND b_rpm_cp = 100000 AND b_rpm_ra = 100000 AND b_rpm_rp = 60000"+
		" AND b_tpm_tk = 5 AND b_tpm_cp = 10000000000000 AND b_tpm_ra = 1000000 AND b_tpm_rp = 60000"+
		" AND b_z_tk = 1 AND b_z_cp = 1000000000000000 AND b_z_ra = 1 AND b_z_rp = 1"+
		" AND b_q_cp = 1 AND b_q_ra = 2 AND b_q_rp = 3 AND b_wcu_tk >= -998000", renderSpec(in.ConditionExpression, in))
	assert.Equal(t, types.ReturnValueAllNew, in.ReturnValues)
	assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, in.ReturnValuesOnConditionCheckFailure)

	// The same shape with other values: the template is reused.
	w.Limits[0].NewMilli, w.OldRefillMs = 42, 7
	in2 := u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	assert.Same(t, in.ConditionExpression, in2.ConditionExpression)
	assert.Contains(t, renderSpec(in2.UpdateExpression, in2), "b_rpm_tk = 42, b_rpm_ts = 42,")
	assert.Contains(t, renderSpec(in2.ConditionExpression, in2), "rf = 7 AND")
	assert.Contains(t, renderSpec(in.UpdateExpression, in), "b_rpm_tk = 99000,", "the first input kept its values")

	// Without refilling: rf stays (and is conditioned on), only the limit
	// taken from is written.
	take := ExactWrite{OldRefillMs: 1000, NewRefillMs: 1000, Limits: w.Limits[:1]}
	in3 := u.Input(BucketKeyValue("ns", "e", "r", 0), &take)
	assert.Equal(t, "SET b_rpm_tk = 42, b_rpm_ts = 42, b_rpm_fa = 61600, b_rpm_fp = 100000000000001000000000060000 ADD b_rpm_tc 1000", renderSpec(in3.UpdateExpression, in3))
	assert.Equal(t, "rf = 1000 AND b_rpm_tk = 1000 AND b_rpm_cp = 100000 AND b_rpm_ra = 100000 AND b_rpm_rp = 60000", renderSpec(in3.ConditionExpression, in3))
	assert.Len(t, *u.templates.Load(), 2)

	// With a write identifier: another shape, whose slots shift and take
	// it, refused when one holds it.
	take.ID = 5
	in4 := u.Input(BucketKeyValue("ns", "e", "r", 0), &take)
	assert.Equal(t, ringSet+", b_rpm_tk = 42, b_rpm_ts = 42, b_rpm_fa = 61600, b_rpm_fp = 100000000000001000000000060000 ADD b_rpm_tc 1000", renderSpec(in4.UpdateExpression, in4))
	assert.Equal(t, "rf = 1000 AND b_rpm_tk = 1000 AND b_rpm_cp = 100000 AND b_rpm_ra = 100000 AND b_rpm_rp = 60000 AND "+ringCond, renderSpec(in4.ConditionExpression, in4))
	assert.Equal(t, WriteID(5).Value(), in4.ExpressionAttributeValues[":wid"])
	assert.Len(t, *u.templates.Load(), 3)
}

// TestExactInputManyLimits: an exact write of more varying numbers than
// the input's stack buffers hold (twelve signed limits, each with its
// balance, copy, fa and the amount taken) is built whole: every limit's
// new balance is in place.
func TestExactInputManyLimits(t *testing.T) {
	u := NewExactUpdates("tbl")
	w := ExactWrite{OldRefillMs: 1000, NewRefillMs: 2000, NowMs: 2000, TTLCheck: true}
	for i := range 12 {
		w.Limits = append(w.Limits, ExactLimit{
			Name: fmt.Sprintf("l%02d", i), OldMilli: int64(1000 + i), NewMilli: int64(5000 + i), TakenMilli: 1000,
			CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000, FullAtMs: int64(70_000 + i),
		})
	}
	in := u.Input(BucketKeyValue("ns", "e", "r", 0), &w)
	update, cond := renderSpec(in.UpdateExpression, in), renderSpec(in.ConditionExpression, in)
	for i := range 12 {
		assert.Contains(t, update, fmt.Sprintf("b_l%02d_tk = %d, b_l%02d_ts = %d, b_l%02d_fa = %d,", i, 5000+i, i, 5000+i, i, 70_000+i))
		assert.Contains(t, cond, fmt.Sprintf("b_l%02d_tk = %d AND", i, 1000+i))
	}
	assert.NotContains(t, update+cond, "?")
}
