package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// The behavioural scenarios: the limiter's rules on top of the repository.

var (
	cRPM = limiter.PerMinute("rpm", 10)
	cTPM = limiter.PerMinute("tpm", 1000)
)

var scenarios = []scenario{
	{"LeaseLifecycle", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		lims := limiter.WithLimits(cRPM, cTPM)
		lease, err := rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1, "tpm": 400}, lims)
		require.NoError(t, err, "acquire: %v", err)
		b.note("after acquire: %s", b.bucket("k1", "gpt"))
		if err := lease.Adjust(store.Consume{"tpm": 250}); err != nil {
			t.Fatal(err)
		}
		if err := lease.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := b.bucket("k1", "gpt")
		b.note("after commit: %s", got)
		want := "rpm=9000/1000 tpm=350000/650000"
		require.Equal(t, want, got, "after commit %s, want %s", got, want)
		// A refused request writes nothing and says when to retry.
		_, err = rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1, "tpm": 500}, lims)
		b.noteErr("over", err)
		var rle *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &rle, "over: %v, want retry after 9s", err)
		require.Equal(t, 9001*time.Millisecond, rle.RetryAfter, "over: %v (%v), want retry after 9s", err, rle.RetryAfter)
		if got := b.bucket("k1", "gpt"); got != "rpm=9000/1000 tpm=350000/650000" {
			t.Fatalf("refusal wrote: %s", got)
		}
		// Refill, then a rollback gives everything back.
		b.clock.Advance(9001 * time.Millisecond)
		lease, err = rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1, "tpm": 500}, lims)
		b.noteErr("after refill", err)
		require.NoError(t, err)
		b.note("leased: %s consumed=%v", b.bucket("k1", "gpt"), lease.Consumed())
		if err := lease.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		b.note("rolled back: %s", b.bucket("k1", "gpt"))
		b.noteErr("commit after rollback", lease.Commit(ctx))
		// Consume within a lease is checked locally; Adjust may go into debt.
		lease, err = rl.Acquire(ctx, "k1", "gpt", store.Consume{"rpm": 1}, lims)
		require.NoError(t, err)
		b.noteErr("lease consume over", lease.Consume(store.Consume{"tpm": 5000}))
		b.noteErr("lease adjust debt", lease.Adjust(store.Consume{"tpm": 1500}))
		b.noteErr("commit debt", lease.Commit(ctx))
		b.note("debt: %s", b.bucket("k1", "gpt"))
		avail, err := rl.Available(ctx, "k1", "gpt", lims)
		b.note("available %v %v", avail, err)
		wait, err := rl.TimeUntilAvailable(ctx, "k1", "gpt", store.Consume{"tpm": 100}, lims)
		b.note("wait %v %v", wait, err)
		require.Negative(t, avail["tpm"], "debt not visible: available %v, wait %v", avail, wait)
		require.Positive(t, wait, "debt not visible: available %v, wait %v", avail, wait)
	}},
	{"Do", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		lims := limiter.WithLimits(cTPM)
		boom := errors.New("llm failed")
		err := rl.Do(ctx, "k", "gpt", store.Consume{"tpm": 300}, func(ctx context.Context, l *limiter.Lease) error { return boom }, lims)
		b.noteErr("do error", err)
		require.ErrorIs(t, err, boom, "Do: %v", err)
		b.note("after failed do: %s", b.bucket("k", "gpt"))
		err = rl.Do(ctx, "k", "gpt", store.Consume{"tpm": 300}, func(ctx context.Context, l *limiter.Lease) error {
			return l.Adjust(store.Consume{"tpm": -100})
		}, lims)
		b.noteErr("do ok", err)
		got := b.bucket("k", "gpt")
		b.note("after do: %s", got)
		require.EqualValues(t, "tpm=800000/200000", got, "after Do: %s", got)
	}},
	{"Cascade", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		if _, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "proj"}); err != nil {
			t.Fatal(err)
		}
		if _, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "key", ParentID: "proj", Cascade: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "key2", ParentID: "proj", Cascade: true}); err != nil {
			t.Fatal(err)
		}
		if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("tpm", 1000))})); err != nil {
			t.Fatal(err)
		}
		if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("tpm", 600))})); err != nil {
			t.Fatal(err)
		}
		for i, id := range []string{"key", "key2", "key"} {
			lease, err := rl.Acquire(ctx, id, "gpt", store.Consume{"tpm": 400})
			b.noteErr(fmt.Sprintf("acquire %d %s", i, id), err)
			if err == nil {
				b.noteErr("commit", lease.Commit(ctx))
			}
			b.note("key=%s key2=%s proj=%s", b.bucket("key", "gpt"), b.bucket("key2", "gpt"), b.bucket("proj", "gpt"))
		}
		// The third acquire fits the child (200 left) but not the parent
		// (200 left of 1000 after 800): refused, and nothing written.
		got := b.bucket("proj", "gpt")
		require.EqualValues(t, "tpm=200000/800000", got, "parent %s", got)
		got = b.bucket("key", "gpt")
		require.EqualValues(t, "tpm=200000/400000", got, "child %s", got)
		kids, err := iterx.Collect(rl.Admin().Children(ctx, "proj"))
		var ids []string
		for _, k := range kids {
			ids = append(ids, k.ID)
		}
		slices.Sort(ids)
		b.note("children %v %v", ids, err)
	}},
	{"ConfigHierarchy", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		resolve := func(what string) {
			l, src, err := rl.Admin().ResolveLimits(ctx, "e", "gpt")
			b.note("%s: %v %s %v", what, l, src, err)
		}
		_, err := rl.Acquire(ctx, "e", "gpt", store.Consume{"rpm": 1})
		b.noteErr("no limits", err)
		require.ErrorIs(t, err, store.ErrValidation, "no limits: %v", err)
		steps := []struct {
			name string
			set  func() error
			want limiter.ConfigSource
		}{
			{"system", func() error {
				return rl.Admin().SetSystemDefaults(ctx, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 1))}), store.OnUnavailableAllow)
			}, limiter.SourceSystem},
			{"resource", func() error {
				return rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 2))}))
			}, limiter.SourceResource},
			{"entity default", func() error {
				return rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: store.DefaultResource}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 3))}))
			}, limiter.SourceEntityDefault},
			{"entity", func() error {
				return rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "e", Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 4))}))
			}, limiter.SourceEntity},
		}
		for _, s := range steps {
			err := s.set()
			require.NoError(t, err, "%s: %v", s.name, err)
			rl.Admin().InvalidateCaches()
			_, src, _ := rl.Admin().ResolveLimits(ctx, "e", "gpt")
			require.Equal(t, s.want, src, "%s: source %s, want %s", s.name, src, s.want)
			resolve(s.name)
		}
		// Entity limits: capacity 4, the bucket never expires.
		for i := range 5 {
			lease, err := rl.Acquire(ctx, "e", "gpt", store.Consume{"rpm": 1})
			b.noteErr(fmt.Sprintf("acquire %d", i), err)
			if err == nil {
				lease.Commit(ctx)
			}
		}
		sb, _ := b.repo.GetBucket(ctx, store.BucketKey{EntityID: "e", Resource: "gpt"})
		b.note("bucket %s ttl=%v", b.bucket("e", "gpt"), sb.TTL)
		if err := rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "e", Resource: "gpt"}); err != nil {
			t.Fatal(err)
		}
		resolve("after delete")
		sb, _ = b.repo.GetBucket(ctx, store.BucketKey{EntityID: "e", Resource: "gpt"})
		b.note("reconciled %s ttl>0=%v", b.bucket("e", "gpt"), sb.TTL > 0)
		sys, err := rl.Admin().Limits(ctx, limiter.Scope{})
		_, ou, err2 := rl.Admin().SystemDefaults(ctx)
		b.note("system %v %s %v %v", sys, ou, err, err2)
		if b.has(capConfigLister) {
			res, err := iterx.Collect(rl.Admin().ResourcesWithDefaults(ctx))
			b.noteCap(capConfigLister, "resources %v %v", res, err)
			ecr, err := iterx.Collect(rl.Admin().ResourcesWithEntityLimits(ctx))
			b.noteCap(capConfigLister, "entity config resources %v %v", ecr, err)
		}
		if err := rl.Admin().DeleteLimits(ctx, limiter.Scope{}); err != nil {
			t.Fatal(err)
		}
		if err := rl.Admin().DeleteLimits(ctx, limiter.Scope{Resource: "gpt"}); err != nil {
			t.Fatal(err)
		}
		rl.Admin().InvalidateCaches()
		resolve("defaults deleted")
	}},
	{"EntitiesAndAudit", func(t *testing.T, b *backend) {
		ctx := limiter.ContextWithPrincipal(context.Background(), "admin-1")
		rl := b.rl()
		e, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "acme", Name: "Acme", Metadata: map[string]string{"tier": "gold"}})
		b.note("create %s %s %v %v", e.ID, e.Name, e.Metadata, err)
		_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "acme"})
		b.noteErr("create again", err)
		var exists *store.EntityExistsError
		require.ErrorAs(t, err, &exists, "second create: %v", err)
		_, err = rl.Admin().Entity(ctx, "nobody")
		b.noteErr("get missing", err)
		_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "bad id!"})
		b.noteErr("create invalid", err)
		_, err = rl.Acquire(ctx, "acme", "gpt", store.Consume{"wcu": 1}, limiter.WithLimits(cRPM))
		b.noteErr("reserved name", err)
		for _, r := range []string{"a", "b", "c"} {
			err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acme", Resource: r}, toCallerLimits([]store.Limit{store.Limit(cRPM)}))
			require.NoError(t, err)
		}
		if err := rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "zeta", Resource: "a"}, toCallerLimits([]store.Limit{store.Limit(cRPM)})); err != nil {
			t.Fatal(err)
		}
		lease, err := rl.Acquire(ctx, "acme", "a", store.Consume{"rpm": 2})
		require.NoError(t, err)
		lease.Commit(ctx)
		if b.has(capConfigLister) {
			var pages [][]string
			cursor := ""
			for {
				ids, next, err := b.repo.(store.ConfigLister).ListEntitiesWithCustomLimits(ctx, "a", 1, cursor)
				require.NoError(t, err)
				if len(ids) > 0 {
					pages = append(pages, ids)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			b.noteCap(capConfigLister, "custom limit pages %v", pages)
			ids, err := iterx.Collect(rl.Admin().EntitiesWithLimits(ctx, "a"))
			require.NoError(t, err)
			require.Equal(t, slices.Concat(pages...), ids, "EntitiesWithLimits yields every page")
		}
		if err := rl.Admin().DeleteEntity(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		_, err = rl.Admin().Entity(ctx, "acme")
		b.noteErr("get deleted", err)
		b.note("bucket after delete %s", b.bucket("acme", "a"))
		_, err = iterx.Collect(rl.Admin().AuditEvents(ctx, "not an id!"))
		b.noteErr("bad entity id", err)
		if !b.has(capAuditLog) {
			return
		}
		events, err := iterx.Collect(rl.Admin().AuditEvents(ctx, "acme"))
		require.NoError(t, err)
		var actions []string
		for _, ev := range events {
			actions = append(actions, ev.Action+":"+ev.Resource+":"+ev.Principal+fmt.Sprint(ev.Details["records_deleted"]))
		}
		b.noteCap(capAuditLog, "audit %v", actions)
		require.Len(t, events, 5, "audit events: %v", actions)
		require.Equal(t, store.AuditEntityDeleted, events[0].Action, "audit events: %v", actions)
		require.Equal(t, store.AuditEntityCreated, events[4].Action, "audit events: %v", actions)
		for ev, err := range rl.Admin().AuditEvents(ctx, "acme") {
			require.NoError(t, err)
			require.Equal(t, events[0].EventID, ev.EventID, "the loop's first event")
			break
		}
		page2, err := b.repo.(store.AuditLog).AuditEvents(ctx, "acme", 2, events[1].EventID)
		require.NoError(t, err, "audit page: %v %v", page2, err)
		require.Len(t, page2, 2, "audit page: %v %v", page2, err)
		require.Equal(t, events[2].EventID, page2[0].EventID, "audit page: %v %v", page2, err)
	}},
	// ConcurrentAdmission: 32 goroutines race for a bucket of 20
	// with the clock frozen. On one bucket exactly 20 are admitted; with a
	// cascade the child and parent writes of the speculative path are two
	// conditional writes, so a race at the boundary may refuse a request that
	// would have fit (both sides give back), never admit one too many — at
	// most 20 are admitted and both counters equal what was admitted.
	{"ConcurrentAdmission", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		_, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "p"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "c", ParentID: "p", Cascade: true})
		require.NoError(t, err)
		lims := limiter.WithLimits(limiter.PerMinute("rpm", 20))
		race := func(entity string) (admitted, refused int) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					lease, err := rl.Acquire(ctx, entity, "gpt", store.Consume{"rpm": 1}, lims)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						admitted++
						if err := lease.Commit(ctx); err != nil {
							t.Error(err)
						}
					case errors.Is(err, limiter.ErrRateLimited):
						refused++
					default:
						t.Error(err)
					}
				})
			}
			wg.Wait()
			return admitted, refused
		}
		admitted, refused := race("solo")
		b.note("solo admitted=%d refused=%d bucket=%s", admitted, refused, b.bucket("solo", "gpt"))
		require.Equal(t, 20, admitted, "solo: admitted %d, refused %d, bucket %s", admitted, refused, b.bucket("solo", "gpt"))
		require.Equal(t, 12, refused, "solo: admitted %d, refused %d, bucket %s", admitted, refused, b.bucket("solo", "gpt"))
		require.Equal(t, "rpm=0/20000", b.bucket("solo", "gpt"), "solo: admitted %d, refused %d, bucket %s", admitted, refused, b.bucket("solo", "gpt"))
		admitted, refused = race("c")
		want := fmt.Sprintf("rpm=%d/%d", (20-admitted)*1000, admitted*1000)
		c, p := b.bucket("c", "gpt"), b.bucket("p", "gpt")
		t.Logf("cascade: admitted %d, refused %d, child %s, parent %s", admitted, refused, c, p)
		require.GreaterOrEqual(t, admitted, 1, "cascade: admitted %d, refused %d, child %s, parent %s, want both %s", admitted, refused, c, p, want)
		require.LessOrEqual(t, admitted, 20, "cascade: admitted %d, refused %d, child %s, parent %s, want both %s", admitted, refused, c, p, want)
		require.Equal(t, 32, admitted+refused, "cascade: admitted %d, refused %d, child %s, parent %s, want both %s", admitted, refused, c, p, want)
		require.Equal(t, want, c, "cascade: admitted %d, refused %d, child %s, parent %s, want both %s", admitted, refused, c, p, want)
		require.Equal(t, want, p, "cascade: admitted %d, refused %d, child %s, parent %s, want both %s", admitted, refused, c, p, want)
		b.note("cascade conserved")
	}},
	// IdleBurstExact: a bucket that refilled to its capacity while idle
	// holds its capacity and no more. A 100/min bucket, one token taken, 60
	// s idle: a burst at one instant admits exactly 100 (a write that took
	// from the stored 99 and left the refill time alone would have them
	// credited back by the capped refill: 199); and right after taking 99
	// from the full bucket 1 is available. With group commit on and off,
	// and for a cascading child and its parent.
	{"IdleBurstExact", func(t *testing.T, b *backend) {
		ctx := context.Background()
		lims := limiter.WithLimits(limiter.PerMinute("rpm", 100))
		for _, gc := range []bool{false, true} {
			rl := b.rl(func(o *limiter.Options) { o.GroupCommit = gc })
			id := fmt.Sprintf("idle-gc-%v", gc)
			lease, err := rl.Acquire(ctx, id, "gpt", store.Consume{"rpm": 1}, lims)
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
			b.clock.Advance(time.Minute)
			var mu sync.Mutex
			var wg sync.WaitGroup
			admitted := 0
			for range 16 {
				wg.Go(func() {
					for range 10 {
						lease, err := rl.Acquire(ctx, id, "gpt", store.Consume{"rpm": 1}, lims)
						if errors.Is(err, limiter.ErrRateLimited) {
							continue
						}
						if !assert.NoError(t, err) {
							return
						}
						assert.NoError(t, lease.Commit(ctx))
						mu.Lock()
						admitted++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.note("group commit %v: burst after idle admitted %d: %s", gc, admitted, b.bucket(id, "gpt"))
			require.Equal(t, 100, admitted, "group commit %v", gc)
			require.Equal(t, "rpm=0/101000", b.bucket(id, "gpt"))

			b.clock.Advance(time.Minute)
			lease, err = rl.Acquire(ctx, id, "gpt", store.Consume{"rpm": 99}, lims)
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
			avail, err := rl.Available(ctx, id, "gpt", lims)
			require.NoError(t, err)
			b.note("group commit %v: 99 taken from full: available %v: %s", gc, avail, b.bucket(id, "gpt"))
			require.Equal(t, map[string]int64{"rpm": 1}, avail, "group commit %v", gc)
			_, err = rl.Acquire(ctx, id, "gpt", store.Consume{"rpm": 2}, lims)
			b.noteErr("two more", err)
			require.ErrorIs(t, err, limiter.ErrRateLimited)
		}

		// A cascade: child and parent both refilled while idle.
		rl := b.rl()
		_, err := rl.Admin().CreateEntity(ctx, store.Entity{ID: "idle-p"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, store.Entity{ID: "idle-c", ParentID: "idle-p", Cascade: true})
		require.NoError(t, err)
		lease, err := rl.Acquire(ctx, "idle-c", "gpt", store.Consume{"rpm": 1}, lims)
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		b.clock.Advance(time.Minute)
		admitted := 0
		for range 150 {
			lease, err := rl.Acquire(ctx, "idle-c", "gpt", store.Consume{"rpm": 1}, lims)
			if errors.Is(err, limiter.ErrRateLimited) {
				continue
			}
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
			admitted++
		}
		c, p := b.bucket("idle-c", "gpt"), b.bucket("idle-p", "gpt")
		b.note("cascade: burst after idle admitted %d: child %s parent %s", admitted, c, p)
		require.Equal(t, 100, admitted)
		require.Equal(t, "rpm=0/101000", c)
		require.Equal(t, "rpm=0/101000", p)
	}},
	// BucketTTL: a bucket of default (resource) config gets a
	// TTL of 7× its time to fill; past it the speculative write refuses it and
	// the read-then-write path refreshes it, keeping its counters.
	{"BucketTTL", func(t *testing.T, b *backend) {
		ctx := context.Background()
		rl := b.rl()
		if err := rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, toCallerLimits([]store.Limit{store.Limit(limiter.PerMinute("rpm", 10))})); err != nil {
			t.Fatal(err)
		}
		lease, err := rl.Acquire(ctx, "k", "gpt", store.Consume{"rpm": 3})
		require.NoError(t, err)
		lease.Commit(ctx)
		sb, _ := b.repo.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "gpt"})
		ttl := sb.TTL - b.clock.Now().Unix()
		b.note("ttl in %ds: %s", ttl, b.bucket("k", "gpt"))
		require.EqualValues(t, 7*60, ttl, "ttl in %d s, want 420", ttl)
		b.clock.Advance(421 * time.Second)
		lease, err = rl.Acquire(ctx, "k", "gpt", store.Consume{"rpm": 2})
		b.noteErr("after expiry", err)
		require.NoError(t, err)
		lease.Commit(ctx)
		sb, _ = b.repo.GetBucket(ctx, store.BucketKey{EntityID: "k", Resource: "gpt"})
		got := b.bucket("k", "gpt")
		b.note("refreshed ttl in %ds: %s", sb.TTL-b.clock.Now().Unix(), got)
		require.Equal(t, "rpm=8000/5000", got, "after expiry %s ttl %d", got, sb.TTL-b.clock.Now().Unix())
		require.EqualValues(t, 420, sb.TTL-b.clock.Now().Unix(), "after expiry %s ttl %d", got, sb.TTL-b.clock.Now().Unix())
	}},
	// ClockBehindNeverRefillsTwice: two limiters share the store, one's
	// clock a minute behind the other's. A 10/min bucket: the late clock
	// takes 10 (0 left), the early one takes 5 (refilled to 10 a minute
	// on: 5 left), the late one takes 1: its clock is before the item's
	// refill time, so it refilled nothing and leaves that time where it
	// is (4 left). Moving it back would let the next refill credit the
	// same minute again (10 available, 26 admitted where capacity plus a
	// minute's refill is 20).
	{"ClockBehindNeverRefillsTwice", func(t *testing.T, b *backend) {
		ctx := context.Background()
		lims := limiter.WithLimits(limiter.PerMinute("tpm", 10))
		behind := b.rl()
		defer behind.Close()
		early := &Clock{t: b.clock.Now().Add(time.Minute)}
		ahead := limiter.New(b.repo, func(o *limiter.Options) { o.SpeculativeWrites = b.spec }, func(o *limiter.Options) { o.Clock = early.Now })
		defer ahead.Close()
		take := func(rl *limiter.RateLimiter, n int64) {
			t.Helper()
			lease, err := rl.Acquire(ctx, "skew", "gpt", store.Consume{"tpm": n}, lims)
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
		}
		take(behind, 10)
		take(ahead, 5)
		take(behind, 1)
		b.note("after 10 (late clock), 5 (a minute ahead), 1 (late): %s", b.bucket("skew", "gpt"))
		avail, err := ahead.Available(ctx, "skew", "gpt", lims)
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"tpm": 4}, avail)
		_, err = ahead.Acquire(ctx, "skew", "gpt", store.Consume{"tpm": 5}, lims)
		b.noteErr("5 more", err)
		require.ErrorIs(t, err, limiter.ErrRateLimited)
	}},
}
