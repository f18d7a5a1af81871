package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The contract checks call the repository directly, one method at a time,
// with the inputs the limiter would pass.

var nowMs = Epoch.UnixMilli()

// state is a bucket state of a limit of capacity tokens refilling capacity
// per minute, holding tokens.
func state(name string, capacity, tokens int64) store.BucketState {
	return store.BucketState{
		LimitName: name, TokensMilli: tokens * 1000, LastRefillMs: nowMs,
		CapacityMilli: capacity * 1000, RefillAmountMilli: capacity * 1000, RefillPeriodMs: 60_000,
	}
}

// create writes a new bucket item of states at nowMs.
func create(t *testing.T, repo store.Repository, key store.BucketKey, states ...store.BucketState) {
	t.Helper()
	w := store.BucketWrite{Kind: store.WriteCreate, Key: key, NowMs: nowMs, ShardCount: 1, States: states}
	err := repo.WriteBuckets(context.Background(), []store.BucketWrite{w})
	require.NoError(t, err, "create %v: %v", key, err)
}

// balances returns the item's limits as "name=tk/tc" in order, or
// "missing".
func balances(t *testing.T, repo store.Repository, key store.BucketKey) string {
	t.Helper()
	b, err := repo.GetBucket(context.Background(), key)
	require.NoError(t, err, "GetBucket %v: %v", key, err)
	if b == nil {
		return "missing"
	}
	s := ""
	for i, st := range b.States {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s=%d/%d", st.LimitName, st.TokensMilli, st.TotalConsumedMilli)
	}
	return s
}

func wantBalances(t *testing.T, repo store.Repository, key store.BucketKey, want string) {
	t.Helper()
	got := balances(t, repo, key)
	require.Equal(t, want, got, "bucket %s/%s/%d = %q, want %q", key.EntityID, key.Resource, key.Shard, got, want)
}

