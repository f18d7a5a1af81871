package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The JSON shapes below are the CLI's stable output format (-o json); their
// field names are documented in docs/cli.md and do not change.

// limitJSON is one limit.
type limitJSON struct {
	Name                string `json:"name"`
	Capacity            int64  `json:"capacity"`
	RefillAmount        int64  `json:"refill_amount"`
	RefillPeriodSeconds int64  `json:"refill_period_seconds"`
	// Calendar (day, week or month) marks a calendar limit, whose refill
	// fields are zero; Timezone is its zone, absent for UTC.
	Calendar string `json:"calendar,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Prepaid marks a prepaid balance ([limiter.Prepaid]), whose capacity
	// is the ceiling of its top-ups and refill fields are zero.
	Prepaid bool `json:"prepaid,omitempty"`
	// InFlight marks a limit of calls in flight ([limiter.InFlight]), whose
	// capacity is its slots and refill fields are zero.
	InFlight bool `json:"in_flight,omitempty"`
}

// entityJSON is one entity.
type entityJSON struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	ParentID  string            `json:"parent_id"`
	Cascade   bool              `json:"cascade"`
	Metadata  map[string]string `json:"metadata"`
	CreatedAt string            `json:"created_at"`
}

// limitsJSON is the limits stored at one level: entity (entity_id and
// resource set), resource (resource set) or system (on_unavailable set).
type limitsJSON struct {
	EntityID      string      `json:"entity_id,omitempty"`
	Resource      string      `json:"resource,omitempty"`
	OnUnavailable string      `json:"on_unavailable,omitempty"`
	Limits        []limitJSON `json:"limits"`
}

func limitsToJSON(limits []limiter.Limit) []limitJSON {
	out := make([]limitJSON, len(limits))
	for i, l := range limits {
		out[i] = limitJSON{Name: l.Name, Capacity: l.Capacity, RefillAmount: l.RefillAmount, RefillPeriodSeconds: store.Limit(l).RefillPeriodSeconds()}
		if store.Limit(l).IsCalendar() {
			out[i].Calendar, out[i].Timezone = l.Calendar.String(), store.Limit(l).LocationName()
		}
		out[i].Prepaid = store.Limit(l).IsPrepaid()
		out[i].InFlight = store.Limit(l).IsInFlight()
	}
	return out
}

func entityToJSON(e limiter.Entity) entityJSON {
	md := e.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return entityJSON{ID: e.ID, Name: e.Name, ParentID: e.ParentID, Cascade: e.Cascade, Metadata: md, CreatedAt: formatTime(e.CreatedAt)}
}

// formatTime formats t as RFC 3339 in UTC at second precision; "" when zero.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (c *cli) jsonOutput() bool { return c.common.output == outputJSON }

// writeJSON writes v as indented JSON.
func (c *cli) writeJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under header, aligned in columns.
func (c *cli) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printf writes to stdout.
func (c *cli) printf(format string, a ...any) { fmt.Fprintf(c.stdout, format, a...) }

// limitsTable prints limits as a table: name, capacity, refill amount,
// period and the one-line form of formatLimit.
func (c *cli) limitsTable(limits []limiter.Limit) error {
	rows := make([][]string, len(limits))
	for i, l := range limits {
		refill, period := limitRefillCells(l)
		rows[i] = []string{l.Name, capacityCell(l), refill, period, formatLimit(l)}
	}
	return c.table([]string{"LIMIT", "CAPACITY", "REFILL", "PERIOD", "RATE"}, rows)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kv writes label/value rows aligned, without a header.
func (c *cli) kv(rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// warnf writes "zae-limiter: warning: MESSAGE" on stderr: something the
// command did as asked but that looks unintended.
func (c *cli) warnf(format string, a ...any) {
	fmt.Fprintf(c.stderr, "zae-limiter: warning: "+format+"\n", a...)
}
