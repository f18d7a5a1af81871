package aggregator

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr bool
	}{
		{"defaults", nil, Config{Table: "rate-limits", Windows: []string{"hourly", "daily"}, SnapshotTTLDays: 90}, false},
		{"all set", map[string]string{
			"TABLE_NAME": "prod", "SNAPSHOT_WINDOWS": " hourly , monthly ,", "SNAPSHOT_TTL_DAYS": "30",
			"ENABLE_ARCHIVAL": "TRUE", "ARCHIVE_BUCKET_NAME": "arch",
		}, Config{Table: "prod", Windows: []string{"hourly", "monthly"}, SnapshotTTLDays: 30, ArchiveEnabled: true, ArchiveBucket: "arch"}, false},
		{"archival off", map[string]string{"ENABLE_ARCHIVAL": "false", "ARCHIVE_BUCKET_NAME": "arch"},
			Config{Table: "rate-limits", Windows: []string{"hourly", "daily"}, SnapshotTTLDays: 90, ArchiveBucket: "arch"}, false},
		{"ttl zero", map[string]string{"SNAPSHOT_TTL_DAYS": "0"}, Config{}, true},
		{"ttl negative", map[string]string{"SNAPSHOT_TTL_DAYS": "-1"}, Config{}, true},
		{"ttl not a number", map[string]string{"SNAPSHOT_TTL_DAYS": "90d"}, Config{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadConfig(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.Table != tt.want.Table || !slices.Equal(got.Windows, tt.want.Windows) || got.SnapshotTTLDays != tt.want.SnapshotTTLDays ||
				got.ArchiveEnabled != tt.want.ArchiveEnabled || got.ArchiveBucket != tt.want.ArchiveBucket {
				t.Fatalf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigOptions(t *testing.T) {
	unused := ddblocal.NewClient("http://127.0.0.1:1") // never called
	c := Config{Table: "t", Windows: []string{"monthly"}, SnapshotTTLDays: 7, ArchiveEnabled: true, ArchiveBucket: "b"}
	p, err := NewProcessor(unused, c.Table, c.Options())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.opts.Windows, []string{store.WindowMonthly}) || p.opts.SnapshotTTL != 7*24*time.Hour || p.opts.ArchiveBucket != "b" {
		t.Fatalf("options = %+v", p.opts)
	}
	c.ArchiveEnabled = false
	if p, _ = NewProcessor(unused, c.Table, c.Options()); p.opts.ArchiveBucket != "" {
		t.Fatal("archival on while disabled")
	}
	// An unknown window, a negative TTL or no table is refused.
	for name, fn := range map[string]func(*Options){
		"window": func(o *Options) { o.Windows = []string{"weekly"} },
		"ttl":    func(o *Options) { o.SnapshotTTL = -time.Hour },
	} {
		if _, err := NewProcessor(unused, "t", fn); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewProcessor(unused, ""); err == nil {
		t.Error("empty table: no error")
	}
	if _, err := NewProcessor(nil, "t"); err == nil {
		t.Error("nil client: no error")
	}
}

// TestHandleCanceled: a batch whose context is already done reports every
// record for redelivery, and no error (which would redeliver the whole
// batch, applied records included).
func TestHandleCanceled(t *testing.T) {
	f := newFixture(t, fixtureNow)
	ev := loadEvent(t, "modify_bucket.json")
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	resp, err := f.proc.Handle(ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[0].Change.SequenceNumber {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	if f.get(fixtureNS+"/ENTITY#C", "#USAGE#gpt#2026-03-04T05:00:00Z") != nil {
		t.Fatal("counted under a canceled context")
	}
}
