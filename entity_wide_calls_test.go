package limiter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCallCountsEntityWide asserts the DynamoDB calls of acquires with
// and without entity-wide limits on the speculative path: without them a
// warm acquire is one UpdateItem, as ever, and a config cache miss one
// BatchGetItem of the resource's and the entity-wide bucket's slots; with
// them one atomic TransactWriteItems of every bucket of the plan.
func TestCallCountsEntityWide(t *testing.T) {
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	ctx := env.ctx
	_, err := rl.CreateEntity(ctx, Entity{ID: "proj"})
	require.NoError(t, err)
	_, err = rl.CreateEntity(ctx, Entity{ID: "key", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.SetLimits(ctx, "solo", "api", []Limit{PerMinute("rpm", 100), PerMinute("tpm", 100_000)}))
	check := env.callChecker(t)
	// A limiter of its own, whose config cache SetLimits did not warm
	// (SetLimits reads the limits in force before it stores): a miss
	// reads the resource's four slots and the entity-wide bucket's two
	// in one BatchGetItem.
	cold := env.limiter()
	check("config cache miss, new bucket", "BatchGetItem[6], UpdateItem!, BatchGetItem[2], PutItem", func() {
		mustCommit(t, mustAcquire(t, cold, "solo", "api", Consume{"rpm": 1, "tpm": 10}))
	})
	check("warm acquire without entity-wide limits", "UpdateItem", func() {
		mustCommit(t, mustAcquire(t, cold, "solo", "api", Consume{"rpm": 1, "tpm": 10}))
	})
	mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}))

	// An entity-wide usd budget beside rpm and tpm per resource.
	require.NoError(t, rl.SetLimits(ctx, "solo", AllResources, []Limit{PerDay("usd", 1_000_000)}))
	// Cold: the entity-wide slot evicted by SetLimits is read (the
	// other slots are cached); the batch's fast path reads the items it
	// does not keep, finds the entity-wide bucket missing, and the
	// read-then-write path reads both items and the entity's record and
	// writes them in one transaction.
	check("entity-wide budget, new bucket", "BatchGetItem[1], BatchGetItem[1], BatchGetItem[1], BatchGetItem[3], TransactWriteItems[2]", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10, "usd": 100}))
	})
	// The first batch after the items were created reads the one its
	// fast path does not keep yet; then one transaction.
	for _, want := range []string{"BatchGetItem[1], TransactWriteItems[2]", "TransactWriteItems[2]", "TransactWriteItems[2]"} {
		check("warm acquire with an entity-wide budget", want, func() {
			mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10, "usd": 100}))
		})
	}
	// A call's own entity-wide limits, on another resource: the same
	// entity-wide bucket, with the limits the call gives (api2's bucket
	// is new).
	for _, want := range []string{"BatchGetItem[1], BatchGetItem[1], BatchGetItem[3], TransactWriteItems[2]",
		"BatchGetItem[1], TransactWriteItems[2]", "TransactWriteItems[2]"} {
		check("acquire with WithEntityWideLimits", want, func() {
			mustCommit(t, mustAcquire(t, rl, "solo", "api2", Consume{"rpm": 1, "usd": 100}, WithLimits(PerMinute("rpm", 10)), WithEntityWideLimits(PerDay("usd", 1_000_000))))
		})
	}

	// A key cascading to a project with an entity-wide budget: four items.
	require.NoError(t, rl.SetLimits(ctx, "key", "api", []Limit{PerMinute("rpm", 100)}))
	require.NoError(t, rl.SetLimits(ctx, "proj", "api", []Limit{PerMinute("rpm", 1000)}))
	require.NoError(t, rl.SetLimits(ctx, "proj", AllResources, []Limit{PerDay("usd", 1_000_000)}))
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
