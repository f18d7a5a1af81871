package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCharClassMatchesPattern checks the hand-written matchers against the
// original's regular expressions (the "$" of which no longer lets a trailing
// newline through) on every short string over an alphabet of the
// interesting bytes, and on random longer ones.
func TestCharClassMatchesPattern(t *testing.T) {
	alphabet := []byte("aZ09_.-:@/#é \n\x00[`{")
	rules := []nameRule{identifierRule, limitNameRule, resourceRule}
	check := func(s string) {
		for _, r := range rules {
			require.Equal(t, r.pattern.MatchString(s), r.chars.match(s), "%q: the matcher disagrees with the regexp %v", s, r.pattern)
		}
	}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if prefix != "" {
			check(prefix)
		}
		if n == 0 {
			return
		}
		for _, b := range alphabet {
			gen(prefix+string(b), n-1)
		}
	}
	gen("", 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		check(string(b))
	}
}

// TestIsOwnBucketResource: the derived names of the buckets of prepaid
// balances and calendar periods, and only they, are own-bucket resources.
func TestIsOwnBucketResource(t *testing.T) {
	for res, want := range map[string]bool{
		"gpt-4o/usd.balance":          true,
		"a/b/usd.v2.balance":          true,
		"gpt-4o/usd.m2026-11":         true,
		"gpt-4o/usd.d2026-11-30":      true,
		"gpt-4o/usd.w2026-11-30":      true,
		"gpt-4o":                      false,
		"usd.balance":                 false,
		"gpt-4o/usd.balances":         false,
		"gpt-4o/.balance":             false,
		"gpt-4o/1usd.balance":         false,
		"gpt-4o/usd.m2026-1":          false,
		"gpt-4o/usd.m2026/11":         false,
		"gpt-4o/usd.x2026-11-30":      false,
		"gpt-4o/usd.d2026-11-3x":      false,
		"gpt-4o/usd.w2026-11-30extra": false,
	} {
		require.Equal(t, want, IsOwnBucketResource(res), res)
		if want {
			require.ErrorIs(t, ValidateChargedResource(res), ErrInvalidName, res)
		} else if ValidateResource(res) == nil {
			require.NoError(t, ValidateChargedResource(res), res)
		}
	}
}

// TestValidateAllResources: "*" is a resource wherever one is taken,
// except as the resource an acquire charges; no other name with "*" is.
func TestValidateAllResources(t *testing.T) {
	require.NoError(t, ValidateResource(AllResources))
	require.NoError(t, ValidateChargedResource(AllResources))
	require.ErrorIs(t, ValidateAcquiredResource(AllResources), ErrInvalidName)
	require.NoError(t, ValidateAcquiredResource("gpt-4o"))
	for _, bad := range []string{"**", "*a", "a*", "gpt-*", " *"} {
		require.ErrorIs(t, ValidateResource(bad), ErrInvalidName, bad)
	}
	require.True(t, IsOwnBucketResource(AllResources+"/usd.balance"))
	require.True(t, IsOwnBucketResource(AllResources+"/usd.m2026-11"))
}

// TestInFlightBucketResourceReserved: the bucket resources of in-flight
// generations of earlier layouts are refused as charged resources;
// look-alikes are not.
func TestInFlightBucketResourceReserved(t *testing.T) {
	l := Limit{Name: "calls", Capacity: 8, InFlight: true}
	bucket := "gpt-4o/calls.slots.117821536"
	require.ErrorIs(t, ValidateChargedResource(bucket), ErrInvalidName)
	for _, ok := range []string{"gpt-4o/calls.slots.", "gpt-4o/calls.slots.1x", "calls.slots.12", "gpt-4o/calls.slot.12"} {
		require.NoError(t, ValidateChargedResource(ok), ok)
	}
	require.ErrorIs(t, Limit{Name: "calls", Capacity: 8, RefillAmount: 1, InFlight: true}.Validate(), ErrValidation)
	require.ErrorIs(t, Limit{Name: "calls", InFlight: true}.Validate(), ErrValidation)
	require.NoError(t, l.Validate())
}

// TestInFlightSlotLimitNames: the limit of a generation of in-flight
// slots is named {limit}.slots.{generation}, parses back to its in-flight
// limit, and such names are refused as limit names; look-alikes are not.
func TestInFlightSlotLimitNames(t *testing.T) {
	l := Limit{Name: "calls.v2", Capacity: 8, InFlight: true}
	s := l.InFlightSlotLimit(117821536)
	require.Equal(t, Limit{Name: "calls.v2.slots.117821536", Capacity: 8, RefillAmount: 1, RefillPeriod: CalendarBucketRefillPeriod}, s)
	back, gen, ok := SlotLimitOf(s)
	require.True(t, ok)
	require.Equal(t, l, back)
	require.Equal(t, int64(117821536), gen)
	require.ErrorIs(t, ValidateLimitName(s.Name, "name"), ErrInvalidName)
	require.ErrorIs(t, Limit{Name: s.Name, Capacity: 1, RefillAmount: 1, RefillPeriod: time.Second}.Validate(), ErrInvalidName)
	for _, ok := range []string{"calls.slots.", "calls.slots.1x", "calls.slot.12", "slots.12", "calls.slots"} {
		require.NoError(t, ValidateLimitName(ok, "name"), ok)
		_, _, parsed := ParseSlotLimitName(ok)
		require.False(t, parsed, ok)
	}
	_, _, ok = SlotLimitOf(Limit{Name: "calls.slots.3", Capacity: 8, RefillAmount: 1, RefillPeriod: time.Minute})
	require.False(t, ok, "a rolling limit of another refill is not a generation's")
}
