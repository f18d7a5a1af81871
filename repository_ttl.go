// Layer 5, the DynamoDB repository: the TTL extension of an adjustment.

package limiter

import (
	"maps"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// withTTLExtension returns in, the UpdateItem of adjustment w, with the
// item's TTL moved later by w.TTLExtendSeconds (a copy of in; in itself
// when there is no extension, or when kept, the item as last seen in the
// same incarnation, has no TTL). An update expression cannot test for
// the TTL, so an item without one that is not known to lack it gets one
// a century after w.NowMs plus the extension (see
// store.BucketWrite.TTLExtendSeconds): in effect none, and the next write
// that removes the TTL removes it.
func withTTLExtension(in *dynamodb.UpdateItemInput, w store.BucketWrite, kept *store.Bucket) *dynamodb.UpdateItemInput {
	if in == nil || w.TTLExtendSeconds <= 0 || (kept != nil && kept.Incarnation == w.Incarnation && kept.TTL == 0) {
		return in
	}
	out := *in
	out.ExpressionAttributeNames = maps.Clone(in.ExpressionAttributeNames)
	if out.ExpressionAttributeNames == nil {
		out.ExpressionAttributeNames = map[string]string{}
	}
	out.ExpressionAttributeValues = maps.Clone(in.ExpressionAttributeValues)
	if out.ExpressionAttributeValues == nil {
		out.ExpressionAttributeValues = map[string]types.AttributeValue{}
	}
	far := bucketmath.AddSat(bucketmath.FloorDiv(w.NowMs, 1000), maxBucketTTLSeconds)
	out.ExpressionAttributeNames["#xttl"] = attrTTL
	out.ExpressionAttributeValues[":xttlf"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(far, 10)}
	out.ExpressionAttributeValues[":xttle"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(w.TTLExtendSeconds, 10)}
	clause := "#xttl = if_not_exists(#xttl, :xttlf) + :xttle"
	expr := aws.ToString(in.UpdateExpression)
	switch i := strings.Index(expr, "SET "); {
	case i == 0:
		expr = "SET " + clause + ", " + expr[4:]
	case i > 0 && expr[i-1] == ' ':
		expr = expr[:i] + "SET " + clause + ", " + expr[i+4:]
	default:
		expr = "SET " + clause + " " + expr
	}
	out.UpdateExpression = aws.String(expr)
	return &out
}
