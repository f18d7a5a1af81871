package limiter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

func TestLimitConstructors(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  Limit
		want Limit
	}{
		{"PerSecond", PerSecond("rps", 10), lim("rps", 10, 10, time.Second)},
		{"PerMinute", PerMinute("rpm", 100), lim("rpm", 100, 100, time.Minute)},
		{"PerHour", PerHour("rph", 1000), lim("rph", 1000, 1000, time.Hour)},
		{"PerDay", PerDay("rpd", 5), lim("rpd", 5, 5, 24*time.Hour)},
		{"WithBurst", PerMinute("tpm", 10_000).WithBurst(15_000), lim("tpm", 15_000, 10_000, time.Minute)},
		{"burst below rate", PerMinute("tpm", 10).WithBurst(5), lim("tpm", 5, 10, time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.got)
			err := tc.got.Validate()
			assert.NoError(t, err, "Validate() = %v, want nil", err)
		})
	}
	got := store.Limit(PerMinute("rpm", 60)).RefillPeriodSeconds()
	assert.EqualValues(t, 60, got, "RefillPeriodSeconds() = %d, want 60", got)
	assert.EqualValues(t, 2, store.Limit(PerMinute("rpm", 120)).RefillRate(), "RefillRate()")
}

func TestLimitValidate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      Limit
		kind       error
		field      string
		wantReason string
	}{
		{"empty name", lim("", 1, 1, time.Second), ErrInvalidName, "name", "cannot be empty"},
		{"long name", lim(strings.Repeat("a", 65), 1, 1, time.Second), ErrInvalidName, "name", "exceeds maximum length of 64"},
		{"hash", lim("a#b", 1, 1, time.Second), ErrInvalidName, "name", "cannot contain '#' (reserved delimiter)"},
		{"wcu reserved", lim("wcu", 1, 1, time.Second), ErrInvalidName, "name", "'wcu' is a reserved limit name"},
		{"starts with digit", lim("1rpm", 1, 1, time.Second), ErrInvalidName, "name",
			"must start with a letter and contain only alphanumeric, underscore, hyphen, or dot characters"},
		{"slash", lim("a/b", 1, 1, time.Second), ErrInvalidName, "name",
			"must start with a letter and contain only alphanumeric, underscore, hyphen, or dot characters"},
		{"trailing newline", lim("rpm\n", 1, 1, time.Second), ErrInvalidName, "name",
			"must start with a letter and contain only alphanumeric, underscore, hyphen, or dot characters"},
		{"zero capacity", lim("rpm", 0, 1, time.Second), ErrValidation, "capacity", "capacity must be positive"},
		{"negative capacity", lim("rpm", -1, 1, time.Second), ErrValidation, "capacity", "capacity must be positive"},
		{"zero refill", lim("rpm", 1, 0, time.Second), ErrValidation, "refill_amount", "refill_amount must be positive"},
		{"zero period", lim("rpm", 1, 1, 0), ErrValidation, "refill_period", "refill_period_seconds must be positive"},
		{"fractional period", lim("rpm", 1, 1, 1500*time.Millisecond), ErrValidation, "refill_period",
			"refill period must be a whole number of seconds"},
		{"capacity overflows millitokens", lim("rpm", 1<<62, 1, time.Second), ErrValidation, "capacity",
			"capacity and refill_amount must fit in int64 millitokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limit.Validate()
			var ve *ValidationError
			require.ErrorAs(t, err, &ve, "Validate()")
			assert.ErrorIs(t, err, tc.kind)
			assert.ErrorIs(t, err, ErrValidation)
			assert.Equal(t, tc.field, ve.Field, "field")
			assert.Equal(t, tc.wantReason, ve.Reason, "reason")
			err = Limit{Name: tc.limit.Name, Capacity: tc.limit.Capacity, RefillAmount: tc.limit.RefillAmount, RefillPeriod: tc.limit.RefillPeriod}.Validate()
			assert.Error(t, err, "Validate accepted %+v", tc.limit)
		})
	}
	for _, name := range []string{"rpm", "tpm-x", "a.b", "a_b", "A1", strings.Repeat("a", 64)} {
		err := store.ValidateLimitName(name, "name")
		assert.NoError(t, err, "ValidateLimitName(%q) = %v, want nil", name, err)
	}
}

