package limiter

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

var placeholder = regexp.MustCompile(`[#:][av][0-9]+|#wid[0-9]|:wid`)

// render substitutes an expression's placeholders with attribute names and
// number/string values, so that index-based expressions can be compared with
// the Python library's, which names attributes directly.
func render(expr string, names map[string]string, values map[string]types.AttributeValue) string {
	return placeholder.ReplaceAllStringFunc(expr, func(p string) string {
		if n, ok := names[p]; ok {
			return n
		}
		switch v := values[p].(type) {
		case *types.AttributeValueMemberN:
			return v.Value
		case *types.AttributeValueMemberS:
			return `"` + v.Value + `"`
		case *types.AttributeValueMemberBOOL:
			if v.Value {
				return "true"
			}
			return "false"
		case *types.AttributeValueMemberB:
			return "ID"
		}
		return p
	})
}

// TestNormalWriteShape checks the slow-path normal write of {rps:1,
// tpm:100} 203 ms after the last write against the Python library's: the
// refill and consumption as ADDs under the rf lock. Where the Python
// library guards tpm, whose consumption exceeds its refill, with tk ≥ the
// excess, this write is conditioned on each balance being the one read
// (which covers the guard), and sets each limit's exact state: ts to the
// balance written, fa to when it is full (rps: 1 token at 10/s, 100 ms;
// tpm: 166,167 millitokens at 10,000/min, 998 ms), fp to its parameters.
// It carries a write identifier (see ddbschema.WriteID).
func TestNormalWriteShape(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.limiter()
	err := rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "api"}, []Limit{PerSecond("rps", 10), PerMinute("tpm", 10_000)})
	require.NoError(t, err)
	R := epoch.UnixMilli()
	item := bucketItem(env.repo.NamespaceID(), &store.Bucket{Key: store.BucketKey{EntityID: "e", Resource: "api"}, RefillMs: R, States: []store.BucketState{
		{LimitName: "rps", TokensMilli: 9000, CapacityMilli: 10_000, RefillAmountMilli: 10_000, RefillPeriodMs: 1000},
		{LimitName: "tpm", TokensMilli: 9_900_000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000},
	}})
	_, err = env.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
	require.NoError(t, err)
	env.clock.advance(203 * time.Millisecond)

	var captured []*dynamodb.UpdateItemInput
	capture := hook(func(op string, params any) error {
		if in, ok := params.(*dynamodb.UpdateItemInput); ok {
			captured = append(captured, in)
		}
		return nil
	})
	l := mustAcquire(t, New(env.withClient(capture), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false }), "e", "api", Consume{"rps": 1, "tpm": 100})
	mustCommit(t, l)
	require.Len(t, captured, 1, "%d UpdateItems, want 1", len(captured))
	in := captured[0]
	now := R + 203
	gotUpdate := render(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	wantUpdate := writeIDSet + ", rf = " + itoa64(now) +
		", b_rps_ts = 9000, b_rps_fa = " + itoa64(now+100) + ", b_rps_fp = 10000000000000100000000001000" +
		", b_tpm_ts = 9833833, b_tpm_fa = " + itoa64(now+998) + ", b_tpm_fp = 10000000000000100000000000060000" +
		" ADD b_rps_tk 0, b_rps_tc 1000, b_tpm_tk -66167, b_tpm_tc 100000 REMOVE ttl"
	assert.Equal(t, wantUpdate, gotUpdate, "update\n got %s\nwant %s", gotUpdate, wantUpdate)
	gotCond := render(aws.ToString(in.ConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want := "rf = " + itoa64(R) + " AND attribute_not_exists(inc) AND b_rps_tk = 9000 AND b_tpm_tk = 9900000 AND " + writeIDCond
	assert.Equal(t, want, gotCond, "condition\n got %s\nwant %s", gotCond, want)
	for p, name := range in.ExpressionAttributeNames {
		// The write identifiers' placeholders are fixed, as their names are.
		fixed := strings.HasPrefix(p, "#wid") && p == "#"+name
		assert.True(t, strings.HasPrefix(p, "#a") || fixed, "placeholder %q is not index-based: limit names with '-' or '.' would break the expression", p)
	}
	b := env.bucket("e", "api")
	assert.EqualValues(t, 9000, env.n(b, "b_rps_tk"), "item after write: %v", b)
	assert.EqualValues(t, 9_833_833, env.n(b, "b_tpm_tk"), "item after write: %v", b)
	assert.EqualValues(t, now, env.n(b, "rf"), "item after write: %v", b)
}

// writeIDSet and writeIDCond are the clauses of a write identifier,
// rendered.
const (
	writeIDSet  = "SET wid3 = if_not_exists(wid2, ID), wid2 = if_not_exists(wid1, ID), wid1 = if_not_exists(wid0, ID), wid0 = ID"
	writeIDCond = "NOT (wid0 = ID OR wid1 = ID OR wid2 = ID OR wid3 = ID)"
)

func itoa64(n int64) string { return schemaN(n).(*types.AttributeValueMemberN).Value }

// TestSpeculativeUpdateShape checks the speculative UpdateItem against the
// Python library's, except that only positive amounts are guarded (a zero
// or negative amount must not refuse the write for a balance it does not
// take from), that the resolved limits' parameters are conditioned on, and
// that a positive amount is also conditioned on its limit not being full
// by now (its exact state: fa after now, ts = tk, fp its parameters) and
// moves ts with tk and fa by the time the take delays it (rpm: 1 token at
// 100/min, 600 ms; tpm: 100 tokens at 10,000/min, 600 ms), and that it
// carries a write identifier (ID; see ddbschema.WriteID).
func TestSpeculativeUpdateShape(t *testing.T) {
	in := buildSpeculativeUpdate(ddbschema.NewSpeculativeUpdates("tbl"), "ns", store.SpeculativeRequest{Key: store.BucketKey{EntityID: "e", Resource: "r", Shard: 2},
		Consume: Consume{"tpm": 100, "rpm": 1, "x": 0}, Limits: storeLimits([]Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000)}), NowMs: 1_700_000_000_999}, 1)
	got := render(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want := writeIDSet + " ADD b_rpm_fa 600, b_rpm_tk -1000, b_rpm_ts -1000, b_rpm_tc 1000, b_tpm_fa 600, b_tpm_tk -100000, b_tpm_ts -100000, b_tpm_tc 100000, b_wcu_tk -1000, b_wcu_tc 1000"
	assert.Equal(t, want, got, "update\n got %s\nwant %s", got, want)
	got = render(aws.ToString(in.ConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want = "attribute_exists(PK) AND b_rpm_cp = 100000 AND b_rpm_ra = 100000 AND b_rpm_rp = 60000 AND b_tpm_cp = 10000000 AND b_tpm_ra = 10000000 AND b_tpm_rp = 60000" +
		" AND b_rpm_tk >= 1000 AND (b_rpm_fa > 1700000000999 OR rf >= 1700000000999) AND b_rpm_tk = b_rpm_ts AND b_rpm_fp = 100000000000001000000000060000" +
		" AND b_tpm_tk >= 100000 AND (b_tpm_fa > 1700000000999 OR rf >= 1700000000999) AND b_tpm_tk = b_tpm_ts AND b_tpm_fp = 10000000000000100000000000060000" +
		" AND attribute_exists(b_x_tk) AND b_wcu_tk >= 1000 AND (attribute_not_exists(ttl) OR ttl > 1700000000) AND " + writeIDCond
	assert.Equal(t, want, got, "condition\n got %s\nwant %s", got, want)
	assert.Equal(t, types.ReturnValueAllNew, in.ReturnValues, "return values")
	assert.Equal(t, types.ReturnValuesOnConditionCheckFailureAllOld, in.ReturnValuesOnConditionCheckFailure, "return values on condition check failure")
	pk := in.Key["PK"].(*types.AttributeValueMemberS).Value
	assert.EqualValues(t, "ns/BUCKET#e#r#2", pk, "key %s", pk)
}

// TestRetryAndAdjustShapes checks the retry writes (an exact write from the
// item, or the take from the stored balances when no limit may be full)
// and the adjustment write.
func TestRetryAndAdjustShapes(t *testing.T) {
	const rf = 1_700_000_000_000
	base := &store.Bucket{Key: store.BucketKey{EntityID: "e", Resource: "r"}, RefillMs: rf, Incarnation: 42, States: []store.BucketState{
		{LimitName: "rpm", TokensMilli: 9000, CapacityMilli: 10_000, RefillAmountMilli: 10_000, RefillPeriodMs: 60_000},
	}, Private: &itemExtras{exact: []exactState{{valid: true, fullAtMs: rf + 6000}}}}
	full := store.BucketState{LimitName: "new", TokensMilli: 5000, CapacityMilli: 5000, RefillAmountMilli: 5000, RefillPeriodMs: 60_000}
	retry := store.BucketWrite{Kind: store.WriteRetry, Key: base.Key, NowMs: rf + 1000, Incarnation: 42, Limits: []store.LimitWrite{
		{Name: "rpm", ConsumedMilli: 2000}, {Name: "new", ConsumedMilli: 1000, Initial: &full},
	}}
	w, ok, direct := planRetry(base, retry)
	require.True(t, ok)
	require.True(t, direct, "a limit created: the exact write")
	u := ddbschema.NewExactUpdates("tbl").Update(bucketPrimaryKey("ns", "e", "r", 0), &w)
	got := render(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	want := "SET b_new_tk = 4000, b_new_ts = 4000, b_new_cp = if_not_exists(b_new_cp, 5000), b_new_ra = if_not_exists(b_new_ra, 5000), " +
		"b_new_rp = if_not_exists(b_new_rp, 60000), b_rpm_tk = 7000, b_rpm_ts = 7000, b_rpm_fa = " + itoa64(rf+18_000) +
		", b_rpm_fp = 10000000000000100000000060000 ADD b_new_tc 1000, b_rpm_tc 2000 REMOVE b_new_fa"
	assert.Equal(t, want, got, "exact retry update")
	got = render(aws.ToString(u.ConditionExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	want = "rf = " + itoa64(rf) + " AND inc = 42 AND attribute_not_exists(b_new_tk) AND b_rpm_tk = 9000 AND b_rpm_cp = 10000 AND b_rpm_ra = 10000 AND b_rpm_rp = 60000"
	assert.Equal(t, want, got, "exact retry condition")

	// Without a limit to create, and rpm not full by then: the take.
	retry.Limits = retry.Limits[:1]
	_, ok, direct = planRetry(base, retry)
	require.True(t, ok)
	require.False(t, direct)
	r := &dynamoRepository{opts: DynamoDBOptions{Table: "tbl"}, nsID: "ns"}
	u = r.retrySubtract(bucketPrimaryKey("ns", "e", "r", 0), base, retry, 0)
	got = render(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	assert.Equal(t, "ADD b_rpm_tk -2000, b_rpm_ts -2000, b_rpm_tc 2000, b_rpm_fa 12000", got, "retry take update")
	got = render(aws.ToString(u.ConditionExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	want = "attribute_exists(PK) AND inc = 42 AND b_rpm_tk >= 2000 AND b_rpm_fa > " + itoa64(rf+1000) + " AND b_rpm_tk = b_rpm_ts AND b_rpm_fp = 10000000000000100000000060000" +
		" AND b_rpm_cp = 10000 AND b_rpm_ra = 10000 AND b_rpm_rp = 60000"
	assert.Equal(t, want, got, "retry take condition")

	// 7 s on, rpm is full: the exact write refills the item.
	retry.NowMs = rf + 7000
	w, ok, direct = planRetry(base, retry)
	require.True(t, ok)
	require.True(t, direct)
	require.Equal(t, int64(rf+7000), w.NewRefillMs)
	require.Equal(t, int64(8000), w.Limits[0].NewMilli)

	aw := buildBucketWrite("tbl", "ns", store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "e", Resource: "r", Shard: 1}, Limits: []store.LimitWrite{
		{Name: "tpm-x", ConsumedMilli: -5000},
	}})
	u = aw.Update
	got = render(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	assert.Equal(t, "ADD b_tpm-x_tk 5000, b_tpm-x_tc -5000, b_tpm-x_ts 5000 REMOVE b_tpm-x_fa", got, "adjust update")
	pk := u.Key["PK"].(*types.AttributeValueMemberS).Value
	assert.EqualValues(t, "ns/BUCKET#e#r#1", pk, "adjust key %s", pk)
}
