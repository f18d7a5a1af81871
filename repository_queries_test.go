package limiter

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// put writes raw items.
func (env *testEnv) put(items ...map[string]types.AttributeValue) {
	env.t.Helper()
	for _, item := range items {
		_, err := env.client.PutItem(env.ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
		require.NoError(env.t, err, "PutItem")
	}
}

// scanCountingClient passes every call to DynamoDB Local and adds up the
// items each Query evaluated (ScannedCount).
type scanCountingClient struct {
	DynamoDBClient
	scanned atomic.Int64
}

func (c *scanCountingClient) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.DynamoDBClient.Query(ctx, in, optFns...)
	if err == nil {
		c.scanned.Add(int64(out.ScannedCount))
	}
	return out, err
}

// bareRepo has only the methods of Repository: none of the optional
// abilities.
type bareRepo struct{ Repository }

func TestQueriesUnsupportedByRepository(t *testing.T) {
	env := newTestEnv(t)
	rl := New(bareRepo{env.repo}, func(o *Options) { o.Clock = env.clock.now })
	ctx := env.ctx
	_, err1 := iterx.Collect(rl.Admin().AuditEvents(ctx, "e"))
	_, _, err2 := rl.usageSnapshots(ctx, UsageQuery{EntityID: "e"})
	_, err3 := rl.Admin().UsageSummary(ctx, UsageQuery{EntityID: "e"})
	_, err4 := rl.Admin().ResourceCapacity(ctx, "gpt", "rpm", false)
	for i, err := range []error{err1, err2, err3, err4} {
		assert.ErrorIs(t, err, ErrUnsupported, "query %d: err = %v, want ErrUnsupported", i+1, err)
	}
	assert.EqualValues(t, "limiter: not supported by this repository", ErrUnsupported.Error(), "ErrUnsupported = %q", ErrUnsupported)
}

