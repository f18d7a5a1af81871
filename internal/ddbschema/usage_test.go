package ddbschema

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUsageSnapshotItems(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"PK":           S("ns/ENTITY#e-1"),
		"SK":           S("#USAGE#openai/gpt-4#2024-02-01T00:00:00Z#monthly"),
		"entity_id":    S("e-1"),
		"resource":     S("openai/gpt-4"),
		"window":       S("monthly"),
		"window_start": S("2024-02-01T00:00:00Z"),
		"GSI2PK":       S("ns/RESOURCE#openai/gpt-4"),
		"GSI2SK":       S("USAGE#2024-02-01T00:00:00Z#e-1#monthly"),
		"GSI4PK":       S("ns"),
		"GSI4SK":       S("ns/ENTITY#e-1"),
		"ttl":          N(1714521600),
		"rpm":          N(12),
		"tpm":          N(-3),
		"total_events": N(7),
	}
	got, ok, err := UsageSnapshotFromItem(item)
	require.NoError(t, err, "UsageSnapshotFromItem = %v", ok)
	require.True(t, ok, "UsageSnapshotFromItem = %v", ok)
	want := UsageSnapshot{
		EntityID: "e-1", Resource: "openai/gpt-4", WindowType: WindowMonthly,
		WindowStart: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowEnd:   time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		Counters:    map[string]int64{"rpm": 12, "tpm": -3},
		TotalEvents: 7,
	}
	assert.Equal(t, want, got, "UsageSnapshotFromItem")
	checkItem(t, "usage snapshot", UsageSnapshotItem("ns", want, 1714521600), itemText(item))

	for _, tc := range []struct {
		name string
		drop string
		set  types.AttributeValue
	}{
		{name: "no entity_id", drop: "entity_id"},
		{name: "no resource", drop: "resource"},
		{name: "no window_start", drop: "window_start"},
		{name: "unparsable window_start", drop: "window_start", set: S("yesterday")},
	} {
		it := make(map[string]types.AttributeValue, len(item))
		for k, v := range item {
			it[k] = v
		}
		delete(it, tc.drop)
		if tc.set != nil {
			it[tc.drop] = tc.set
		}
		_, ok, err := UsageSnapshotFromItem(it)
		require.False(t, ok, "%s: ok=%v err, want skipped", tc.name, ok)
		require.NoError(t, err, "%s: ok=%v err, want skipped", tc.name, ok)
	}
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	_, _, err = UsageSnapshotFromItem(item)
	assert.Error(t, err, "UsageSnapshotFromItem(fractional counter) succeeded, want error")
}

func TestWindowKey(t *testing.T) {
	t.Parallel()
	ms := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return tm
	}
	for _, tc := range []struct {
		at                     string
		hourly, daily, monthly string
	}{
		{"2024-03-10T14:35:12.345Z", "2024-03-10T14:00:00Z", "2024-03-10T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-10T23:59:59.999Z", "2024-03-10T23:00:00Z", "2024-03-10T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-11T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-11T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2023-12-31T23:59:59.999Z", "2023-12-31T23:00:00Z", "2023-12-31T00:00:00Z", "2023-12-01T00:00:00Z"},
		{"2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"},
		{"2024-02-29T12:00:00Z", "2024-02-29T12:00:00Z", "2024-02-29T00:00:00Z", "2024-02-01T00:00:00Z"},
		// Local times are converted to UTC first.
		{"2024-01-01T03:30:00+05:00", "2023-12-31T22:00:00Z", "2023-12-31T00:00:00Z", "2023-12-01T00:00:00Z"},
	} {
		at := ms(tc.at)
		for _, w := range []struct{ window, want string }{
			{WindowHourly, tc.hourly}, {WindowDaily, tc.daily}, {WindowMonthly, tc.monthly},
		} {
			got, err := WindowKey(w.window, at)
			require.NoError(t, err, "WindowKey(%s, %s) = %q; want %q", w.window, tc.at, got, w.want)
			assert.Equal(t, w.want, got, "WindowKey(%s, %s) = %q; want %q", w.window, tc.at, got, w.want)
		}
	}
	_, err := WindowKey("weekly", time.Unix(0, 0))
	assert.EqualError(t, err, "unknown window type: weekly", "WindowKey(weekly) error")
	got, _ := WindowKey(WindowHourly, time.UnixMilli(1767225600123))
	assert.Equal(t, "2026-01-01T00:00:00Z", got, "WindowKey from epoch ms = %q", got)
}

