package ddbschema

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Expr accumulates the attribute names and values of one request's
// expressions, with index-based placeholders: names are #a0, #a1, … in
// order of first use (one placeholder per name), values :v0, :v1, … in
// order of use. Limit names containing '-' or '.' are therefore safe. An
// Expr is not safe for concurrent use; the zero value is not usable, call
// [NewExpr].
type Expr struct {
	names   map[string]string // placeholder → attribute name
	byName  map[string]string // attribute name → placeholder
	values  map[string]types.AttributeValue
	nValues int
}

// NewExpr returns an empty expression builder.
func NewExpr() *Expr {
	return &Expr{names: map[string]string{}, byName: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// Name returns the placeholder of attribute name n.
func (b *Expr) Name(n string) string {
	if p, ok := b.byName[n]; ok {
		return p
	}
	p := "#a" + strconv.Itoa(len(b.names))
	b.names[p] = n
	b.byName[n] = p
	return p
}

// Value returns a new placeholder for v.
func (b *Expr) Value(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(b.nValues)
	b.nValues++
	b.values[p] = v
	return p
}

// N returns a new placeholder for the number v.
func (b *Expr) N(v int64) string { return b.Value(N(v)) }

// Names returns the placeholders of names (the builder's own map, for
// ExpressionAttributeNames).
func (b *Expr) Names() map[string]string { return b.names }

// Values returns the placeholders of values (the builder's own map, for
// ExpressionAttributeValues).
func (b *Expr) Values() map[string]types.AttributeValue { return b.values }

// Update returns the transactional Update of item key in table with update
// expression expr and the conditions conds joined by AND (none: no
// condition). ExpressionAttributeValues is nil when no value was used.
func (b *Expr) Update(table string, key map[string]types.AttributeValue, expr string, conds []string) *types.Update {
	u := &types.Update{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeNames:  b.names,
		ExpressionAttributeValues: b.values,
	}
	if len(conds) > 0 {
		u.ConditionExpression = aws.String(strings.Join(conds, " AND "))
	}
	if len(b.values) == 0 {
		u.ExpressionAttributeValues = nil
	}
	return u
}

// UpdateExpr joins SET, ADD and REMOVE clauses into an update expression;
// empty clause lists are left out.
func UpdateExpr(set, add, remove []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(add) > 0 {
		parts = append(parts, "ADD "+strings.Join(add, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	return strings.Join(parts, " ")
}

// UpdateInput turns a transactional Update into an UpdateItemInput.
func UpdateInput(u *types.Update) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 u.TableName,
		Key:                       u.Key,
		UpdateExpression:          u.UpdateExpression,
		ConditionExpression:       u.ConditionExpression,
		ExpressionAttributeNames:  u.ExpressionAttributeNames,
		ExpressionAttributeValues: u.ExpressionAttributeValues,
	}
}

// TransactUpdate is UpdateInput the other way: in as the Update of a
// transaction, which returns no item but the old item when its condition
// fails (ReturnValuesOnConditionCheckFailure ALL_OLD).
func TransactUpdate(in *dynamodb.UpdateItemInput) *types.Update {
	return &types.Update{
		TableName:                           in.TableName,
		Key:                                 in.Key,
		UpdateExpression:                    in.UpdateExpression,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
