package limiter

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/store"
)

// adjustTemplateRepo is a repository that only builds requests: what the
// adjustments' builders read of it.
func adjustTemplateRepo() *dynamoRepository {
	const table = "adjust-template"
	return &dynamoRepository{opts: DynamoDBOptions{Table: table}, nsID: "ns1",
		shared: &sharedState{exact: ddbschema.NewExactUpdates(table), adjust: newAdjustTemplates(table)}}
}

// adjustCase is an adjustment and the item its writes are built from.
type adjustCase struct {
	name string
	w    store.BucketWrite
	item *store.Bucket // kept (optimistic) or read (exact); nil: none
}

// slotState is the state of generation gen of in-flight limit "calls" of
// capacity 8 with free slots free (as stored: one token a century).
func slotState(gen string, free int64) store.BucketState {
	return store.BucketState{LimitName: "calls.slots." + gen, TokensMilli: free * 1000, CapacityMilli: 8000,
		RefillAmountMilli: 1000, RefillPeriodMs: ddbschema.LongRefillPeriodMs}
}

// rollingState is the state of a rolling limit of capacity c per minute
// (millitokens) with tk millitokens.
func rollingState(name string, tk, c int64) store.BucketState {
	return store.BucketState{LimitName: name, TokensMilli: tk, CapacityMilli: c, RefillAmountMilli: c, RefillPeriodMs: 60_000}
}

// adjustCases is a table of shapes: rolling limits only, in-flight slots
// given back, calendar and prepaid limits (one token a century), refunds
// and extra charges, with the capacity and exact state known or not, each
// exact case of a refund, yielded or not.
func adjustCases() []adjustCase {
	key := store.BucketKey{EntityID: "tenant-1", Resource: "gpt-4o", Shard: 0}
	const now = 1_795_958_850_571
	lw := func(name string, milli, capMilli int64) store.LimitWrite {
		return store.LimitWrite{Name: name, ConsumedMilli: milli, CapacityMilli: capMilli}
	}
	write := func(inc int64, limits ...store.LimitWrite) store.BucketWrite {
		return store.BucketWrite{Kind: store.WriteAdjust, Key: key, NowMs: now, Incarnation: inc, Limits: limits}
	}
	item := func(inc int64, states ...store.BucketState) *store.Bucket {
		slices.SortFunc(states, func(a, b store.BucketState) int { return strings.Compare(a.LimitName, b.LimitName) })
		return &store.Bucket{Key: key, ShardCount: 1, RefillMs: now - 250, Incarnation: inc, States: states}
	}
	calendar := store.BucketState{LimitName: "usd.month.2026-11", TokensMilli: 40_000, CapacityMilli: 100_000,
		RefillAmountMilli: 1000, RefillPeriodMs: ddbschema.LongRefillPeriodMs}
	prepaid := store.BucketState{LimitName: "credits", TokensMilli: 5_000_000, CapacityMilli: 9_000_000,
		RefillAmountMilli: 1, RefillPeriodMs: ddbschema.LongRefillPeriodMs}
	rolling := item(7, rollingState("rpm", 40_000, 100_000), rollingState("tpm", 500_000, 1_000_000))
	return []adjustCase{
		{"rolling: extra charge, state kept", write(7, lw("tpm", 20_000, 1_000_000)), rolling},
		{"rolling: extra charge, nothing kept", write(7, lw("tpm", 20_000, 1_000_000)), nil},
		{"rolling: extra charge, capacity changed", write(7, lw("tpm", 20_000, 2_000_000)), rolling},
		{"rolling: refund, state kept", write(7, lw("tpm", -20_000, 1_000_000)), rolling},
		{"rolling: refund, nothing kept", write(7, lw("tpm", -20_000, 1_000_000)), nil},
		{"rolling: refund, capacity unknown", write(7, lw("tpm", -20_000, 0)), rolling},
		{"rolling: zero delta", write(7, lw("rpm", 0, 100_000)), rolling},
		{"rolling: refund and charge", write(7, lw("rpm", -1000, 100_000), lw("tpm", 300_000, 1_000_000)), rolling},
		{"rolling: no incarnation", write(0, lw("tpm", -20_000, 1_000_000)), item(0, rollingState("tpm", 1, 1_000_000))},
		{"rolling: unsigned parameters", write(7, lw("big", 5, math.MaxInt64)),
			item(7, store.BucketState{LimitName: "big", TokensMilli: 1, CapacityMilli: math.MaxInt64, RefillAmountMilli: 1, RefillPeriodMs: 1})},
		{"in-flight: slots given back", write(7, lw("calls.slots.119730590", -1000, 8000), lw("calls.slots.119730591", -1000, 8000)),
			item(7, slotState("119730590", 3), slotState("119730591", 4))},
		{"in-flight: slots given back, one generation gone", write(7, lw("calls.slots.119730590", -1000, 8000), lw("calls.slots.119730591", -1000, 8000)),
			item(7, slotState("119730591", 4))},
		{"in-flight: with rolling refund and extra charge", write(7, lw("calls.slots.119730590", -1000, 8000), lw("calls.slots.119730591", -1000, 8000),
			lw("rpm", -1000, 100_000), lw("tpm", 1500, 1_000_000)),
			item(7, slotState("119730590", 3), slotState("119730591", 4), rollingState("rpm", 40_000, 100_000), rollingState("tpm", 500_000, 1_000_000))},
		{"in-flight: generation read full", write(7, lw("calls.slots.119730591", -1000, 8000)), item(7, slotState("119730591", 8))},
		{"in-flight: generation read to be capped", write(7, lw("calls.slots.119730591", -2000, 8000)), item(7, slotState("119730591", 7))},
		{"calendar: refund", write(7, lw("usd.month.2026-11", -2500, 100_000)), item(7, calendar)},
		{"calendar: extra charge", write(7, lw("usd.month.2026-11", 2500, 100_000)), item(7, calendar)},
		{"prepaid: refund and charge beside rolling", write(7, lw("credits", -70_000, 9_000_000), lw("rpm", 1000, 100_000)),
			item(7, prepaid, rollingState("rpm", 40_000, 100_000))},
		{"rolling: refund capped", write(7, lw("tpm", -20_000, 1_000_000)), item(7, rollingState("tpm", 990_000, 1_000_000))},
		{"rolling: refund on a full bucket", write(7, lw("tpm", -20_000, 1_000_000)), item(7, rollingState("tpm", 1_000_000, 1_000_000))},
		{"rolling: refund above the capacity", write(7, lw("tpm", -20_000, 0)), item(7, rollingState("tpm", 1_200_000, 1_000_000))},
		{"rolling: removed from the item", write(7, lw("tpm", -20_000, 1_000_000)), item(7, rollingState("rpm", 1, 100_000))},
		{"saturated amounts", write(7, lw("tpm", math.MinInt64+1, 1_000_000), lw("rpm", math.MaxInt64, 100_000)), rolling},
	}
}

