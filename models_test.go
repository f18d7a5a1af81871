package limiter

import (
	"errors"
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
			assert.False(t, tc.got != tc.want, "got %+v, want %+v", tc.got, tc.want)
			err := tc.got.Validate()
			assert.NoError(t, err, "Validate() = %v, want nil", err)
		})
	}
	got := PerMinute("rpm", 60).RefillPeriodSeconds()
	assert.EqualValues(t, 60, got, "RefillPeriodSeconds() = %d, want 60", got)
	if got := PerMinute("rpm", 120).RefillRate(); got != 2 {
		t.Errorf("RefillRate() = %v, want 2", got)
	}
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
			require.True(t, errors.As(err, &ve), "Validate() = %v, want *ValidationError", err)
			assert.False(t, !errors.Is(err, tc.kind) || !errors.Is(err, ErrValidation), "errors.Is(%v, %v) = false", err, tc.kind)
			if ve.Field != tc.field || ve.Reason != tc.wantReason {
				t.Errorf("got field %q reason %q, want %q %q", ve.Field, ve.Reason, tc.field, tc.wantReason)
			}
			if _, err := NewLimit(tc.limit.Name, tc.limit.Capacity, tc.limit.RefillAmount, tc.limit.RefillPeriod); err == nil {
				t.Errorf("NewLimit accepted %+v", tc.limit)
			}
		})
	}
	for _, name := range []string{"rpm", "tpm-x", "a.b", "a_b", "A1", strings.Repeat("a", 64)} {
		err := store.ValidateLimitName(name, "name")
		assert.NoError(t, err, "ValidateLimitName(%q) = %v, want nil", name, err)
	}
}

func TestValidateLimitsDuplicate(t *testing.T) {
	err := validateLimits([]Limit{PerMinute("rpm", 1), PerMinute("rpm", 2)})
	require.ErrorIs(t, err, ErrValidation, "validateLimits(duplicate) = %v, want ErrValidation", err)
	if err := validateLimits([]Limit{PerMinute("rpm", 1), PerMinute("tpm", 2)}); err != nil {
		t.Fatalf("validateLimits(valid) = %v", err)
	}
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
		if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("ValidateIdentifier(%q) = %v, want ErrInvalidIdentifier", tc.value, err)
			continue
		}
		if ve.Reason != tc.reason || ve.Field != "entity_id" {
			t.Errorf("ValidateIdentifier(%q) reason %q field %q, want %q", tc.value, ve.Reason, ve.Field, tc.reason)
		}
		got := ve.Error()
		assert.Equal(t, "limiter: invalid entity_id: "+tc.reason, got, "Error() = %q", got)
	}
	if err := store.ValidateIdentifier(long, "entity_id"); err != nil {
		var ve *ValidationError
		errors.As(err, &ve)
		if want := strings.Repeat("a", 50) + "..."; ve.Value != want {
			t.Errorf("Value = %q, want truncated %q", ve.Value, want)
		}
	}
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
		if !errors.As(err, &ve) || !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateResource(%q) = %v, want ErrInvalidName", tc.value, err)
			continue
		}
		if ve.Reason != tc.reason || ve.Field != "resource" {
			t.Errorf("ValidateResource(%q) = field %q reason %q, want %q", tc.value, ve.Field, ve.Reason, tc.reason)
		}
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
	s := bucketStateFromLimit("e", "r", PerMinute("rpm", 10), 1234)
	want := store.BucketState{EntityID: "e", Resource: "r", LimitName: "rpm", TokensMilli: 10000, LastRefillMs: 1234,
		CapacityMilli: 10000, RefillAmountMilli: 10000, RefillPeriodMs: 60000}
	require.False(t, s != want, "bucketStateFromLimit = %+v, want %+v", s, want)
	s.TokensMilli = -1500
	got := s.Tokens()
	assert.EqualValues(t, -2, got, "Tokens() = %d, want -2", got)
	if got := limitFromBucketState(s); got != PerMinute("rpm", 10) {
		t.Errorf("limitFromBucketState = %+v", got)
	}
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
		err := rl.checkNames(t.Context(), "e", "api", tc.consume, resolved{limits: tc.limits}, o)
		if tc.ok {
			assert.NoError(t, err, "%v with %v", tc.consume, tc.limits)
		} else {
			assert.ErrorIs(t, err, ErrValidation, "%v with %v", tc.consume, tc.limits)
		}
	}
}
