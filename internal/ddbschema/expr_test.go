package ddbschema

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"
)

func TestExpr(t *testing.T) {
	t.Parallel()
	b := NewExpr()
	a, rf := b.Name("b_tpm-x_tk"), b.Name(AttrRefill)
	if again := b.Name("b_tpm-x_tk"); again != a || a != "#a0" || rf != "#a1" {
		t.Errorf("names = %s, %s, again %s; want #a0, #a1, #a0", a, rf, again)
	}
	if v0, v1 := b.N(5), b.Value(S("x")); v0 != ":v0" || v1 != ":v1" {
		t.Errorf("values = %s, %s; want :v0, :v1", v0, v1)
	}
	if v2 := b.N(5); v2 != ":v2" {
		t.Errorf("a repeated value = %s, want a new placeholder :v2", v2)
	}
	u := b.Update("tbl", PrimaryKey("p", "s"), UpdateExpr([]string{rf + " = :v0"}, []string{a + " :v2"}, nil), []string{"c1", "c2"})
	if aws.ToString(u.UpdateExpression) != "SET #a1 = :v0 ADD #a0 :v2" || aws.ToString(u.ConditionExpression) != "c1 AND c2" || aws.ToString(u.TableName) != "tbl" {
		t.Errorf("update %q, condition %q", aws.ToString(u.UpdateExpression), aws.ToString(u.ConditionExpression))
	}
	if diff := cmp.Diff(map[string]string{"#a0": "b_tpm-x_tk", "#a1": "rf"}, b.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{":v0": "N:5", ":v1": `S:"x"`, ":v2": "N:5"}, itemText(u.ExpressionAttributeValues)); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	in := UpdateInput(u)
	if in.TableName != u.TableName || in.UpdateExpression != u.UpdateExpression || in.ConditionExpression != u.ConditionExpression || len(in.Key) != 2 {
		t.Errorf("UpdateInput = %+v", in)
	}

	// No values and no conditions: both are left out.
	e := NewExpr()
	u = e.Update("tbl", PrimaryKey("p", "s"), UpdateExpr(nil, nil, []string{e.Name(AttrTTL)}), nil)
	if u.ExpressionAttributeValues != nil || u.ConditionExpression != nil || aws.ToString(u.UpdateExpression) != "REMOVE #a0" {
		t.Errorf("values-free update = %+v", u)
	}

	for _, tc := range []struct {
		set, add, remove []string
		want             string
	}{
		{nil, nil, nil, ""},
		{[]string{"a = 1", "b = 2"}, nil, nil, "SET a = 1, b = 2"},
		{nil, []string{"a 1"}, []string{"c", "d"}, "ADD a 1 REMOVE c, d"},
		{[]string{"a = 1"}, []string{"b 2"}, []string{"c"}, "SET a = 1 ADD b 2 REMOVE c"},
	} {
		if got := UpdateExpr(tc.set, tc.add, tc.remove); got != tc.want {
			t.Errorf("UpdateExpr(%q, %q, %q) = %q, want %q", tc.set, tc.add, tc.remove, got, tc.want)
		}
	}
}
