package crossbackend_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// deepChain creates key → proj → org → top (and key2 → proj), each
// cascading: key has a prepaid balance, top a monthly budget of 100, every
// level an rpm limit.
func deepChain(t *testing.T, rl *limiter.RateLimiter) {
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "top"})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "org", ParentID: "top", Cascade: true})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj", ParentID: "org", Cascade: true})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "key2", ParentID: "proj", Cascade: true})
	require.NoError(t, err)
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000), limiter.Prepaid("usd")}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "key2", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "proj", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000)}))
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "top", Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("rpm", 100000), limiter.PerCalendarMonth("usd", 100)}))
}

// TestDeepCascadeCalendarTopPrepaidBottom: 24 concurrent acquires of 5 on
// a four-level chain whose top has a monthly budget of 100 and whose
// bottom a prepaid balance of 1,000: exactly 20 are admitted, each level
// charged once per admission. The leases commit in December with 2 more
// than their estimate: the balance and November's bucket take it (−40),
// December's budget is whole.
func TestDeepCascadeCalendarTopPrepaidBottom(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-30T23:59:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		deepChain(t, rl)
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "key", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		var admitted atomic.Int64
		var leases sync.Map
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Go(func() {
				for j := 0; j < 4; j++ {
					lease, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 5})
					if err == nil {
						admitted.Add(1)
						leases.Store(lease, true)
					} else if !isRateLimited(err) {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(20), admitted.Load(), "the monthly budget of 100 at the top admits 20 of 5")
		avail, err := rl.Available(ctx, "key", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(900), avail["usd"])
		for _, id := range []string{"key", "proj", "org", "top"} {
			a, err := rl.Available(ctx, id, "gpt-4o")
			require.NoError(t, err)
			require.Equal(t, int64(100000-20), a["rpm"], id)
		}
		// Next period: commits with actual above the estimate settle in November.
		clk.at("2026-12-01T00:00:01Z")
		leases.Range(func(k, _ any) bool {
			l := k.(*limiter.Lease)
			require.NoError(t, l.Adjust(limiter.Consume{"usd": 2}))
			require.NoError(t, l.Commit(ctx))
			return true
		})
		avail, err = rl.Available(ctx, "key", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(860), avail["usd"], "20 × 7 charged to the balance")
		top, err := rl.Available(ctx, "top", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(100), top["usd"], "December's budget untouched")
		require.Equal(t, int64(-40), periodTokens(t, repo, "top", "gpt-4o/usd.m2026-11"), "November overspent by 40")
	})
}

// isRateLimited reports whether err is a refusal for want of tokens.
func isRateLimited(err error) bool {
	var rle *limiter.RateLimitExceededError
	return errors.As(err, &rle)
}

// TestAcquireAllSharedAncestors: one AcquireAll of key twice and its
// sibling key2, whose chains share proj, org and top: each bucket is
// charged the sum of the requests that reach it, once; a batch the top's
// budget cannot cover takes nothing anywhere.
func TestAcquireAllSharedAncestors(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-10T00:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		deepChain(t, rl)
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "key", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		reqs := []limiter.AcquireRequest{
			{EntityID: "key", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 30}},
			{EntityID: "key2", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 2, "usd": 30}},
			{EntityID: "key", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 4, "usd": 30}},
		}
		lease, _, err := rl.AcquireAll(ctx, reqs)
		require.NoError(t, err)
		require.NoError(t, lease.Commit(ctx))
		get := func(id string) map[string]int64 {
			a, err := rl.Available(ctx, id, "gpt-4o")
			require.NoError(t, err)
			return a
		}
		require.Equal(t, int64(940), get("key")["usd"], "key's balance: 30 + 30")
		require.Equal(t, int64(100000-5), get("key")["rpm"])
		require.Equal(t, int64(100000-2), get("key2")["rpm"])
		require.Equal(t, int64(100000-7), get("proj")["rpm"])
		require.Equal(t, int64(100000-7), get("top")["rpm"])
		require.Equal(t, int64(10), get("top")["usd"], "the budget: 90 of 100 spent")
		// A batch over the budget takes nothing anywhere.
		_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "key", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 6}},
			{EntityID: "key2", Resource: "gpt-4o", Consume: limiter.Consume{"rpm": 1, "usd": 6}},
		})
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		require.Equal(t, int64(940), get("key")["usd"])
		require.Equal(t, int64(100000-7), get("proj")["rpm"])
		require.Equal(t, int64(10), get("top")["usd"])
	})
}

// TestDeepCascadeTwoLimitersStaleItems: two limiters on one store take
// turns on a three-level chain, so the items each keeps from its last
// write (DynamoDB's one-transaction batch) are stale after the other's;
// with rollbacks in between, exactly the budget of 20 is admitted and
// every level ends empty.
func TestDeepCascadeTwoLimitersStaleItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		a := limiter.New(repo)
		defer a.Close()
		b := limiter.New(repo)
		defer b.Close()
		_, err := a.Admin().CreateEntity(ctx, limiter.Entity{ID: "org"})
		require.NoError(t, err)
		_, err = a.Admin().CreateEntity(ctx, limiter.Entity{ID: "proj", ParentID: "org", Cascade: true})
		require.NoError(t, err)
		_, err = a.Admin().CreateEntity(ctx, limiter.Entity{ID: "key", ParentID: "proj", Cascade: true})
		require.NoError(t, err)
		limits := limiter.WithLimits(limiter.PerHour("rpm", 20))
		admitted := 0
		for i := 0; i < 30; i++ {
			rl := a
			if i%3 == 1 {
				rl = b
			}
			lease, err := rl.Acquire(ctx, "key", "gpt-4o", limiter.Consume{"rpm": 1}, limits)
			if err == nil {
				admitted++
				if i%5 == 0 {
					require.NoError(t, lease.Rollback(ctx))
					admitted--
				} else {
					require.NoError(t, lease.Commit(ctx))
				}
			} else {
				require.ErrorIs(t, err, limiter.ErrRateLimited)
			}
		}
		require.Equal(t, 20, admitted)
		for _, id := range []string{"key", "proj", "org"} {
			av, err := b.Available(ctx, id, "gpt-4o", limits)
			require.NoError(t, err)
			require.Equal(t, int64(0), av["rpm"], id)
		}
	})
}

// TestPrepaidLimitsDeletedWhileLeaseOpen: the limits of a prepaid balance
// are deleted while two leases are open: the Commit of one (100 over its
// estimate) and the Rollback of the other end without error, and with the
// limits back the balance is 1,000 − 400.
func TestPrepaidLimitsDeletedWhileLeaseOpen(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		rl := limiter.New(repo)
		defer rl.Close()
		limits := []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.Prepaid("usd")}
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, limits))
		_, err := rl.TopUp(ctx, limiter.TopUpRequest{Entity: "acct", Resource: "gpt-4o", Limit: "usd", Amount: 1000, ID: "pay-1"})
		require.NoError(t, err)
		l1, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 300})
		require.NoError(t, err)
		l2, err := rl.Acquire(ctx, "acct", "gpt-4o", limiter.Consume{"rpm": 1, "usd": 300})
		require.NoError(t, err)
		require.NoError(t, rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}))
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, l1.Adjust(limiter.Consume{"usd": 100}))
		require.NoError(t, l1.Commit(cctx))
		require.NoError(t, l2.Rollback(cctx))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "acct", Resource: "gpt-4o"}, limits))
		avail, err := rl.Available(ctx, "acct", "gpt-4o")
		require.NoError(t, err)
		require.Equal(t, int64(600), avail["usd"])
	})
}
