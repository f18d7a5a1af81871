package crossbackend_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
)

// usd is one dollar in the micro-dollars a usd limit counts.
const usd = 1_000_000

// models are the resources the entity-wide tests spread their calls over.
var models = []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "claude-haiku-4-5"}

// eachBackendCluster is eachBackend plus the Redis Cluster (a store whose
// bucket items share one slot, see redisstore.Options.SingleSlot).
func eachBackendCluster(t *testing.T, f func(t *testing.T, repo limiter.Repository)) {
	eachBackend(t, f)
	t.Run("redis-cluster", func(t *testing.T) { f(t, openRedisCluster(t)) })
}

// openRedisCluster opens a store on the package's Redis Cluster, under a
// key prefix of the test's own, with every bucket item of the namespace
// in one slot.
func openRedisCluster(t *testing.T) limiter.Repository {
	repo, err := redisstore.New(redisserver.ClusterClient(t), func(o *redisstore.Options) {
		o.Prefix = redisserver.Prefix(t)
		o.SingleSlot = true
	})
	require.NoError(t, err)
	return repo
}

// TestEntityWideCalendarBudget: a project's PerCalendarMonth("usd", $1)
// on AllResources is one budget for every model: four models asking $0.90
// each admit one call, where a budget on DefaultResource (a copy per
// model) admits four.
func TestEntityWideCalendarBudget(t *testing.T) {
	eachBackendCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acme", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		admitted := 0
		for _, m := range models {
			_, err := rl.Acquire(ctx, "acme", m, limiter.Consume{"usd": 900_000})
			if err == nil {
				admitted++
				continue
			}
			require.True(t, isRateLimited(err), "%v", err)
			var rle *limiter.RateLimitExceededError
			require.ErrorAs(t, err, &rle)
			// The period bucket of the entity-wide budget refused.
			require.Equal(t, limiter.AllResources+"/usd.m2026-11", rle.Primary.Resource)
			require.Equal(t, "usd", rle.Primary.LimitName)
		}
		require.Equal(t, 1, admitted)
		left, err := rl.Available(ctx, "acme", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(100_000), left["usd"])

		// The same budget on DefaultResource is a copy per model.
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "other", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		copies := 0
		for _, m := range models {
			if _, err := rl.Acquire(ctx, "other", m, limiter.Consume{"usd": 900_000}); err == nil {
				copies++
			}
		}
		require.Equal(t, len(models), copies)
	})
}

// TestEntityWideClusterPerResourceSlots: on a Redis Cluster with the
// default slot per resource, an entity-wide batch spans slots and is run
// one script per slot, earlier ones given back when a later one refuses:
// the budget is never overspent (at most 22 of $0.045 in $1), though
// calls that would have fit may be refused under contention.
func TestEntityWideClusterPerResourceSlots(t *testing.T) {
	ctx := context.Background()
	repo, err := redisstore.New(redisserver.ClusterClient(t), func(o *redisstore.Options) { o.Prefix = redisserver.Prefix(t) })
	require.NoError(t, err)
	clk := &fakeClock{}
	clk.at("2026-11-15T12:00:00Z")
	rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
	defer rl.Close()
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 1000)}))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := rl.Acquire(ctx, "proj", models[i%len(models)], limiter.Consume{"rpm": 1, "usd": 45_000})
			if err == nil {
				admitted.Add(1)
			} else if !isRateLimited(err) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, admitted.Load(), int64(22))
	require.Positive(t, admitted.Load())
	left, err := rl.Available(ctx, "proj", limiter.AllResources)
	require.NoError(t, err)
	require.Equal(t, int64(usd)-admitted.Load()*45_000, left["usd"], "what was admitted, and nothing more, is spent")
}

// TestEntityWideCascadeExact: five keys cascading to a project whose
// budget is PerCalendarMonth("usd", $1) on AllResources, 50 concurrent
// calls of $0.045 on four models from two limiters: exactly 22 admitted,
// and no call refused while $0.045 is left. The keys have an rpm limit of
// their own and no usd limit: they spend the project's money.
func TestEntityWideCascadeExact(t *testing.T) {
	eachBackendCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl1 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl1.Close()
		rl2 := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl2.Close()
		_, err := rl1.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj"})
		require.NoError(t, err)
		require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: limiter.AllResources}, []limiter.Limit{limiter.PerCalendarMonth("usd", usd)}))
		for k := range 5 {
			id := fmt.Sprintf("key-%d", k)
			_, err := rl1.Admin().CreateEntity(ctx, limiter.Entity{ID: id, ParentID: "proj", Cascade: true})
			require.NoError(t, err)
			require.NoError(t, rl1.Admin().SetLimits(ctx, limiter.Scope{Entity: id, Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 1000)}))
		}
		var admitted, refused atomic.Int64
		var wg sync.WaitGroup
		for i := range 50 {
			rl := rl1
			if i%2 == 1 {
				rl = rl2
			}
			wg.Go(func() {
				key := fmt.Sprintf("key-%d", i%5)
				_, err := rl.Acquire(ctx, key, models[i%len(models)], limiter.Consume{"rpm": 1, "usd": 45_000})
				switch {
				case err == nil:
					admitted.Add(1)
				case isRateLimited(err):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(22), admitted.Load(), "22 × $0.045 fit in $1, 23 do not")
		left, err := rl1.Available(ctx, "proj", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(usd-22*45_000), left["usd"])
		require.Less(t, left["usd"], int64(45_000), "a refusal while $0.045 was left")
	})
}

// TestEntityWidePrepaid: a Prepaid("usd") balance on (customer,
// AllResources) topped up with $10 pays for calls on three models: ten
// calls of $1 are admitted, the eleventh refused, and a refusal takes
// nothing from the model's rpm bucket.
func TestEntityWidePrepaid(t *testing.T) {
	eachBackendCluster(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		// A clock that stands still: the models' rpm buckets do not
		// refill while the calls run, however slow the machine.
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "cust", Resource: limiter.AllResources}, []limiter.Limit{limiter.Prepaid("usd")}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "cust", Resource: limiter.DefaultResource}, []limiter.Limit{limiter.PerMinute("rpm", 100)}))
		res, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "cust", Resource: limiter.AllResources, Limit: "usd", Amount: 10 * usd, ID: "pay-1"})
		require.NoError(t, err)
		require.True(t, res.Applied)
		admitted := 0
		for i := range 15 {
			_, err := rl.Acquire(ctx, "cust", models[i%3], limiter.Consume{"rpm": 1, "usd": usd})
			if err == nil {
				admitted++
				continue
			}
			require.True(t, isRateLimited(err), "%v", err)
		}
		require.Equal(t, 10, admitted)
		left, err := rl.Available(ctx, "cust", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(0), left["usd"])
		// The refused calls took nothing from the models' rpm buckets.
		total := int64(0)
		for _, m := range models[:3] {
			a, err := rl.Available(ctx, "cust", m)
			require.NoError(t, err)
			total += 100 - a["rpm"]
		}
		require.Equal(t, int64(10), total)
	})
}
