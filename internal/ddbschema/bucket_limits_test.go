package ddbschema

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bucketLimitsByName is how the limits of a bucket item were read before the
// one-pass reader: discover the names by b_*_tk, then read each field by
// its attribute name. bucketLimits must agree with it.
func bucketLimitsByName(item map[string]types.AttributeValue) ([]BucketLimit, error) {
	var out []BucketLimit
	for _, name := range DiscoverLimitNames(item, BucketAttrPrefix, FieldTokens) {
		l := BucketLimit{Name: name}
		for _, f := range []struct {
			field string
			dst   *int64
		}{
			{FieldTokens, &l.TokensMilli}, {FieldCapacity, &l.CapacityMilli}, {FieldRefillAmount, &l.RefillAmountMilli},
			{FieldRefillPeriod, &l.RefillPeriodMs}, {FieldTotalConsumed, &l.TotalConsumedMilli},
		} {
			var err error
			if *f.dst, err = GetNOr(item, BucketAttr(name, f.field), 0); err != nil {
				return nil, err
			}
		}
		out = append(out, l)
	}
	return out, nil
}

func TestBucketLimitsOnePass(t *testing.T) {
	for name, item := range map[string]map[string]types.AttributeValue{
		"two limits and wcu": {
			"b_rpm_tk": N(9000), "b_rpm_cp": N(10000), "b_rpm_ra": N(10000), "b_rpm_rp": N(60000), "b_rpm_tc": N(1000),
			"b_wcu_tk": N(1000000), "b_wcu_cp": N(1000000), "b_wcu_ra": N(1000000), "b_wcu_rp": N(1000), "b_wcu_tc": N(0),
			"b_tpm_tk": N(5), "b_tpm_cp": N(7), "rf": N(3), "PK": S("ns/BUCKET#e#r#0"),
		},
		"underscores in names": {
			"b_my_limit_tk": N(1), "b_my_limit_cp": N(2), "b_a_tk_tk": N(3), "b_a_tk_cp": N(4), "b_a_tk": N(5),
		},
		"fields without tokens, wrong types, odd names": {
			"b_x_cp": N(1), "b_y_tk": S("7"), "b_y_cp": N(2), "b__tk": N(3), "b_z_zz": N(4), "b_tk": N(5), "l_q_tk": N(6),
		},
		"no limits": {"PK": S("ns/BUCKET#e#r#0")},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := bucketLimitsByName(item)
			require.NoError(t, err)
			got, err := bucketLimits(item)
			require.NoError(t, err)
			assert.Equal(t, len(want), len(got))
			if len(want) > 0 {
				assert.Equal(t, want, got)
			}
		})
	}
	_, err := bucketLimits(map[string]types.AttributeValue{"b_x_tk": N(1), "b_x_cp": &types.AttributeValueMemberN{Value: "1.5"}})
	assert.ErrorContains(t, err, `attribute b_x_cp: invalid integer "1.5"`)
	// A malformed field of a limit without tokens is not read, as before.
	_, err = bucketLimits(map[string]types.AttributeValue{"b_x_cp": &types.AttributeValueMemberN{Value: "1.5"}})
	assert.NoError(t, err)
}

func TestBucketFromItemAllocs(t *testing.T) {
	item := map[string]types.AttributeValue{
		"PK": S("ns/BUCKET#e#r#0"), "SK": S(SKState), "rf": N(3),
		"b_rpm_tk": N(9000), "b_rpm_cp": N(10000), "b_rpm_ra": N(10000), "b_rpm_rp": N(60000), "b_rpm_tc": N(1000),
		"b_tpm_tk": N(9000), "b_tpm_cp": N(10000), "b_tpm_ra": N(10000), "b_tpm_rp": N(60000), "b_tpm_tc": N(1000),
		"b_wcu_tk": N(1000000), "b_wcu_cp": N(1000000), "b_wcu_ra": N(1000000), "b_wcu_rp": N(1000), "b_wcu_tc": N(0),
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := BucketFromItem(item); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 4.0, "allocations of BucketFromItem")
}