func TestWindowEnd(t *testing.T) {
	t.Parallel()
	d := func(y int, m time.Month, day, h, mi, s int) time.Time {
		return time.Date(y, m, day, h, mi, s, 0, time.UTC)
	}
	for _, tc := range []struct {
		window string
		start  time.Time
		want   time.Time
	}{
		{WindowHourly, d(2024, 3, 10, 14, 0, 0), d(2024, 3, 10, 14, 59, 59)},
		{WindowHourly, d(2023, 12, 31, 23, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowDaily, d(2024, 3, 10, 0, 0, 0), d(2024, 3, 10, 23, 59, 59)},
		{WindowDaily, d(2023, 12, 31, 0, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowMonthly, d(2023, 12, 1, 0, 0, 0), d(2023, 12, 31, 23, 59, 59)},
		{WindowMonthly, d(2024, 2, 1, 0, 0, 0), d(2024, 2, 29, 23, 59, 59)},
		{WindowMonthly, d(2023, 2, 1, 0, 0, 0), d(2023, 2, 28, 23, 59, 59)},
		{WindowMonthly, d(2024, 4, 1, 0, 0, 0), d(2024, 4, 30, 23, 59, 59)},
		// The original keeps the start's time of day before subtracting 1 s.
		{WindowMonthly, d(2024, 1, 1, 10, 0, 0), d(2024, 2, 1, 9, 59, 59)},
		{"weekly", d(2024, 3, 10, 14, 0, 0), d(2024, 3, 10, 14, 0, 0)},
	} {
		got := WindowEnd(tc.window, tc.start)
		require.True(t, got.Equal(tc.want), "WindowEnd(%s, %s) = %s, want %s", tc.window, tc.start, got, tc.want)
		assert.Equal(t, time.UTC, got.Location(), "WindowEnd(%s, %s) = %s, want %s", tc.window, tc.start, got, tc.want)
	}
}

func TestISOSeconds(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", -5*3600))
	assert.Equal(t, "2026-01-02T08:04:05Z", FormatISOSeconds(local), "FormatISOSeconds")
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T08:04:05Z", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T09:04:05+01:00", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T08:04:05.25Z", time.Date(2026, 1, 2, 8, 4, 5, 250_000_000, time.UTC)},
	} {
		got, err := ParseISOSeconds(tc.in)
		require.NoError(t, err, "ParseISOSeconds(%q) = %v; want %v", tc.in, got, tc.want)
		require.True(t, got.Equal(tc.want), "ParseISOSeconds(%q) = %v; want %v", tc.in, got, tc.want)
		assert.Equal(t, time.UTC, got.Location(), "ParseISOSeconds(%q) = %v; want %v", tc.in, got, tc.want)
	}
	_, err := ParseISOSeconds("2026-01-02")
	assert.Error(t, err, "ParseISOSeconds(date only) succeeded, want error")
}

func TestPrimaryKeys(t *testing.T) {
	t.Parallel()
	checkItem(t, "BucketPrimaryKey", BucketPrimaryKey("ns", "e", "openai/gpt-4", 1), map[string]string{
		"PK": `S:"ns/BUCKET#e#openai/gpt-4#1"`,
		"SK": `S:"#STATE"`,
	})
	names := DiscoverLimitNames(map[string]types.AttributeValue{
		"b_rpm_tc": N(1), "b_a_b_tc": N(1), "b_x_tk": N(1), "b__tc": N(1),
	}, BucketAttrPrefix, FieldTotalConsumed)
	assert.Equal(t, []string{"a_b", "rpm"}, names, "DiscoverLimitNames")
}

func TestUsageSnapshotUpdate(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	exp := at.Add(90 * 24 * time.Hour)
	in, err := UsageSnapshotUpdate("t", "ns1", UsageSnapshot{
		EntityID: "e", Resource: "gpt-4", WindowType: WindowHourly, WindowStart: at,
		Counters: map[string]int64{"tpm-x": -3, "rpm": 2, WCULimitName: 9, "ttl": 1, "GSI4SK": 4}, TotalEvents: 2,
	}, exp)
	require.NoError(t, err)
	got := updateRequest(in)
	want := `SET entity_id = "e", resource = if_not_exists(resource, "gpt-4"), window = if_not_exists(window, "hourly"), ` +
		`window_start = if_not_exists(window_start, "2026-03-04T05:00:00Z"), GSI2PK = "ns1/RESOURCE#gpt-4", ` +
		`GSI2SK = "USAGE#2026-03-04T05:00:00Z#e#hourly", GSI4PK = if_not_exists(GSI4PK, "ns1"), GSI4SK = if_not_exists(GSI4SK, "ns1/ENTITY#e"), ` +
		`ttl = if_not_exists(ttl, ` + strconv.FormatInt(exp.Unix(), 10) + `) ADD rpm 2, tpm-x -3, total_events 2`
	assert.Equal(t, want, got.Rendered, "update\n got %s\nwant %s", got.Rendered, want)
	assert.Equal(t, map[string]string{"PK": `S:"ns1/ENTITY#e"`, "SK": `S:"#USAGE#gpt-4#2026-03-04T05:00:00Z#hourly"`}, got.Key, "key")
	assert.NotContains(t, got.Update, "tpm-x", "update %q condition %q: limit names must go through placeholders, no condition", got.Update, got.Condition)
	assert.Equal(t, "", got.Condition, "update %q condition %q: limit names must go through placeholders, no condition", got.Update, got.Condition)

	for name, s := range map[string]UsageSnapshot{
		"unknown window": {EntityID: "e", Resource: "r", WindowType: "weekly", WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"no entity":      {Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"no resource":    {EntityID: "e", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"nothing to add": {EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{WCULimitName: 1, "window": 3}},
	} {
		_, err := UsageSnapshotUpdate("t", "ns1", s, exp)
		if name == "unknown window" {
			assert.EqualError(t, err, "unknown window type: weekly", name)
		} else {
			assert.ErrorIs(t, err, ErrInvalidSnapshot, name)
		}
	}
	// Only events: no counter, still a valid update.
	_, err = UsageSnapshotUpdate("t", "ns1", UsageSnapshot{EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at, TotalEvents: 1}, exp)
	require.NoError(t, err, "events only")
}

func TestWindowStart(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600))
	for w, want := range map[string]string{
		WindowHourly: "2026-03-04T04:00:00Z", WindowDaily: "2026-03-04T00:00:00Z", WindowMonthly: "2026-03-01T00:00:00Z",
	} {
		got, err := WindowStart(w, at)
		require.NoError(t, err, "WindowStart(%s) = %v; want %s", w, got, want)
		assert.Equal(t, want, got.Format(time.RFC3339), "WindowStart(%s) = %v; want %s", w, got, want)
		assert.Equal(t, time.UTC, got.Location(), "WindowStart(%s) = %v; want %s", w, got, want)
	}
	_, err := WindowStart("weekly", at)
	assert.Error(t, err, "weekly: no error")
}

// TestUsageSnapshotKeysPerWindowType: the windows of every type that start
// at one instant are items of their own, at midnight UTC on the 1st of a
// month, on a leap day and a millisecond before midnight; the shared layout
// of the original's aggregator still reads, as the window its window
// attribute names.
func TestUsageSnapshotKeysPerWindowType(t *testing.T) {
	t.Parallel()
	exp := time.Date(2028, 6, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		at   time.Time
		want map[string]string // window type → SK
	}{
		{time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), map[string]string{
			WindowHourly:  "#USAGE#r#2028-03-01T00:00:00Z#hourly",
			WindowDaily:   "#USAGE#r#2028-03-01T00:00:00Z#daily",
			WindowMonthly: "#USAGE#r#2028-03-01T00:00:00Z#monthly",
		}},
		{time.Date(2028, 2, 29, 23, 59, 59, 999_000_000, time.UTC), map[string]string{
			WindowHourly:  "#USAGE#r#2028-02-29T23:00:00Z#hourly",
			WindowDaily:   "#USAGE#r#2028-02-29T00:00:00Z#daily",
			WindowMonthly: "#USAGE#r#2028-02-01T00:00:00Z#monthly",
		}},
		{time.Date(2028, 2, 29, 0, 30, 0, 0, time.UTC), map[string]string{
			WindowHourly:  "#USAGE#r#2028-02-29T00:00:00Z#hourly",
			WindowDaily:   "#USAGE#r#2028-02-29T00:00:00Z#daily",
			WindowMonthly: "#USAGE#r#2028-02-01T00:00:00Z#monthly",
		}},
	}
	for _, tc := range cases {
		seen := map[string]string{}
		for w, wantSK := range tc.want {
			in, err := UsageSnapshotUpdate("t", "ns", UsageSnapshot{EntityID: "e", Resource: "r", WindowType: w, WindowStart: tc.at,
				Counters: map[string]int64{"rpm": 1}, TotalEvents: 1}, exp)
			require.NoError(t, err, "%v %s", tc.at, w)
			got := updateRequest(in)
			require.Equal(t, `S:"`+wantSK+`"`, got.Key["SK"], "%v %s", tc.at, w)
			require.Empty(t, seen[got.Key["SK"]], "%v: %s and %s share an item", tc.at, w, seen[got.Key["SK"]])
			seen[got.Key["SK"]] = w
			gsi2 := strings.TrimPrefix(strings.TrimSuffix(wantSK, "#"+w), "#USAGE#r#")
			require.Contains(t, got.Rendered, `GSI2SK = "USAGE#`+gsi2+`#e#`+w+`"`, "%v %s", tc.at, w)
		}
	}

	// An item of the shared layout, as the original's aggregator writes it
	// (its window attribute set by the first window type that wrote it).
	shared := map[string]types.AttributeValue{
		"PK": S("ns/ENTITY#e"), "SK": S(SKUsageShared("r", "2028-03-01T00:00:00Z")),
		"entity_id": S("e"), "resource": S("r"), "window": S(WindowHourly), "window_start": S("2028-03-01T00:00:00Z"),
		"GSI2PK": S("ns/RESOURCE#r"), "GSI2SK": S(GSI2SKUsageShared("2028-03-01T00:00:00Z", "e")),
		"GSI4PK": S("ns"), "GSI4SK": S("ns/ENTITY#e"), "ttl": N(1), "rpm": N(8), "total_events": N(8),
	}
	got, ok, err := UsageSnapshotFromItem(shared)
	require.NoError(t, err)
	require.True(t, ok, "shared-layout item skipped")
	require.Equal(t, UsageSnapshot{EntityID: "e", Resource: "r", WindowType: WindowHourly,
		WindowStart: time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), WindowEnd: time.Date(2028, 3, 1, 0, 59, 59, 0, time.UTC),
		Counters: map[string]int64{"rpm": 8}, TotalEvents: 8}, got)
}
