package limiter

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/store"
)

// pairBudgets are the entity-wide usd budgets the pair path is attacked
// with: a rolling limit (in the entity-wide bucket itself), a calendar
// month (its period's bucket) and a prepaid balance (its balance's
// bucket, topped up with 1,000).
var pairBudgets = []Limit{PerDay("usd", 1000), PerCalendarMonth("usd", 1000), Prepaid("usd")}

// setPairBudget stores rpm 5 on (id, api) and budget on (id,
// AllResources), tops a balance up with 1,000 and creates the items with
// two acquires of rpm 1 and usd 100 (the second's writes find the items,
// and the repository keeps a copy of the balance TopUp created): 3 rpm
// and 800 usd are left.
func setPairBudget(t *testing.T, rl *RateLimiter, id string, budget Limit) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: id, Resource: "api"}, []Limit{PerMinute("rpm", 5)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: id, Resource: AllResources}, []Limit{budget}))
	if store.Limit(budget).IsPrepaid() {
		_, err := rl.TopUp(ctx, TopUpRequest{Entity: id, Resource: AllResources, Limit: "usd", Amount: 1000, ID: "t-" + id})
		require.NoError(t, err)
	}
	for range 2 {
		mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1, "usd": 100}))
	}
}

// pairLeft returns what (id, api) and (id, AllResources) have left.
func pairLeft(t *testing.T, rl *RateLimiter, id string) [2]map[string]int64 {
	t.Helper()
	var out [2]map[string]int64
	for i, res := range []string{"api", AllResources} {
		a, err := rl.Available(context.Background(), id, res)
		require.NoError(t, err)
		out[i] = a
	}
	return out
}

// TestPairRefusalTakesNothing: an acquire of two items on the pair path
// (the resource's bucket and an entity-wide budget of each kind) refused
// by either side, or both, leaves both as they were: the write that
// applied is given back. A refusal by one side after the other applied
// reads the refusing item once before it answers (see mixedRetries); a
// refusal by both does not.
func TestPairRefusalTakesNothing(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl := env.limiter()
	defer rl.Close()
	for i, budget := range pairBudgets {
		t.Run(budget.String(), func(t *testing.T) {
			id := fmt.Sprintf("e%d", i)
			setPairBudget(t, rl, id, budget)
			before := pairLeft(t, rl, id)
			require.Equal(t, int64(3), before[0]["rpm"])
			require.Equal(t, int64(800), before[1]["usd"])
			// A refused write to a rolling or calendar period's bucket is
			// an UpdateItem that fails its condition; to a balance bucket,
			// whose capacity the speculative write's signature cannot
			// hold, a read (GetItem: its state decides).
			refusedBudget := "UpdateItem!"
			if store.Limit(budget).IsPrepaid() {
				refusedBudget = "GetItem"
			}
			for _, c := range []struct {
				name    string
				consume Consume
				calls   []string
				refuser string // the resource of the violated limit
			}{
				// The other write applied and is given back; the refusing
				// item is read once more.
				{"the budget refuses", Consume{"rpm": 1, "usd": 801}, []string{"UpdateItem", refusedBudget, "UpdateItem", "GetItem"}, AllResources},
				{"the resource refuses", Consume{"rpm": 4, "usd": 1}, []string{"UpdateItem!", "UpdateItem", "UpdateItem", "GetItem"}, "api"},
				{"both refuse", Consume{"rpm": 4, "usd": 801}, []string{"UpdateItem!", refusedBudget}, ""},
			} {
				env.rec.Reset()
				_, err := rl.Acquire(env.ctx, id, "api", c.consume)
				rle := rateLimited(t, err)
				slices.Sort(c.calls)
				require.Equal(t, strings.Join(c.calls, ", "), env.sortedCalls(), c.name)
				require.Equal(t, before, pairLeft(t, rl, id), "%s: something stayed taken", c.name)
				var violated []string
				for _, v := range rle.Violations {
					violated = append(violated, v.Resource)
				}
				if c.refuser != "" {
					require.Len(t, violated, 1, "%s: %v", c.name, rle.Violations)
					require.Contains(t, violated[0], c.refuser, c.name)
				} else {
					require.Len(t, violated, 2, "%s: %v", c.name, rle.Violations)
				}
			}
			// Admitted: both sides charged once.
			mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 3, "usd": 800}))
			after := pairLeft(t, rl, id)
			require.Equal(t, int64(0), after[0]["rpm"])
			require.Equal(t, int64(0), after[1]["usd"])
		})
	}
}

