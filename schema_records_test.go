package limiter

import (
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

// The record layouts are tested in internal/ddbschema; these tests check the
// conversions to and from this package's types.

func TestVersionRecordConversion(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 25, 12, 0, 1, 0, time.UTC)
	rec := VersionRecord{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", UpdatedBy: "client:0.1.0", UpdatedAt: at}
	item := versionItem(versionRecord(rec))
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
	item["template_version"] = schemaS("0.9.0")
	rec.TemplateVersion = "0.9.0"
	diff := cmp.Diff(rec, VersionRecord(versionFromItem(item)))
	assert.EqualValues(t, "", diff, "version round trip (-want +got):\n%s", diff)
}

func TestNamespaceRecordConversion(t *testing.T) {
	t.Parallel()
	r := namespaceRecord{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: namespaceDeleted,
		CreatedAt: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), DeletedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	rev := namespaceReverseItem(r)
	sk := schemaAVText(rev[attrSK])
	assert.EqualValues(t, `S:"#NSID#E9P6iV0e9iQ"`, sk, "reverse SK = %s", sk)
	diff := cmp.Diff(r, namespaceFromItem(rev))
	assert.EqualValues(t, "", diff, "reverse round trip (-want +got):\n%s", diff)
	fwd := namespaceForwardItem(r)
	r.DeletedAt = time.Time{} // never written on forward records
	sk = schemaAVText(fwd[attrSK])
	assert.EqualValues(t, `S:"#NAMESPACE#tenant-a"`, sk, "forward SK = %s", sk)
	diff = cmp.Diff(r, namespaceFromItem(fwd))
	assert.EqualValues(t, "", diff, "forward round trip (-want +got):\n%s", diff)
}

func TestAuditItem(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := AuditEvent{
		EventID:   "01M812K98TDJXJ05Q7ZQETE6EN",
		Timestamp: ts,
		Action:    store.AuditLimitsSet,
		EntityID:  "C",
		Principal: "arn:aws:iam::123456789012:user/alice",
		Resource:  "gpt-4",
		Details: map[string]any{
			"mode":   OnUnavailableAllow,
			"limits": []Limit{PerMinute("rpm", 100)},
			"limit":  PerSecond("rps", 5).WithBurst(10),
			"ptr":    &[]Limit{PerDay("rpd", 7)}[0],
			"given":  auditLimitDetails([]Limit{PerMinute("tpm", 9)}),
			"when":   ts, // unsupported in a map: dropped
		},
	}
	item, err := auditItem("ns", e, ttlEpochSeconds(ts.UnixMilli(), 90*86400))
	require.NoError(t, err)
	schemaCheckItem(t, "audit", item, map[string]string{
		"PK":        `S:"ns/AUDIT#C"`,
		"SK":        `S:"#AUDIT#01M812K98TDJXJ05Q7ZQETE6EN"`,
		"entity_id": `S:"C"`,
		"event_id":  `S:"01M812K98TDJXJ05Q7ZQETE6EN"`,
		"timestamp": `S:"2026-01-02T03:04:05Z"`,
		"action":    `S:"limits_set"`,
		"principal": `S:"arn:aws:iam::123456789012:user/alice"`,
		"resource":  `S:"gpt-4"`,
		"details": `M:{given=L:[M:{capacity=N:9, name=S:"tpm", refill_amount=N:9, refill_period_seconds=N:60}], ` +
			`limit=M:{capacity=N:10, name=S:"rps", refill_amount=N:5, refill_period_seconds=N:1}, ` +
			`limits=L:[M:{capacity=N:100, name=S:"rpm", refill_amount=N:100, refill_period_seconds=N:60}], mode=S:"allow", ` +
			`ptr=M:{capacity=N:7, name=S:"rpd", refill_amount=N:7, refill_period_seconds=N:86400}}`,
		"ttl":    `N:1775099045`,
		"GSI4PK": `S:"ns"`,
		"GSI4SK": `S:"ns/AUDIT#C"`,
	})

	got, ok, err := auditEventFromItem(item)
	require.False(t, err != nil || !ok, "auditEventFromItem = %v, %v", ok, err)
	limit := func(name string, capacity, amount, seconds int64) map[string]any {
		return map[string]any{"name": name, "capacity": capacity, "refill_amount": amount, "refill_period_seconds": seconds}
	}
	want := e
	want.Details = map[string]any{
		"mode":   "allow",
		"limits": []any{limit("rpm", 100, 100, 60)},
		"limit":  limit("rps", 10, 5, 1),
		"ptr":    limit("rpd", 7, 7, 86400),
		"given":  []any{limit("tpm", 9, 9, 60)},
	}
	diff := cmp.Diff(want, got)
	assert.EqualValues(t, "", diff, "audit round trip (-want +got):\n%s", diff)

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

func TestUsageSnapshotConversion(t *testing.T) {
	t.Parallel()
	s := UsageSnapshot{
		EntityID: "e-1", Resource: "openai/gpt-4", WindowType: store.WindowMonthly,
		WindowStart: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowEnd:   time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC),
		Counters:    map[string]int64{"rpm": 12, "tpm": -3},
		TotalEvents: 7,
	}
	item := usageSnapshotItem("ns", s, 1714521600)
	sk := schemaAVText(item[attrSK])
	assert.EqualValues(t, `S:"#USAGE#openai/gpt-4#2024-02-01T00:00:00Z"`, sk, "SK = %s", sk)
	got, ok, err := usageSnapshotFromItem(item)
	require.False(t, err != nil || !ok, "usageSnapshotFromItem = %v, %v", ok, err)
	diff := cmp.Diff(s, got)
	assert.EqualValues(t, "", diff, "round trip (-want +got):\n%s", diff)
	delete(item, attrEntityID)
	if _, ok, err := usageSnapshotFromItem(item); ok || err != nil {
		t.Errorf("no entity_id: ok=%v err=%v, want skipped", ok, err)
	}
	item[attrEntityID] = schemaS("e-1")
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	if _, _, err := usageSnapshotFromItem(item); err == nil {
		t.Error("usageSnapshotFromItem(fractional counter) succeeded, want error")
	}
}
