package ddbschema

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteIDIn: an item holds an identifier in any of its slots; other
// identifiers, values of another type and the zero id are not held.
func TestWriteIDIn(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{"wid0": WriteID(3).Value(), "wid3": WriteID(1 << 60).Value(), "wid1": N(4)}
	assert.True(t, WriteID(3).In(item))
	assert.True(t, WriteID(1<<60).In(item))
	assert.False(t, WriteID(4).In(item), "a number is not an identifier")
	assert.False(t, WriteID(5).In(item))
	assert.False(t, WriteID(0).In(map[string]types.AttributeValue{"wid0": &types.AttributeValueMemberB{Value: make([]byte, 8)}}))
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 3}, WriteID(3).Value().(*types.AttributeValueMemberB).Value)
	assert.NotZero(t, NewWriteID())
}

// TestAddWriteID: the identifier's clauses join an update's SET clause,
// or start one, and its condition; a zero id adds nothing.
func TestAddWriteID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, cond, wantExpr, wantCond string }{
		{"SET #a0 = :v0 ADD #a1 :v1", "#a0 = :v2", ringSet + ", rf = 1 ADD b_x_tk 2", "rf = 3 AND " + ringCond},
		{"ADD #a1 :v1", "", ringSet + " ADD b_x_tk 2", ringCond},
	} {
		eb := NewExpr()
		eb.Name(AttrRefill)
		eb.Name(BucketAttr("x", FieldTokens))
		eb.N(1)
		eb.N(2)
		eb.N(3)
		u := eb.Update("tbl", BucketKeyValue("ns", "e", "r", 0), tc.expr, nil)
		if tc.cond != "" {
			u.ConditionExpression = aws.String(tc.cond)
		}
		AddWriteID(u, 9)
		in := UpdateInput(u)
		assert.Equal(t, tc.wantExpr, renderSpec(in.UpdateExpression, in))
		assert.Equal(t, tc.wantCond, renderSpec(in.ConditionExpression, in))
	}
	u := &types.Update{UpdateExpression: aws.String("ADD #a0 :v0")}
	AddWriteID(u, 0)
	assert.Equal(t, "ADD #a0 :v0", *u.UpdateExpression)
	assert.Nil(t, u.ConditionExpression)
	AddWriteID(u, 1)
	require.NotNil(t, u.ConditionExpression)
	assert.Len(t, u.ExpressionAttributeNames, WriteIDSlots)
	assert.Len(t, u.ExpressionAttributeValues, 1)
}
