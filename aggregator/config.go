package aggregator

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment variables of the aggregator Lambda, as the stack's
// CloudFormation template (package infra) sets them.
const (
	EnvTableName       = "TABLE_NAME"
	EnvSnapshotWindows = "SNAPSHOT_WINDOWS"
	EnvSnapshotTTLDays = "SNAPSHOT_TTL_DAYS"
	EnvEnableArchival  = "ENABLE_ARCHIVAL"
	EnvArchiveBucket   = "ARCHIVE_BUCKET_NAME"
)

// Defaults of [Config] when the environment leaves a variable unset or
// empty.
const (
	DefaultTableName       = "rate-limits"
	DefaultSnapshotTTLDays = 90
)

// Config is the aggregator Lambda's configuration. It is a plain value.
type Config struct {
	// Table is the rate-limiter table ($TABLE_NAME, default "rate-limits").
	Table string
	// Windows are the snapshot windows ($SNAPSHOT_WINDOWS, comma-separated,
	// default "hourly,daily").
	Windows []string
	// SnapshotTTLDays is the snapshot retention ($SNAPSHOT_TTL_DAYS, default
	// 90).
	SnapshotTTLDays int
	// ArchiveEnabled ($ENABLE_ARCHIVAL = "true", any case) turns audit
	// archival on; it needs ArchiveBucket ($ARCHIVE_BUCKET_NAME).
	ArchiveEnabled bool
	ArchiveBucket  string
}

// LoadConfig reads the configuration from getenv (os.Getenv in the
// Lambda). An unknown window or a TTL that is not a positive integer is an
// error; the windows are checked again by [NewProcessor].
func LoadConfig(getenv func(string) string) (Config, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	c := Config{
		Table:           env(EnvTableName),
		SnapshotTTLDays: DefaultSnapshotTTLDays,
		ArchiveEnabled:  strings.EqualFold(env(EnvEnableArchival), "true"),
		ArchiveBucket:   env(EnvArchiveBucket),
	}
	if c.Table == "" {
		c.Table = DefaultTableName
	}
	for _, w := range strings.Split(env(EnvSnapshotWindows), ",") {
		if w = strings.TrimSpace(w); w != "" {
			c.Windows = append(c.Windows, w)
		}
	}
	if len(c.Windows) == 0 {
		c.Windows = append(c.Windows, DefaultWindows...)
	}
	if s := env(EnvSnapshotTTLDays); s != "" {
		days, err := strconv.Atoi(s)
		if err != nil || days <= 0 {
			return Config{}, fmt.Errorf("aggregator: %s=%q: want a positive number of days", EnvSnapshotTTLDays, s)
		}
		c.SnapshotTTLDays = days
	}
	return c, nil
}

// Options returns an option function that applies c to a processor's
// [Options] (windows and snapshot TTL; archival needs an S3 client, which
// the caller sets when ArchiveEnabled).
func (c Config) Options() func(*Options) {
	return func(o *Options) {
		o.Windows = c.Windows
		o.SnapshotTTL = time.Duration(c.SnapshotTTLDays) * 24 * time.Hour
		if c.ArchiveEnabled {
			o.ArchiveBucket = c.ArchiveBucket
		}
	}
}
