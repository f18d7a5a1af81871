package limiter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallCountsEntityWide asserts the DynamoDB calls of acquires with
// and without entity-wide limits on the speculative path: without them a
// warm acquire is one UpdateItem, as ever, and a config cache miss one
// BatchGetItem of the resource's and the entity-wide bucket's slots; with
// them, two items (the resource's bucket and the entity-wide one) are two
// conditional UpdateItems in parallel, one round trip, and three or more
// one atomic TransactWriteItems of every bucket of the plan.
func TestCallCountsEntityWide(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	ctx := env.ctx
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "proj"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "key", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: "api"}, []Limit{PerMinute("rpm", 100), PerMinute("tpm", 100_000)}))
	check := env.callChecker(t)
	checkSorted := env.sortedCallChecker(t)
	// A limiter of its own, whose config cache SetLimits did not warm
	// (SetLimits reads the limits in force before it stores): a miss
	// reads the resource's four slots and the entity-wide bucket's two
	// in one BatchGetItem; the entity, which its entity cache does not
	// know, is read with its item, and the item put.
	cold := env.limiter()
	check("config cache miss, new bucket", "BatchGetItem[6], BatchGetItem[2], PutItem", func() {
		mustCommit(t, mustAcquire(t, cold, "solo", "api", Consume{"rpm": 1, "tpm": 10}))
	})
	hits := cold.Stats().Configs.Hits
	check("warm acquire without entity-wide limits", "UpdateItem", func() {
		mustCommit(t, mustAcquire(t, cold, "solo", "api", Consume{"rpm": 1, "tpm": 10}))
	})
	// Its config lookups: the system slot (for its on_unavailable), the
	// entity's own slot (the first with limits), the two entity-wide
	// slots.
	require.Equal(t, int64(4), cold.Stats().Configs.Hits-hits, "config cache lookups of a warm acquire")
	mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}))

	// An entity-wide usd budget beside rpm and tpm per resource: two
	// items, written at once by two conditional UpdateItems (listed here
	// in sorted order: they run in parallel).
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: AllResources}, []Limit{PerDay("usd", 1_000_000)}))
	// Cold: the entity-wide slot evicted by SetLimits is read (the other
	// slots are cached); the write to the resource's bucket applies, the
	// entity-wide bucket, which no write of this limiter left it, is read
	// and missing, so the first is given back and the read-then-write path
	// reads both items and the entity's record and writes them in one
	// transaction.
	checkSorted("entity-wide budget, new bucket", "BatchGetItem[1], BatchGetItem[3], GetItem, TransactWriteItems[2], UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10, "usd": 100}))
	})
	for range 3 {
		check("warm acquire with an entity-wide budget", "UpdateItem, UpdateItem", func() {
			mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10, "usd": 100}))
		})
	}
	// A call's own entity-wide limits, on another resource: the same
	// entity-wide bucket, with the limits the call gives (api2's bucket
	// is new, read and missing: the entity-wide write is given back,
	// then the read-then-write path).
	checkSorted("acquire with WithEntityWideLimits, new bucket", "BatchGetItem[3], GetItem, TransactWriteItems[2], UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api2", Consume{"rpm": 1, "usd": 100}, WithLimits(PerMinute("rpm", 10)), WithEntityWideLimits(PerDay("usd", 1_000_000))))
	})
	for range 2 {
		check("acquire with WithEntityWideLimits", "UpdateItem, UpdateItem", func() {
			mustCommit(t, mustAcquire(t, rl, "solo", "api2", Consume{"rpm": 1, "usd": 100}, WithLimits(PerMinute("rpm", 10)), WithEntityWideLimits(PerDay("usd", 1_000_000))))
		})
	}

	// The budgets of the issue on AllResources, each beside the
	// resource's rpm: a calendar month (its period's bucket) and a
	// prepaid balance (its balance's bucket) are items of their own, so
	// two items again. A call that asks nothing of the budget charges the
	// resource's bucket alone: one UpdateItem.
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "month", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "month", Resource: AllResources}, []Limit{PerCalendarMonth("usd", 1_000_000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "buyer", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "buyer", Resource: AllResources}, []Limit{Prepaid("usd")}))
	_, err = rl.TopUp(ctx, TopUpRequest{Entity: "buyer", Resource: AllResources, Limit: "usd", Amount: 1_000_000, ID: "t1"})
	require.NoError(t, err)
	for _, id := range []string{"month", "buyer"} {
		// The first acquire creates the resource's bucket; TopUp created
		// the balance's, whose first speculative write reads it once
		// (GetItem: the repository keeps no copy of it yet).
		for range 2 {
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1, "usd": 100}))
		}
		check(id+" on AllResources, warm", "UpdateItem, UpdateItem", func() {
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1, "usd": 100}))
		})
		check(id+" on AllResources, no usd asked", "UpdateItem", func() {
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1}))
		})
	}
	// Limits on AllResources alone: the entity-wide bucket is the only
	// item, one UpdateItem.
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "wideonly", Resource: AllResources}, []Limit{PerMinute("rpm", 100)}))
	mustCommit(t, mustAcquire(t, rl, "wideonly", "api", Consume{"rpm": 1}))
	check("entity-wide limits alone, warm", "UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "wideonly", "api", Consume{"rpm": 1}))
	})
	// Three items (the resource's bucket, the entity-wide bucket and the
	// month's): one transaction.
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "three", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "three", Resource: AllResources}, []Limit{PerMinute("rpm", 1000), PerCalendarMonth("usd", 1_000_000)}))
	mustCommit(t, mustAcquire(t, rl, "three", "api", Consume{"rpm": 1, "usd": 100}))
	check("three items, warm", "TransactWriteItems[3]", func() {
		mustCommit(t, mustAcquire(t, rl, "three", "api", Consume{"rpm": 1, "usd": 100}))
	})

	// A key cascading to a project with an entity-wide budget: four items.
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "key", Resource: "api"}, []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "proj", Resource: "api"}, []Limit{PerMinute("rpm", 1000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "proj", Resource: AllResources}, []Limit{PerDay("usd", 1_000_000)}))
	// Cold: the configs of key and proj that SetLimits did not read (one
	// BatchGetItem each, both buckets' slots), the items the batch's fast
	// path does not keep, then the read-then-write path (three items, two
	// records).
	check("cascade with an entity-wide budget, cold", "BatchGetItem[2], BatchGetItem[2], BatchGetItem[3], BatchGetItem[5], TransactWriteItems[3]", func() {
		mustCommit(t, mustAcquire(t, rl, "key", "api", Consume{"rpm": 1, "usd": 100}))
	})
	for range 2 {
		check("cascade with an entity-wide budget, warm", "TransactWriteItems[3]", func() {
			mustCommit(t, mustAcquire(t, rl, "key", "api", Consume{"rpm": 1, "usd": 100}))
		})
	}
}
