package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// usageSnapshotJSON is one usage snapshot.
type usageSnapshotJSON struct {
	EntityID    string           `json:"entity_id"`
	Resource    string           `json:"resource"`
	Window      string           `json:"window"`
	WindowStart string           `json:"window_start"`
	WindowEnd   string           `json:"window_end"`
	Counters    map[string]int64 `json:"counters"`
	TotalEvents int64            `json:"total_events"`
}

// usageSummaryJSON is a usage summary.
type usageSummaryJSON struct {
	EntityID       string             `json:"entity_id,omitempty"`
	Resource       string             `json:"resource,omitempty"`
	Window         string             `json:"window,omitempty"`
	SnapshotCount  int                `json:"snapshot_count"`
	Total          map[string]int64   `json:"total"`
	Average        map[string]float64 `json:"average"`
	MinWindowStart string             `json:"min_window_start"`
	MaxWindowStart string             `json:"max_window_start"`
}

// usageFlags are the query flags shared by usage list and usage summary.
type usageFlags struct {
	entityID, resource, window, start, end string
}

func (u *usageFlags) register(f *command) {
	f.str(&u.entityID, "entity-id", "e", "", "entity whose snapshots to read (required unless --resource is given)")
	f.str(&u.resource, "resource", "r", "", "resource whose snapshots to read (required unless --entity-id is given)")
	f.str(&u.window, "window", "w", "", "window type: hourly, daily or monthly")
	f.str(&u.start, "start", "", "", "earliest window start (RFC 3339, e.g. 2026-01-01T00:00:00Z, or a date)")
	f.str(&u.end, "end", "", "", "latest window start (RFC 3339 or a date)")
}

// query checks the flags and builds the library's query.
func (u *usageFlags) query() (limiter.UsageQuery, error) {
	q := limiter.UsageQuery{EntityID: u.entityID, Resource: u.resource, WindowType: u.window}
	if u.entityID == "" && u.resource == "" {
		return q, errors.New("either --entity-id or --resource is required")
	}
	switch u.window {
	case "", store.WindowHourly, store.WindowDaily, store.WindowMonthly:
	default:
		return q, fmt.Errorf("invalid --window %q: use hourly, daily or monthly", u.window)
	}
	var err error
	if q.Start, err = parseTimeFlag("--start", u.start); err != nil {
		return q, err
	}
	if q.End, err = parseTimeFlag("--end", u.end); err != nil {
		return q, err
	}
	return q, nil
}

// parseTimeFlag parses RFC 3339 (with or without a zone; UTC when none) or
// a date. "" is the zero time.
func parseTimeFlag(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid %s %q: use RFC 3339 (2026-01-02T15:04:05Z) or a date (2026-01-02)", name, s)
}

func cmdUsageList(c *cli) *command {
	f := c.newFlags("usage list", "List the usage snapshots the aggregator wrote, newest first.", 0, 0, true)
	var u usageFlags
	var limit int
	var plot bool
	u.register(f)
	f.integer(&limit, "limit", "l", store.DefaultUsageSnapshotsLimit, "most snapshots to list")
	f.boolean(&plot, "plot", "p", false, "draw each counter over time as a terminal chart instead of the table")
	f.run = func([]string) error {
		if plot && c.jsonOutput() {
			return errors.New("usage list: --plot draws charts; it cannot be combined with -o json")
		}
		q, err := u.query()
		if err != nil {
			return err
		}
		if limit <= 0 {
			return fmt.Errorf("invalid --limit %d: must be positive", limit)
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		var snaps []limiter.UsageSnapshot
		more := false
		for {
			q.Limit = limit - len(snaps)
			page, next, err := repo.store().(store.UsageStore).UsageSnapshots(c.ctx, q)
			if err != nil {
				return err
			}
			snaps = append(snaps, page...)
			if next == "" {
				break
			}
			if len(snaps) >= limit {
				more = true
				break
			}
			q.Cursor = next
		}
		if c.jsonOutput() {
			out := make([]usageSnapshotJSON, len(snaps))
			for i, s := range snaps {
				counters := s.Counters
				if counters == nil {
					counters = map[string]int64{}
				}
				out[i] = usageSnapshotJSON{EntityID: s.EntityID, Resource: s.Resource, Window: s.WindowType,
					WindowStart: formatTime(s.WindowStart), WindowEnd: formatTime(s.WindowEnd), Counters: counters, TotalEvents: s.TotalEvents}
			}
			return c.writeJSON(map[string]any{"snapshots": out, "more": more})
		}
		if len(snaps) == 0 {
			c.printf("No usage snapshots found\n")
			return nil
		}
		if plot {
			c.printf("%s", plotUsage(snaps))
			if more {
				c.printf("\nMore snapshots may exist. Raise --limit or narrow --start/--end.\n")
			}
			return nil
		}
		rows := make([][]string, len(snaps))
		for i, s := range snaps {
			rows[i] = []string{formatTime(s.WindowStart), s.WindowType, s.EntityID, s.Resource, formatCounters(s.Counters), fmt.Sprint(s.TotalEvents)}
		}
		if err := c.table([]string{"WINDOW START", "WINDOW", "ENTITY", "RESOURCE", "COUNTERS", "EVENTS"}, rows); err != nil {
			return err
		}
		c.printf("\nTotal: %d snapshots\n", len(snaps))
		if more {
			c.printf("More snapshots may exist. Raise --limit or narrow --start/--end.\n")
		}
		return nil
	}
	return f
}

// formatCounters formats counters as "rpm=5 tpm=500", sorted by name.
func formatCounters(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + "=" + thousands(m[k])
	}
	return dash(strings.Join(parts, " "))
}

