package ddbschema

import (
	"fmt"
	"time"
)

// isoSecondsLayout is the stored timestamp format `%Y-%m-%dT%H:%M:%SZ`: UTC,
// second precision, literal Z.
const isoSecondsLayout = "2006-01-02T15:04:05Z"

// FormatISOSeconds formats t in UTC as `%Y-%m-%dT%H:%M:%SZ`, dropping
// fractions of a second.
func FormatISOSeconds(t time.Time) string { return t.UTC().Format(isoSecondsLayout) }

// ParseISOSeconds parses a stored timestamp: `%Y-%m-%dT%H:%M:%SZ`, or any
// RFC 3339 time (with offset or fraction, as other writers produce). The
// result is in UTC.
func ParseISOSeconds(s string) (time.Time, error) {
	t, err := time.Parse(isoSecondsLayout, s)
	if err != nil {
		var err2 error
		if t, err2 = time.Parse(time.RFC3339Nano, s); err2 != nil {
			return time.Time{}, err
		}
	}
	return t.UTC(), nil
}

// TTLEpochSeconds returns the TTL attribute value for an item that expires
// seconds after nowMs: floor(nowMs / 1000) + seconds.
func TTLEpochSeconds(nowMs, seconds int64) int64 { return floorDiv(nowMs, 1000) + seconds }

// Window types of usage snapshots, as stored in their window attribute.
const (
	WindowHourly  = "hourly"
	WindowDaily   = "daily"
	WindowMonthly = "monthly"
)

// WindowKey returns the start of the usage window containing t, in UTC, as
// stored in window_start and snapshot keys: hourly `YYYY-MM-DDTHH:00:00Z`,
// daily `YYYY-MM-DDT00:00:00Z`, monthly `YYYY-MM-01T00:00:00Z`. Any other
// window is an error ("unknown window type: …").
func WindowKey(window string, t time.Time) (string, error) {
	t = t.UTC()
	switch window {
	case WindowHourly:
		return t.Format("2006-01-02T15") + ":00:00Z", nil
	case WindowDaily:
		return t.Format("2006-01-02") + "T00:00:00Z", nil
	case WindowMonthly:
		return t.Format("2006-01") + "-01T00:00:00Z", nil
	}
	return "", fmt.Errorf("unknown window type: %s", window)
}

// WindowStart returns the start, in UTC, of the usage window of type window
// that contains t. Any other window than [WindowHourly], [WindowDaily] and
// [WindowMonthly] is an error.
func WindowStart(window string, t time.Time) (time.Time, error) {
	key, err := WindowKey(window, t)
	if err != nil {
		return time.Time{}, err
	}
	return ParseISOSeconds(key)
}

// WindowEnd returns the last second of the window that starts at start:
// hourly → same hour :59:59, daily → 23:59:59, monthly → one second before
// the first day of the next month (at start's time of day), any other window
// → start itself. The result is in UTC.
func WindowEnd(window string, start time.Time) time.Time {
	s := start.UTC().Truncate(time.Second)
	y, m, d := s.Date()
	switch window {
	case WindowHourly:
		return time.Date(y, m, d, s.Hour(), 59, 59, 0, time.UTC)
	case WindowDaily:
		return time.Date(y, m, d, 23, 59, 59, 0, time.UTC)
	case WindowMonthly:
		next := time.Date(y, m+1, 1, s.Hour(), s.Minute(), s.Second(), 0, time.UTC)
		return next.Add(-time.Second)
	}
	return s
}

// floorDiv returns a / b rounded toward negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
