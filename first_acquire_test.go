package limiter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/store"
)

// TestFirstAcquireCreatesBesideParent: a key's first acquire, its parent
// known, takes from the parent with its speculative write and creates the
// key's item with one put (after one read of its record), with no
// transaction and no give-back; the item is the one the read-then-write
// path creates (same attributes, same balances).
func TestFirstAcquireCreatesBesideParent(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.specLimiter()
	cascadeTo(t, rl, "P", "k1", "k2")
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))
	slow := env.limiter(func(o *Options) { o.SpeculativeWrites = false })
	mustCommit(t, mustAcquire(t, slow, "k1", "api", Consume{"rpm": 1, "tpm": 10}, lim)) // P's item, and k1's by the transaction
	env.rec.Reset()
	mustCommit(t, mustAcquire(t, rl, "k2", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	// the child's read (no item kept: it finds none) and the parent's
	// write go out together, then the record's read and the put; the
	// commit writes nothing (no change)
	assert.Equal(t, "BatchGetItem[2], GetItem, PutItem, UpdateItem", env.sortedCalls())

	k1, k2 := env.bucket("k1", "api"), env.bucket("k2", "api")
	attrs := func(item map[string]types.AttributeValue) []string {
		// The put carries a write identifier (wid0), which a transaction
		// does not need (its idempotency token recognises a resent one).
		delete(item, "wid0")
		return slices.Sorted(maps.Keys(item))
	}
	require.Equal(t, attrs(maps.Clone(k1)), attrs(maps.Clone(k2)), "the put's item has the read-then-write create's attributes")
	for _, attr := range []string{"b_rpm_tk", "b_rpm_cp", "b_rpm_tc", "b_tpm_tk", "b_tpm_tc", "rf", "ttl"} {
		assert.Equal(t, env.n(k1, attr), env.n(k2, attr), attr)
	}
	assert.Equal(t, k1["parent_id"], k2["parent_id"])
	assert.Equal(t, k1["cascade"], k2["cascade"])
	assert.NotEqual(t, env.n(k1, "inc"), env.n(k2, "inc"), "each item its own incarnation")
	assert.EqualValues(t, 98_000, env.tokens("P", "api", "rpm"))
	assert.EqualValues(t, 99_000, env.tokens("k2", "api", "rpm"))
	assert.EqualValues(t, 9_990_000, env.tokens("k2", "api", "tpm"))
}

// TestFirstAcquireResentPutChargedOnce: the first acquire's put, applied
// but answered with a 500, is sent again: the retry is refused because the
// item holds its write identifier, and counts as applied. The key and the
// parent are charged once.
func TestFirstAcquireResentPutChargedOnce(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl, p := proxiedLimiter(t, env, func(o *Options) { o.GroupCommit = false })
	cascadeTo(t, rl, "P", "k1", "k2")
	lim := WithLimits(PerMinute("rpm", 100))
	mustAcquireWithin(t, rl, "k1", Consume{"rpm": 1}, lim) // P's item
	p.Add(faultproxy.Rule{Op: "PutItem", Kind: faultproxy.Error500After, Times: 1})
	before := p.Count("PutItem")
	l, err := rl.Acquire(env.ctx, "k2", "api", Consume{"rpm": 5}, lim)
	require.NoError(t, err, "a put answered 500 after it applied")
	require.NoError(t, l.Commit(env.ctx))
	require.NoError(t, rl.Close())
	assert.Equal(t, 1, p.Faults("PutItem"), "the fault hit no put: the test did not test")
	assert.Equal(t, 2, p.Count("PutItem")-before, "the put answered 500, then its retry")
	assert.EqualValues(t, 5000, env.n(env.bucket("k2", "api"), "b_rpm_tc"), "k2 charged once")
	assert.EqualValues(t, 6000, env.n(env.bucket("P", "api"), "b_rpm_tc"), "P charged once")
	assert.EqualValues(t, 95_000, env.tokens("k2", "api", "rpm"))
	assert.EqualValues(t, 94_000, env.tokens("P", "api", "rpm"))
}

// TestFirstAcquireTwoProcessesExact: two processes (limiters on stores of
// their own) make the first acquire of the same new key at once, the key
// allowing one request: both find the item missing and send their puts
// together. Exactly one is admitted per key; the loser's put is refused
// and its parent take given back; each key and the parent are charged
// once per admitted acquire. Known: both processes know the keys' parent
// (their first write of a key's item is preceded by a read of the item);
// unknown: neither has seen the keys (each reads a key's record and item
// first).
func TestFirstAcquireTwoProcessesExact(t *testing.T) {
	t.Parallel()
	for _, known := range []bool{true, false} {
		t.Run(map[bool]string{true: "known", false: "unknown"}[known], func(t *testing.T) {
			t.Parallel()
			firstAcquireTwoProcesses(t, known)
		})
	}
}

func firstAcquireTwoProcesses(t *testing.T, known bool) {
	env := newTestEnv(t)
	const keys = 6
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = fmt.Sprintf("k%d", i)
	}
	gates := [2]*gate{newGate("PutItem"), newGate("PutItem")}
	var rls [2]*RateLimiter
	for i := range rls {
		repo := coldRepo(t, env)
		repo.client = ddblocal.Client(t, env.rec.Option(), hook(gates[i].before))
		rls[i] = New(repo, func(o *Options) { o.Clock = env.clock.now })
	}
	adminRL := rls[0]
	if !known {
		adminRL = env.specLimiter() // the processes learn nothing from the set-up
	}
	cascadeTo(t, adminRL, "P", ids...)
	admin := adminRL.Admin()
	require.NoError(t, admin.SetLimits(env.ctx, Scope{Resource: "api"}, []Limit{PerMinute("rpm", 1)}))
	require.NoError(t, admin.SetLimits(env.ctx, Scope{Entity: "P", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	for _, id := range ids {
		if known {
			_, err := rls[1].Admin().Entity(env.ctx, id) // the second process learns the cascade
			require.NoError(t, err)
		}
	}
	for _, rl := range rls {
		mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 1})) // P's item
	}
	admitted := 0
	for _, id := range ids {
		for _, g := range gates {
			g.hold()
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, rl := range rls {
			wg.Go(func() {
				l, err := rl.Acquire(env.ctx, id, "api", Consume{"rpm": 1})
				if err == nil {
					err = l.Commit(env.ctx)
				}
				errs[i] = err
			})
		}
		for _, g := range gates {
			g.await(t, fmt.Sprintf("%s: a process made no put", id)) // each process read the missing item and puts it
		}
		for _, g := range gates {
			g.release()
		}
		wg.Wait()
		n := 0
		for _, err := range errs {
			var rle *RateLimitExceededError
			switch {
			case err == nil:
				n++
			case errors.As(err, &rle):
			default:
				require.NoError(t, err)
			}
		}
		require.Equal(t, 1, n, "%s: admitted %d of 2, want exactly 1 (capacity 1)", id, n)
		admitted += n
		require.EqualValues(t, 0, env.tokens(id, "api", "rpm"), id)
		require.EqualValues(t, 1000, env.n(env.bucket(id, "api"), "b_rpm_tc"), "%s charged once", id)
	}
	assert.EqualValues(t, (100-2-admitted)*1000, env.tokens("P", "api", "rpm"), "P charged once per admitted acquire")
}

// TestFirstAcquireReparentedMeanwhile: the key is deleted and created
// again under another parent between its first acquire's writes (the
// parent's take applied, the child's refused for want of the item) and
// the read of its record. The record names another parent than the one
// taken from: the take is given back and the read-then-write path charges
// the new parent; the old one ends as it was.
func TestFirstAcquireReparentedMeanwhile(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	g := newGate("BatchGetItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = true })
	cascadeTo(t, rl, "P", "k0", "k")
	cascadeTo(t, rl, "Q", "q0")
	lim := WithLimits(PerMinute("rpm", 100))
	for _, id := range []string{"k0", "q0"} {
		mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}, lim)) // P's and Q's items
	}
	finish := acquireAtGate(t, g, rl, "k", lim, "no read of the record") // the record's read
	admin := env.limiter().Admin()
	require.NoError(t, admin.DeleteEntity(env.ctx, "k"))
	_, cerr := admin.CreateEntity(env.ctx, Entity{ID: "k", ParentID: "Q", Cascade: true})
	require.NoError(t, cerr)
	l, err := finish()
	require.NoError(t, err)
	mustCommit(t, l)
	assert.EqualValues(t, 99_000, env.tokens("P", "api", "rpm"), "P: the take given back")
	assert.EqualValues(t, 98_000, env.tokens("Q", "api", "rpm"), "Q: charged for k")
	assert.Equal(t, &types.AttributeValueMemberS{Value: "Q"}, env.bucket("k", "api")["parent_id"])
	assert.EqualValues(t, 99_000, env.tokens("k", "api", "rpm"))
}

