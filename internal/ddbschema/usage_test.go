package ddbschema

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func TestUsageSnapshotItems(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"PK":           S("ns/ENTITY#e-1"),
		"SK":           S("#USAGE#openai/gpt-4#2024-02-01T00:00:00Z"),
		"entity_id":    S("e-1"),
		"resource":     S("openai/gpt-4"),
		"window":       S("monthly"),
		"window_start": S("2024-02-01T00:00:00Z"),
		"GSI2PK":       S("ns/RESOURCE#openai/gpt-4"),
		"GSI2SK":       S("USAGE#2024-02-01T00:00:00Z#e-1"),
		"GSI4PK":       S("ns"),
		"GSI4SK":       S("ns/ENTITY#e-1"),
		"ttl":          N(1714521600),
		"rpm":          N(12),
		"tpm":          N(-3),
		"total_events": N(7),
	}
	got, ok, err := UsageSnapshotFromItem(item)
	if err != nil || !ok {
		t.Fatalf("UsageSnapshotFromItem = %v, %v", ok, err)
	}
	want := UsageSnapshot{
		EntityID: "e-1", Resource: "openai/gpt-4", WindowType: WindowMonthly,
		WindowStart: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowEnd:   time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		Counters:    map[string]int64{"rpm": 12, "tpm": -3},
		TotalEvents: 7,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UsageSnapshotFromItem (-want +got):\n%s", diff)
	}
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
		if _, ok, err := UsageSnapshotFromItem(it); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want skipped", tc.name, ok, err)
		}
	}
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	if _, _, err := UsageSnapshotFromItem(item); err == nil {
		t.Error("UsageSnapshotFromItem(fractional counter) succeeded, want error")
	}
}

func TestWindowKey(t *testing.T) {
	t.Parallel()
	ms := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
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
			if err != nil || got != w.want {
				t.Errorf("WindowKey(%s, %s) = %q, %v; want %q", w.window, tc.at, got, err, w.want)
			}
		}
	}
	if _, err := WindowKey("weekly", time.Unix(0, 0)); err == nil || err.Error() != "unknown window type: weekly" {
		t.Errorf("WindowKey(weekly) error = %v", err)
	}
	if got, _ := WindowKey(WindowHourly, time.UnixMilli(1767225600123)); got != "2026-01-01T00:00:00Z" {
		t.Errorf("WindowKey from epoch ms = %q", got)
	}
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
		if got := WindowEnd(tc.window, tc.start); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("WindowEnd(%s, %s) = %s, want %s", tc.window, tc.start, got, tc.want)
		}
	}
}

func TestISOSeconds(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", -5*3600))
	if got := FormatISOSeconds(local); got != "2026-01-02T08:04:05Z" {
		t.Errorf("FormatISOSeconds = %q", got)
	}
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T08:04:05Z", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T09:04:05+01:00", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T08:04:05.25Z", time.Date(2026, 1, 2, 8, 4, 5, 250_000_000, time.UTC)},
	} {
		got, err := ParseISOSeconds(tc.in)
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("ParseISOSeconds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := ParseISOSeconds("2026-01-02"); err == nil {
		t.Error("ParseISOSeconds(date only) succeeded, want error")
	}
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
	if diff := cmp.Diff([]string{"a_b", "rpm"}, names); diff != "" {
		t.Errorf("DiscoverLimitNames (-want +got):\n%s", diff)
	}
}

func TestUsageSnapshotUpdate(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	exp := at.Add(90 * 24 * time.Hour)
	in, err := UsageSnapshotUpdate("t", "ns1", UsageSnapshot{
		EntityID: "e", Resource: "gpt-4", WindowType: WindowHourly, WindowStart: at,
		Counters: map[string]int64{"tpm-x": -3, "rpm": 2, WCULimitName: 9, "ttl": 1, "GSI4SK": 4}, TotalEvents: 2,
	}, exp)
	if err != nil {
		t.Fatal(err)
	}
	got := updateRequest(in)
	want := `SET entity_id = "e", resource = if_not_exists(resource, "gpt-4"), window = if_not_exists(window, "hourly"), ` +
		`window_start = if_not_exists(window_start, "2026-03-04T05:00:00Z"), GSI2PK = "ns1/RESOURCE#gpt-4", ` +
		`GSI2SK = "USAGE#2026-03-04T05:00:00Z#e", GSI4PK = if_not_exists(GSI4PK, "ns1"), GSI4SK = if_not_exists(GSI4SK, "ns1/ENTITY#e"), ` +
		`ttl = if_not_exists(ttl, ` + strconv.FormatInt(exp.Unix(), 10) + `) ADD rpm 2, tpm-x -3, total_events 2`
	if got.Rendered != want {
		t.Errorf("update\n got %s\nwant %s", got.Rendered, want)
	}
	if diff := cmp.Diff(map[string]string{"PK": `S:"ns1/ENTITY#e"`, "SK": `S:"#USAGE#gpt-4#2026-03-04T05:00:00Z"`}, got.Key); diff != "" {
		t.Errorf("key (-want +got):\n%s", diff)
	}
	if strings.Contains(got.Update, "tpm-x") || got.Condition != "" {
		t.Errorf("update %q condition %q: limit names must go through placeholders, no condition", got.Update, got.Condition)
	}

	for name, s := range map[string]UsageSnapshot{
		"unknown window": {EntityID: "e", Resource: "r", WindowType: "weekly", WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"no entity":      {Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"no resource":    {EntityID: "e", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{"rpm": 1}},
		"nothing to add": {EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at, Counters: map[string]int64{WCULimitName: 1, "window": 3}},
	} {
		_, err := UsageSnapshotUpdate("t", "ns1", s, exp)
		switch {
		case err == nil:
			t.Errorf("%s: no error", name)
		case name == "unknown window" && err.Error() != "unknown window type: weekly":
			t.Errorf("%s: %v", name, err)
		case name != "unknown window" && !errors.Is(err, ErrInvalidSnapshot):
			t.Errorf("%s: %v, want ErrInvalidSnapshot", name, err)
		}
	}
	// Only events: no counter, still a valid update.
	if _, err := UsageSnapshotUpdate("t", "ns1", UsageSnapshot{EntityID: "e", Resource: "r", WindowType: WindowDaily, WindowStart: at, TotalEvents: 1}, exp); err != nil {
		t.Errorf("events only: %v", err)
	}
}

func TestWindowStart(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("X", 3600))
	for w, want := range map[string]string{
		WindowHourly: "2026-03-04T04:00:00Z", WindowDaily: "2026-03-04T00:00:00Z", WindowMonthly: "2026-03-01T00:00:00Z",
	} {
		got, err := WindowStart(w, at)
		if err != nil || got.Format(time.RFC3339) != want || got.Location() != time.UTC {
			t.Errorf("WindowStart(%s) = %v, %v; want %s", w, got, err, want)
		}
	}
	if _, err := WindowStart("weekly", at); err == nil {
		t.Error("weekly: no error")
	}
}