// requireSameAdjust builds c's writes both ways, with one write
// identifier, and requires them equal: the optimistic write, and the
// exact rewrite from c's item with and without yielding.
func requireSameAdjust(t *testing.T, r *dynamoRepository, c adjustCase) {
	t.Helper()
	id := ddbschema.NewWriteID()
	got := r.optimisticAdjust(c.w, c.item, nil, id)
	want := r.optimisticAdjustExpr(c.w, c.item, id)
	require.Equal(t, want, got, "%s: optimistic", c.name)
	if c.item == nil {
		return
	}
	for _, yield := range []bool{false, true} {
		got, want := r.exactAdjust(c.w, c.item, nil, id, yield), r.exactAdjustExpr(c.w, c.item, id, yield)
		require.Equal(t, want, got, "%s: exact, yield %v", c.name, yield)
	}
}

// TestAdjustTemplateEqualsExpressions: for a table of shapes, the
// adjustments' writes built from templates equal those built expression
// by expression, on a template's first use and when it is used again for
// other numbers of the same shape.
func TestAdjustTemplateEqualsExpressions(t *testing.T) {
	t.Parallel()
	r := adjustTemplateRepo()
	for _, c := range adjustCases() {
		requireSameAdjust(t, r, c)
	}
	templates := len(*r.shared.adjust.templates.Load())
	require.Positive(t, templates)
	// The same shapes, other numbers: every write from a kept template.
	for _, c := range adjustCases() {
		c.w.NowMs += 61_000
		if c.w.Incarnation != 0 {
			c.w.Incarnation = 1 << 40
		}
		for i := range c.w.Limits {
			c.w.Limits[i].ConsumedMilli = c.w.Limits[i].ConsumedMilli/2 + c.w.Limits[i].ConsumedMilli%2
		}
		if c.item != nil {
			it := *c.item
			it.Incarnation, it.RefillMs = c.w.Incarnation, it.RefillMs+1
			c.item = &it
		}
		requireSameAdjust(t, r, c)
	}
	// Halving can move a refund to another case; each such case is a new
	// shape, and every shape of the first pass came back.
	require.GreaterOrEqual(t, len(*r.shared.adjust.templates.Load()), templates)
}