// finestWindow returns the finest window type (hourly, daily, monthly) of
// which q selects at least one snapshot; "" when it selects none.
func finestWindow(c *cli, repo *table, q limiter.UsageQuery) (string, error) {
	for _, w := range []string{store.WindowHourly, store.WindowDaily, store.WindowMonthly} {
		q.WindowType, q.Limit = w, 1
		page, _, err := repo.store().(store.UsageStore).UsageSnapshots(c.ctx, q)
		if err != nil {
			return "", err
		}
		if len(page) > 0 {
			return w, nil
		}
	}
	return "", nil
}

func cmdUsageSummary(c *cli) *command {
	f := c.newFlags("usage summary", "Summarise the usage snapshots of one window type: totals and averages per limit. Without --window, the finest window present (hourly, else daily, else monthly): adding several window types would count the same traffic once per window.", 0, 0, true)
	var u usageFlags
	u.register(f)
	f.run = func([]string) error {
		q, err := u.query()
		if err != nil {
			return err
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		// One window at a time: the hourly and daily snapshots of the same
		// traffic would otherwise be added up. Without --window, the finest
		// window present.
		chosen := false
		if q.WindowType == "" {
			if q.WindowType, err = finestWindow(c, repo, q); err != nil {
				return err
			}
			chosen = q.WindowType != ""
		}
		s, err := repo.Admin().UsageSummary(c.ctx, q)
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			out := usageSummaryJSON{EntityID: u.entityID, Resource: u.resource, Window: q.WindowType, SnapshotCount: s.SnapshotCount,
				Total: s.Total, Average: s.Average, MinWindowStart: formatTime(s.MinWindowStart), MaxWindowStart: formatTime(s.MaxWindowStart)}
			if out.Total == nil {
				out.Total = map[string]int64{}
			}
			if out.Average == nil {
				out.Average = map[string]float64{}
			}
			return c.writeJSON(out)
		}
		if s.SnapshotCount == 0 {
			c.printf("No usage snapshots found\n")
			return nil
		}
		window := q.WindowType
		if chosen {
			window += " (the finest present; --window chooses another)"
		}
		c.printf("Window:    %s\nSnapshots: %d\nWindows:   %s .. %s\n\n", window, s.SnapshotCount, formatTime(s.MinWindowStart), formatTime(s.MaxWindowStart))
		names := make([]string, 0, len(s.Total))
		for k := range s.Total {
			names = append(names, k)
		}
		sort.Strings(names)
		rows := make([][]string, len(names))
		for i, k := range names {
			rows[i] = []string{k, thousands(s.Total[k]), fmt.Sprintf("%.2f", s.Average[k])}
		}
		return c.table([]string{"LIMIT", "TOTAL", "AVERAGE"}, rows)
	}
	return f
}