// TestFirstAcquireParentDeletedMeanwhile: the parent is deleted (its items
// with it) while the key's first acquire puts the key's item, after its
// take from the parent applied. The key is charged once; the lease's
// commit does not bring back the deleted parent's item, and the parent
// created again starts full.
func TestFirstAcquireParentDeletedMeanwhile(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	g := newGate("PutItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = true })
	cascadeTo(t, rl, "P", "k0", "k")
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k0", "api", Consume{"rpm": 1}, lim)) // P's item
	finish := acquireAtGate(t, g, rl, "k", lim, "no put")                  // the put
	admin := env.limiter().Admin()
	require.NoError(t, admin.DeleteEntity(env.ctx, "P"))
	l, err := finish()
	require.NoError(t, err)
	require.NoError(t, l.Adjust(Consume{"rpm": 2}))
	mustCommit(t, l)
	assert.Empty(t, env.bucket("P", "api"), "the deleted parent's item written again by the lease")
	assert.EqualValues(t, 3000, env.n(env.bucket("k", "api"), "b_rpm_tc"), "k charged once")
	_, cerr := admin.CreateEntity(env.ctx, Entity{ID: "P"})
	require.NoError(t, cerr)
	mustCommit(t, mustAcquire(t, env.limiter(), "P", "api", Consume{"rpm": 1}, lim))
	assert.EqualValues(t, 99_000, env.tokens("P", "api", "rpm"), "P created again starts full")
}

// TestFirstAcquireCoalesces: 16 goroutines of one limiter make the first
// acquire of one key at once, its parent known and its item existing. All
// take from the parent; one reads the key's record and creates its item
// while the 15 others wait for it, then send their child write again:
// one read and one put in all, every acquire admitted, each item charged
// exactly.
func TestFirstAcquireCoalesces(t *testing.T) {
	env := newTestEnv(t)
	g := newGate("BatchGetItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = true })
	cascadeTo(t, rl, "P", "k0", "k")
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k0", "api", Consume{"rpm": 1}, lim)) // P's item
	key := store.BucketKey{EntityID: "k", Resource: "api"}
	env.rec.Reset()

	const n = 16
	errs := acquireBehindLeader(t, g, rl, key, n, lim)
	for i, err := range errs {
		assert.NoError(t, err, "acquire %d", i)
	}
	assert.Equal(t, 1, env.rec.Count("BatchGetItem"), "the leader's read: %s", env.calls())
	assert.Equal(t, 1, env.rec.Count("PutItem"), "the leader's put: %s", env.calls())
	assert.Zero(t, env.rec.Count("TransactWriteItems"), "calls: %s", env.calls())
	assert.EqualValues(t, (100-1-n)*1000, env.tokens("P", "api", "rpm"))
	assert.EqualValues(t, (100-n)*1000, env.tokens("k", "api", "rpm"))
	assert.EqualValues(t, n*1000, env.n(env.bucket("k", "api"), "b_rpm_tc"))
}

// acquireAtGate starts an Acquire of one rpm of (id, "api") with g held
// and returns once it has reached g's call (what: the failure when it does
// not); finish releases g and returns the acquire's result.
func acquireAtGate(t *testing.T, g *gate, rl *RateLimiter, id string, lim AcquireOption, what string) (finish func() (*Lease, error)) {
	t.Helper()
	g.hold()
	var l *Lease
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err = rl.Acquire(context.Background(), id, "api", Consume{"rpm": 1}, lim)
	}()
	g.await(t, what)
	return func() (*Lease, error) {
		g.release()
		<-done
		return l, err
	}
}

// TestFirstSightReadsBeforeWriting: a limiter that does not know an entity
// reads its record and item (one BatchGetItem) before any write. A
// cascading key's first acquire then takes from the parent and puts the
// key's item, a key of no record puts its own, and a key whose item exists
// sends both writes at once, the exact one for an item full by now (kept
// from the read; an item no write of the limiter returned is read before
// its first write): no write is refused, every item is charged once.
func TestFirstSightReadsBeforeWriting(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	admin := env.specLimiter()
	cascadeTo(t, admin, "P", "k0", "k1")
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))
	one := Consume{"rpm": 1, "tpm": 10}
	mustCommit(t, mustAcquire(t, admin, "k0", "api", one, lim)) // P's and k0's items
	rl := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })

	check := env.callChecker(t)
	// the parent's item, which this limiter has not written, is read
	// before its write
	check("cascading key, no item", "BatchGetItem[2], GetItem, UpdateItem, PutItem", func() {
		mustCommit(t, mustAcquire(t, rl, "k1", "api", one, lim))
	})
	check("key of no record, no item", "BatchGetItem[2], PutItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", one, lim))
	})
	env.clock.advance(time.Minute) // every item full again
	check("cascading key, item full", "BatchGetItem[2], UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "k0", "api", one, lim))
	})
	check("known now", "UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "k1", "api", one, lim))
	})
	for id, n := range map[string]int64{"P": 4, "k0": 2, "k1": 2, "solo": 1} {
		assert.EqualValues(t, n*1000, env.n(env.bucket(id, "api"), "b_rpm_tc"), "%s charged once per acquire", id)
		assert.EqualValues(t, n*10_000, env.n(env.bucket(id, "api"), "b_tpm_tc"), "%s charged once per acquire", id)
	}
	assert.EqualValues(t, 98_000, env.tokens("P", "api", "rpm"), "P after a minute: full, less two")
	assert.Equal(t, &types.AttributeValueMemberS{Value: "P"}, env.bucket("k1", "api")["parent_id"])
	assert.NotContains(t, env.bucket("solo", "api"), "parent_id")
}

