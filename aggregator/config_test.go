package aggregator

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			require.Equal(t, tt.wantErr, (err != nil), "err, want error %v", tt.wantErr)
			if err != nil {
				return
			}
			require.Equal(t, tt.want.Table, got.Table, "config = %+v, want %+v", got, tt.want)
			require.Equal(t, tt.want.Windows, got.Windows, "config = %+v, want %+v", got, tt.want)
			require.Equal(t, tt.want.SnapshotTTLDays, got.SnapshotTTLDays, "config = %+v, want %+v", got, tt.want)
			require.Equal(t, tt.want.ArchiveEnabled, got.ArchiveEnabled, "config = %+v, want %+v", got, tt.want)
			require.Equal(t, tt.want.ArchiveBucket, got.ArchiveBucket, "config = %+v, want %+v", got, tt.want)
		})
	}
}

func TestConfigOptions(t *testing.T) {
	unused := ddblocal.NewClient("http://127.0.0.1:1") // never called
	c := Config{Table: "t", Windows: []string{"monthly"}, SnapshotTTLDays: 7, ArchiveEnabled: true, ArchiveBucket: "b"}
	p, err := NewProcessor(unused, c.Table, c.Options())
	require.NoError(t, err)
	require.Equal(t, []string{store.WindowMonthly}, p.opts.Windows, "options = %+v", p.opts)
	require.Equal(t, 7*24*time.Hour, p.opts.SnapshotTTL, "options = %+v", p.opts)
	require.Equal(t, "b", p.opts.ArchiveBucket, "options = %+v", p.opts)
	c.ArchiveEnabled = false
	p, _ = NewProcessor(unused, c.Table, c.Options())
	require.Empty(t, p.opts.ArchiveBucket, "archival on while disabled")
	// An unknown window, a negative TTL or no table is refused.
	for name, fn := range map[string]func(*Options){
		"window": func(o *Options) { o.Windows = []string{"weekly"} },
		"ttl":    func(o *Options) { o.SnapshotTTL = -time.Hour },
	} {
		_, err := NewProcessor(unused, "t", fn)
		assert.Error(t, err, "%s: no error", name)
	}
	_, err = NewProcessor(unused, "")
	assert.Error(t, err, "empty table: no error")
	_, err = NewProcessor(nil, "t")
	assert.Error(t, err, "nil client: no error")
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
	require.NoError(t, err, "Handle = %+v", resp)
	require.Len(t, resp.BatchItemFailures, 1, "Handle = %+v", resp)
	require.Equal(t, ev.Records[0].Change.SequenceNumber, resp.BatchItemFailures[0].ItemIdentifier, "Handle = %+v", resp)
	require.Nil(t, f.get(fixtureNS+"/ENTITY#C", "#USAGE#gpt#2026-03-04T05:00:00Z#hourly"), "counted under a canceled context")
}