// TestAdjustTemplateEqualsExpressionsRandom: seeded random adjustments
// over a few limit names (so that shapes repeat and templates are used
// again with other numbers), items with balances on each side of every
// case's boundary: both ways of building give the same write.
func TestAdjustTemplateEqualsExpressionsRandom(t *testing.T) {
	t.Parallel()
	r := adjustTemplateRepo()
	rng := rand.New(rand.NewPCG(47, 1))
	names := []string{"calls.slots.41", "calls.slots.42", "rpm", "tpm", "usd.month.2026-11"}
	pick := func(vs ...int64) int64 { return vs[rng.IntN(len(vs))] }
	const n = 4000
	for i := range n {
		now := 1_795_958_850_000 + rng.Int64N(100_000)
		w := store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "e", Resource: "r"}, NowMs: now, Incarnation: pick(0, 7, rng.Int64())}
		var item *store.Bucket
		if rng.IntN(4) > 0 {
			item = &store.Bucket{Key: w.Key, RefillMs: now - rng.Int64N(2000), Incarnation: pick(w.Incarnation, 9)}
		}
		for _, name := range names {
			if rng.IntN(2) == 0 {
				continue
			}
			c := pick(8000, 100_000, 1_000_000)
			amount := pick(0, 1000, -1000, rng.Int64N(2*c)-c, math.MaxInt64, math.MinInt64+1)
			w.Limits = append(w.Limits, store.LimitWrite{Name: name, ConsumedMilli: amount, CapacityMilli: pick(0, c, c, 2*c)})
			if item != nil && rng.IntN(5) > 0 {
				ra, rp := c, int64(60_000)
				if strings.Contains(name, ".") {
					ra, rp = pick(1, 1000), ddbschema.LongRefillPeriodMs
				}
				fits := c - max(-amount, 0)
				tk := pick(0, fits-1, fits, fits+1, c-1, c, c+1, rng.Int64N(c+1))
				item.States = append(item.States, store.BucketState{LimitName: name, TokensMilli: tk, CapacityMilli: c, RefillAmountMilli: ra, RefillPeriodMs: pick(rp, rp, 0)})
			}
		}
		requireSameAdjust(t, r, adjustCase{name: "random " + string(rune('a'+i%26)), w: w, item: item})
	}
	require.Less(t, len(*r.shared.adjust.templates.Load()), ddbschema.MaxTemplates, "shapes repeat: the templates are used again")
}

// TestAdjustTemplateCacheBounded: past ddbschema.MaxTemplates shapes (the
// names of in-flight generations change every half slot TTL), the cache
// starts afresh rather than growing or keeping only the first shapes, and
// every write is still the right one.
func TestAdjustTemplateCacheBounded(t *testing.T) {
	t.Parallel()
	r := adjustTemplateRepo()
	for gen := range 3 * ddbschema.MaxTemplates {
		name := store.SlotLimitName("calls", int64(gen))
		c := adjustCase{name: name, w: store.BucketWrite{Kind: store.WriteAdjust, Key: store.BucketKey{EntityID: "e", Resource: "r"}, NowMs: 1e12, Incarnation: 3,
			Limits: []store.LimitWrite{{Name: name, ConsumedMilli: -1000, CapacityMilli: 8000}}}}
		requireSameAdjust(t, r, c)
		kept := *r.shared.adjust.templates.Load()
		require.LessOrEqual(t, len(kept), ddbschema.MaxTemplates)
		require.Len(t, kept, gen%ddbschema.MaxTemplates+1)
	}
}

// TestAdjustTemplateAllocs bounds the allocations of a warm in-flight
// lease's commit write (its two generations' slots given back, and a
// rolling refund and extra charge): the input, its values map, its
// numbers (one string and one array) and the write identifier (8); the
// expression by expression build of the same write takes many times as
// many.
func TestAdjustTemplateAllocs(t *testing.T) {
	r := adjustTemplateRepo()
	var c adjustCase
	for _, ac := range adjustCases() {
		if ac.name == "in-flight: with rolling refund and extra charge" {
			c = ac
		}
	}
	require.NotNil(t, c.item)
	key := ddbschema.BucketKeyValue(r.nsID, c.w.Key.EntityID, c.w.Key.Resource, c.w.Key.Shard)
	id := ddbschema.NewWriteID()
	var in *dynamodb.UpdateItemInput
	in = r.optimisticAdjust(c.w, c.item, key, id) // warm: the template is kept
	got := testing.AllocsPerRun(200, func() { in = r.optimisticAdjust(c.w, c.item, key, id) })
	ref := testing.AllocsPerRun(200, func() { in = r.optimisticAdjustExpr(c.w, c.item, id) })
	t.Logf("allocations of the commit's write: %.0f from its template, %.0f expression by expression", got, ref)
	require.NotNil(t, in)
	// 8 allocations; the race detector makes sync.Pool drop a quarter of
	// the walkers put back, whose three buffers are then allocated again.
	require.LessOrEqual(t, got, 10.0)
	require.Less(t, got*10, ref)
}
