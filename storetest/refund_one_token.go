package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The one-token refund scenario: a lease of one token given back a
// millisecond after its acquire (a call that failed at once) gives its
// token back, by every path that gives back, while the refill cut stays:
// the bucket then admits its capacity and no more.

func init() {
	scenarios = append(scenarios, scenario{"RefundOneToken", refundOneToken})
}

func refundOneToken(t *testing.T, b *backend) {
	ctx := context.Background()
	boom := errors.New("llm failed")
	for _, m := range commitModes {
		rl := b.rl(m.opts...)
		for _, capacity := range []int64{100, 1} {
			lim := limiter.WithLimits(limiter.PerMinute("rpm", capacity))
			for _, way := range []struct {
				name   string
				refund func(l *limiter.Lease) error
			}{
				{"rollback", func(l *limiter.Lease) error { return l.Rollback(ctx) }},
				{"adjust-commit", func(l *limiter.Lease) error {
					if err := l.Adjust(store.Consume{"rpm": -1}); err != nil {
						return err
					}
					return l.Commit(ctx)
				}},
				{"release-commit", func(l *limiter.Lease) error {
					if err := l.Release(store.Consume{"rpm": 1}); err != nil {
						return err
					}
					return l.Commit(ctx)
				}},
				{"do", nil},
			} {
				e := "k-" + m.name + "-" + way.name + "-" + map[int64]string{100: "100", 1: "1"}[capacity]
				// The bucket exists and is full.
				lease, err := rl.Acquire(ctx, e, "gpt", store.Consume{"rpm": 1}, lim)
				require.NoError(t, err)
				require.NoError(t, lease.Rollback(ctx))
				b.clock.Advance(time.Minute)
				require.Equal(t, capacity, available(t, rl, e, "rpm", lim), "%s: full", e)

				if way.refund == nil {
					err := rl.Do(ctx, e, "gpt", store.Consume{"rpm": 1}, func(ctx context.Context, l *limiter.Lease) error {
						b.clock.Advance(time.Millisecond)
						return boom
					}, lim)
					require.ErrorIs(t, err, boom)
				} else {
					lease, err := rl.Acquire(ctx, e, "gpt", store.Consume{"rpm": 1}, lim)
					require.NoError(t, err)
					b.clock.Advance(time.Millisecond)
					require.NoError(t, way.refund(lease))
					if way.name != "rollback" {
						require.Zero(t, lease.Consumed()["rpm"], "%s: charged in whole tokens", e)
					}
				}
				got := available(t, rl, e, "rpm", lim)
				again := takeAll(t, rl, e, "gpt", "rpm", int(capacity)+10, lim)
				b.note("%s, %s, capacity %d: %d available a millisecond after the acquire, then %d admitted", m.name, way.name, capacity, got, again)
				require.Equal(t, capacity, got, "%s: the token came back", e)
				require.Equal(t, int(capacity), again, "%s: capacity plus the refill of the millisecond admitted", e)
			}
		}
		require.NoError(t, rl.Close())
	}
}