func TestAuditEventsQuery(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter(func(o *Options) { o.Principal = "arn:aws:iam::123456789012:role/app" })
	ctx := env.ctx
	step := func(err error) {
		t.Helper()
		require.NoError(t, err)
		env.clock.advance(time.Millisecond)
	}
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "e", Name: "E"})
	step(err)
	step(rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "gpt"}, []Limit{PerMinute("rpm", 5)}))
	step(rl.Admin().SetLimits(ContextWithPrincipal(ctx, "admin@example.com"), Scope{Entity: "e", Resource: "claude"}, []Limit{PerMinute("rpm", 6)}))
	step(rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: DefaultResource}, []Limit{PerMinute("tpm", 7)}))
	step(rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: "claude"}))
	step(rl.Admin().DeleteLimits(ctx, Scope{Entity: "e", Resource: "gpt"}))
	step(rl.Admin().SetSystemDefaults(ctx, []Limit{PerMinute("rpm", 1)}, OnUnavailableAllow))
	step(rl.Admin().DeleteLimits(ctx, Scope{}))
	step(rl.Admin().SetLimits(ctx, Scope{Resource: "gpt"}, []Limit{PerMinute("rpm", 2)}))
	_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "other"})
	step(err)

	all, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "e"))
	require.NoError(t, err)
	type ev struct{ action, resource string }
	var got []ev
	for i, e := range all {
		got = append(got, ev{e.Action, e.Resource})
		assert.Equal(t, "e", e.EntityID, "event %d: %+v", i, e)
		assert.Len(t, e.EventID, 26, "event %d: %+v", i, e)
		if i > 0 {
			assert.Less(t, e.EventID, all[i-1].EventID, "events not newest first")
		}
	}
	want := []ev{
		{store.AuditLimitsDeleted, "gpt"}, {store.AuditLimitsDeleted, "claude"}, {store.AuditLimitsSet, DefaultResource},
		{store.AuditLimitsSet, "claude"}, {store.AuditLimitsSet, "gpt"}, {store.AuditEntityCreated, ""},
	}
	require.Equal(t, want, got, "AuditEvents(e)")
	created := all[5]
	assert.Equal(t, "arn:aws:iam::123456789012:role/app", created.Principal, "entity_created event = %+v", created)
	assert.WithinDuration(t, epoch.Truncate(time.Second), created.Timestamp, 0, "entity_created event = %+v", created)
	assert.Equal(t, "E", created.Details["name"], "entity_created event = %+v", created)
	assert.Equal(t, false, created.Details["cascade"], "entity_created event = %+v", created)
	assert.Nil(t, created.Details["parent_id"], "entity_created event = %+v", created)
	assert.Equal(t, "admin@example.com", all[3].Principal, "principal of the claude limits")

	// Paging back with the last id returned, three at a time.
	var paged []AuditEvent
	start := ""
	for pages := 0; ; pages++ {
		page, err := rl.auditEvents(ctx, "e", 3, start)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 3, "events of page %d", pages)
		require.LessOrEqual(t, pages, 5, "pages")
		paged = append(paged, page...)
		if len(page) < 3 {
			break
		}
		start = page[len(page)-1].EventID
	}
	assert.Equal(t, all, paged, "paged events")
	older, err := rl.auditEvents(ctx, "e", 0, all[4].EventID)
	assert.NoError(t, err, "events older than the 5th")
	if assert.Len(t, older, 1, "events older than the 5th = %+v", older) {
		assert.Equal(t, all[5].EventID, older[0].EventID, "events older than the 5th")
	}

	// An item without an action is skipped, and still limit events come back.
	junkID := ulid.MustNew(ulid.Timestamp(env.clock.now()), ulid.DefaultEntropy()).String()
	env.put(map[string]types.AttributeValue{
		attrPK: schemaS(pkAudit(env.repo.NamespaceID(), "e")), attrSK: schemaS(skAudit(junkID)), attrEventID: schemaS(junkID),
	})
	env.rec.Reset()
	top, err := rl.auditEvents(ctx, "e", 2, "")
	assert.NoError(t, err, "AuditEvents(e, 2) with a junk item first")
	if assert.Len(t, top, 2, "AuditEvents(e, 2) with a junk item first = %+v", top) {
		assert.Equal(t, []string{all[0].EventID, all[1].EventID}, []string{top[0].EventID, top[1].EventID}, "AuditEvents(e, 2) with a junk item first")
	}
	n := env.rec.Count("Query")
	assert.EqualValues(t, 2, n, "Query calls = %d, want 2 (a short first page is topped up)", n)

	// Config-level events under their pseudo entity ids.
	sys, err := iterx.Collect(rl.Admin().AuditEvents(ctx, store.AuditEntitySystem))
	assert.NoError(t, err, "AuditEvents($SYSTEM)")
	require.Len(t, sys, 2, "AuditEvents($SYSTEM) = %+v", sys)
	assert.Equal(t, store.AuditLimitsDeleted, sys[0].Action, "AuditEvents($SYSTEM) = %+v", sys)
	assert.Equal(t, store.AuditLimitsSet, sys[1].Action, "AuditEvents($SYSTEM) = %+v", sys)
	assert.Equal(t, "$SYSTEM", sys[1].EntityID, "AuditEvents($SYSTEM) = %+v", sys)
	assert.Equal(t, "allow", sys[1].Details["on_unavailable"], "system details = %v", sys[1].Details)
	res, err := iterx.Collect(rl.Admin().AuditEvents(ctx, store.AuditEntityResource("gpt")))
	assert.NoError(t, err, "AuditEvents($RESOURCE:gpt)")
	if assert.Len(t, res, 1, "AuditEvents($RESOURCE:gpt) = %+v", res) {
		assert.Equal(t, "$RESOURCE:gpt", res[0].EntityID, "AuditEvents($RESOURCE:gpt) = %+v", res)
		assert.Equal(t, "gpt", res[0].Resource, "AuditEvents($RESOURCE:gpt) = %+v", res)
		assert.Equal(t, store.AuditLimitsSet, res[0].Action, "AuditEvents($RESOURCE:gpt) = %+v", res)
	}
	none, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "nobody"))
	assert.NoError(t, err, "AuditEvents(nobody)")
	assert.Empty(t, none, "AuditEvents(nobody)")
	assert.Equal(t, "$RESOURCE:a/b", store.AuditEntityResource("a/b"), "audit pseudo entity id differs from the schema's")
	assert.Equal(t, auditEntitySystem, store.AuditEntitySystem, "audit pseudo entity id differs from the schema's")

	// Validation, before any read.
	env.rec.Reset()
	for _, tc := range []struct {
		entity, start string
		kind          error
	}{
		{"", "", ErrInvalidIdentifier},
		{"a#b", "", ErrInvalidIdentifier},
		{"e\n", "", ErrInvalidIdentifier},
		{"$OTHER", "", ErrInvalidIdentifier},
		{"$RESOURCE:", "", ErrInvalidName},
		{"$RESOURCE:_x", "", ErrInvalidName},
		{"e", "not-an-event-id", ErrValidation},
		{"e", strings.ToLower(all[0].EventID) + "#", ErrValidation},
	} {
		_, err := rl.auditEvents(ctx, tc.entity, 0, tc.start)
		var ve *ValidationError
		assert.ErrorAs(t, err, &ve, "AuditEvents(%q, %q)", tc.entity, tc.start)
		assert.ErrorIs(t, err, tc.kind, "AuditEvents(%q, %q)", tc.entity, tc.start)
	}
	n = env.rec.Count("")
	assert.EqualValues(t, 0, n, "invalid input caused %d calls", n)
}

