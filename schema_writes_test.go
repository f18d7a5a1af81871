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
	"github.com/zaelimiter/limiter/store"
)

var placeholder = regexp.MustCompile(`[#:][av][0-9]+`)

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
		}
		return p
	})
}

// TestNormalWriteShape checks the slow-path normal write of {rps:1,
// tpm:100} 203 ms after the last write against the Python library's: the
// refill and consumption as ADDs under the rf lock, a floor guard on tpm,
// whose consumption exceeds its refill, and none on rps.
func TestNormalWriteShape(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.limiter()
	err := rl.SetLimits(ctx, "e", "api", []Limit{PerSecond("rps", 10), PerMinute("tpm", 10_000)})
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
	l := mustAcquire(t, New(env.withClient(capture), WithClock(env.clock.now), WithSpeculativeWrites(false)), "e", "api", Consume{"rps": 1, "tpm": 100})
	mustCommit(t, l)
	require.Len(t, captured, 1, "%d UpdateItems, want 1", len(captured))
	in := captured[0]
	now := R + 203
	gotUpdate := render(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	wantUpdate := "SET rf = " + itoa64(now) +
		" ADD b_rps_tk 0, b_rps_tc 1000, b_tpm_tk -66167, b_tpm_tc 100000 REMOVE ttl"
	assert.Equal(t, wantUpdate, gotUpdate, "update\n got %s\nwant %s", gotUpdate, wantUpdate)
	gotCond := render(aws.ToString(in.ConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want := "rf = " + itoa64(R) + " AND b_tpm_tk >= 66167"
	assert.Equal(t, want, gotCond, "condition\n got %s\nwant %s", gotCond, want)
	for p := range in.ExpressionAttributeNames {
		assert.True(t, strings.HasPrefix(p, "#a"), "placeholder %q is not index-based: limit names with '-' or '.' would break the expression", p)
	}
	b := env.bucket("e", "api")
	assert.False(t, env.n(b, "b_rps_tk") != 9000 || env.n(b, "b_tpm_tk") != 9_833_833 || env.n(b, "rf") != now, "item after write: %v", b)
}

func itoa64(n int64) string { return schemaN(n).(*types.AttributeValueMemberN).Value }

// TestSpeculativeUpdateShape checks the speculative UpdateItem against the
// Python library's, except that only positive amounts are guarded (a zero
// or negative amount must not refuse the write for a balance it does not
// take from).
func TestSpeculativeUpdateShape(t *testing.T) {
	in := buildSpeculativeUpdate("tbl", "ns", store.SpeculativeRequest{Key: store.BucketKey{EntityID: "e", Resource: "r", Shard: 2}, Consume: Consume{"tpm": 100, "rpm": 1, "x": 0}, NowMs: 1_700_000_000_999})
	got := render(aws.ToString(in.UpdateExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want := "ADD b_rpm_tk -1000, b_rpm_tc 1000, b_tpm_tk -100000, b_tpm_tc 100000, b_wcu_tk -1000, b_wcu_tc 1000"
	assert.Equal(t, want, got, "update\n got %s\nwant %s", got, want)
	got = render(aws.ToString(in.ConditionExpression), in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	want = "attribute_exists(PK) AND b_rpm_tk >= 1000 AND b_tpm_tk >= 100000 AND attribute_exists(b_x_tk) AND b_wcu_tk >= 1000" +
		" AND (attribute_not_exists(ttl) OR ttl > 1700000000)"
	assert.Equal(t, want, got, "condition\n got %s\nwant %s", got, want)
	if in.ReturnValues != types.ReturnValueAllNew || in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("return values %v %v", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure)
	}
	pk := in.Key["PK"].(*types.AttributeValueMemberS).Value
	assert.EqualValues(t, "ns/BUCKET#e#r#2", pk, "key %s", pk)
}

// TestRetryAndAdjustShapes checks the consumption-only retry write and the
// adjustment write.
func TestRetryAndAdjustShapes(t *testing.T) {
	full := store.BucketState{LimitName: "new", TokensMilli: 5000, CapacityMilli: 5000, RefillAmountMilli: 5000, RefillPeriodMs: 60_000}
	w := buildBucketWrite("tbl", "ns", store.BucketWrite{Kind: store.WriteRetry, Key: store.BucketKey{EntityID: "e", Resource: "r"}, Limits: []store.LimitWrite{
		{Name: "rpm", ConsumedMilli: 2000}, {Name: "new", ConsumedMilli: 1000, Initial: &full},
	}})
	u := w.Update
	got := render(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	want := "SET b_new_tk = if_not_exists(b_new_tk, 5000) - 1000, b_new_cp = if_not_exists(b_new_cp, 5000), " +
		"b_new_ra = if_not_exists(b_new_ra, 5000), b_new_rp = if_not_exists(b_new_rp, 60000) " +
		"ADD b_rpm_tk -2000, b_rpm_tc 2000, b_new_tc 1000"
	assert.Equal(t, want, got, "retry update\n got %s\nwant %s", got, want)
	got = render(aws.ToString(u.ConditionExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	if want := "attribute_exists(PK) AND b_rpm_tk >= 2000 AND (attribute_not_exists(b_new_tk) OR b_new_tk >= 1000)"; got != want {
		t.Errorf("retry condition\n got %s\nwant %s", got, want)
	}

	w = buildBucketWrite("tbl", "ns", store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "e", Resource: "r", Shard: 1}, Limits: []store.LimitWrite{
		{Name: "tpm-x", ConsumedMilli: -5000},
	}})
	u = w.Update
	got = render(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues)
	if want := "ADD b_tpm-x_tk 5000, b_tpm-x_tc -5000"; got != want {
		t.Errorf("adjust update %s, want %s", got, want)
	}
	pk := u.Key["PK"].(*types.AttributeValueMemberS).Value
	assert.EqualValues(t, "ns/BUCKET#e#r#1", pk, "adjust key %s", pk)
}