func runContract(t *testing.T, newRepo func(t *testing.T) store.Repository) {
	ctx := context.Background()
	t.Run("Entities", func(t *testing.T) {
		repo := newRepo(t)
		created := Epoch.Truncate(time.Second)
		p := store.Entity{ID: "proj", Name: "Project", Metadata: map[string]string{"tier": "gold"}, CreatedAt: created}
		c := store.Entity{ID: "key", Name: "key", ParentID: "proj", Cascade: true, Metadata: map[string]string{}, CreatedAt: created}
		for _, e := range []store.Entity{p, c} {
			err := repo.CreateEntity(ctx, e)
			require.NoError(t, err, "CreateEntity %s: %v", e.ID, err)
		}
		if err := repo.CreateEntity(ctx, p); !errors.Is(err, store.ErrEntityExists) {
			t.Fatalf("CreateEntity of an existing id: %v, want ErrEntityExists", err)
		}
		got, err := repo.GetEntity(ctx, "key")
		require.NoError(t, err, "GetEntity = %+v, %v", got, err)
		require.Equal(t, "key", got.ID, "GetEntity = %+v, %v", got, err)
		require.Equal(t, "proj", got.ParentID, "GetEntity = %+v, %v", got, err)
		require.True(t, got.Cascade, "GetEntity = %+v, %v", got, err)
		require.WithinDuration(t, created, got.CreatedAt, 0, "GetEntity = %+v, %v", got, err)
		if got, _ := repo.GetEntity(ctx, "proj"); got.Name != "Project" || got.Metadata["tier"] != "gold" {
			t.Fatalf("GetEntity(proj) = %+v", got)
		}
		if _, err := repo.GetEntity(ctx, "nobody"); !errors.Is(err, store.ErrEntityNotFound) {
			t.Fatalf("GetEntity of a missing id: %v, want ErrEntityNotFound", err)
		}
		kids, err := repo.Children(ctx, "proj")
		require.NoError(t, err, "Children = %+v, %v", kids, err)
		require.Len(t, kids, 1, "Children = %+v, %v", kids, err)
		require.Equal(t, "key", kids[0].ID, "Children = %+v, %v", kids, err)
		if kids, err := repo.Children(ctx, "key"); err != nil || len(kids) != 0 {
			t.Fatalf("Children of a leaf = %+v, %v", kids, err)
		}
		// DeleteEntity takes the entity's configs and buckets with it.
		if err := repo.PutConfig(ctx, store.EntityConfig("key", "gpt"), store.Config{Limits: []store.Limit{store.Limit(cRPM)}}); err != nil {
			t.Fatal(err)
		}
		k := store.BucketKey{EntityID: "key", Resource: "gpt"}
		create(t, repo, k, state("rpm", 10, 9))
		n, err := repo.DeleteEntity(ctx, "key")
		require.NoError(t, err, "DeleteEntity = %d, %v; want at least 3 records (entity, config, bucket)", n, err)
		require.GreaterOrEqual(t, n, 3, "DeleteEntity = %d, %v; want at least 3 records (entity, config, bucket)", n, err)
		if _, err := repo.GetEntity(ctx, "key"); !errors.Is(err, store.ErrEntityNotFound) {
			t.Fatalf("deleted entity: %v", err)
		}
		if _, ok, err := repo.GetConfig(ctx, store.EntityConfig("key", "gpt")); ok || err != nil {
			t.Fatalf("config of a deleted entity: ok=%v err=%v", ok, err)
		}
		wantBalances(t, repo, k, "missing")
		if n, err := repo.DeleteEntity(ctx, "key"); n != 0 || err != nil {
			t.Fatalf("DeleteEntity of a missing entity = %d, %v", n, err)
		}
	})

	t.Run("Configs", func(t *testing.T) {
		repo := newRepo(t)
		ek, dk, rk, sk := store.EntityConfig("e", "gpt"), store.EntityConfig("e", store.DefaultResource),
			store.ResourceConfig("gpt"), store.SystemConfig()
		got, err := repo.LoadConfigs(ctx, []store.ConfigKey{ek, dk, rk, sk})
		require.NoError(t, err, "LoadConfigs on an empty repository = %v, %v", got, err)
		require.Empty(t, got, "LoadConfigs on an empty repository = %v, %v", got, err)
		two := []store.Limit{store.Limit(limiter.PerMinute("rpm", 5)), store.Limit(limiter.PerDay("tpd", 1_000_000).WithBurst(50_000))}
		puts := map[store.ConfigKey]store.Config{
			ek: {Limits: two},
			rk: {Limits: []store.Limit{store.Limit(cTPM)}},
			sk: {Limits: []store.Limit{store.Limit(cRPM)}, OnUnavailable: store.OnUnavailableAllow},
		}
		for k, c := range puts {
			err := repo.PutConfig(ctx, k, c)
			require.NoError(t, err, "PutConfig %+v: %v", k, err)
		}
		got, err = repo.LoadConfigs(ctx, []store.ConfigKey{ek, dk, rk, sk})
		require.NoError(t, err, "LoadConfigs = %v, %v; want the 3 stored", got, err)
		require.Len(t, got, 3, "LoadConfigs = %v, %v; want the 3 stored", got, err)
		for k, c := range puts {
			require.Equal(t, c.Limits, got[k].Limits, "LoadConfigs[%+v] = %+v, want %+v", k, got[k], c)
			require.Equal(t, c.OnUnavailable, got[k].OnUnavailable, "LoadConfigs[%+v] = %+v, want %+v", k, got[k], c)
		}
		if _, ok := got[dk]; ok {
			t.Fatalf("LoadConfigs returned a config never stored: %+v", got[dk])
		}
		c, ok, err := repo.GetConfig(ctx, ek)
		require.NoError(t, err, "GetConfig = %+v, %v, %v", c, ok, err)
		require.True(t, ok, "GetConfig = %+v, %v, %v", c, ok, err)
		require.Equal(t, two, c.Limits, "GetConfig = %+v, %v, %v", c, ok, err)
		if _, ok, err := repo.GetConfig(ctx, dk); ok || err != nil {
			t.Fatalf("GetConfig of a missing config: ok=%v err=%v", ok, err)
		}
		// Put replaces.
		if err := repo.PutConfig(ctx, ek, store.Config{Limits: []store.Limit{store.Limit(cTPM)}}); err != nil {
			t.Fatal(err)
		}
		if c, _, _ := repo.GetConfig(ctx, ek); !slices.Equal(c.Limits, []store.Limit{store.Limit(cTPM)}) {
			t.Fatalf("after replacing: %+v", c)
		}
		for _, k := range []store.ConfigKey{ek, rk, sk} {
			existed, err := repo.DeleteConfig(ctx, k)
			require.NoError(t, err, "DeleteConfig %+v = %v, %v", k, existed, err)
			require.True(t, existed, "DeleteConfig %+v = %v, %v", k, existed, err)
			_, ok, _ := repo.GetConfig(ctx, k)
			require.False(t, ok, "config %+v still there", k)
		}
		if existed, err := repo.DeleteConfig(ctx, dk); err != nil {
			t.Fatalf("DeleteConfig of a missing config: %v, %v", existed, err)
		}
	})

	t.Run("SystemConfigWrites", func(t *testing.T) {
		repo := newRepo(t)
		w, ok := repo.(store.SystemConfigWriter)
		if !ok {
			t.Skip("the repository is no store.SystemConfigWriter")
		}
		sk := store.SystemConfig()
		kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
		require.NoError(t, err)
		r1 := store.LimitSwitch{Name: "usd", Resource: "gpt", From: store.Limit(limiter.PerCalendarDay("usd", 1000)), AtMs: nowMs}
		r2 := store.LimitSwitch{Name: "usd", From: store.Limit(limiter.PerDay("usd", 500)), AtMs: nowMs + 1}
		a := store.Config{
			Limits:        []store.Limit{store.Limit(cRPM), store.Limit(limiter.PerCalendarDay("usd", 1000).InLocation(kiritimati))},
			OnUnavailable: store.OnUnavailableAllow, Switches: []store.LimitSwitch{r1},
		}
		done, err := w.SetSystemConfig(ctx, store.Config{}, a)
		require.NoError(t, err)
		require.True(t, done, "a write over no config")
		got, ok, err := repo.GetConfig(ctx, sk)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, a.Limits, got.Limits)
		require.Equal(t, a.OnUnavailable, got.OnUnavailable)
		require.Equal(t, a.Switches, got.Switches)

		// Conditioned on the records read: none are stored no more.
		b := store.Config{Limits: []store.Limit{store.Limit(limiter.PerCalendarDay("usd", 1000))}, Switches: []store.LimitSwitch{r1, r2}}
		done, err = w.SetSystemConfig(ctx, store.Config{}, b)
		require.NoError(t, err)
		require.False(t, done, "a write conditioned on no records while r1 is stored")
		got, _, err = repo.GetConfig(ctx, sk)
		require.NoError(t, err)
		require.Equal(t, a.Limits, got.Limits, "a refused write wrote something")

		// The limits b lacks go, its zone goes back to UTC, the mode goes.
		done, err = w.SetSystemConfig(ctx, got, b)
		require.NoError(t, err)
		require.True(t, done)
		got, _, err = repo.GetConfig(ctx, sk)
		require.NoError(t, err)
		require.Equal(t, b.Limits, got.Limits)
		require.Equal(t, store.OnUnavailable(""), got.OnUnavailable)
		require.Equal(t, b.Switches, got.Switches)

		// Records changed by the switch writer refuse a write conditioned
		// on the ones before.
		if sw, ok := repo.(store.ConfigSwitchWriter); ok {
			done, err = sw.SetConfigSwitches(ctx, sk, []store.LimitSwitch{r1}, nil)
			require.NoError(t, err)
			require.False(t, done, "records conditioned on r1 alone while r1 and r2 are stored")
			done, err = sw.SetConfigSwitches(ctx, sk, got.Switches, []store.LimitSwitch{r2})
			require.NoError(t, err)
			require.True(t, done)
			done, err = w.SetSystemConfig(ctx, got, store.Config{})
			require.NoError(t, err)
			require.False(t, done, "a write conditioned on r1 and r2 while r2 alone is stored")
			now, _, err := repo.GetConfig(ctx, sk)
			require.NoError(t, err)
			require.Equal(t, []store.LimitSwitch{r2}, now.Switches)
			require.Equal(t, b.Limits, now.Limits, "SetConfigSwitches changed the limits")
		}
	})

	t.Run("BucketWrites", func(t *testing.T) {
		repo := newRepo(t)
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		if b, err := repo.GetBucket(ctx, k); b != nil || err != nil {
			t.Fatalf("GetBucket of a missing item = %+v, %v", b, err)
		}
		create(t, repo, k, state("tpm", 1000, 600), state("rpm", 10, 9))
		b, err := repo.GetBucket(ctx, k)
		require.NoError(t, err, "GetBucket = %+v, %v", b, err)
		require.NotNil(t, b, "GetBucket = %+v, %v", b, err)
		require.Equal(t, 1, b.ShardCount, "GetBucket = %+v, %v", b, err)
		require.Equal(t, nowMs, b.RefillMs, "GetBucket = %+v, %v", b, err)
		require.Zero(t, b.TTL, "GetBucket = %+v, %v", b, err)
		require.Equal(t, "rpm", b.States[0].LimitName, "states not sorted by name with the item's key and refill time: %+v", b.States)
		require.Equal(t, "tpm", b.States[1].LimitName, "states not sorted by name with the item's key and refill time: %+v", b.States)
		require.Equal(t, nowMs, b.States[0].LastRefillMs, "states not sorted by name with the item's key and refill time: %+v", b.States)
		require.Equal(t, "e", b.States[0].EntityID, "states not sorted by name with the item's key and refill time: %+v", b.States)
		wantBalances(t, repo, k, "rpm=9000/0 tpm=600000/0")
		again := store.BucketWrite{Kind: store.WriteCreate, Key: k, NowMs: nowMs, ShardCount: 1, States: []store.BucketState{state("rpm", 10, 10)}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{again}); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("create of an existing item: %v, want ErrConditionFailed", err)
		}

		// Normal: under the refill lock; refill and consume per limit.
		normal := store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 6000, ExpectedRefillMs: nowMs + 1,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 3000, RefillMilli: 1000}}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{normal}); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("normal write with a stale refill time: %v, want ErrConditionFailed", err)
		}
		normal.ExpectedRefillMs = nowMs
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{normal}); err != nil {
			t.Fatalf("normal write: %v", err)
		}
		wantBalances(t, repo, k, "rpm=7000/3000 tpm=600000/0")
		if b, _ := repo.GetBucket(ctx, k); b.RefillMs != nowMs+6000 {
			t.Fatalf("refill time %d, want %d", b.RefillMs, nowMs+6000)
		}
		// The balance guard: 7000 held, 8000 more than refilled is refused.
		guard := store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 7000, ExpectedRefillMs: nowMs + 6000,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 9000, RefillMilli: 1000}}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{guard}); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("normal write beyond the balance: %v, want ErrConditionFailed", err)
		}
		// A limit new to the item starts from Initial.
		full := state("rpd", 100, 100)
		addLimit := store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 7000, ExpectedRefillMs: nowMs + 6000,
			Limits: []store.LimitWrite{{Name: "rpd", ConsumedMilli: 1000, Initial: &full}}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{addLimit}); err != nil {
			t.Fatalf("normal write adding a limit: %v", err)
		}
		wantBalances(t, repo, k, "rpd=99000/1000 rpm=7000/3000 tpm=600000/0")

		// Retry: no refill, guarded by the balance.
		retry := store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: nowMs + 8000,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 7001}}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{retry}); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("retry write beyond the balance: %v, want ErrConditionFailed", err)
		}
		retry.Limits[0].ConsumedMilli = 7000
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{retry}); err != nil {
			t.Fatalf("retry write: %v", err)
		}
		// Adjust: no condition, balances may go negative; refunds count
		// negatively in the total.
		adjust := store.BucketWrite{Kind: store.WriteAdjust, Key: k,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 2000}, {Name: "tpm", ConsumedMilli: -1000}}}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{adjust}); err != nil {
			t.Fatalf("adjust write: %v", err)
		}
		wantBalances(t, repo, k, "rpd=99000/1000 rpm=-2000/12000 tpm=601000/-1000")
		if b, _ := repo.GetBucket(ctx, k); b.RefillMs != nowMs+7000 {
			t.Fatalf("retry or adjust moved the refill time to %d", b.RefillMs)
		}
		missing := store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "nobody", Resource: "gpt"}, Limits: adjust.Limits[:1]}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{missing}); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("adjust of a missing item: %v, want ErrConditionFailed", err)
		}
		got := balances(t, repo, missing.Key)
		require.EqualValues(t, "missing", got, "adjust created an item: %s", got)
	})

	t.Run("AtomicWrites", func(t *testing.T) {
		repo := newRepo(t)
		a := store.BucketKey{EntityID: "child", Resource: "gpt"}
		p := store.BucketKey{EntityID: "parent", Resource: "gpt"}
		// Items that are not full: a backend may drop full ones.
		create(t, repo, a, state("rpm", 10, 9))
		create(t, repo, p, state("rpm", 10, 1))
		take := func(k store.BucketKey, rf int64) store.BucketWrite {
			return store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 1000, ExpectedRefillMs: rf,
				Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 2000}}}
		}
		err := repo.WriteBuckets(ctx, []store.BucketWrite{take(a, nowMs), take(p, nowMs)})
		if !errors.Is(err, store.ErrTransactionConflict) {
			require.ErrorIs(t, err, store.ErrConditionFailed, "two-item write whose second condition fails: %v, want ErrConditionFailed", err)
		}
		wantBalances(t, repo, a, "rpm=9000/0")
		wantBalances(t, repo, p, "rpm=1000/0")
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{take(a, nowMs), take(p, nowMs+1)}); err == nil {
			t.Fatal("two-item write with a stale refill time applied")
		}
		wantBalances(t, repo, a, "rpm=9000/0")
		one := take(p, nowMs)
		one.Limits[0].ConsumedMilli = 1000
		two := take(a, nowMs)
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{two, one}); err != nil {
			t.Fatalf("two-item write: %v", err)
		}
		wantBalances(t, repo, a, "rpm=7000/2000")
		wantBalances(t, repo, p, "rpm=0/1000")
		metas, buckets, err := repo.LoadBuckets(ctx, []string{"child", "nobody"}, []store.BucketKey{a, p, {EntityID: "x", Resource: "gpt"}})
		require.NoError(t, err, "LoadBuckets = %v, %v, %v", metas, buckets, err)
		require.Empty(t, metas, "LoadBuckets = %v, %v, %v", metas, buckets, err)
		require.Len(t, buckets, 2, "LoadBuckets = %v, %v, %v", metas, buckets, err)
		require.NotNil(t, buckets[a], "LoadBuckets = %v, %v, %v", metas, buckets, err)
		require.Zero(t, buckets[p].States[0].TokensMilli, "LoadBuckets = %v, %v, %v", metas, buckets, err)
	})

	t.Run("SyncAndTTL", func(t *testing.T) {
		repo := newRepo(t)
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		w := store.BucketWrite{Kind: store.WriteCreate, Key: k, NowMs: nowMs, ShardCount: 1,
			States: []store.BucketState{state("rpm", 10, 4), state("tpm", 1000, 1000)}, TTL: store.TTLSet, TTLSeconds: 420,
			Cascade: true, ParentID: "p"}
		err := repo.WriteBuckets(ctx, []store.BucketWrite{w})
		require.NoError(t, err)
		b, _ := repo.GetBucket(ctx, k)
		want := nowMs/1000 + 420
		require.Equal(t, want, b.TTL, "created item: ttl %d cascade %v parent %q; want ttl %d, cascade to p", b.TTL, b.Cascade, b.ParentID, want)
		require.True(t, b.Cascade, "created item: ttl %d cascade %v parent %q; want ttl %d, cascade to p", b.TTL, b.Cascade, b.ParentID, want)
		require.Equal(t, "p", b.ParentID, "created item: ttl %d cascade %v parent %q; want ttl %d, cascade to p", b.TTL, b.Cascade, b.ParentID, want)
		require.True(t, b.Expired(nowMs+421_000), "Expired disagrees with the TTL")
		require.False(t, b.Expired(nowMs+419_000), "Expired disagrees with the TTL")
		rpm, rpd := state("rpm", 20, 20), state("rpd", 100, 100)
		sync := store.BucketWrite{Kind: store.WriteSync, Key: k, NowMs: nowMs + 1000, TTL: store.TTLRemove,
			Limits: []store.LimitWrite{{Name: "rpm", Initial: &rpm}, {Name: "rpd", Initial: &rpd}}, Remove: []string{"tpm"}}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{sync})
		require.NoError(t, err, "sync: %v", err)
		b, _ = repo.GetBucket(ctx, k)
		require.Zero(t, b.TTL, "after sync: ttl %d, states %+v", b.TTL, b.States)
		require.Len(t, b.States, 2, "after sync: ttl %d, states %+v", b.TTL, b.States)
		gotRPD, _ := b.State("rpd")
		gotRPM, _ := b.State("rpm")
		require.EqualValues(t, 100_000, gotRPD.TokensMilli, "a limit new to the item must start full: %+v", gotRPD)
		require.EqualValues(t, 100_000, gotRPD.CapacityMilli, "a limit new to the item must start full: %+v", gotRPD)
		require.Zero(t, gotRPD.TotalConsumedMilli, "a limit new to the item must start full: %+v", gotRPD)
		require.EqualValues(t, 4000, gotRPM.TokensMilli, "sync keeps a limit the item holds as it is: %+v", gotRPM)
		require.EqualValues(t, 10_000, gotRPM.CapacityMilli, "sync keeps a limit the item holds as it is: %+v", gotRPM)
		require.EqualValues(t, 10_000, gotRPM.RefillAmountMilli, "sync keeps a limit the item holds as it is: %+v", gotRPM)
		sync.Key = store.BucketKey{EntityID: "nobody", Resource: "gpt"}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{sync})
		require.ErrorIs(t, err, store.ErrConditionFailed, "sync of a missing item: %v, want ErrConditionFailed", err)
		got := balances(t, repo, sync.Key)
		require.EqualValues(t, "missing", got, "sync created an item: %s", got)
		// A normal write sets the TTL again, and may refresh the entity.
		normal := store.BucketWrite{Kind: store.WriteNormal, Key: k, NowMs: nowMs + 2000, ExpectedRefillMs: nowMs,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}, TTL: store.TTLSet, TTLSeconds: 60,
			RefreshEntity: true}
		err = repo.WriteBuckets(ctx, []store.BucketWrite{normal})
		require.NoError(t, err)
		b, _ = repo.GetBucket(ctx, k)
		require.Equal(t, (nowMs+2000)/1000+60, b.TTL, "after a normal write with TTL and entity refresh: ttl %d cascade %v parent %q", b.TTL, b.Cascade, b.ParentID)
		require.False(t, b.Cascade, "after a normal write with TTL and entity refresh: ttl %d cascade %v parent %q", b.TTL, b.Cascade, b.ParentID)
		require.Empty(t, b.ParentID, "after a normal write with TTL and entity refresh: ttl %d cascade %v parent %q", b.TTL, b.Cascade, b.ParentID)
	})

	t.Run("SpeculativeConsume", func(t *testing.T) {
		repo := newRepo(t)
		spec, ok := repo.(store.SpeculativeStore)
		if !ok {
			t.Skip("not a store.SpeculativeStore")
		}
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		res, err := spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1}, NowMs: nowMs})
		require.NoError(t, err, "missing item: %+v, %v", res, err)
		require.False(t, res.Applied, "missing item: %+v, %v", res, err)
		require.Equal(t, store.RefusedBucketMissing, res.Reason, "missing item: %+v, %v", res, err)
		require.Nil(t, res.Bucket, "missing item: %+v, %v", res, err)
		create(t, repo, k, state("rpm", 10, 2), state("tpm", 1000, 500))
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1, "tpm": 400}, NowMs: nowMs})
		require.NoError(t, err, "fitting write: %+v, %v", res, err)
		require.True(t, res.Applied, "fitting write: %+v, %v", res, err)
		require.NotNil(t, res.Bucket, "fitting write: %+v, %v", res, err)
		s, _ := res.Bucket.State("tpm")
		require.EqualValues(t, 100_000, s.TokensMilli, "applied write returns the new item: %+v", s)
		require.EqualValues(t, 400_000, s.TotalConsumedMilli, "applied write returns the new item: %+v", s)
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1, "tpm": 101}, NowMs: nowMs})
		require.NoError(t, err, "short write: %+v, %v", res, err)
		require.False(t, res.Applied, "short write: %+v, %v", res, err)
		require.Equal(t, store.RefusedLimitExhausted, res.Reason, "short write: %+v, %v", res, err)
		require.NotNil(t, res.Bucket, "short write: %+v, %v", res, err)
		s, _ = res.Bucket.State("tpm")
		require.EqualValues(t, 100_000, s.TokensMilli, "a refusal returns the item as it was: %+v", s)
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 1, "rpd": 1}, NowMs: nowMs})
		require.NoError(t, err, "write naming a limit the item lacks: %+v, %v", res, err)
		require.False(t, res.Applied, "write naming a limit the item lacks: %+v, %v", res, err)
		require.Equal(t, store.RefusedLimitMissing, res.Reason, "write naming a limit the item lacks: %+v, %v", res, err)
		// Zero and negative amounts never gate; a negative one gives back.
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 0, "tpm": -50}, NowMs: nowMs})
		require.NoError(t, err, "non-positive write: %+v, %v", res, err)
		require.True(t, res.Applied, "non-positive write: %+v, %v", res, err)
		wantBalances(t, repo, k, "rpm=1000/1000 tpm=150000/350000")
		exp := store.BucketKey{EntityID: "x", Resource: "gpt"}
		w := store.BucketWrite{Kind: store.WriteCreate, Key: exp, NowMs: nowMs, ShardCount: 1,
			States: []store.BucketState{state("rpm", 10, 10)}, TTL: store.TTLSet, TTLSeconds: 10}
		if err := repo.WriteBuckets(ctx, []store.BucketWrite{w}); err != nil {
			t.Fatal(err)
		}
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: exp, Consume: store.Consume{"rpm": 1}, NowMs: nowMs + 11_000})
		require.NoError(t, err, "expired item: %+v, %v", res, err)
		require.False(t, res.Applied, "expired item: %+v, %v", res, err)
		require.Equal(t, store.RefusedExpired, res.Reason, "expired item: %+v, %v", res, err)
	})

	// A write that takes without refilling is exact only while no limit it
	// takes from can have refilled to its capacity (store.RefillDue); once
	// one may have, the item is refilled to the write's time first.
	t.Run("TakeRefillsWhenFull", func(t *testing.T) {
		repo := newRepo(t)
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		create(t, repo, k, state("rpm", 10, 9), state("tpm", 1000, 1000))
		refill := func(want int64) {
			t.Helper()
			b, err := repo.GetBucket(ctx, k)
			require.NoError(t, err)
			require.Equal(t, want, b.RefillMs, "refill time")
		}
		// 6 s later rpm has refilled its 10th token: a retry of 1 takes it
		// from the refilled balance, and every limit is refilled.
		retry := store.BucketWrite{Kind: store.WriteRetry, Key: k, NowMs: nowMs + 6000,
			Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: 1000}}}
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{retry}))
		wantBalances(t, repo, k, "rpm=9000/1000 tpm=1000000/0")
		refill(nowMs + 6000)
		// 1 ms later none is full: the retry takes from the stored balance.
		retry.NowMs++
		require.NoError(t, repo.WriteBuckets(ctx, []store.BucketWrite{retry}))
		wantBalances(t, repo, k, "rpm=8000/2000 tpm=1000000/0")
		refill(nowMs + 6000)
		spec, ok := repo.(store.SpeculativeStore)
		if !ok {
			return
		}
		at := nowMs + 6001 + 60_000
		lims := []store.Limit{{Name: "rpm", Capacity: 10, RefillAmount: 10, RefillPeriod: time.Minute}}
		// Idle for a minute: rpm is full again; 11 do not fit even so, and
		// the refusal writes nothing.
		res, err := spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 11}, Limits: lims, NowMs: at})
		require.NoError(t, err)
		require.Equal(t, store.RefusedLimitExhausted, res.Reason)
		wantBalances(t, repo, k, "rpm=8000/2000 tpm=1000000/0")
		refill(nowMs + 6000)
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 10}, Limits: lims, NowMs: at})
		require.NoError(t, err)
		require.True(t, res.Applied, "%+v", res)
		require.Equal(t, at, res.Bucket.RefillMs)
		wantBalances(t, repo, k, "rpm=0/12000 tpm=1000000/0")
		// tpm is full (its balance is its capacity): a take of it refills
		// first, which at the same instant changes nothing.
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"tpm": 1}, NowMs: at})
		require.NoError(t, err)
		require.True(t, res.Applied, "%+v", res)
		wantBalances(t, repo, k, "rpm=0/12000 tpm=999000/1000")
		refill(at)
		// A zero amount does not take, so it does not refill.
		res, err = spec.SpeculativeConsume(ctx, store.SpeculativeRequest{Key: k, Consume: store.Consume{"rpm": 0}, NowMs: at + 60_000})
		require.NoError(t, err)
		require.True(t, res.Applied, "%+v", res)
		refill(at)
	})

	t.Run("AuditLog", func(t *testing.T) {
		repo := newRepo(t)
		log, ok := repo.(store.AuditLog)
		if !ok {
			t.Skip("not a store.AuditLog")
		}
		var ids []string
		for i := range 5 {
			at := Epoch.Add(time.Duration(i) * time.Second).Truncate(time.Second)
			id := ulid.MustNew(ulid.Timestamp(at), ulid.DefaultEntropy()).String()
			ids = append(ids, id)
			ev := store.AuditEvent{EventID: id, Timestamp: at, Action: store.AuditLimitsSet, EntityID: "e",
				Principal: "admin", Resource: "gpt", Details: map[string]any{"n": int64(i)}}
			err := log.AppendAudit(ctx, ev, at.Add(time.Hour))
			require.NoError(t, err, "AppendAudit: %v", err)
		}
		evs, err := log.AuditEvents(ctx, "e", 2, "")
		require.NoError(t, err, "AuditEvents newest first = %+v, %v", evs, err)
		require.Len(t, evs, 2, "AuditEvents newest first = %+v, %v", evs, err)
		require.Equal(t, ids[4], evs[0].EventID, "AuditEvents newest first = %+v, %v", evs, err)
		require.Equal(t, ids[3], evs[1].EventID, "AuditEvents newest first = %+v, %v", evs, err)
		require.Equal(t, "admin", evs[0].Principal, "event as read: %+v", evs[0])
		require.Equal(t, "gpt", evs[0].Resource, "event as read: %+v", evs[0])
		require.WithinDuration(t, Epoch.Add(4*time.Second).Truncate(time.Second), evs[0].Timestamp, 0, "event as read: %+v", evs[0])
		evs, err = log.AuditEvents(ctx, "e", 10, ids[3])
		require.NoError(t, err, "AuditEvents after %s = %+v, %v", ids[3], evs, err)
		require.Len(t, evs, 3, "AuditEvents after %s = %+v, %v", ids[3], evs, err)
		require.Equal(t, ids[2], evs[0].EventID, "AuditEvents after %s = %+v, %v", ids[3], evs, err)
		if evs, err := log.AuditEvents(ctx, "other", 10, ""); err != nil || len(evs) != 0 {
			t.Fatalf("AuditEvents of another entity = %+v, %v", evs, err)
		}
	})

	t.Run("ConfigLister", func(t *testing.T) {
		repo := newRepo(t)
		l, ok := repo.(store.ConfigLister)
		if !ok {
			t.Skip("not a store.ConfigLister")
		}
		for _, k := range []store.ConfigKey{
			store.EntityConfig("b", "gpt"), store.EntityConfig("a", "gpt"), store.EntityConfig("c", "gpt"),
			store.EntityConfig("a", "claude"), store.ResourceConfig("gpt"), store.ResourceConfig("llama"),
		} {
			err := repo.PutConfig(ctx, k, store.Config{Limits: []store.Limit{store.Limit(cRPM)}})
			require.NoError(t, err)
		}
		res, err := l.ListResourcesWithDefaults(ctx)
		require.NoError(t, err, "ListResourcesWithDefaults = %v, %v", res, err)
		require.Equal(t, []string{"gpt", "llama"}, res, "ListResourcesWithDefaults = %v, %v", res, err)
		res, err = l.ListResourcesWithEntityConfigs(ctx)
		require.NoError(t, err, "ListResourcesWithEntityConfigs = %v, %v", res, err)
		require.Equal(t, []string{"claude", "gpt"}, res, "ListResourcesWithEntityConfigs = %v, %v", res, err)
		var all []string
		cursor := ""
		for range 10 {
			ids, next, err := l.ListEntitiesWithCustomLimits(ctx, "gpt", 2, cursor)
			require.NoError(t, err, "ListEntitiesWithCustomLimits: %v", err)
			require.LessOrEqual(t, len(ids), 2, "page of %d, want at most 2", len(ids))
			all = append(all, ids...)
			if cursor = next; cursor == "" {
				break
			}
		}
		slices.Sort(all)
		require.Equal(t, []string{"a", "b", "c"}, all, "entities with limits for gpt: %v", all)
		if _, _, err := l.ListEntitiesWithCustomLimits(ctx, "gpt", 2, "!not a cursor"); !errors.Is(err, store.ErrValidation) {
			t.Fatalf("a foreign cursor: %v, want a ValidationError", err)
		}
	})

	t.Run("EntityLister", func(t *testing.T) {
		repo := newRepo(t)
		l, ok := repo.(store.EntityLister)
		if !ok {
			t.Skip("not a store.EntityLister")
		}
		ids := []string{"key-2", "proj", "key-1", "key-3", "a"}
		for _, id := range ids {
			e := store.Entity{ID: id, Name: "Entity " + id, CreatedAt: Epoch}
			if strings.HasPrefix(id, "key-") {
				e.ParentID, e.Cascade = "proj", true
			}
			require.NoError(t, repo.CreateEntity(ctx, e))
		}
		// Stored limits of an entity are not entities.
		require.NoError(t, repo.PutConfig(ctx, store.EntityConfig("key-1", "gpt"), store.Config{Limits: []store.Limit{store.Limit(cRPM)}}))
		require.NoError(t, repo.PutConfig(ctx, store.EntityConfig("ghost", "gpt"), store.Config{Limits: []store.Limit{store.Limit(cRPM)}}))
		var all []store.Entity
		cursor := ""
		pages := 0
		for ; pages < 20; pages++ {
			page, next, err := l.ListEntities(ctx, 2, cursor)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2, "a page of pageSize 2")
			all = append(all, page...)
			if cursor = next; cursor == "" {
				break
			}
		}
		require.Less(t, pages, 20, "ListEntities never ended")
		got := make([]string, len(all))
		for i, e := range all {
			got[i] = e.ID
		}
		require.Equal(t, []string{"a", "key-1", "key-2", "key-3", "proj"}, got, "every entity once, in ID order")
		k1 := all[1]
		require.Equal(t, store.Entity{ID: "key-1", Name: "Entity key-1", ParentID: "proj", Cascade: true, CreatedAt: Epoch.Truncate(time.Second)}, store.Entity{
			ID: k1.ID, Name: k1.Name, ParentID: k1.ParentID, Cascade: k1.Cascade, CreatedAt: k1.CreatedAt.UTC().Truncate(time.Second)},
			"an entity as listed (created_at to the second, as the table keeps it)")
		one, next, err := l.ListEntities(ctx, 0, "")
		require.NoError(t, err)
		if next == "" {
			require.Len(t, one, len(ids), "pageSize 0 and no cursor: every entity")
		}
		_, _, err = l.ListEntities(ctx, 2, "!not a cursor")
		require.ErrorIs(t, err, store.ErrValidation, "a foreign cursor")
	})

	t.Run("Context", func(t *testing.T) {
		repo := newRepo(t)
		done, cancel := context.WithCancel(ctx)
		cancel()
		k := store.BucketKey{EntityID: "e", Resource: "gpt"}
		w := store.BucketWrite{Kind: store.WriteCreate, Key: k, NowMs: nowMs, ShardCount: 1, States: []store.BucketState{state("rpm", 10, 10)}}
		err := repo.WriteBuckets(done, []store.BucketWrite{w})
		require.Error(t, err, "WriteBuckets with a cancelled context succeeded")
		got := balances(t, repo, k)
		require.EqualValues(t, "missing", got, "a cancelled write applied: %s", got)
		_, err = repo.GetEntity(done, "e")
		require.Error(t, err, "GetEntity with a cancelled context: %v", err)
		require.NotErrorIs(t, err, store.ErrEntityNotFound, "GetEntity with a cancelled context: %v", err)
		_, err = repo.LoadConfigs(done, []store.ConfigKey{store.SystemConfig()})
		require.Error(t, err, "LoadConfigs with a cancelled context succeeded")
	})

	runContractBatch(t, newRepo)
	runContractIncarnation(t, newRepo)
}
