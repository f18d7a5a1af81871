package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSoakEntityWidePrepaid: seeded LLM calls on three models paid from
// one prepaid balance on (customer, AllResources), with top-ups (some
// sent twice) between them: each call acquires an estimate, then commits
// its actual cost (less or more) or rolls back. At the end the balance is
// the top-ups less the sum of the actual costs, to the micro-dollar, and
// it never admitted a call it could not cover at acquire. 10,000 calls
// with SOAK=1 (`make soak`), fewer by default.
func TestSoakEntityWidePrepaid(t *testing.T) {
	calls := map[bool]int{false: 600, true: 10_000}[os.Getenv(envSoak) != ""]
	t.Run("memory", func(t *testing.T) { soakPrepaid(t, newMemory(), calls, 1) })
	t.Run("dynamodb", func(t *testing.T) {
		env := newTestEnv(t)
		n := calls
		if os.Getenv(envSoak) == "" {
			n = calls / 3
		}
		soakPrepaid(t, env.repo, n, 2)
	})
}

// soakPrepaid runs calls seeded calls (seed) on repo and checks the
// balance.
func soakPrepaid(t *testing.T, repo Repository, calls int, seed uint64) {
	ctx := context.Background()
	rl := New(repo)
	defer rl.Close()
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "cust", Resource: AllResources}, []Limit{Prepaid("usd")}))
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Entity: "cust", Resource: DefaultResource}, []Limit{PerMinute("rpm", 1_000_000)}))
	var topUps, actual atomic.Int64
	var ids atomic.Int64
	topUp := func(amount int64, id string) {
		res, err := rl.TopUp(ctx, TopUpRequest{Entity: "cust", Resource: AllResources, Limit: "usd", Amount: amount, ID: id})
		require.NoError(t, err)
		if res.Applied {
			topUps.Add(amount)
		}
	}
	topUp(10_000_000, "pay-0")
	modelNames := []string{"gpt-4o", "claude-sonnet-4-5", "gemini-2.5-pro"}
	const workers = 8
	var wg sync.WaitGroup
	var admitted, refused atomic.Int64
	for w := range workers {
		r := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for i := w; i < calls; i += workers {
				if r.IntN(25) == 0 {
					amount := int64(100_000 + r.IntN(2_000_000))
					id := fmt.Sprintf("pay-%d", ids.Add(1))
					topUp(amount, id)
					if r.IntN(3) == 0 {
						topUp(amount, id) // sent again: applied once
					}
				}
				est := int64(1 + r.IntN(50_000))
				lease, err := rl.Acquire(ctx, "cust", modelNames[r.IntN(len(modelNames))], Consume{"rpm": 1, "usd": est})
				if err != nil {
					if !isRefusal(err) {
						t.Error(err)
						return
					}
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				if r.IntN(10) == 0 {
					require.NoError(t, lease.Rollback(ctx))
					continue
				}
				cost := int64(r.IntN(int(2 * est)))
				require.NoError(t, lease.Adjust(Consume{"usd": cost - est}))
				require.NoError(t, lease.Commit(ctx))
				require.Equal(t, cost, lease.Consumed()["usd"], "the lease's cost")
				actual.Add(cost)
			}
		})
	}
	wg.Wait()
	left, err := rl.Available(ctx, "cust", AllResources)
	require.NoError(t, err)
	require.Equal(t, topUps.Load()-actual.Load(), left["usd"], "balance = top-ups − Σ actual (admitted %d, refused %d)", admitted.Load(), refused.Load())
	require.Positive(t, admitted.Load())
}