// TestFirstSightItemCreatedMeanwhile: another process creates a key's item
// and takes from it between a first sight's read, which found no item,
// and its put. The put is refused, the parent's take given back, and the
// read-then-write path admits the acquire: each item is charged once per
// admitted acquire.
func TestFirstSightItemCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	admin := env.specLimiter()
	cascadeTo(t, admin, "P", "k0", "k")
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, admin, "k0", "api", Consume{"rpm": 1}, lim)) // P's item
	g := newGate("PutItem")
	repo := coldRepo(t, env)
	repo.client = ddblocal.Client(t, env.rec.Option(), hook(g.before))
	rl := New(repo, func(o *Options) { o.Clock = env.clock.now })
	finish := acquireAtGate(t, g, rl, "k", lim, "no put after the first sight")
	mustCommit(t, mustAcquire(t, admin, "k", "api", Consume{"rpm": 1}, lim)) // the other process
	l, err := finish()
	require.NoError(t, err)
	mustCommit(t, l)
	assert.EqualValues(t, 2000, env.n(env.bucket("k", "api"), "b_rpm_tc"), "k charged once per acquire")
	assert.EqualValues(t, 98_000, env.tokens("k", "api", "rpm"))
	assert.EqualValues(t, 97_000, env.tokens("P", "api", "rpm"), "P: the refused put's take given back")
}
