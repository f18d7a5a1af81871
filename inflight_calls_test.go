package limiter

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCallCountsInFlight: the DynamoDB round trips of an acquire of rpm,
// tpm and 1 call in flight. The slots of the current and the next
// generation are limits of the (entity, resource) item itself, so once
// the item holds them the speculative acquire is one conditional
// UpdateItem of that item and nothing else, and its commit (the tpm
// adjustment and the give-back of both generations' slots) one
// UpdateItem, as is its rollback. The first acquire creates the item with
// both generations: on the read-then-write path one PutItem after its
// reads; on the speculative path the write finds no item (UpdateItem
// refused), the item is created alone, nothing taken (BatchGetItem of it
// and the entity record, PutItem), and the write is made again
// (UpdateItem). Both also read the entity record, GetItem, for its
// cascade.
func TestCallCountsInFlight(t *testing.T) {
	t.Parallel()
	for _, spec := range []bool{false, true} {
		t.Run(map[bool]string{false: "read-then-write", true: "speculative"}[spec], func(t *testing.T) {
			env := newTestEnv(t)
			env.spec = spec
			rl := slotLimiter(t, env)
			lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000), InFlight("calls", 8))
			call := Consume{"rpm": 1, "tpm": 10, "calls": 1}
			check := env.callChecker(t)
			var l *Lease
			check("acquire (new item)", map[bool]string{
				false: "GetItem, BatchGetItem[2], PutItem",
				true:  "GetItem, GetItem, BatchGetItem[2], PutItem, UpdateItem",
			}[spec], func() { l = mustAcquire(t, rl, "solo", "api", call, lim) })
			check("commit with adjustment", "UpdateItem", func() {
				require.NoError(t, l.Adjust(Consume{"tpm": 5}))
				mustCommit(t, l)
			})
			for range 3 {
				check("acquire (existing item)", map[bool]string{false: "BatchGetItem[2], UpdateItem", true: "UpdateItem"}[spec], func() { l = mustAcquire(t, rl, "solo", "api", call, lim) })
				check("commit", "UpdateItem", func() { mustCommit(t, l) })
			}
			check("acquire (existing item)", map[bool]string{false: "BatchGetItem[2], UpdateItem", true: "UpdateItem"}[spec], func() { l = mustAcquire(t, rl, "solo", "api", call, lim) })
			check("rollback", "UpdateItem", func() { require.NoError(t, l.Rollback(env.ctx)) })
		})
	}
}

// TestCallCountsInFlightCascade: 8 calls in flight per key and 32 per
// organisation (stored limits, cascade) cost what a cascade of rolling
// limits costs: a warm acquire is the key's and the organisation's
// conditional UpdateItems in parallel (one round trip), its commit one
// UpdateItem per item. An in-flight limit of the entity-wide bucket is
// the same pair: the resource's item and the entity-wide item.
func TestCallCountsInFlightCascade(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := slotLimiter(t, env)
	ctx := env.ctx
	orgKeyCascade(t, rl, []Limit{PerMinute("rpm", 1000), InFlight("calls", 32)},
		[]Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000), InFlight("calls", 8)})
	check := env.callChecker(t)
	checkSorted := env.sortedCallChecker(t)
	call := Consume{"rpm": 1, "tpm": 10, "calls": 1}
	mustCommit(t, mustAcquire(t, rl, "key", "api", call)) // creates both items
	for range 3 {
		var l *Lease
		checkSorted("cascade acquire", "UpdateItem, UpdateItem", func() { l = mustAcquire(t, rl, "key", "api", call) })
		require.Equal(t, int64(2), l.Consumed()["calls"], "one slot of the key's, one of the organisation's")
		checkSorted("cascade commit", "UpdateItem, UpdateItem", func() {
			require.NoError(t, l.Adjust(Consume{"tpm": 5}))
			mustCommit(t, l)
		})
	}
	free, err := rl.Available(ctx, "key", "api")
	require.NoError(t, err)
	require.Equal(t, int64(8), free["calls"])

	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: AllResources}, []Limit{InFlight("calls", 4)}))
	solo := Consume{"rpm": 1, "calls": 1}
	mustCommit(t, mustAcquire(t, rl, "solo", "api", solo))
	for range 3 {
		var l *Lease
		checkSorted("entity-wide in-flight acquire", "UpdateItem, UpdateItem", func() { l = mustAcquire(t, rl, "solo", "api", solo) })
		check("entity-wide in-flight commit", "UpdateItem", func() { mustCommit(t, l) })
	}
}

