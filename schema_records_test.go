package limiter

import (
	"bytes"
	"math"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func TestVersionRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 25, 12, 0, 1, 0, time.UTC)
	v := versionRecord{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", UpdatedBy: "client:0.1.0", UpdatedAt: at}
	item := versionItem(v)
	schemaCheckItem(t, "version record", item, map[string]string{
		"PK":                 `S:"_/SYSTEM#"`,
		"SK":                 `S:"#VERSION"`,
		"schema_version":     `S:"0.10.0"`,
		"client_min_version": `S:"0.0.0"`,
		"updated_at":         `S:"2026-06-25T12:00:01Z"`,
		"lambda_version":     `NULL:true`,
		"updated_by":         `S:"client:0.1.0"`,
		"GSI4PK":             `S:"_"`,
		"GSI4SK":             `S:"_/SYSTEM#"`,
	})
	if diff := cmp.Diff(v, versionFromItem(item)); diff != "" {
		t.Errorf("version round trip (-want +got):\n%s", diff)
	}
	item[attrTemplateVersion] = schemaS("0.9.0")
	item[attrLambdaVersion] = schemaS("0.10.3")
	got := versionFromItem(item)
	if got.TemplateVersion != "0.9.0" || got.LambdaVersion != "0.10.3" {
		t.Errorf("versionFromItem = %+v", got)
	}
}

