package main

import (
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"
	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// auditEventJSON is one audit event.
type auditEventJSON struct {
	EventID   string         `json:"event_id"`
	Timestamp string         `json:"timestamp"`
	Action    string         `json:"action"`
	EntityID  string         `json:"entity_id"`
	Principal string         `json:"principal"`
	Resource  string         `json:"resource"`
	Details   map[string]any `json:"details"`
}

func cmdAuditList(c *cli) *command {
	f := c.newFlags("audit list", "List the audit events of an entity, newest first. Use --entity-id '$SYSTEM' for system defaults and '$RESOURCE:NAME' for a resource's defaults.", 0, 0, true)
	var entityID, start string
	var limit int
	f.str(&entityID, "entity-id", "e", "", "entity whose events to list (required)")
	f.integer(&limit, "limit", "l", store.DefaultAuditEventsLimit, "most events to list")
	f.str(&start, "start-event-id", "", "", "list events older than this event id (the cursor printed by a previous call)")
	f.run = func([]string) error {
		if entityID == "" {
			return errors.New("audit list: --entity-id is required")
		}
		if limit <= 0 {
			return fmt.Errorf("invalid --limit %d: must be positive", limit)
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if start != "" {
			if _, err := ulid.ParseStrict(start); err != nil {
				return fmt.Errorf("invalid --start-event-id %q: must be an audit event id (a 26-character ULID)", start)
			}
		}
		// Events come newest first; those older than start sort below it.
		var events []limiter.AuditEvent
		for e, err := range repo.Admin().AuditEvents(c.ctx, entityID) {
			if err != nil {
				return err
			}
			if start != "" && e.EventID >= start {
				continue
			}
			if events = append(events, e); len(events) == limit {
				break
			}
		}
		next := ""
		if len(events) == limit {
			next = events[len(events)-1].EventID
		}
		if c.jsonOutput() {
			out := make([]auditEventJSON, len(events))
			for i, e := range events {
				d := e.Details
				if d == nil {
					d = map[string]any{}
				}
				out[i] = auditEventJSON{EventID: e.EventID, Timestamp: formatTime(e.Timestamp), Action: e.Action,
					EntityID: e.EntityID, Principal: e.Principal, Resource: e.Resource, Details: d}
			}
			return c.writeJSON(map[string]any{"entity_id": entityID, "events": out, "next_start_event_id": next})
		}
		if len(events) == 0 {
			c.printf("No audit events found for entity: %s\n", entityID)
			return nil
		}
		rows := make([][]string, len(events))
		for i, e := range events {
			rows[i] = []string{formatTime(e.Timestamp), e.Action, dash(e.Principal), dash(e.Resource), e.EventID}
		}
		if err := c.table([]string{"TIMESTAMP", "ACTION", "PRINCIPAL", "RESOURCE", "EVENT ID"}, rows); err != nil {
			return err
		}
		c.printf("\nTotal: %d events\n", len(events))
		if next != "" {
			c.printf("More events may exist. Use --start-event-id %s\n", next)
		}
		return nil
	}
	return f
}