func TestValidateLimitsDuplicate(t *testing.T) {
	err := validateLimits(storeLimits([]Limit{PerMinute("rpm", 1), PerMinute("rpm", 2)}))
	require.ErrorIs(t, err, ErrValidation, "validateLimits(duplicate) = %v, want ErrValidation", err)
	require.NoError(t, validateLimits(storeLimits([]Limit{PerMinute("rpm", 1), PerMinute("tpm", 2)})), "validateLimits(valid)")
}

func TestValidateIdentifier(t *testing.T) {
	long := strings.Repeat("a", 257)
	for _, tc := range []struct {
		value  string
		reason string
	}{
		{"", "cannot be empty"},
		{long, "exceeds maximum length of 256"},
		{"a#b", "cannot contain '#' (reserved delimiter)"},
		{"-abc", "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"},
		{"a b", "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"},
		{"user\n", "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"},
		{"a/b", "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"},
		{"é", "must start with alphanumeric and contain only alphanumeric, underscore, hyphen, dot, colon, or @ characters"},
	} {
		err := store.ValidateIdentifier(tc.value, "entity_id")
		var ve *ValidationError
		if !assert.ErrorAs(t, err, &ve, "ValidateIdentifier(%q)", tc.value) || !assert.ErrorIs(t, err, ErrInvalidIdentifier, "ValidateIdentifier(%q)", tc.value) {
			continue
		}
		assert.Equal(t, tc.reason, ve.Reason, "ValidateIdentifier(%q) reason", tc.value)
		assert.Equal(t, "entity_id", ve.Field, "ValidateIdentifier(%q) field", tc.value)
		got := ve.Error()
		assert.Equal(t, "limiter: invalid entity_id: "+tc.reason, got, "Error() = %q", got)
	}
	var ve *ValidationError
	require.ErrorAs(t, store.ValidateIdentifier(long, "entity_id"), &ve)
	assert.Equal(t, strings.Repeat("a", 50)+"...", ve.Value, "Value, want truncated")
	for _, ok := range []string{"user-1", "550e8400-e29b-41d4-a716-446655440000", "sk-proj-abc_DEF.1", "john@example.com",
		"arn:aws:iam::123456789012:user/x"[:30], "a", strings.Repeat("b", 256)} {
		err := store.ValidateIdentifier(ok, "entity_id")
		assert.NoError(t, err, "ValidateIdentifier(%q) = %v, want nil", ok, err)
	}
}

