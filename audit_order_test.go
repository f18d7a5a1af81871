package limiter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/memorystore"
	"github.com/zaelimiter/limiter/store"
)

// TestAuditOrderUnderStillClock: the audit log lists an entity's events
// newest first in the order they were made, each id greater than the last, even when every change falls in
// one millisecond (here a clock that stands still, then steps back) and ids
// are made at other milliseconds in between — by another limiter in the
// process, or by anything else drawing on the process-wide ULID entropy.
func TestAuditOrderUnderStillClock(t *testing.T) {
	ctx := limiter.ContextWithPrincipal(context.Background(), "admin")
	at := time.Date(2026, 3, 8, 9, 59, 59, 0, time.UTC)
	clock := at
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return clock } })
	defer rl.Close()
	other := limiter.New(memorystore.New(), func(o *limiter.Options) {
		o.Clock = func() time.Time { return at.Add(time.Hour) }
	})
	defer other.Close()

	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "acme"})
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		if i == 20 {
			clock = at.Add(-time.Second) // the clock steps back
		}
		res := fmt.Sprintf("r%02d", i)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acme", Resource: res},
			[]limiter.Limit{limiter.PerMinute("rpm", 10)}))
		want = append([]string{res}, want...)
		// Ids made at another millisecond between two of ours.
		_ = ulid.MustNew(ulid.Timestamp(at.Add(time.Duration(i)*time.Millisecond)), ulid.DefaultEntropy())
		require.NoError(t, other.Admin().SetLimits(ctx, limiter.Scope{Entity: "zeta", Resource: res},
			[]limiter.Limit{limiter.PerMinute("rpm", 10)}))
	}
	require.NoError(t, rl.Admin().DeleteEntity(ctx, "acme"))

	events, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "acme"))
	require.NoError(t, err)
	var got []string
	for i, ev := range events {
		got = append(got, ev.Action+":"+ev.Resource)
		// Stores that keep the log sorted by id (DynamoDB's sort key,
		// Redis's sorted set) list in this order only if each id is
		// greater than every earlier one.
		if i > 0 {
			require.Less(t, ev.EventID, events[i-1].EventID, "event %d (%s) id after its successor's", i, got[i])
		}
	}
	wantActions := []string{store.AuditEntityDeleted + ":"}
	for _, r := range want {
		wantActions = append(wantActions, store.AuditLimitsSet+":"+r)
	}
	wantActions = append(wantActions, store.AuditEntityCreated+":")
	require.Equal(t, wantActions, got, "audit events newest first")
}