// usageFixture writes usage snapshots (as the aggregator would).
func usageFixture(env *testEnv) {
	env.t.Helper()
	ns := env.repo.NamespaceID()
	ttl := epoch.Unix() + 90*86400
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(env.t, err)
		return tm
	}
	snap := func(entity, resource, window, start string, counters map[string]int64) map[string]types.AttributeValue {
		return usageSnapshotItem(ns, UsageSnapshot{
			EntityID: entity, Resource: resource, WindowType: window, WindowStart: at(start),
			Counters: counters, TotalEvents: int64(2 * len(counters)),
		}, ttl)
	}
	for h := 1; h <= 6; h++ {
		env.put(snap("e1", "gpt", store.WindowHourly, fmt.Sprintf("2026-01-02T%02d:00:00Z", h), map[string]int64{"rpm": int64(h), "tpm": int64(100 * h)}))
	}
	env.put(
		snap("e1", "gpt", store.WindowDaily, "2025-12-30T00:00:00Z", map[string]int64{"rpm": 50, "tpm": 5000}),
		snap("e1", "gpt", store.WindowDaily, "2025-12-31T00:00:00Z", map[string]int64{"rpm": 60}),
		snap("e1", "gpt", store.WindowMonthly, "2025-11-01T00:00:00Z", map[string]int64{"rpm": 300, "tpm": 30000}),
		snap("e1", "claude", store.WindowHourly, "2026-01-02T03:00:00Z", map[string]int64{"rpm": 7}),
		snap("e2", "gpt", store.WindowHourly, "2026-01-02T02:00:00Z", map[string]int64{"rpm": 5, "tpm": 500, "wcu": 9}),
		snap("e2", "gpt", store.WindowHourly, "2026-01-02T05:00:00Z", map[string]int64{"rpm": 5, "tpm": 500, "wcu": 9}),
		// Malformed: no window_start. It sorts first on both the table and GSI2.
		map[string]types.AttributeValue{
			attrPK: schemaS(pkEntity(ns, "e1")), attrSK: schemaS(skUsage("gpt", "zzz", store.WindowHourly)),
			attrEntityID: schemaS("e1"), attrResource: schemaS("gpt"), "rpm": schemaN(1000),
			attrGSI2PK: schemaS(gsi2PKResource(ns, "gpt")), attrGSI2SK: schemaS(gsi2SKUsage("zzz", "e1", store.WindowHourly)),
		},
		// Another namespace's snapshot of the same entity and resource.
		usageSnapshotItem("othernamesp", UsageSnapshot{EntityID: "e1", Resource: "gpt", WindowType: store.WindowHourly,
			WindowStart: at("2026-01-02T04:00:00Z"), Counters: map[string]int64{"rpm": 1000}}, ttl),
	)
}

// snapKeys summarises snapshots as "entity/resource/window@start".
func snapKeys(snaps []UsageSnapshot) []string {
	out := make([]string, len(snaps))
	for i, s := range snaps {
		out[i] = fmt.Sprintf("%s/%s/%s@%s", s.EntityID, s.Resource, s.WindowType, s.WindowStart.Format("01-02T15"))
	}
	return out
}

// allSnapshots pages through q and returns every snapshot and the number of
// calls.
func allSnapshots(t *testing.T, rl *RateLimiter, q UsageQuery) ([]UsageSnapshot, int) {
	t.Helper()
	var out []UsageSnapshot
	for calls := 1; ; calls++ {
		page, next, err := rl.usageSnapshots(context.Background(), q)
		require.NoError(t, err, "UsageSnapshots(%+v): %v", q, err)
		if q.Limit > 0 {
			require.LessOrEqual(t, len(page), q.Limit, "snapshots of one page")
		}
		out = append(out, page...)
		if next == "" {
			return out, calls
		}
		require.LessOrEqual(t, calls, 50, "no end of pages")
		q.Cursor = next
	}
}