func TestNamespaceRecords(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	r := namespaceRecord{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: namespaceActive, CreatedAt: created}
	fwd := namespaceForwardItem(r)
	schemaCheckItem(t, "forward", fwd, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NAMESPACE#tenant-a"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"active"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	deleted := r
	deleted.Status = namespaceDeleted
	deleted.DeletedAt = created.Add(time.Hour)
	rev := namespaceReverseItem(deleted)
	schemaCheckItem(t, "reverse", rev, map[string]string{
		"PK":             `S:"_/SYSTEM#"`,
		"SK":             `S:"#NSID#E9P6iV0e9iQ"`,
		"namespace_id":   `S:"E9P6iV0e9iQ"`,
		"namespace_name": `S:"tenant-a"`,
		"status":         `S:"deleted"`,
		"created_at":     `S:"2026-03-01T08:00:00Z"`,
		"deleted_at":     `S:"2026-03-01T09:00:00Z"`,
		"GSI4PK":         `S:"_"`,
		"GSI4SK":         `S:"_/SYSTEM#"`,
	})
	if _, ok := namespaceReverseItem(r)[attrDeletedAt]; ok {
		t.Error("active reverse record has deleted_at")
	}
	if diff := cmp.Diff(r, namespaceFromItem(fwd)); diff != "" {
		t.Errorf("forward round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(deleted, namespaceFromItem(rev)); diff != "" {
		t.Errorf("reverse round trip (-want +got):\n%s", diff)
	}
}

func TestAuditItem(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := AuditEvent{
		EventID:   "01M812K98TDJXJ05Q7ZQETE6EN",
		Timestamp: ts,
		Action:    AuditEntityCreated,
		EntityID:  "C",
		Principal: "arn:aws:iam::123456789012:user/alice",
		Details: map[string]any{
			"name":      "C",
			"parent_id": nil,
			"cascade":   true,
			"metadata":  map[string]string{"tier": "gold"},
			"count":     3,
			"ratio":     1.5,
			"whole":     2.0,
			"mode":      OnUnavailableAllow,
			"limits":    []Limit{PerMinute("rpm", 100)},
			"names":     []string{"rpm", "tpm"},
			"when":      ts,                        // unsupported in a map: dropped
			"mixed":     []any{"a", int64(-7), ts}, // unsupported in a list: stringified
		},
	}
	ttl := ttlEpochSeconds(ts.UnixMilli(), 90*86400)
	item, err := auditItem("ns", e, ttl)
	if err != nil {
		t.Fatal(err)
	}
	schemaCheckItem(t, "audit", item, map[string]string{
		"PK":        `S:"ns/AUDIT#C"`,
		"SK":        `S:"#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"`,
		"entity_id": `S:"C"`,
		"event_id":  `S:"01M812K98TDJXJ05Q7ZQETE6EN"`,
		"timestamp": `S:"2026-01-02T03:04:05Z"`,
		"action":    `S:"entity_created"`,
		"principal": `S:"arn:aws:iam::123456789012:user/alice"`,
		"resource":  `NULL:true`,
		"details": `M:{cascade=BOOL:true, count=N:3, limits=L:[M:{capacity=N:100, name=S:"rpm", refill_amount=N:100, refill_period_seconds=N:60}], ` +
			`metadata=M:{tier=S:"gold"}, mixed=L:[S:"a", N:-7, S:"2026-01-02 03:04:05 +0000 UTC"], mode=S:"allow", name=S:"C", ` +
			`names=L:[S:"rpm", S:"tpm"], parent_id=NULL:true, ratio=N:1.5, whole=N:2.0}`,
		"ttl":    `N:1775099045`,
		"GSI4PK": `S:"ns"`,
		"GSI4SK": `S:"ns/AUDIT#C"`,
	})

	got, ok, err := auditEventFromItem(item)
	if err != nil || !ok {
		t.Fatalf("auditEventFromItem = %v, %v", ok, err)
	}
	want := e
	want.Details = map[string]any{
		"name":      "C",
		"parent_id": nil,
		"cascade":   true,
		"metadata":  map[string]any{"tier": "gold"},
		"count":     int64(3),
		"ratio":     1.5,
		"whole":     2.0,
		"mode":      "allow",
		"limits":    []any{map[string]any{"name": "rpm", "capacity": int64(100), "refill_amount": int64(100), "refill_period_seconds": int64(60)}},
		"names":     []any{"rpm", "tpm"},
		"mixed":     []any{"a", int64(-7), "2026-01-02 03:04:05 +0000 UTC"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit round trip (-want +got):\n%s", diff)
	}

	// Minimal event: no principal, resource-scoped, nil details.
	minimal := AuditEvent{EventID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Timestamp: ts, Action: AuditLimitsDeleted, EntityID: auditEntityResource("gpt-4"), Resource: "gpt-4"}
	item, err = auditItem("ns", minimal, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := schemaAVText(item[attrPrincipal]) + " " + schemaAVText(item[attrDetails]); got != "NULL:true M:{}" {
		t.Errorf("principal/details = %s", got)
	}
	got, ok, err = auditEventFromItem(item)
	minimal.Details = map[string]any{}
	if diff := cmp.Diff(minimal, got); err != nil || !ok || diff != "" {
		t.Errorf("minimal audit round trip (ok=%v err=%v) (-want +got):\n%s", ok, err, diff)
	}

	if _, err := auditItem("ns", AuditEvent{Details: map[string]any{"x": math.NaN()}}, 0); err == nil {
		t.Error("auditItem(NaN) succeeded, want error")
	}
	if _, ok, err := auditEventFromItem(map[string]types.AttributeValue{"event_id": schemaS("x")}); ok || err != nil {
		t.Errorf("auditEventFromItem(no action) = %v, %v; want skipped", ok, err)
	}
	bad := map[string]types.AttributeValue{"action": schemaS("a"), "details": &types.AttributeValueMemberM{
		Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "x"}}}}
	if _, _, err := auditEventFromItem(bad); err == nil {
		t.Error("auditEventFromItem(bad number) succeeded, want error")
	}
}

func TestUsageSnapshotItems(t *testing.T) {
	t.Parallel()
	item := map[string]types.AttributeValue{
		"PK":           schemaS("ns/ENTITY#e-1"),
		"SK":           schemaS("#USAGE#openai/gpt-4#2024-02-01T00:00:00Z"),
		"entity_id":    schemaS("e-1"),
		"resource":     schemaS("openai/gpt-4"),
		"window":       schemaS("monthly"),
		"window_start": schemaS("2024-02-01T00:00:00Z"),
		"GSI2PK":       schemaS("ns/RESOURCE#openai/gpt-4"),
		"GSI2SK":       schemaS("USAGE#2024-02-01T00:00:00Z#e-1"),
		"GSI4PK":       schemaS("ns"),
		"GSI4SK":       schemaS("ns/ENTITY#e-1"),
		"ttl":          schemaN(1714521600),
		"rpm":          schemaN(12),
		"tpm":          schemaN(-3),
		"total_events": schemaN(7),
	}
	got, ok, err := usageSnapshotFromItem(item)
	if err != nil || !ok {
		t.Fatalf("usageSnapshotFromItem = %v, %v", ok, err)
	}
	want := UsageSnapshot{
		EntityID: "e-1", Resource: "openai/gpt-4", WindowType: WindowMonthly,
		WindowStart: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowEnd:   time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		Counters:    map[string]int64{"rpm": 12, "tpm": -3},
		TotalEvents: 7,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usageSnapshotFromItem (-want +got):\n%s", diff)
	}
	schemaCheckItem(t, "usage snapshot", usageSnapshotItem("ns", want, 1714521600), schemaItemText(item))

	for _, tc := range []struct {
		name string
		drop string
		set  types.AttributeValue
	}{
		{name: "no entity_id", drop: "entity_id"},
		{name: "no resource", drop: "resource"},
		{name: "no window_start", drop: "window_start"},
		{name: "unparsable window_start", drop: "window_start", set: schemaS("yesterday")},
	} {
		it := make(map[string]types.AttributeValue, len(item))
		for k, v := range item {
			it[k] = v
		}
		delete(it, tc.drop)
		if tc.set != nil {
			it[tc.drop] = tc.set
		}
		if _, ok, err := usageSnapshotFromItem(it); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want skipped", tc.name, ok, err)
		}
	}
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	if _, _, err := usageSnapshotFromItem(item); err == nil {
		t.Error("usageSnapshotFromItem(fractional counter) succeeded, want error")
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
			got, err := windowKey(w.window, at)
			if err != nil || got != w.want {
				t.Errorf("windowKey(%s, %s) = %q, %v; want %q", w.window, tc.at, got, err, w.want)
			}
		}
	}
	if _, err := windowKey("weekly", time.Unix(0, 0)); err == nil || err.Error() != "unknown window type: weekly" {
		t.Errorf("windowKey(weekly) error = %v", err)
	}
	if got, _ := windowKey(WindowHourly, time.UnixMilli(1767225600123)); got != "2026-01-01T00:00:00Z" {
		t.Errorf("windowKey from epoch ms = %q", got)
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
		if got := windowEnd(tc.window, tc.start); !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("windowEnd(%s, %s) = %s, want %s", tc.window, tc.start, got, tc.want)
		}
	}
}