func TestValidateResource(t *testing.T) {
	const badChars = "must start with a letter and contain only alphanumeric, underscore, hyphen, dot, or slash characters"
	for _, tc := range []struct {
		value  string
		reason string
	}{
		{"", "cannot be empty"},
		{strings.Repeat("r", 65), "exceeds maximum length of 64"},
		{"gpt#4", "cannot contain '#' (reserved delimiter)"},
		{"_default_", badChars},
		{"4o", badChars},
		{"gpt-4\n", badChars},
		{"gpt 4", badChars},
	} {
		err := store.ValidateResource(tc.value)
		var ve *ValidationError
		if !assert.ErrorAs(t, err, &ve, "ValidateResource(%q)", tc.value) || !assert.ErrorIs(t, err, ErrInvalidName, "ValidateResource(%q)", tc.value) {
			continue
		}
		assert.Equal(t, tc.reason, ve.Reason, "ValidateResource(%q) reason", tc.value)
		assert.Equal(t, "resource", ve.Field, "ValidateResource(%q) field", tc.value)
	}
	for _, ok := range []string{"gpt-4", "openai/gpt-4o", "claude-3.5_sonnet", "a"} {
		err := store.ValidateResource(ok)
		assert.NoError(t, err, "ValidateResource(%q) = %v, want nil", ok, err)
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{-1500, 1000, -2}, {1500, 1000, 1}, {-1000, 1000, -1}, {0, 1000, 0}, {-1, 1000, -1},
		{1500, -1000, -2}, {-1500, -1000, 1}, {999, 1000, 0},
	} {
		got := bucketmath.FloorDiv(tc.a, tc.b)
		assert.Equal(t, tc.want, got, "bucketmath.FloorDiv(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
	}
}

func TestBucketStateHelpers(t *testing.T) {
	s := bucketStateFromLimit("e", "r", store.Limit(PerMinute("rpm", 10)), 1234)
	want := store.BucketState{EntityID: "e", Resource: "r", LimitName: "rpm", TokensMilli: 10000, LastRefillMs: 1234,
		CapacityMilli: 10000, RefillAmountMilli: 10000, RefillPeriodMs: 60000}
	require.Equal(t, want, s, "bucketStateFromLimit")
	s.TokensMilli = -1500
	got := s.Tokens()
	assert.EqualValues(t, -2, got, "Tokens() = %d, want -2", got)
	assert.Equal(t, store.Limit(PerMinute("rpm", 10)), limitFromBucketState(s), "limitFromBucketState")
	got = (LimitStatus{Requested: 5, Available: 2}).Deficit()
	assert.EqualValues(t, 3, got, "Deficit() = %d, want 3", got)
	got = (LimitStatus{Requested: 1, Available: 2}).Deficit()
	assert.EqualValues(t, 0, got, "Deficit() = %d, want 0", got)
}

func TestConsumeNamesSorted(t *testing.T) {
	got := consumeNames(Consume{"tpm": 1, "rpm": 2, "a": 0})
	assert.EqualValues(t, "a,rpm,tpm", strings.Join(got, ","), "names() = %v", got)
}

// lim is a Limit written positionally, as the tables above read best.
func lim(name string, capacity, refillAmount int64, refillPeriod time.Duration) Limit {
	return Limit{Name: name, Capacity: capacity, RefillAmount: refillAmount, RefillPeriod: refillPeriod}
}

// TestCheckNames checks that a request naming a limit none of the
// entity's limits has is refused (a typo must not turn limiting off), with
// the fast count by lookups and without: names the limits have, a typo
// among them, a limit listed twice (which validation refuses, but a stored
// config written elsewhere could hold), and a request naming fewer limits
// than there are.
func TestCheckNames(t *testing.T) {
	rl := New(newMemory())
	t.Cleanup(func() { _ = rl.Close() })
	rpm, tpm := PerMinute("rpm", 10), PerMinute("tpm", 1000)
	o := acquireOptions{override: true}
	for _, tc := range []struct {
		limits  []Limit
		consume Consume
		ok      bool
	}{
		{[]Limit{rpm, tpm}, Consume{"rpm": 1, "tpm": 5}, true},
		{[]Limit{rpm, tpm}, Consume{"tpm": 5}, true},
		{[]Limit{rpm}, Consume{"rpm": 1, "rmp": 1}, false},
		{[]Limit{rpm, tpm}, Consume{"rpm": 1, "rmp": 1}, false},
		{[]Limit{rpm, rpm}, Consume{"rpm": 1, "rmp": 1}, false},
		{[]Limit{rpm}, Consume{"rmp": 1}, false},
		{[]Limit{rpm}, Consume{}, true},
	} {
		err := rl.checkNames(t.Context(), "e", "api", tc.consume, resolved{limits: storeLimits(tc.limits)}, o)
		if tc.ok {
			assert.NoError(t, err, "%v with %v", tc.consume, tc.limits)
		} else {
			assert.ErrorIs(t, err, ErrValidation, "%v with %v", tc.consume, tc.limits)
		}
	}
}

// TestLimitMethodsAreTheStores: the root's Limit is its own type (so that
// go doc lists its methods), and each of its methods answers as the
// backends' store.Limit does.
func TestLimitMethodsAreTheStores(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	for _, l := range []Limit{PerMinute("rpm", 100), PerCalendarMonth("usd", 500), Prepaid("usd"), InFlight("calls", 8), {Name: "bad", Capacity: -1}} {
		s := store.Limit(l)
		require.Equal(t, s.WithBurst(7), store.Limit(l.WithBurst(7)))
		require.Equal(t, s.InLocation(paris), store.Limit(l.InLocation(paris)))
		require.Equal(t, s.String(), l.String())
		require.Equal(t, s.Validate(), l.Validate())
	}
}