// TestPairFaultGivesBack: one of the pair's two writes fails or is
// answered too late for its caller: the acquire fails and nothing stays
// charged — the other write, or the late one once it is answered, is
// given back. A write DynamoDB applied but answered with a 500 is sent
// again by the SDK and counted once. Each budget has a table, a fault
// proxy and a limiter of its own, and the three run at once (subtests
// started from goroutines, not parallel tests, so that -parallel's two
// slots do not hold the third back): most of their time is spent
// waiting for deadlines and late answers, and nothing here bounds how
// late an acquire returns.
func TestPairFaultGivesBack(t *testing.T) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, budget := range pairBudgets {
		wg.Go(func() {
			t.Run(budget.String(), func(t *testing.T) {
				env := newTestEnv(t)
				rl, p := proxiedLimiter(t, env)
				id := fmt.Sprintf("f%d", i)
				setPairBudget(t, rl, id, budget)
				before := pairLeft(t, rl, id)
				unchanged := func() bool { return reflect.DeepEqual(pairLeft(t, rl, id), before) }
				start := p.Faults("UpdateItem")
				// One write never answered (whichever of the two it hits):
				// the acquire gives up at its deadline, the other write is
				// given back, the lost one took nothing.
				for range 2 {
					faults := p.Faults("UpdateItem")
					p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Blackhole, Times: 1})
					_, err := acquireWithin(t, rl, 300*time.Millisecond, id, Consume{"rpm": 1, "usd": 10})
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.Equal(t, faults+1, p.Faults("UpdateItem"), "the fault hit no write: the test did not test")
					require.Eventually(t, unchanged, 5*time.Second, 50*time.Millisecond, "a lost write left something taken")
				}
				// An answer later than the caller's deadline: the acquire
				// gives up at its deadline; the write applies, and is given
				// back when its answer comes.
				p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.DelayAfter, Delay: 1500 * time.Millisecond, Times: 1})
				_, err := acquireWithin(t, rl, 300*time.Millisecond, id, Consume{"rpm": 1, "usd": 10})
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Eventually(t, unchanged, 5*time.Second, 50*time.Millisecond, "the late write was not given back")
				// Applied, answered 500, sent again: admitted, charged once.
				p.Add(faultproxy.Rule{Op: "UpdateItem", Kind: faultproxy.Error500After, Times: 1})
				mustCommit(t, mustAcquire(t, rl, id, "api", Consume{"rpm": 1, "usd": 10}))
				// Every fault hit a write (a late answer counts when sent).
				require.Eventually(t, func() bool { return p.Faults("UpdateItem") == start+4 }, 5*time.Second, 20*time.Millisecond,
					"faults %d, want %d: one hit no write, the test did not test", p.Faults("UpdateItem"), start+4)
				after := pairLeft(t, rl, id)
				require.Equal(t, before[0]["rpm"]-1, after[0]["rpm"])
				require.Equal(t, before[1]["usd"]-10, after[1]["usd"])
				require.NoError(t, rl.Close())
			})
		})
	}
}

// TestPairConcurrentExact: two limiters, one entity whose plan is two
// items, both contended (rpm 6 on each of four models, 15 on
// AllResources): 48 concurrent calls never admit more than either
// bucket holds, and every bucket is charged exactly what the admitted
// calls took (a refused call's write is given back whole). A $1 monthly
// budget beside the models' rpm, 50 calls of $0.045: exactly 22
// admitted, none refused while $0.045 was left.
func TestPairConcurrentExact(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	env.spec = true
	rl1, rl2 := env.limiter(), env.limiter()
	defer rl1.Close()
	defer rl2.Close()
	ctx := env.ctx
	models := []string{"m0", "m1", "m2", "m3"}
	require.NoError(t, rl1.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: DefaultResource}, []Limit{PerHour("rpm", 6)}))
	require.NoError(t, rl1.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: AllResources}, []Limit{PerHour("rpm", 15)}))
	for _, m := range models { // the items exist: the pair path decides
		require.NoError(t, mustAcquire(t, rl1, "e", m, Consume{"rpm": 1}).Rollback(ctx))
	}
	run := func(n int, fn func(rl *RateLimiter, i int) error) (admitted int64) {
		var ok atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			rl := rl1
			if i%2 == 1 {
				rl = rl2
			}
			wg.Go(func() {
				err := fn(rl, i)
				switch {
				case err == nil:
					ok.Add(1)
				case isRefusal(err):
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return ok.Load()
	}
	perModel := make([]atomic.Int64, len(models))
	admitted := run(48, func(rl *RateLimiter, i int) error {
		_, err := rl.Acquire(ctx, "e", models[i%len(models)], Consume{"rpm": 1})
		if err == nil {
			perModel[i%len(models)].Add(1)
		}
		return err
	})
	t.Logf("%d of 48 calls admitted (the entity-wide bucket holds 15)", admitted)
	require.LessOrEqual(t, admitted, int64(15), "more than the entity-wide budget")
	require.Positive(t, admitted)
	wide, err := rl1.Available(ctx, "e", AllResources)
	require.NoError(t, err)
	require.Equal(t, 15-admitted, wide["rpm"], "the entity-wide bucket holds other than the admitted calls")
	for k, m := range models {
		a, err := rl1.Available(ctx, "e", m)
		require.NoError(t, err)
		require.LessOrEqual(t, perModel[k].Load(), int64(6), m)
		require.Equal(t, 6-perModel[k].Load(), a["rpm"], "%s holds other than its admitted calls", m)
	}

	const usd = 1_000_000
	require.NoError(t, rl1.Admin().SetLimits(ctx, Scope{Entity: "acme", Resource: DefaultResource}, []Limit{PerMinute("rpm", 1000)}))
	require.NoError(t, rl1.Admin().SetLimits(ctx, Scope{Entity: "acme", Resource: AllResources}, []Limit{PerCalendarMonth("usd", usd)}))
	for _, m := range models { // the items exist
		mustCommit(t, mustAcquire(t, rl1, "acme", m, Consume{"rpm": 1, "usd": 1}))
	}
	admitted = run(50, func(rl *RateLimiter, i int) error {
		_, err := rl.Acquire(ctx, "acme", models[i%len(models)], Consume{"rpm": 1, "usd": 45_000})
		return err
	})
	require.Equal(t, int64(22), admitted, "22 × $0.045 fit in what is left of $1, 23 do not")
	left, err := rl1.Available(ctx, "acme", AllResources)
	require.NoError(t, err)
	require.Equal(t, int64(usd-4-22*45_000), left["usd"])
}
