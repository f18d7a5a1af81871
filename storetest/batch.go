package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// Reset and the all-or-nothing batch: the contract of WriteReset and of
// the optional BatchStore, and the limiter's Reset and AcquireAll on top.

func init() {
	scenarios = append(scenarios,
		scenario{"Reset", resetScenario},
		scenario{"AcquireAll", acquireAllScenario},
	)
}

// runContractBatch checks WriteReset and, when the repository implements
// it, store.BatchStore.
func runContractBatch(t *testing.T, newRepo func(t *testing.T) store.Repository) {
	ctx := context.Background()
	t.Run("Reset", func(t *testing.T) {
		repo := newRepo(t)
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		debt := state("tpm", 1000, 0)
		debt.TokensMilli = -500_000
		w := store.BucketWrite{Kind: store.WriteCreate, Key: k, NowMs: nowMs, ShardCount: 1,
			States: []store.BucketState{state("rpm", 10, 2), debt}, TTL: store.TTLSet, TTLSeconds: 600}
		err := repo.WriteBuckets(ctx, []store.BucketWrite{w})
		require.NoError(t, err)
		take := store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: nowMs,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{take})
		require.NoError(t, err)
		reset := store.BucketWrite{Kind: store.WriteReset, Key: k, NowMs: nowMs + 5000,
			Limits: []store.LimitWrite{{Name: "rpm"}, {Name: "tpm"}}}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{reset})
		require.NoError(t, err, "reset: %v", err)
		// Balances at capacity; totals kept.
		wantBalances(t, repo, k, "rpm=10000/1000 tpm=1000000/0")
		b, _ := repo.GetBucket(ctx, k)
		require.Equal(t, nowMs+5000, b.RefillMs, "after reset: refill %d ttl %d; want refill %d, the TTL kept (%d)", b.RefillMs, b.TTL, nowMs+5000, nowMs/1000+600)
		require.Equal(t, nowMs/1000+600, b.TTL, "after reset: refill %d ttl %d; want refill %d, the TTL kept (%d)", b.RefillMs, b.TTL, nowMs+5000, nowMs/1000+600)
		// A read-then-write computed before the reset loses its lock.
		stale := store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 6000, ExpectedRefillMs: nowMs,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000, RefillMilli: 1000}}}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{stale})
		require.ErrorIs(t, err, store.ErrConditionFailed, "normal write with the refill time before the reset: %v, want ErrConditionFailed", err)
		reset.Key = store.BucketKey{EntityID: "nobody", Resource: "gpt"}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{reset})
		require.ErrorIs(t, err, store.ErrConditionFailed, "reset of a missing item: %v, want ErrConditionFailed", err)
		got := balances(t, repo, reset.Key)
		require.EqualValues(t, "missing", got, "reset created an item: %s", got)
	})

	t.Run("BatchStore", func(t *testing.T) {
		repo := newRepo(t)
		bs, ok := repo.(store.BatchStore)
		if !ok {
			t.Skip("not a store.BatchStore")
		}
		a := store.BucketKey{EntityID: "a", Resource: "gpt"}
		p := store.BucketKey{EntityID: "p", Resource: "claude"}
		create(t, repo, a, state("rpm", 10, 5))
		create(t, repo, p, state("rpm", 10, 1), state("tpm", 1000, 900))
		rpm := limiter.PerMinute("rpm", 10)
		req := func(k store.BucketKey, c store.Consume, limits ...store.Limit) store.SpeculativeRequest {
			return store.SpeculativeRequest{Key: k, Consume: c, Limits: limits, NowMs: nowMs}
		}
		// One request short: nothing applies, each item comes back as it was.
		res, err := bs.SpeculativeConsumeAll(ctx, []store.SpeculativeRequest{
			req(a, store.Consume{"rpm": 2}, store.Limit(rpm)), req(p, store.Consume{"rpm": 2, "tpm": 100}, store.Limit(rpm))})
		require.NoError(t, err, "refused batch: %+v, %v", res, err)
		require.Len(t, res, 2, "refused batch: %+v, %v", res, err)
		require.False(t, res[0].Applied, "refused batch: applied %v/%v, reasons %q/%q; want none applied, the second exhausted", res[0].Applied, res[1].Applied, res[0].Reason, res[1].Reason)
		require.False(t, res[1].Applied, "refused batch: applied %v/%v, reasons %q/%q; want none applied, the second exhausted", res[0].Applied, res[1].Applied, res[0].Reason, res[1].Reason)
		require.Equal(t, store.RefusedNone, res[0].Reason, "refused batch: applied %v/%v, reasons %q/%q; want none applied, the second exhausted", res[0].Applied, res[1].Applied, res[0].Reason, res[1].Reason)
		require.Equal(t, store.RefusedLimitExhausted, res[1].Reason, "refused batch: applied %v/%v, reasons %q/%q; want none applied, the second exhausted", res[0].Applied, res[1].Applied, res[0].Reason, res[1].Reason)
		s, _ := res[0].Bucket.State("rpm")
		require.EqualValues(t, 5000, s.TokensMilli, "refused batch returns the items as they were: %+v", s)
		wantBalances(t, repo, a, "rpm=5000/0")
		wantBalances(t, repo, p, "rpm=1000/0 tpm=900000/0")
		// A missing item refuses the whole batch too.
		res, err = bs.SpeculativeConsumeAll(ctx, []store.SpeculativeRequest{
			req(a, store.Consume{"rpm": 1}, store.Limit(rpm)), req(store.BucketKey{EntityID: "x", Resource: "gpt"}, store.Consume{"rpm": 1})})
		require.NoError(t, err, "batch with a missing item: %+v, %v", res, err)
		require.False(t, res[0].Applied, "batch with a missing item: %+v, %v", res, err)
		require.Equal(t, store.RefusedBucketMissing, res[1].Reason, "batch with a missing item: %+v, %v", res, err)
		require.Nil(t, res[1].Bucket, "batch with a missing item: %+v, %v", res, err)
		wantBalances(t, repo, a, "rpm=5000/0")
		// Everything fits: all apply, each result holds its item after.
		res, err = bs.SpeculativeConsumeAll(ctx, []store.SpeculativeRequest{
			req(a, store.Consume{"rpm": 2}, store.Limit(rpm)), req(p, store.Consume{"rpm": 1, "tpm": 100}, store.Limit(rpm))})
		require.NoError(t, err, "fitting batch: %+v, %v", res, err)
		require.True(t, res[0].Applied, "fitting batch: %+v, %v", res, err)
		require.True(t, res[1].Applied, "fitting batch: %+v, %v", res, err)
		s, _ = res[1].Bucket.State("tpm")
		require.EqualValues(t, 800_000, s.TokensMilli, "applied batch returns the items after: %+v", s)
		require.EqualValues(t, 100_000, s.TotalConsumedMilli, "applied batch returns the items after: %+v", s)
		wantBalances(t, repo, a, "rpm=3000/2000")
		wantBalances(t, repo, p, "rpm=0/1000 tpm=800000/100000")
	})
}

