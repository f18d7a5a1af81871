package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// TestLimitSwitchCodec: switch records read back as written (a calendar
// definition with its zone, a rolling one, an inherited one); none encode
// as ""; a malformed or unknown-zone record is an error.
func TestLimitSwitchCodec(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	in := []store.LimitSwitch{
		{Name: "usd", From: store.Limit{Name: "usd", Capacity: 1000, Calendar: store.CalendarDay, Location: ny}, AtMs: 1_796_000_000_000},
		{Name: "usd", Resource: "gpt-4o", From: store.Limit{Name: "usd", Capacity: 1000, RefillAmount: 1000, RefillPeriod: 24 * time.Hour}, AtMs: 5},
		{Name: "tpm", Inherited: true, AtMs: 7},
		{Name: "usd", Entity: "key-1", From: store.Limit{Name: "usd", Capacity: 9, Calendar: store.CalendarMonth}, AtMs: 8},
	}
	raw, err := store.EncodeLimitSwitches(in)
	require.NoError(t, err)
	out, err := store.DecodeLimitSwitches(raw)
	require.NoError(t, err)
	require.Len(t, out, 4)
	require.Equal(t, "America/New_York", out[0].From.LocationName())
	out[0].From.Location = ny
	require.Equal(t, in, out)

	raw, err = store.EncodeLimitSwitches(nil)
	require.NoError(t, err)
	require.Equal(t, "", raw)
	out, err = store.DecodeLimitSwitches("")
	require.NoError(t, err)
	require.Nil(t, out)

	_, err = store.DecodeLimitSwitches("{")
	require.Error(t, err)
	_, err = store.DecodeLimitSwitches(`[{"n":"usd","at":1,"cal":1,"tz":"Mars/Olympus"}]`)
	require.Error(t, err)
}
