package ddbschema

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// avText renders an attribute value canonically (maps sorted) so that items
// can be compared and diffed as map[string]string.
func avText(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + strconv.Quote(v.Value)
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberBOOL:
		return "BOOL:" + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL:" + strconv.FormatBool(v.Value)
	case *types.AttributeValueMemberM:
		keys := make([]string, 0, len(v.Value))
		for k := range v.Value {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + avText(v.Value[k])
		}
		return "M:{" + strings.Join(parts, ", ") + "}"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, e := range v.Value {
			parts[i] = avText(e)
		}
		return "L:[" + strings.Join(parts, ", ") + "]"
	case *types.AttributeValueMemberSS:
		return "SS:" + fmt.Sprint(v.Value)
	case nil:
		return "<nil>"
	}
	return fmt.Sprintf("%T", av)
}

func itemText(item map[string]types.AttributeValue) map[string]string {
	out := make(map[string]string, len(item))
	for k, v := range item {
		out[k] = avText(v)
	}
	return out
}

func checkItem(t *testing.T, name string, got map[string]types.AttributeValue, want map[string]string) {
	t.Helper()
	assert.Equal(t, want, itemText(got), "%s mismatch", name)
}

var placeholder = regexp.MustCompile(`[#:][av][0-9]+`)

// render substitutes an expression's placeholders with attribute names and
// number/string values.
func render(expr string, names map[string]string, values map[string]types.AttributeValue) string {
	return placeholder.ReplaceAllStringFunc(expr, func(p string) string {
		if n, ok := names[p]; ok {
			return n
		}
		switch v := values[p].(type) {
		case *types.AttributeValueMemberN:
			return v.Value
		case *types.AttributeValueMemberS:
			return strconv.Quote(v.Value)
		case *types.AttributeValueMemberBOOL:
			return strconv.FormatBool(v.Value)
		}
		return p
	})
}

// request is the golden-file form of a request: its expressions as written
// (placeholders and all) and rendered, its key and its placeholders.
type request struct {
	Table     string            `json:"table"`
	Key       map[string]string `json:"key,omitempty"`
	Item      map[string]string `json:"item,omitempty"`
	Update    string            `json:"update,omitempty"`
	Condition string            `json:"condition,omitempty"`
	Rendered  string            `json:"rendered"`
	Names     map[string]string `json:"names,omitempty"`
	Values    map[string]string `json:"values,omitempty"`
	NilValues bool              `json:"nil_values,omitempty"`
}

func updateRequest(in *dynamodb.UpdateItemInput) *request {
	if in == nil {
		return nil
	}
	r := &request{
		Table:     aws.ToString(in.TableName),
		Key:       itemText(in.Key),
		Update:    aws.ToString(in.UpdateExpression),
		Condition: aws.ToString(in.ConditionExpression),
		Names:     in.ExpressionAttributeNames,
		Values:    itemText(in.ExpressionAttributeValues),
		NilValues: in.ExpressionAttributeValues == nil,
	}
	r.Rendered = render(r.Update, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if r.Condition != "" {
		r.Rendered += " IF " + render(r.Condition, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	}
	return r
}

func putRequest(in *dynamodb.PutItemInput) *request {
	r := &request{
		Table:     aws.ToString(in.TableName),
		Item:      itemText(in.Item),
		Condition: aws.ToString(in.ConditionExpression),
		Names:     in.ExpressionAttributeNames,
		Values:    itemText(in.ExpressionAttributeValues),
		NilValues: in.ExpressionAttributeValues == nil,
	}
	r.Rendered = "PUT IF " + render(r.Condition, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	return r
}

// checkGolden compares got, as indented JSON, with testdata/name; -update
// rewrites the file.
func checkGolden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	require.NoError(t, err)
	b = append(b, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, b, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "(run go test -run %s -update)", t.Name())
	assert.Equal(t, string(want), string(b), "%s mismatch", path)
}
