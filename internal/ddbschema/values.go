package ddbschema

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// S returns a string attribute value.
func S(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// N returns a number attribute value holding n in decimal.
func N(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// Bool returns a BOOL attribute value.
func Bool(b bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: b} }

// Null returns a NULL attribute value.
func Null() types.AttributeValue { return &types.AttributeValueMemberNULL{Value: true} }

// SOrNull returns S(s), or NULL when s is empty (the layout's absent
// value).
func SOrNull(s string) types.AttributeValue {
	if s == "" {
		return Null()
	}
	return S(s)
}

// GetS returns the string attribute name of item; ok is false when it is
// absent or not of type S.
func GetS(item map[string]types.AttributeValue, name string) (s string, ok bool) {
	if v, isS := item[name].(*types.AttributeValueMemberS); isS {
		return v.Value, true
	}
	return "", false
}

// GetN returns the number attribute name of item as an int64; ok is false
// when it is absent or not of type N. A number that is not a decimal int64
// is an error.
func GetN(item map[string]types.AttributeValue, name string) (n int64, ok bool, err error) {
	v, isN := item[name].(*types.AttributeValueMemberN)
	if !isN {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s: invalid integer %q", name, v.Value)
	}
	return n, true, nil
}

// GetNOr returns the number attribute name of item, or def when it is
// absent.
func GetNOr(item map[string]types.AttributeValue, name string, def int64) (int64, error) {
	n, ok, err := GetN(item, name)
	if err != nil || !ok {
		return def, err
	}
	return n, nil
}

// GetBool returns the BOOL attribute name of item; ok is false when it is
// absent or not of type BOOL.
func GetBool(item map[string]types.AttributeValue, name string) (b, ok bool) {
	if v, isBool := item[name].(*types.AttributeValueMemberBOOL); isBool {
		return v.Value, true
	}
	return false, false
}

// GetTime parses the timestamp attribute name of item (see
// [ParseISOSeconds]); the zero time when it is absent, NULL or unparsable.
func GetTime(item map[string]types.AttributeValue, name string) time.Time {
	s, ok := GetS(item, name)
	if !ok {
		return time.Time{}
	}
	t, err := ParseISOSeconds(s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// PrimaryKey returns the key map {PK: pk, SK: sk}.
func PrimaryKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: S(pk), AttrSK: S(sk)}
}

// BucketPrimaryKey returns the key of a bucket item.
func BucketPrimaryKey(ns, entityID, resource string, shard int) map[string]types.AttributeValue {
	return PrimaryKey(PKBucket(ns, entityID, resource, shard), SKState)
}

// DiscoverLimitNames returns, sorted, the limit names L for which item has
// an attribute `{prefix}{L}_{field}` with a non-empty L. This is how the
// table's clients discover limits: buckets by b_*_tk, configs by l_*_cp.
func DiscoverLimitNames(item map[string]types.AttributeValue, prefix, field string) []string {
	suffix := "_" + field
	var names []string
	for attr := range item {
		if len(attr) > len(prefix)+len(suffix) && strings.HasPrefix(attr, prefix) && strings.HasSuffix(attr, suffix) {
			names = append(names, attr[len(prefix):len(attr)-len(suffix)])
		}
	}
	sort.Strings(names)
	return names
}
