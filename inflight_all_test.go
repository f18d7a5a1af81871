package limiter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/memorystore"
)

// TestAcquireAllOneItemWithAndWithoutSlot: AcquireAll of two requests on
// one bucket item, one naming the in-flight limit and one not, charges
// the item once with both amounts and takes one slot (memory and
// DynamoDB Local); the commit gives the slot back. A slot taken by the
// first request is counted against the cap: two such batches fit a cap
// of 2, a third is refused.
func TestAcquireAllOneItemWithAndWithoutSlot(t *testing.T) {
	env := newTestEnv(t)
	for name, repo := range map[string]Repository{"memory": memorystore.New(), "dynamodb": env.repo} {
		t.Run(name, func(t *testing.T) {
			rl := New(repo, func(o *Options) { o.SlotTTL = time.Hour })
			defer func() { _ = rl.Close() }()
			lims := []Limit{InFlight("calls", 2), PerMinute("rpm", 100)}
			reqs := []AcquireRequest{
				{EntityID: "e-" + name, Resource: "m", Consume: Consume{"calls": 1, "rpm": 1}, Limits: lims},
				{EntityID: "e-" + name, Resource: "m", Consume: Consume{"rpm": 2}, Limits: lims},
			}
			var leases []*Lease
			for range 2 {
				l, _, err := rl.AcquireAll(env.ctx, reqs)
				require.NoError(t, err)
				leases = append(leases, l)
			}
			_, _, err := rl.AcquireAll(env.ctx, reqs)
			require.ErrorIs(t, err, ErrRateLimited)
			free, err := rl.Available(env.ctx, "e-"+name, "m", WithLimits(lims...))
			require.NoError(t, err)
			require.Equal(t, int64(0), free["calls"])
			require.Equal(t, int64(94), free["rpm"])
			for _, l := range leases {
				require.NoError(t, l.Commit(env.ctx))
			}
			free, err = rl.Available(env.ctx, "e-"+name, "m", WithLimits(lims...))
			require.NoError(t, err)
			require.Equal(t, int64(2), free["calls"])
		})
	}
}