func TestUsageSnapshots(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	usageFixture(env)
	counter := &scanCountingClient{DynamoDBClient: env.repo.client}
	repo := *env.repo
	repo.client = counter
	rl := New(&repo, func(o *Options) { o.Clock = env.clock.now })
	ctx := env.ctx
	ts := func(s string) time.Time { tm, _ := time.Parse(time.RFC3339, s); return tm }

	e1All := []string{
		"e1/gpt/hourly@01-02T06", "e1/gpt/hourly@01-02T05", "e1/gpt/hourly@01-02T04", "e1/gpt/hourly@01-02T03",
		"e1/gpt/hourly@01-02T02", "e1/gpt/hourly@01-02T01", "e1/gpt/daily@12-31T00", "e1/gpt/daily@12-30T00",
		"e1/gpt/monthly@11-01T00", "e1/claude/hourly@01-02T03",
	}
	gptAll := []string{
		"e1/gpt/hourly@01-02T06", "e2/gpt/hourly@01-02T05", "e1/gpt/hourly@01-02T05", "e1/gpt/hourly@01-02T04",
		"e1/gpt/hourly@01-02T03", "e2/gpt/hourly@01-02T02", "e1/gpt/hourly@01-02T02", "e1/gpt/hourly@01-02T01",
		"e1/gpt/daily@12-31T00", "e1/gpt/daily@12-30T00", "e1/gpt/monthly@11-01T00",
	}
	for _, tc := range []struct {
		name        string
		q           UsageQuery
		want        []string
		maxScanned  int64 // 0: not checked
		wantQueries int   // 0: not checked
	}{
		{name: "entity", q: UsageQuery{EntityID: "e1"}, want: e1All},
		{name: "entity and resource", q: UsageQuery{EntityID: "e1", Resource: "claude"}, want: e1All[9:]},
		{name: "resource via GSI2", q: UsageQuery{Resource: "gpt"}, want: gptAll},
		{name: "window type", q: UsageQuery{EntityID: "e1", WindowType: store.WindowHourly},
			want: append(append([]string{}, e1All[:6]...), e1All[9])},
		{name: "resource time range is a key condition",
			q:    UsageQuery{Resource: "gpt", Start: ts("2026-01-02T02:00:00Z"), End: ts("2026-01-02T04:30:00Z")},
			want: gptAll[3:7], maxScanned: 4},
		{name: "entity+resource start is a key condition",
			q:    UsageQuery{EntityID: "e1", Resource: "gpt", Start: ts("2026-01-02T03:00:00Z")},
			want: e1All[:4], maxScanned: 5}, // + the malformed item, which sorts inside the range
		{name: "entity-only start filters client-side, at second precision",
			q:    UsageQuery{EntityID: "e1", Start: ts("2026-01-02T03:59:59.999Z")},
			want: e1All[:3]},
		{name: "end only", q: UsageQuery{Resource: "gpt", End: ts("2025-12-31T00:00:00Z")}, want: gptAll[8:], maxScanned: 3},
		{name: "window and range", q: UsageQuery{Resource: "gpt", WindowType: store.WindowDaily, Start: ts("2025-12-31T00:00:00Z")},
			want: gptAll[8:9]},
		{name: "nothing", q: UsageQuery{EntityID: "e3"}, want: []string{}},
		{name: "paged entity", q: UsageQuery{EntityID: "e1", Limit: 3}, want: e1All, wantQueries: 4},
		{name: "paged filtered resource", q: UsageQuery{Resource: "gpt", WindowType: store.WindowHourly, Limit: 4}, want: gptAll[:8]},
		{name: "paged range", q: UsageQuery{Resource: "gpt", End: ts("2026-01-02T05:00:00Z"), Limit: 2}, want: gptAll[1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter.scanned.Store(0)
			got, calls := allSnapshots(t, rl, tc.q)
			assert.Equal(t, tc.want, snapKeys(got), "snapshots")
			if tc.maxScanned > 0 {
				assert.LessOrEqual(t, counter.scanned.Load(), tc.maxScanned, "items evaluated")
			}
			if tc.wantQueries > 0 {
				assert.Equal(t, tc.wantQueries, calls, "UsageSnapshots calls (full pages of %d)", tc.q.Limit)
			}
		})
	}

	// Every page but possibly the last is full, although the malformed item
	// and filtered snapshots are skipped.
	page, next, err := rl.usageSnapshots(ctx, UsageQuery{EntityID: "e1", Limit: 3})
	require.NoError(t, err, "first page")
	require.Len(t, page, 3, "first page = %v", snapKeys(page))
	require.NotEmpty(t, next, "first page's cursor")

	// Snapshot contents: window ends, counters without wcu, total events.
	gpt, _, err := rl.usageSnapshots(ctx, UsageQuery{Resource: "gpt", Limit: 20})
	require.NoError(t, err)
	for _, s := range gpt {
		var wantEnd time.Time
		switch s.WindowType {
		case store.WindowHourly:
			wantEnd = s.WindowStart.Add(time.Hour - time.Second)
		case store.WindowDaily:
			wantEnd = s.WindowStart.Add(24*time.Hour - time.Second)
		case store.WindowMonthly:
			wantEnd = ts("2025-11-30T23:59:59Z")
		}
		assert.WithinDuration(t, wantEnd, s.WindowEnd, 0, "%s: WindowEnd", snapKeys([]UsageSnapshot{s})[0])
		assert.NotContains(t, s.Counters, "wcu", "%s: wcu counter visible", s.EntityID)
	}
	e2 := gpt[1]
	assert.Equal(t, "e2", e2.EntityID, "e2 snapshot = %+v", e2)
	assert.Equal(t, map[string]int64{"rpm": 5, "tpm": 500}, e2.Counters, "e2 snapshot = %+v", e2)
	assert.EqualValues(t, 6, e2.TotalEvents, "e2 snapshot = %+v", e2)

	// Cursors belong to their query.
	_, gptCursor, _ := rl.usageSnapshots(ctx, UsageQuery{Resource: "gpt", Limit: 2})
	_, e1Cursor, _ := rl.usageSnapshots(ctx, UsageQuery{EntityID: "e1", Limit: 2})
	require.NotEmpty(t, gptCursor, "no cursor")
	require.NotEmpty(t, e1Cursor, "no cursor")
	_, _, err = rl.usageSnapshots(ctx, UsageQuery{Resource: "gpt", Cursor: gptCursor})
	assert.NoError(t, err, "own cursor")
	env.rec.Reset()
	for name, q := range map[string]UsageQuery{
		"garbage":                     {EntityID: "e1", Cursor: "!!!"},
		"not base64 json":             {EntityID: "e1", Cursor: "bm90IGpzb24="},
		"GSI2 cursor on the table":    {EntityID: "e1", Cursor: gptCursor},
		"table cursor on GSI2":        {Resource: "gpt", Cursor: e1Cursor},
		"another entity":              {EntityID: "e2", Cursor: e1Cursor},
		"another resource prefix":     {EntityID: "e1", Resource: "claude", Cursor: e1Cursor},
		"outside the range":           {Resource: "gpt", End: ts("2025-12-01T00:00:00Z"), Cursor: gptCursor},
		"neither entity nor resource": {WindowType: store.WindowHourly},
		"bad entity":                  {EntityID: "e#1"},
		"entity with newline":         {EntityID: "e1\n"},
		"bad resource":                {Resource: "_gpt"},
		"bad window":                  {EntityID: "e1", WindowType: "weekly"},
		"end before start":            {EntityID: "e1", Start: ts("2026-01-02T00:00:01Z"), End: ts("2026-01-02T00:00:00Z")},
	} {
		_, _, err := rl.usageSnapshots(ctx, q)
		var ve *ValidationError
		assert.ErrorAs(t, err, &ve, "%s", name)
		if q.Cursor != "" {
			continue // UsageSummary ignores the cursor
		}
		_, err = rl.Admin().UsageSummary(ctx, q)
		assert.ErrorIs(t, err, ErrValidation, "%s: UsageSummary", name)
	}
	n := env.rec.Count("")
	assert.EqualValues(t, 0, n, "invalid queries caused %d calls", n)
	_, _, err = rl.usageSnapshots(ctx, UsageQuery{})
	assert.EqualError(t, err, "limiter: invalid query: either entity_id or resource must be given", "empty query")
	// Start equal to End (at second precision) is a valid one-instant range.
	got, _ := allSnapshots(t, rl, UsageQuery{Resource: "gpt", Start: ts("2026-01-02T05:00:00Z"), End: ts("2026-01-02T05:00:00.9Z")})
	assert.Len(t, got, 2, "instant range = %v", snapKeys(got))
}

