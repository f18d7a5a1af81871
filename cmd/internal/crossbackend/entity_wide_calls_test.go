package crossbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// TestEntityWideEveryCall: the calls that take a resource work on
// AllResources (resource defaults, TimeUntilAvailable, Wait, LowerTokens,
// Reset), and AcquireAll over two resources of one entity charges its
// entity-wide bucket the sum of both, all or nothing; AcquireAll refuses
// AllResources as a request's resource.
func TestEntityWideEveryCall(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		clk := &fakeClock{}
		clk.at("2026-11-15T12:00:00Z")
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
		defer rl.Close()
		// Every entity's entity-wide bucket: the resource defaults of *.
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: limiter.AllResources}, []limiter.Limit{limiter.PerMinute("tpm", 600)}))
		got, err := rl.Admin().Limits(ctx, limiter.Scope{Resource: limiter.AllResources})
		require.NoError(t, err)
		require.Equal(t, []limiter.Limit{limiter.PerMinute("tpm", 600)}, got)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt-4o"}, []limiter.Limit{limiter.PerMinute("tpm", 1000)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "claude"}, []limiter.Limit{limiter.PerMinute("tpm", 1000)}))
		lif, err := rl.LimitsInForce(ctx, "e", "gpt-4o")
		require.NoError(t, err)
		require.Len(t, lif, 2)
		require.Equal(t, limiter.LimitInForce{EntityID: "e", Resource: limiter.AllResources, Limit: limiter.PerMinute("tpm", 600), Source: limiter.SourceResource}, lif[1])

		// AcquireAll: 300 on each model is 600 entity-wide, which fits;
		// then 1 more anywhere does not.
		lease, statuses, err := rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "e", Resource: "gpt-4o", Consume: limiter.Consume{"tpm": 300}},
			{EntityID: "e", Resource: "claude", Consume: limiter.Consume{"tpm": 300}},
		})
		require.NoError(t, err)
		require.Len(t, statuses, 2)
		require.NoError(t, lease.Commit(ctx))
		_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{
			{EntityID: "e", Resource: "gpt-4o", Consume: limiter.Consume{"tpm": 1}},
		})
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		for _, m := range []string{"gpt-4o", "claude"} {
			a, err := rl.Available(ctx, "e", m)
			require.NoError(t, err)
			require.Equal(t, int64(700), a["tpm"], m)
		}
		_, _, err = rl.AcquireAll(ctx, []limiter.AcquireRequest{{EntityID: "e", Resource: limiter.AllResources, Consume: limiter.Consume{"tpm": 1}}})
		require.ErrorIs(t, err, limiter.ErrInvalidName)

		// 100 needed at 10 a second: 10 s, entity-wide.
		wait, err := rl.TimeUntilAvailable(ctx, "e", limiter.AllResources, limiter.Consume{"tpm": 100})
		require.NoError(t, err)
		require.Equal(t, 10*time.Second+time.Millisecond, wait)

		// Reset fills the entity-wide bucket; LowerTokens lowers it.
		require.NoError(t, rl.Reset(ctx, "e", limiter.AllResources))
		a, err := rl.Available(ctx, "e", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(600), a["tpm"])
		lowered, err := rl.LowerTokens(ctx, "e", limiter.AllResources, limiter.Consume{"tpm": 95})
		require.NoError(t, err)
		require.True(t, lowered)
		a, err = rl.Available(ctx, "e", limiter.AllResources)
		require.NoError(t, err)
		require.Equal(t, int64(95), a["tpm"], "lowered to 95")

		// Wait sleeps out the entity-wide refusal (5 short at 10 a
		// second: half a second; the limiter's clock moves on meanwhile).
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			l, err := rl.Wait(wctx, "e", "claude", limiter.Consume{"tpm": 100})
			if err == nil {
				err = l.Commit(ctx)
			}
			done <- err
		}()
		for range 600 {
			select {
			case err := <-done:
				require.NoError(t, err)
				a, err = rl.Available(ctx, "e", limiter.AllResources)
				require.NoError(t, err)
				require.GreaterOrEqual(t, a["tpm"], int64(0))
				return
			case <-time.After(5 * time.Millisecond):
				clk.set(clk.now().Add(time.Second))
			}
		}
		t.Fatal("Wait did not return")
	})
}
