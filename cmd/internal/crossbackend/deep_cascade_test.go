package crossbackend_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// createChain creates org, proj (cascading to org), and the keys (each
// cascading to proj) on repo.
func createChain(t *testing.T, repo limiter.Repository, keys ...string) {
	t.Helper()
	ctx := context.Background()
	admin := limiter.New(repo)
	defer admin.Close()
	entities := []limiter.Entity{{ID: "org"}, {ID: "proj", ParentID: "org", Cascade: true}}
	for _, k := range keys {
		entities = append(entities, limiter.Entity{ID: k, ParentID: "proj", Cascade: true})
	}
	for _, e := range entities {
		_, err := admin.Admin().CreateEntity(ctx, e)
		require.NoError(t, err)
	}
}

// TestDeepCascadeAllOrNothing: on each backend, an acquire on a key of a
// three-level cascade charges the key, its project and the organisation;
// a refusal at the organisation leaves the key and the project untouched;
// a rollback gives every level back what it took.
func TestDeepCascadeAllOrNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		createChain(t, repo, "key")
		now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
		rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
		defer rl.Close()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("tpm", 10_000), limiter.PerHour("usd", 1_000_000)}))
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "gpt"}, []limiter.Limit{limiter.PerMinute("tpm", 1000), limiter.PerHour("usd", 1_000_000)}))
		avail := func() map[string]int64 {
			out := map[string]int64{}
			for _, id := range []string{"key", "proj", "org"} {
				a, err := rl.Available(ctx, id, "gpt")
				require.NoError(t, err)
				out[id] = a["tpm"]
			}
			return out
		}
		for range 2 { // the first creates the buckets, the second finds them
			lease, err := rl.Acquire(ctx, "key", "gpt", limiter.Consume{"tpm": 400, "usd": 10})
			require.NoError(t, err)
			require.NoError(t, lease.Commit(ctx))
		}
		require.Equal(t, map[string]int64{"key": 9200, "proj": 9200, "org": 200}, avail())
		_, err := rl.Acquire(ctx, "key", "gpt", limiter.Consume{"tpm": 300, "usd": 10})
		var rle *limiter.RateLimitExceededError
		require.ErrorAs(t, err, &rle)
		require.Equal(t, "org", rle.Primary.EntityID, "refused by the organisation: %v", err)
		require.Equal(t, map[string]int64{"key": 9200, "proj": 9200, "org": 200}, avail(), "after the refusal")
		lease, err := rl.Acquire(ctx, "key", "gpt", limiter.Consume{"tpm": 150, "usd": 10})
		require.NoError(t, err)
		require.Equal(t, map[string]int64{"key": 9050, "proj": 9050, "org": 50}, avail(), "while the lease holds 150")
		require.NoError(t, lease.Rollback(ctx))
		require.Equal(t, map[string]int64{"key": 9200, "proj": 9200, "org": 200}, avail(), "after the rollback")
	})
}

// TestDeepCascadeExactCount: on each backend, two limiters × 16
// goroutines acquire 1 at a time on two keys of one project of one
// organisation, each until a refusal; the organisation's limit (60 an
// hour; the others are far larger) binds: exactly its capacity is
// admitted, plus what it earns while the run lasts, and every refusal
// reports a real shortage.
func TestDeepCascadeExactCount(t *testing.T) {
	if testing.Short() {
		t.Skip("contention test: skipped with -short")
	}
	const orgCapacity = 60
	eachBackend(t, func(t *testing.T, repo limiter.Repository) {
		ctx := context.Background()
		keys := []string{"k1", "k2"}
		createChain(t, repo, keys...)
		admin := limiter.New(repo)
		require.NoError(t, admin.Admin().SetLimits(ctx, limiter.Scope{Resource: "gpt"}, []limiter.Limit{limiter.PerHour("rpm", 10_000)}))
		require.NoError(t, admin.Admin().SetLimits(ctx, limiter.Scope{Entity: "org", Resource: "gpt"}, []limiter.Limit{limiter.PerHour("rpm", orgCapacity)}))
		require.NoError(t, admin.Close())
		var admitted, falseRefusals, failures atomic.Int64
		var mu sync.Mutex
		var messages []string
		note := func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if len(messages) < 5 {
				messages = append(messages, err.Error())
			}
		}
		var wg sync.WaitGroup
		start := time.Now()
		for range 2 {
			rl := limiter.New(repo)
			defer rl.Close()
			for g := range 16 {
				key := keys[g%len(keys)]
				wg.Go(func() {
					for range 200 {
						lease, err := rl.Acquire(ctx, key, "gpt", limiter.Consume{"rpm": 1})
						var rle *limiter.RateLimitExceededError
						switch {
						case errors.As(err, &rle):
							for _, v := range rle.Violations {
								if v.Available >= v.Requested || v.EntityID != "org" {
									falseRefusals.Add(1)
									note(err)
								}
							}
							return
						case err != nil:
							failures.Add(1)
							note(err)
							return
						}
						if err := lease.Commit(ctx); err != nil {
							failures.Add(1)
							note(err)
							return
						}
						admitted.Add(1)
					}
				})
			}
		}
		wg.Wait()
		earned := int64(time.Since(start) / (time.Hour / orgCapacity))
		t.Logf("admitted %d in %v (%d earned)", admitted.Load(), time.Since(start).Round(time.Millisecond), earned)
		assert.Zero(t, failures.Load(), "errors: %v", messages)
		assert.Zero(t, falseRefusals.Load(), "refusals without a shortage at the organisation: %v", messages)
		assert.GreaterOrEqual(t, admitted.Load(), int64(orgCapacity), "admitted fewer than the organisation's capacity")
		assert.LessOrEqual(t, admitted.Load(), orgCapacity+earned, "admitted more than the organisation's capacity and refill")
	})
}

// TestCascadeDepthValidated: CreateEntity refuses an entity whose cascade
// would charge more than four entities, with a validation error matching
// ErrCascadeTooDeep; a fifth level that does not cascade is accepted.
func TestCascadeDepthValidated(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	defer rl.Close()
	for _, e := range []limiter.Entity{{ID: "l1"}, {ID: "l2", ParentID: "l1", Cascade: true}, {ID: "l3", ParentID: "l2", Cascade: true}, {ID: "l4", ParentID: "l3", Cascade: true}} {
		_, err := rl.Admin().CreateEntity(ctx, e)
		require.NoError(t, err)
	}
	_, err := rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "l5", ParentID: "l4", Cascade: true})
	require.ErrorIs(t, err, limiter.ErrCascadeTooDeep)
	require.ErrorIs(t, err, limiter.ErrValidation)
	var ve *limiter.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "parent_id", ve.Field)
	_, err = rl.Admin().Entity(ctx, "l5")
	require.ErrorIs(t, err, limiter.ErrEntityNotFound, "the refused entity was not stored")
	_, err = rl.Admin().CreateEntity(ctx, limiter.Entity{ID: "l5", ParentID: "l4"})
	require.NoError(t, err, "a child that does not cascade charges itself only")
}