// TestUsageSnapshotsWindowTypesApart: the hourly, daily and monthly
// snapshots that start at 00:00 UTC on the 1st are three snapshots, each
// with its own counters, through every query shape (entity, entity and
// resource, resource on GSI2, a range ending at the instant, pages of
// one), and summaries per window type count each once. Items of the
// shared layout (keyed by the window start only, as the Python library's
// aggregator writes them) are read as the window their window attribute
// names, with their counters as stored.
func TestUsageSnapshotsWindowTypesApart(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ns := env.repo.NamespaceID()
	ttl := epoch.Unix() + 90*86400
	first := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	snap := func(window string, start time.Time, rpm int64) map[string]types.AttributeValue {
		return usageSnapshotItem(ns, UsageSnapshot{EntityID: "e1", Resource: "gpt", WindowType: window, WindowStart: start,
			Counters: map[string]int64{"rpm": rpm}, TotalEvents: rpm}, ttl)
	}
	// shared rewrites a snapshot item into the shared layout.
	shared := func(item map[string]types.AttributeValue, start time.Time) map[string]types.AttributeValue {
		key := formatISOSeconds(start)
		item[attrSK] = schemaS(ddbschema.SKUsageShared("gpt", key))
		item[attrGSI2SK] = schemaS(ddbschema.GSI2SKUsageShared(key, "e1"))
		return item
	}
	feb1, feb28 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 28, 5, 0, 0, 0, time.UTC)
	env.put(
		snap(store.WindowHourly, first, 4), snap(store.WindowDaily, first, 40), snap(store.WindowMonthly, first, 400),
		snap(store.WindowHourly, first.Add(time.Hour), 5),
		// The shared layout: the 1st's hour, day and month in one item
		// (3 × 2), and an hour that no other window shares.
		shared(snap(store.WindowHourly, feb1, 6), feb1), shared(snap(store.WindowHourly, feb28, 7), feb28),
	)
	rl := env.limiter()
	key := func(s UsageSnapshot) string {
		return fmt.Sprintf("%s@%s=%d", s.WindowType, s.WindowStart.Format("01-02T15"), s.Counters["rpm"])
	}
	all := []string{"hourly@03-01T01=5", "monthly@03-01T00=400", "hourly@03-01T00=4", "daily@03-01T00=40",
		"hourly@02-28T05=7", "hourly@02-01T00=6"}
	for name, tc := range map[string]struct {
		q    UsageQuery
		want []string
	}{
		"entity":                      {UsageQuery{EntityID: "e1"}, all},
		"entity, pages of one":        {UsageQuery{EntityID: "e1", Limit: 1}, all},
		"entity and resource":         {UsageQuery{EntityID: "e1", Resource: "gpt", Limit: 1}, all},
		"resource on GSI2":            {UsageQuery{Resource: "gpt", Limit: 1}, all},
		"instant range, entity":       {UsageQuery{EntityID: "e1", Resource: "gpt", Start: first, End: first, Limit: 1}, all[1:4]},
		"instant range, GSI2":         {UsageQuery{Resource: "gpt", Start: first, End: first, Limit: 1}, all[1:4]},
		"range ending at the instant": {UsageQuery{Resource: "gpt", End: first}, all[1:]},
		"daily":                       {UsageQuery{EntityID: "e1", WindowType: store.WindowDaily}, []string{"daily@03-01T00=40"}},
		"hourly":                      {UsageQuery{Resource: "gpt", WindowType: store.WindowHourly}, []string{"hourly@03-01T01=5", "hourly@03-01T00=4", "hourly@02-28T05=7", "hourly@02-01T00=6"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, _ := allSnapshots(t, rl, tc.q)
			keys := make([]string, len(got))
			for i, s := range got {
				keys[i] = key(s)
			}
			require.Equal(t, tc.want, keys)
		})
	}
	for window, want := range map[string]int64{store.WindowHourly: 4 + 5 + 7 + 6, store.WindowDaily: 40, store.WindowMonthly: 400} {
		sum, err := rl.Admin().UsageSummary(env.ctx, UsageQuery{EntityID: "e1", Resource: "gpt", WindowType: window})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"rpm": want}, sum.Total, "%s summary", window)
	}
}