// resetScenario: a drained bucket refuses; Reset fills it (every limit)
// for the next acquire, also past a refusal the limiter keeps in its
// over-limit cache, and is audited.
func resetScenario(t *testing.T, b *backend) {
	ctx := limiter.ContextWithPrincipal(context.Background(), "ops")
	rl := b.rl()
	lims := limiter.WithLimits(cRPM, cTPM)
	b.noteErr("reset of a missing bucket", rl.Reset(ctx, "k", "gpt"))
	n := drain(t, rl, "k", "gpt", "rpm", 20, lims)
	b.note("drained %d: %s", n, b.bucket("k", "gpt"))
	require.EqualValues(t, 10, n, "drained %d, want 10", n)
	lease, err := rl.Acquire(ctx, "k", "gpt", store.Consume{"tpm": 900}, lims)
	require.NoError(t, err)
	if err := lease.Adjust(store.Consume{"tpm": 300}); err != nil { // into debt
		t.Fatal(err)
	}
	if err := lease.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = rl.Acquire(ctx, "k", "gpt", store.Consume{"rpm": 1}, lims)
	b.noteErr("drained", err)
	b.clock.Advance(time.Second)
	if err := rl.Reset(ctx, "k", "gpt"); err != nil {
		t.Fatalf("reset: %v", err)
	}
	got := b.bucket("k", "gpt")
	b.note("after reset: %s", got)
	require.EqualValues(t, "rpm=10000/10000 tpm=1000000/1200000", got, "after reset %s", got)
	avail, err := rl.Available(ctx, "k", "gpt", lims)
	b.note("available %v %v", avail, err)
	n = drain(t, rl, "k", "gpt", "rpm", 20, lims)
	b.note("admitted after reset %d", n)
	require.EqualValues(t, 10, n, "admitted %d after the reset, want 10", n)
	b.noteErr("reset invalid", rl.Reset(ctx, "bad id!", "gpt"))
	if !b.has(capAuditLog) {
		return
	}
	events, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "k"))
	require.NoError(t, err)
	var actions []string
	for _, ev := range events {
		actions = append(actions, fmt.Sprintf("%s:%s:%s:%v", ev.Action, ev.Resource, ev.Principal, ev.Details["buckets_reset"]))
	}
	b.noteCap(capAuditLog, "audit %v", actions)
	require.Len(t, events, 2, "audit events %v, want two bucket_reset", actions)
	require.Equal(t, store.AuditBucketReset, events[0].Action, "audit events %v, want two bucket_reset", actions)
}

