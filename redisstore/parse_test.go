package redisstore_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/zaelimiter/limiter/redisstore"
)

// TestParseStored checks the in-place parser of stored numbers against
// strconv, and its saturation at the int64 limits.
func TestParseStored(t *testing.T) {
	for _, s := range []string{"0", "7", "-7", "123456789012345678", "-123456789012345678",
		"999999999999999999", "1000000000000000000", "9223372036854775807", "-9223372036854775808",
		"1073741824000", "-1", "12a", "", "-", "+5", "007"} {
		want, _ := strconv.ParseInt(s, 10, 64)
		assert.Equal(t, want, redisstore.ParseStored(s), "%q", s)
	}
	assert.Equal(t, int64(math.MaxInt64), redisstore.ParseStored("9223372036854775808"))
	assert.Equal(t, int64(math.MaxInt64), redisstore.ParseStored("123456789012345678901234567890"))
	assert.Equal(t, int64(math.MinInt64), redisstore.ParseStored("-9223372036854775809"))
}