// TestCallCountsInFlightWait: the DynamoDB calls of a Wait refused for want
// of a slot. Its first attempt is the acquire's write (refused); while the
// slots stay taken it polls by reading the items it takes slots of (one
// GetItem, or one BatchGetItem for a cascade's two), and writes nothing,
// however many polls; once a lease of the same limiter gives its slot
// back, the Wait takes it with the acquire's write.
func TestCallCountsInFlightWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, entity, poll string
		opts               []AcquireOption
	}{
		{name: "solo", entity: "solo", poll: "GetItem", opts: []AcquireOption{WithLimits(InFlight("calls", 1), PerMinute("rpm", 100))}},
		{name: "cascade", entity: "key", poll: "BatchGetItem[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t)
			env.spec = true
			rl := slotLimiter(t, env)
			ctx := env.ctx
			if tc.name == "cascade" {
				orgKeyCascade(t, rl, []Limit{InFlight("calls", 1)}, []Limit{InFlight("calls", 8), PerMinute("rpm", 100)})
			}
			call := Consume{"calls": 1, "rpm": 1}
			mustCommit(t, mustAcquire(t, rl, tc.entity, "api", call, tc.opts...)) // creates the items
			held := mustAcquire(t, rl, tc.entity, "api", call, tc.opts...)

			env.rec.Reset()
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := make(chan *Lease, 1)
			go func() {
				l, err := rl.Wait(wctx, tc.entity, "api", call, tc.opts...)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			polls := func() int { return env.rec.Count(strings.SplitN(tc.poll, "[", 2)[0]) }
			require.Eventually(t, func() bool { return polls() >= 2 }, 5*time.Second, time.Millisecond, "the Wait polls by reading")
			require.Positive(t, env.rec.Count("UpdateItem"), "the first attempt writes")
			n := len(env.rec.Calls())
			time.Sleep(300 * time.Millisecond) // polls of 20 ms, one waiter
			later := env.rec.Calls()[n:]
			require.Greater(t, len(later), 2, "the Wait goes on polling: %s", env.calls())
			for _, c := range later {
				op := c.Op
				if c.Items > 0 {
					op += "[" + strconv.Itoa(c.Items) + "]"
				}
				require.Equal(t, tc.poll, op, "while no slot is free a poll is one read, no write: %s", env.calls())
			}

			mustCommit(t, held)
			var l *Lease
			select {
			case l = <-got:
			case <-wctx.Done():
				t.Fatal("the Wait did not get the slot given back")
			}
			require.NotNil(t, l)
			require.Equal(t, map[string]int64{"solo": 1, "cascade": 2}[tc.name], l.Consumed()["calls"], "the key's slot and the organisation's")
			mustCommit(t, l)
		})
	}
}

// orgKeyCascade creates entity "org" and its child "key", which cascades
// to it, and stores orgLimits and keyLimits for their resource "api".
func orgKeyCascade(t *testing.T, rl *RateLimiter, orgLimits, keyLimits []Limit) {
	t.Helper()
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "org"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "key", ParentID: "org", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "org", Resource: "api"}, orgLimits))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "key", Resource: "api"}, keyLimits))
}

// slotLimiter returns a limiter on env's store whose slots outlast any
// test (no keeper renews them meanwhile), closed when the test ends.
func slotLimiter(t *testing.T, env *testEnv) *RateLimiter {
	t.Helper()
	rl := env.limiter(func(o *Options) { o.SlotTTL = time.Hour })
	t.Cleanup(func() { _ = rl.Close() })
	return rl
}
