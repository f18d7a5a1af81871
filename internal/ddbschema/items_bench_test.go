package ddbschema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The benchmarks below measure one encode and one decode of each item of
// fixed shape, so the codec's cost per item can be compared between
// versions (go test -bench Item -benchmem).

var benchTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func BenchmarkItemEntity(b *testing.B) {
	e := Entity{ID: "C", ParentID: "P", Cascade: true, Metadata: map[string]string{"tier": "gold"}, CreatedAt: benchTime}
	item := EntityItem("ns", e)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = EntityItem("ns", e)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = EntityFromItem(item)
		}
	})
	// The same read through attributevalue, which EntityFromItem does not
	// use because it is on the acquire path: plain field types, so this is
	// a lower bound of a reader that also reads wrongly typed attributes as
	// absent.
	b.Run("decode-attributevalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var a struct {
				EntityID  string            `dynamodbav:"entity_id"`
				Name      string            `dynamodbav:"name"`
				ParentID  string            `dynamodbav:"parent_id"`
				Cascade   bool              `dynamodbav:"cascade"`
				Metadata  map[string]string `dynamodbav:"metadata"`
				CreatedAt timeAttr          `dynamodbav:"created_at"`
			}
			unmarshalItem(item, &a)
		}
	})
}

func BenchmarkItemAudit(b *testing.B) {
	e := AuditEvent{EventID: "01M812K98TDJXJ05Q7ZQETE6EN", Timestamp: benchTime, Action: "entity_created", EntityID: "C",
		Principal: "alice", Details: map[string]any{"name": "C", "cascade": true}}
	item, err := AuditItem("ns", e, 1, nil)
	require.NoError(b, err)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = AuditItem("ns", e, 1, nil)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = AuditEventFromItem(item)
		}
	})
}

func BenchmarkItemVersion(b *testing.B) {
	v := Version{SchemaVersion: "0.10.0", ClientMinVersion: "0.0.0", UpdatedBy: "client:0.1.0", UpdatedAt: benchTime}
	item := VersionItem(v)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = VersionItem(v)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = VersionFromItem(item)
		}
	})
}

func BenchmarkItemNamespace(b *testing.B) {
	r := Namespace{Name: "tenant-a", ID: "E9P6iV0e9iQ", Status: NamespaceDeleted, CreatedAt: benchTime, DeletedAt: benchTime}
	item := NamespaceReverseItem(r)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NamespaceReverseItem(r)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NamespaceFromItem(item)
		}
	})
}

func BenchmarkItemUsageSnapshot(b *testing.B) {
	s := UsageSnapshot{EntityID: "e", Resource: "gpt-4", WindowType: WindowHourly, WindowStart: benchTime.Truncate(time.Hour),
		Counters: map[string]int64{"rpm": 3, "tpm": 1200}, TotalEvents: 6}
	item := UsageSnapshotItem("ns", s, 1)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = UsageSnapshotItem("ns", s, 1)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = UsageSnapshotFromItem(item)
		}
	})
}

func BenchmarkItemEntityConfig(b *testing.B) {
	limits := []ConfigLimit{{Name: "rpm", Capacity: 100, RefillAmount: 100, RefillPeriodSeconds: 60},
		{Name: "tpm", Capacity: 10000, RefillAmount: 10000, RefillPeriodSeconds: 60}}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = EntityConfigItem("ns", "e", "gpt-4", limits)
		}
	})
}
