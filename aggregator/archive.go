package aggregator

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// Archive object settings.
const (
	archiveContentType     = "application/x-ndjson"
	archiveContentEncoding = "gzip"
	// archiveTimeLayout is how audit timestamps are stored and archived.
	archiveTimeLayout = "2006-01-02T15:04:05Z"
)

// ArchivedEvent is one line of an audit archive object: a JSON object with
// the audit event's fields under their attribute names. Principal,
// Resource and Timestamp are null when unknown.
type ArchivedEvent struct {
	EventID   string         `json:"event_id"`
	EntityID  string         `json:"entity_id"`
	Action    string         `json:"action"`
	Timestamp *string        `json:"timestamp"`
	Principal *string        `json:"principal"`
	Resource  *string        `json:"resource"`
	Details   map[string]any `json:"details"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func archivedEvent(e ddbschema.AuditEvent) ArchivedEvent {
	a := ArchivedEvent{
		EventID:   e.EventID,
		EntityID:  e.EntityID,
		Action:    e.Action,
		Principal: optional(e.Principal),
		Resource:  optional(e.Resource),
		Details:   e.Details,
	}
	if !e.Timestamp.IsZero() {
		a.Timestamp = optional(e.Timestamp.UTC().Format(archiveTimeLayout))
	}
	if a.Details == nil {
		a.Details = map[string]any{}
	}
	return a
}

// auditEvents returns the batch's expired audit events and the index of the
// first record holding one.
func auditEvents(recs []record) ([]ddbschema.AuditEvent, int) {
	var evs []ddbschema.AuditEvent
	first := -1
	for _, r := range recs {
		if r.kind == kindAudit {
			if first < 0 {
				first = r.index
			}
			evs = append(evs, r.audit)
		}
	}
	return evs, first
}

// ArchiveKey returns the S3 key of the archive object of a batch whose
// earliest audit timestamp is earliest (the zero time means unknown, and
// then now is used): `audit/year=YYYY/month=MM/day=DD/audit-{request
// id}-{timestamp with ':' → '-' and '+' removed}.jsonl.gz`.
func ArchiveKey(requestID string, earliest, now time.Time) string {
	t := earliest
	if t.IsZero() {
		t = now
	}
	t = t.UTC()
	stamp := strings.ReplaceAll(strings.ReplaceAll(t.Format(archiveTimeLayout), ":", "-"), "+", "")
	return fmt.Sprintf("audit/year=%04d/month=%02d/day=%02d/audit-%s-%s.jsonl.gz", t.Year(), int(t.Month()), t.Day(), requestID, stamp)
}

// encodeArchive returns the gzip-compressed JSON Lines of evs: one compact
// object per line, each line ending in '\n'.
func encodeArchive(evs []ddbschema.AuditEvent) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw) // Encode appends '\n'
	enc.SetEscapeHTML(false)
	for _, e := range evs {
		if err := enc.Encode(archivedEvent(e)); err != nil {
			return nil, fmt.Errorf("encode audit event %s: %w", e.EventID, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// archive writes evs as one object to the archive bucket.
func (p *Processor) archive(ctx context.Context, evs []ddbschema.AuditEvent, requestID string, now time.Time) error {
	var earliest time.Time
	for _, e := range evs {
		if !e.Timestamp.IsZero() && (earliest.IsZero() || e.Timestamp.Before(earliest)) {
			earliest = e.Timestamp
		}
	}
	body, err := encodeArchive(evs)
	if err != nil {
		return err
	}
	key := ArchiveKey(requestID, earliest, now)
	_, err = p.opts.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:          aws.String(p.opts.ArchiveBucket),
		Key:             aws.String(key),
		Body:            bytes.NewReader(body),
		ContentLength:   aws.Int64(int64(len(body))),
		ContentType:     aws.String(archiveContentType),
		ContentEncoding: aws.String(archiveContentEncoding),
	})
	if err != nil {
		return fmt.Errorf("archive %d audit events to s3://%s/%s: %w", len(evs), p.opts.ArchiveBucket, key, err)
	}
	return nil
}
