package limiter

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// indexCounts is an IndexMetrics that adds up what it is told.
type indexCounts struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *indexCounts) ForeignIndexItems(_ context.Context, index string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[index] += n
}

func (c *indexCounts) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// with returns item with the attributes of set replaced by strings.
func with(item map[string]types.AttributeValue, set map[string]string) map[string]types.AttributeValue {
	for k, v := range set {
		item[k] = schemaS(v)
	}
	return item
}

// plantIndexEntries writes, in the partitions of namespace other (where a
// principal confined to it may write), items whose index keys name the
// partitions of namespace ns: a child of ns's "org" (GSI1), a bucket of
// ns's resource "gpt" and of ns's entity "key-1" (GSI2, GSI3), a usage
// snapshot of "gpt" (GSI2), a config of "gpt" (GSI3) and an item of ns's
// purge (GSI4).
func plantIndexEntries(env *testEnv, other, ns string) {
	env.t.Helper()
	nowMs := epoch.UnixMilli()
	env.put(
		with(entityItem(other, Entity{ID: "planted", ParentID: "org"}), map[string]string{
			ddbschema.AttrGSI1PK: gsi1PKParent(ns, "org"), ddbschema.AttrGSI4PK: ns,
		}),
		with(bucketItem(other, &store.Bucket{Key: store.BucketKey{EntityID: "planted", Resource: "gpt"}, ShardCount: 1, RefillMs: nowMs,
			States: []store.BucketState{{LimitName: "rpm", TokensMilli: 0, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 60_000}}}),
			map[string]string{attrGSI2PK: gsi2PKResource(ns, "gpt"), ddbschema.AttrGSI3PK: pkEntity(ns, "key-1"), ddbschema.AttrGSI4PK: ns}),
		with(usageSnapshotItem(other, UsageSnapshot{EntityID: "planted", Resource: "gpt", WindowType: store.WindowHourly,
			WindowStart: epoch.Truncate(time.Hour), Counters: map[string]int64{"rpm": 1_000_000}, TotalEvents: 1}, epoch.Unix()+86400),
			map[string]string{attrGSI2PK: gsi2PKResource(ns, "gpt")}),
		with(entityConfigItem(other, "planted", "gpt", storeLimits([]Limit{PerMinute("rpm", 1)})), map[string]string{
			ddbschema.AttrGSI3PK: gsi3PKEntityConfig(ns, "gpt"),
		}),
	)
}

// TestIndexEntriesOfAnotherNamespaceIgnored plants items in namespace
// other whose index keys name namespace default's partitions (IAM lets a
// principal confined to other write them): default's children, resource
// capacity, usage by resource, entities with limits, entity deletion and
// purge never see or touch them, and the entries dropped are counted,
// reported and logged once.
func TestIndexEntriesOfAnotherNamespaceIgnored(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	m := &indexCounts{}
	env := newTestEnv(t, func(o *DynamoDBOptions) {
		o.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
		o.Metrics = m
	})
	ctx := env.ctx
	rl := env.limiter()
	ns := env.repo.NamespaceID()
	otherID, err := env.repo.RegisterNamespace(ctx, "other")
	require.NoError(t, err)

	for _, e := range []Entity{{ID: "org"}, {ID: "key-1", ParentID: "org"}} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err)
	}
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "key-1", Resource: "gpt"}, []Limit{PerMinute("rpm", 10)}))
	mustCommit(t, mustAcquire(t, rl, "key-1", "gpt", Consume{"rpm": 1}))
	env.put(usageSnapshotItem(ns, UsageSnapshot{EntityID: "key-1", Resource: "gpt", WindowType: store.WindowHourly,
		WindowStart: epoch.Truncate(time.Hour), Counters: map[string]int64{"rpm": 1}, TotalEvents: 1}, epoch.Unix()+86400))
	plantIndexEntries(env, otherID, ns)
	require.Zero(t, env.repo.ForeignIndexItems())

	children, err := iterx.Collect(rl.Admin().Children(ctx, "org"))
	require.NoError(t, err)
	require.Len(t, children, 1)
	assert.Equal(t, "key-1", children[0].ID)

	capacity, err := rl.Admin().ResourceCapacity(ctx, "gpt", "rpm", false)
	require.NoError(t, err)
	require.Len(t, capacity.Entities, 1)
	assert.Equal(t, "key-1", capacity.Entities[0].EntityID)
	assert.EqualValues(t, 10, capacity.TotalCapacity)

	snaps, _, err := rl.usageSnapshots(ctx, UsageQuery{Resource: "gpt"})
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	assert.Equal(t, "key-1", snaps[0].EntityID)
	sum, err := rl.Admin().UsageSummary(ctx, UsageQuery{Resource: "gpt"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"rpm": 1}, sum.Total)

	ids, _, err := rl.listEntitiesWithCustomLimits(ctx, "gpt", 10, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"key-1"}, ids)

	assert.Equal(t, map[string]int64{indexGSI1: 1, indexGSI2: 3, indexGSI3: 1}, m.counts())
	assert.EqualValues(t, 5, env.repo.ForeignIndexItems())

	require.NoError(t, rl.Admin().DeleteEntity(ctx, "key-1"))
	assert.Empty(t, env.bucket("key-1", "gpt"), "key-1's own bucket was not deleted")
	assert.NotEmpty(t, env.item(pkBucket(otherID, "planted", "gpt", 0), skState), "another namespace's bucket was deleted")
	assert.Equal(t, map[string]int64{indexGSI1: 1, indexGSI2: 3, indexGSI3: 2}, m.counts())

	// The purge of default deletes its own items, not other's.
	require.NoError(t, env.repo.DeleteNamespace(ctx, "default"))
	require.NoError(t, env.repo.PurgeNamespace(ctx, ns))
	assert.Empty(t, env.item(pkEntity(ns, "org"), skMeta))
	assert.NotEmpty(t, env.item(pkEntity(otherID, "planted"), skMeta), "the purge deleted another namespace's item")
	assert.NotEmpty(t, env.item(pkBucket(otherID, "planted", "gpt", 0), skState), "the purge deleted another namespace's item")
	assert.Equal(t, map[string]int64{indexGSI1: 1, indexGSI2: 3, indexGSI3: 2, indexGSI4: 2}, m.counts())
	assert.EqualValues(t, 8, env.repo.ForeignIndexItems())

	logMu.Lock()
	defer logMu.Unlock()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, "logged once:\n%s", logs.String())
	assert.Contains(t, lines[0], "level=WARN")
	assert.Contains(t, lines[0], `msg="limiter: index entries of another namespace ignored"`)
	assert.Contains(t, lines[0], "index=GSI1")
	assert.Contains(t, lines[0], "item_pk="+pkEntity(otherID, "planted"))
}
