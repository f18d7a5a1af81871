package ddbschema

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
)

func TestExpr(t *testing.T) {
	t.Parallel()
	b := NewExpr()
	a, rf := b.Name("b_tpm-x_tk"), b.Name(AttrRefill)
	assert.Equal(t, a, b.Name("b_tpm-x_tk"), "names")
	assert.Equal(t, "#a0", a, "names")
	assert.Equal(t, "#a1", rf, "names")
	v0, v1 := b.N(5), b.Value(S("x"))
	assert.Equal(t, ":v0", v0, "values = %s, %s; want :v0, :v1", v0, v1)
	assert.Equal(t, ":v1", v1, "values = %s, %s; want :v0, :v1", v0, v1)
	assert.Equal(t, ":v2", b.N(5), "a repeated value")
	u := b.Update("tbl", PrimaryKey("p", "s"), UpdateExpr([]string{rf + " = :v0"}, []string{a + " :v2"}, nil), []string{"c1", "c2"})
	assert.Equal(t, "SET #a1 = :v0 ADD #a0 :v2", aws.ToString(u.UpdateExpression), "update %q, condition %q", aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression))
	assert.Equal(t, "c1 AND c2", aws.ToString(u.ConditionExpression), "update %q, condition %q", aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression))
	assert.Equal(t, "tbl", aws.ToString(u.TableName), "update %q, condition %q", aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression))
	assert.Equal(t, map[string]string{"#a0": "b_tpm-x_tk", "#a1": "rf"}, b.Names(), "names")
	assert.Equal(t, map[string]string{":v0": "N:5", ":v1": `S:"x"`, ":v2": "N:5"}, itemText(u.ExpressionAttributeValues), "values")
	in := UpdateInput(u)
	assert.Equal(t, u.TableName, in.TableName, "UpdateInput = %+v", in)
	assert.Equal(t, u.UpdateExpression, in.UpdateExpression, "UpdateInput = %+v", in)
	assert.Equal(t, u.ConditionExpression, in.ConditionExpression, "UpdateInput = %+v", in)
	assert.Len(t, in.Key, 2, "UpdateInput = %+v", in)

	// No values and no conditions: both are left out.
	e := NewExpr()
	u = e.Update("tbl", PrimaryKey("p", "s"), UpdateExpr(nil, nil, []string{e.Name(AttrTTL)}), nil)
	assert.Nil(t, u.ExpressionAttributeValues, "values-free update = %+v", u)
	assert.Nil(t, u.ConditionExpression, "values-free update = %+v", u)
	assert.Equal(t, "REMOVE #a0", aws.ToString(u.UpdateExpression), "values-free update = %+v", u)

	for _, tc := range []struct {
		set, add, remove []string
		want             string
	}{
		{nil, nil, nil, ""},
		{[]string{"a = 1", "b = 2"}, nil, nil, "SET a = 1, b = 2"},
		{nil, []string{"a 1"}, []string{"c", "d"}, "ADD a 1 REMOVE c, d"},
		{[]string{"a = 1"}, []string{"b 2"}, []string{"c"}, "SET a = 1 ADD b 2 REMOVE c"},
	} {
		assert.Equal(t, tc.want, UpdateExpr(tc.set, tc.add, tc.remove))
	}
}