func TestUsageSummary(t *testing.T) {
	env := newTestEnv(t)
	usageFixture(env)
	rl := env.limiter()
	ts := func(s string) time.Time { tm, _ := time.Parse(time.RFC3339, s); return tm }
	for _, tc := range []struct {
		name string
		q    UsageQuery
		want UsageSummary
	}{
		{"entity and resource", UsageQuery{EntityID: "e1", Resource: "gpt", Limit: 1, Cursor: "ignored"}, UsageSummary{
			SnapshotCount: 9,
			Total:         map[string]int64{"rpm": 21 + 110 + 300, "tpm": 2100 + 5000 + 30000},
			// tpm is missing from one daily snapshot: it averages over 8.
			Average:        map[string]float64{"rpm": 431.0 / 9, "tpm": 37100.0 / 8},
			MinWindowStart: ts("2025-11-01T00:00:00Z"), MaxWindowStart: ts("2026-01-02T06:00:00Z"),
		}},
		{"resource, hourly", UsageQuery{Resource: "gpt", WindowType: store.WindowHourly}, UsageSummary{
			SnapshotCount:  8,
			Total:          map[string]int64{"rpm": 31, "tpm": 3100},
			Average:        map[string]float64{"rpm": 31.0 / 8, "tpm": 3100.0 / 8},
			MinWindowStart: ts("2026-01-02T01:00:00Z"), MaxWindowStart: ts("2026-01-02T06:00:00Z"),
		}},
		{"nothing", UsageQuery{EntityID: "e1", WindowType: store.WindowDaily, Start: ts("2026-01-01T00:00:00Z")}, UsageSummary{
			Total: map[string]int64{}, Average: map[string]float64{},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rl.Admin().UsageSummary(env.ctx, tc.q)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "UsageSummary")
		})
	}

	// Many DynamoDB pages (forced small) add up to the same summary.
	small := env.withClient(hook(func(op string, params any) error {
		if in, ok := params.(*dynamodb.QueryInput); ok {
			in.Limit = aws.Int32(min(aws.ToInt32(in.Limit), 2))
		}
		return nil
	}))
	env.rec.Reset()
	got, err := small.UsageSummary(env.ctx, UsageQuery{Resource: "gpt"})
	assert.NoError(t, err, "summary over small pages")
	assert.EqualValues(t, 11, got.SnapshotCount, "summary over small pages = %+v", got)
	assert.EqualValues(t, 441, got.Total["rpm"], "summary over small pages = %+v", got)
	assert.EqualValues(t, 38100, got.Total["tpm"], "summary over small pages = %+v", got)
	n := env.rec.Count("Query")
	assert.GreaterOrEqual(t, n, 6, "Query calls, want one per page")
	assert.NotContains(t, got.Total, "wcu", "wcu in the summary")
}

