package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/store"
)

// onRejection is a Metrics that runs fn (once) when the speculative path
// counts its first fast rejection, on the goroutine of the acquire being
// refused.
type onRejection struct {
	once sync.Once
	fn   func()
}

func (m *onRejection) AcquireDone(context.Context, AcquireOutcome, time.Duration) {}
func (m *onRejection) StoreCall(context.Context, store.StoreOp, time.Duration, error) {
}
func (m *onRejection) SpeculativeOutcome(o store.SpeculativeOutcome) {
	if o == store.SpecFastRejection {
		m.once.Do(m.fn)
	}
}

// TestMixedOutcomeRefusalRunsAgain: an acquire whose child write applied
// while its parent refused is not refused at once. Here the parent's last
// token is held by another key's lease, which is rolled back just as the
// parent refuses (after the child's write was given back): the acquire
// reads the parent, finds the token back, runs again and is admitted, as
// an exact bucket admits it. Deciding at once refused it with the token back in the parent:
// the under-admission seen under contention, where two groups of acquires
// each hold the last tokens of one item and are refused by the other.
func TestMixedOutcomeRefusalRunsAgain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "dynamodb"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var repo Repository
			var clock func() time.Time
			var env *testEnv
			if name == "memory" {
				repo, clock = newMemory(), time.Now
			} else {
				env = newTestEnv(t)
				repo, clock = env.repo, env.clock.now
			}
			lim := WithLimits(PerHour("rpm", 1))
			m := &onRejection{}
			rl := New(repo, func(o *Options) { o.Clock = clock }, func(o *Options) { o.Metrics = m })
			defer rl.Close()
			for _, e := range []Entity{{ID: "P"}, {ID: "k1", ParentID: "P", Cascade: true}, {ID: "k2", ParentID: "P", Cascade: true}} {
				_, err := rl.Admin().CreateEntity(ctx, e)
				require.NoError(t, err)
			}
			// k1's bucket exists (so that its write is speculative), full.
			warm := mustAcquire(t, rl, "k1", "api", Consume{"rpm": 1}, lim)
			require.NoError(t, warm.Rollback(ctx))
			// k2 holds the parent's only token.
			held := mustAcquire(t, rl, "k2", "api", Consume{"rpm": 1}, lim)
			m.fn = func() { require.NoError(t, held.Rollback(ctx)) }

			lease, err := rl.Acquire(ctx, "k1", "api", Consume{"rpm": 1}, lim)
			require.NoError(t, err, "refused with the parent's token given back")
			require.NoError(t, lease.Commit(ctx))
			require.Equal(t, int64(1), rl.Stats().Speculative.Counts[store.SpecFastRejection])

			// The parent is now empty for real: the next acquire reads it
			// once, finds it empty and is refused, naming the parent. On
			// DynamoDB: the two writes (the parent's refused), the child's
			// give-back and the read; no other round.
			if env != nil {
				env.rec.Reset()
			}
			_, err = rl.Acquire(ctx, "k2", "api", Consume{"rpm": 1}, lim)
			rle := rateLimited(t, err)
			require.Equal(t, "P", rle.Violations[len(rle.Violations)-1].EntityID)
			if env != nil {
				require.Equal(t, "GetItem, UpdateItem, UpdateItem, UpdateItem!", env.sortedCalls())
			}
		})
	}
}