func TestISOSeconds(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.FixedZone("X", -5*3600))
	if got := formatISOSeconds(local); got != "2026-01-02T08:04:05Z" {
		t.Errorf("formatISOSeconds = %q", got)
	}
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T08:04:05Z", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T09:04:05+01:00", time.Date(2026, 1, 2, 8, 4, 5, 0, time.UTC)},
		{"2026-01-02T08:04:05.25Z", time.Date(2026, 1, 2, 8, 4, 5, 250_000_000, time.UTC)},
	} {
		got, err := parseISOSeconds(tc.in)
		if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("parseISOSeconds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseISOSeconds("2026-01-02"); err == nil {
		t.Error("parseISOSeconds(date only) succeeded, want error")
	}
}

// schemaRepeatReader returns b forever.
type schemaRepeatReader struct{ b byte }

func (r schemaRepeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.b
	}
	return len(p), nil
}

func TestNewNamespaceID(t *testing.T) {
	t.Parallel()
	alphabet := regexp.MustCompile(`\A[A-Za-z0-9_-]{11}\z`)
	seen := map[string]bool{}
	for range 200 {
		id, err := newNamespaceID(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(id) || id[0] == '-' {
			t.Fatalf("newNamespaceID() = %q, want 11 chars of [A-Za-z0-9_-] not starting with '-'", id)
		}
		seen[id] = true
	}
	if len(seen) < 200 {
		t.Errorf("newNamespaceID produced duplicates: %d distinct of 200", len(seen))
	}

	// The first 8 bytes encode to "-AAAAAAAAAA" and must be rejected.
	src := bytes.NewReader([]byte{0xF8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	id, err := newNamespaceID(src)
	if err != nil || id != "AAECAwQFBgc" {
		t.Errorf("newNamespaceID(leading '-' first) = %q, %v; want AAECAwQFBgc", id, err)
	}
	// Ids may start with '_'.
	if id, err := newNamespaceID(schemaRepeatReader{0xFC}); err != nil || id[0] != '_' {
		t.Errorf("newNamespaceID(0xFC...) = %q, %v; want leading '_'", id, err)
	}
	if _, err := newNamespaceID(schemaRepeatReader{0xF8}); err == nil {
		t.Error("newNamespaceID(always '-') succeeded, want error")
	}
	if _, err := newNamespaceID(bytes.NewReader([]byte{1, 2, 3})); err == nil {
		t.Error("newNamespaceID(short reader) succeeded, want error")
	}
}

func TestPrimaryKeys(t *testing.T) {
	t.Parallel()
	schemaCheckItem(t, "bucketPrimaryKey", bucketPrimaryKey("ns", "e", "openai/gpt-4", 1), map[string]string{
		"PK": `S:"ns/BUCKET#e#openai/gpt-4#1"`,
		"SK": `S:"#STATE"`,
	})
	names := discoverLimitNames(map[string]types.AttributeValue{
		"b_rpm_tc": schemaN(1), "b_a_b_tc": schemaN(1), "b_x_tk": schemaN(1), "b__tc": schemaN(1),
	}, bucketAttrPrefix, fieldTotalConsumed)
	if diff := cmp.Diff([]string{"a_b", "rpm"}, names); diff != "" {
		t.Errorf("discoverLimitNames (-want +got):\n%s", diff)
	}
}