// capacityFixture writes bucket items for resource capacity queries. Every
// bucket's rf is now, so available = tokens, except key-1's, which refills
// for 30 s.
func capacityFixture(env *testEnv) {
	env.t.Helper()
	ctx := env.ctx
	for _, e := range []Entity{{ID: "proj"}, {ID: "key-1", ParentID: "proj", Cascade: true}, {ID: "big"}, {ID: "full"}} {
		_, err := env.limiter().Admin().CreateEntity(ctx, e)
		require.NoError(env.t, err)
	}
	nowMs := epoch.UnixMilli()
	state := func(name string, capacity, tokensMilli int64) store.BucketState {
		return store.BucketState{LimitName: name, TokensMilli: tokensMilli, CapacityMilli: capacity * 1000,
			RefillAmountMilli: capacity * 1000, RefillPeriodMs: 60_000}
	}
	bucket := func(ns, entity, resource string, shard, shards int, rf int64, states ...store.BucketState) map[string]types.AttributeValue {
		return bucketItem(ns, &store.Bucket{Key: store.BucketKey{EntityID: entity, Resource: resource, Shard: shard}, ShardCount: shards, RefillMs: rf, States: states})
	}
	ns := env.repo.NamespaceID()
	env.put(
		bucket(ns, "proj", "gpt", 0, 1, nowMs, state("rpm", 100, 40_000), state("tpm", 10_000, 2_500_500)),
		bucket(ns, "key-1", "gpt", 0, 1, nowMs-30_000, state("rpm", 10, 0)),
		bucket(ns, "ghost", "gpt", 0, 1, nowMs, state("rpm", 20, 20_000)), // no META
		bucket(ns, "big", "gpt", 0, 4, nowMs, state("rpm", 100, 10_000)),
		bucket(ns, "big", "gpt", 1, 4, nowMs, state("rpm", 100, 20_000)),
		bucket(ns, "big", "gpt", 2, 4, nowMs, state("rpm", 100, 30_000)),
		bucket(ns, "big", "gpt", 10, 4, nowMs, state("rpm", 100, 0)), // sorts before shard 2 in GSI2
		bucket(ns, "full", "gpt", 0, 2, nowMs, state("rpm", 50, 50_000)),
		bucket(ns, "full", "gpt", 1, 2, nowMs, state("rpm", 50, 50_000)),
		bucket(ns, "tponly", "gpt", 0, 1, nowMs, state("tpm", 1000, 1_000_000)),
		bucket(ns, "proj", "claude", 0, 1, nowMs, state("rpm", 1, 1000)),
		bucket(ns, "debtor", "overdrawn", 0, 1, nowMs, state("rpm", 10, -5_000)),
		bucket("othernamesp", "proj", "gpt", 0, 1, nowMs, state("rpm", 999, 999_000)),
	)
}

