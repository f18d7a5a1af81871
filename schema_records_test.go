package limiter

import (
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	assert.Equal(t, rec, VersionRecord(versionFromItem(item)), "version round trip")
}

func TestNamespaceRecordConversion(t *testing.T) {
	t.Parallel()
	r := namespaceRecord{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: namespaceDeleted,
		CreatedAt: time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC), DeletedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	rev := namespaceReverseItem(r)
	sk := schemaAVText(rev[attrSK])
	assert.EqualValues(t, `S:"#NSID#E9P6iV0e9iQ"`, sk, "reverse SK = %s", sk)
	assert.Equal(t, r, namespaceFromItem(rev), "reverse round trip")
	fwd := namespaceForwardItem(r)
	r.DeletedAt = time.Time{} // never written on forward records
	sk = schemaAVText(fwd[attrSK])
	assert.EqualValues(t, `S:"#NAMESPACE#tenant-a"`, sk, "forward SK = %s", sk)
	assert.Equal(t, r, namespaceFromItem(fwd), "forward round trip")
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
			"given":  auditLimitDetails(storeLimits([]Limit{PerMinute("tpm", 9)})),
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
	require.NoError(t, err, "auditEventFromItem")
	require.True(t, ok, "auditEventFromItem skipped the item")
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
	assert.Equal(t, want, got, "audit round trip")

	_, err = auditItem("ns", AuditEvent{Details: map[string]any{"x": math.NaN()}}, 0)
	assert.Error(t, err, "auditItem(NaN)")
	_, ok, err = auditEventFromItem(map[string]types.AttributeValue{"event_id": schemaS("x")})
	assert.NoError(t, err, "auditEventFromItem(no action)")
	assert.False(t, ok, "auditEventFromItem(no action), want skipped")
	bad := map[string]types.AttributeValue{"action": schemaS("a"), "details": &types.AttributeValueMemberM{
		Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "x"}}}}
	_, _, err = auditEventFromItem(bad)
	assert.Error(t, err, "auditEventFromItem(bad number)")
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
	assert.EqualValues(t, `S:"#USAGE#openai/gpt-4#2024-02-01T00:00:00Z#monthly"`, sk, "SK = %s", sk)
	got, ok, err := usageSnapshotFromItem(item)
	require.NoError(t, err, "usageSnapshotFromItem")
	require.True(t, ok, "usageSnapshotFromItem skipped the item")
	assert.Equal(t, s, got, "round trip")
	delete(item, attrEntityID)
	_, ok, err = usageSnapshotFromItem(item)
	assert.NoError(t, err, "no entity_id")
	assert.False(t, ok, "no entity_id, want skipped")
	item[attrEntityID] = schemaS("e-1")
	item["rpm"] = &types.AttributeValueMemberN{Value: "1.5"}
	_, _, err = usageSnapshotFromItem(item)
	assert.Error(t, err, "usageSnapshotFromItem(fractional counter)")
}