// statusLine renders per-request statuses for the transcript.
func statusLine(statuses [][]limiter.LimitStatus) string {
	var reqs []string
	for _, st := range statuses {
		var parts []string
		for _, s := range st {
			parts = append(parts, fmt.Sprintf("%s/%s/%s avail=%d req=%d exc=%v", s.EntityID, s.Resource, s.LimitName, s.Available, s.Requested, s.Exceeded))
		}
		reqs = append(reqs, "["+strings.Join(parts, "; ")+"]")
	}
	return strings.Join(reqs, " ")
}

// acquireAllScenario: several requests, with a cascade and a per-request
// override, admitted together; a batch with one request over its limit
// takes nothing from the others; rollback gives all back.
func acquireAllScenario(t *testing.T, b *backend) {
	ctx := context.Background()
	rl := b.rl()
	for _, e := range []store.Entity{{ID: "proj"}, {ID: "key1", ParentID: "proj", Cascade: true}, {ID: "key2", ParentID: "proj", Cascade: true}} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err)
	}
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("tpm", 1000))})); err != nil {
		t.Fatal(err)
	}
	if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("tpm", 1500))})); err != nil {
		t.Fatal(err)
	}
	solo := limiter.AcquireRequest{EntityID: "solo", Resource: "claude", Consume: store.Consume{"rpm": 1}, Limits: toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 2))})}
	buckets := func() string {
		return fmt.Sprintf("key1=%s key2=%s proj=%s solo=%s", b.bucket("key1", "gpt"), b.bucket("key2", "gpt"), b.bucket("proj", "gpt"), b.bucket("solo", "claude"))
	}
	for round := range 2 { // the first creates the buckets, the second finds them
		lease, statuses, err := rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "key1", Resource: "gpt", Consume: store.Consume{"tpm": 300}},
			{EntityID: "key2", Resource: "gpt", Consume: store.Consume{"tpm": 200}},
			solo,
		})
		b.noteErr(fmt.Sprintf("batch %d", round), err)
		require.NoError(t, err, "batch %d: %v", round, err)
		b.note("statuses %s", statusLine(statuses))
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		b.note("%s", buckets())
	}
	got, want := buckets(), "key1=tpm=400000/600000 key2=tpm=600000/400000 proj=tpm=500000/1000000 solo=rpm=0/2000"
	require.Equal(t, want, got, "after two batches: %s, want %s", got, want)
	// solo is empty: the batch is refused and key1 and the parent keep
	// everything.
	_, statuses, err := rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "key1", Resource: "gpt", Consume: store.Consume{"tpm": 100}}, solo})
	b.noteErr("refused batch", err)
	b.note("statuses %s", statusLine(statuses))
	var rle *limiter.RateLimitExceededError
	require.ErrorAs(t, err, &rle, "refused batch: %v, statuses %s", err, statusLine(statuses))
	require.Len(t, statuses, 2, "refused batch: %v, statuses %s", err, statusLine(statuses))
	require.True(t, statuses[1][0].Exceeded, "refused batch: %v, statuses %s", err, statusLine(statuses))
	require.False(t, statuses[0][0].Exceeded, "refused batch: %v, statuses %s", err, statusLine(statuses))
	b.note("%s", buckets())
	// After a refill the same batch is admitted; a rollback gives every
	// bucket back what it took.
	b.clock.Advance(30 * time.Second)
	lease, statuses, err := rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "key1", Resource: "gpt", Consume: store.Consume{"tpm": 100}}, solo})
	b.noteErr("after refill", err)
	require.NoError(t, err)
	b.note("statuses %s consumed %v", statusLine(statuses), lease.Consumed())
	if err := lease.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	b.note("rolled back %s", buckets())
	_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "key1", Resource: "gpt", Consume: store.Consume{"rmp": 1}}})
	b.noteErr("typo", err)
	_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{solo, {EntityID: "solo", Resource: "claude", Consume: store.Consume{"rpm": 1}, Limits: toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 3))})}})
	b.noteErr("conflicting limits", err)
}