func TestResourceCapacity(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	capacityFixture(env)
	rl := env.limiter()
	ctx := env.ctx

	rpm := ResourceCapacity{
		Resource: "gpt", LimitName: "rpm", TotalCapacity: 100 + 50 + 20 + 10 + 100, TotalAvailable: 60 + 50 + 20 + 5 + 40,
		UtilizationPct: float64(280-175) / 280 * 100,
		Entities: []store.EntityCapacity{
			{EntityID: "big", Capacity: 100, Available: 60, UtilizationPct: 40}, // four shards summed
			{EntityID: "full", Capacity: 50, Available: 50, UtilizationPct: 0},  // 100 summed, capped at 50
			{EntityID: "ghost", Capacity: 20, Available: 20, UtilizationPct: 0},
			{EntityID: "key-1", Capacity: 10, Available: 5, UtilizationPct: 50}, // refilled 30 s of 10/min
			{EntityID: "proj", Capacity: 100, Available: 40, UtilizationPct: 60},
		},
	}
	got, err := rl.Admin().ResourceCapacity(ctx, "gpt", "rpm", false)
	require.NoError(t, err)
	assert.Equal(t, rpm, got, "ResourceCapacity(gpt, rpm)")

	// Parents only: ghost has no META, key-1 has a parent. One BatchGetItem.
	env.rec.Reset()
	got, err = rl.Admin().ResourceCapacity(ctx, "gpt", "rpm", true)
	require.NoError(t, err)
	want := ResourceCapacity{Resource: "gpt", LimitName: "rpm", TotalCapacity: 250, TotalAvailable: 150, UtilizationPct: 40,
		Entities: []store.EntityCapacity{rpm.Entities[0], rpm.Entities[1], rpm.Entities[4]}}
	assert.Equal(t, want, got, "ResourceCapacity(gpt, rpm, parents)")
	assert.Equal(t, 1, env.rec.Count("BatchGetItem"), "calls = %s, want one BatchGetItem for the META records", env.calls())
	assert.Zero(t, env.rec.Count("GetItem"), "calls = %s, want one BatchGetItem for the META records", env.calls())

	got, err = rl.Admin().ResourceCapacity(ctx, "gpt", "tpm", false)
	assert.NoError(t, err, "ResourceCapacity(gpt, tpm)")
	if assert.Len(t, got.Entities, 2, "ResourceCapacity(gpt, tpm) = %+v", got) {
		assert.Equal(t, store.EntityCapacity{EntityID: "proj", Capacity: 10_000, Available: 2500, UtilizationPct: 75}, got.Entities[0], "ResourceCapacity(gpt, tpm)")
		assert.Equal(t, "tponly", got.Entities[1].EntityID, "ResourceCapacity(gpt, tpm) = %+v", got)
	}
	assert.EqualValues(t, 11_000, got.TotalCapacity, "ResourceCapacity(gpt, tpm) = %+v", got)
	got, err = rl.Admin().ResourceCapacity(ctx, "overdrawn", "rpm", false)
	assert.NoError(t, err, "bucket in debt")
	assert.EqualValues(t, -5, got.TotalAvailable, "bucket in debt = %+v", got)
	assert.EqualValues(t, 150, got.UtilizationPct, "bucket in debt = %+v", got)
	if assert.NotEmpty(t, got.Entities, "bucket in debt = %+v", got) {
		assert.EqualValues(t, 150, got.Entities[0].UtilizationPct, "bucket in debt = %+v", got)
	}
	got, err = rl.Admin().ResourceCapacity(ctx, "unused", "rpm", true)
	assert.NoError(t, err, "no buckets")
	assert.Zero(t, got.TotalCapacity, "no buckets = %+v", got)
	assert.Zero(t, got.UtilizationPct, "no buckets = %+v", got)
	assert.NotNil(t, got.Entities, "no buckets: Entities, want an empty slice")
	assert.Empty(t, got.Entities, "no buckets = %+v", got)

	// The GSI2 query reads every page.
	small := env.withClient(hook(func(op string, params any) error {
		if in, ok := params.(*dynamodb.QueryInput); ok {
			in.Limit = aws.Int32(2)
		}
		return nil
	}))
	env.rec.Reset()
	got, err = small.ResourceCapacity(ctx, "gpt", "rpm", false, env.clock.now())
	assert.NoError(t, err, "over small pages")
	assert.Equal(t, rpm, got, "over small pages")
	n := env.rec.Count("Query")
	assert.GreaterOrEqual(t, n, 5, "Query calls, want one per page")

	// The hidden wcu limit cannot be asked for; every input is validated
	// before reading.
	env.rec.Reset()
	for _, tc := range []struct {
		resource, limit string
		kind            error
	}{
		{"gpt", "wcu", ErrInvalidName},
		{"gpt", "", ErrInvalidName},
		{"gpt", "1rpm", ErrInvalidName},
		{"gpt", "r#m", ErrInvalidName},
		{"", "rpm", ErrInvalidName},
		{"_gpt", "rpm", ErrInvalidName},
		{"gpt\n", "rpm", ErrInvalidName},
	} {
		_, err := rl.Admin().ResourceCapacity(ctx, tc.resource, tc.limit, false)
		var ve *ValidationError
		assert.ErrorAs(t, err, &ve, "ResourceCapacity(%q, %q)", tc.resource, tc.limit)
		assert.ErrorIs(t, err, tc.kind, "ResourceCapacity(%q, %q)", tc.resource, tc.limit)
	}
	_, err = rl.Admin().ResourceCapacity(ctx, "gpt", "wcu", false)
	assert.EqualError(t, err, "limiter: invalid limit_name: 'wcu' is a reserved limit name", "wcu")
	n = env.rec.Count("")
	assert.EqualValues(t, 0, n, "invalid input caused %d calls", n)
}
