package storetest

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// The refund scenarios: a lease gives back at most what it holds, less
// what the limit refilled while it held it, on every path that gives
// tokens back (Adjust and Commit, Release, Rollback, Do's rollback), with
// Commit synchronous and in the background; and a background commit
// answers as a synchronous one.

func init() {
	scenarios = append(scenarios,
		scenario{"RefundsCapped", refundsCapped},
		scenario{"RefundAfterRefill", refundAfterRefill},
		scenario{"BackgroundCommitExact", backgroundCommitExact},
	)
}

// commitMode is Commit synchronous or in the background.
type commitMode struct {
	name string
	opts []func(*limiter.Options)
}

var commitModes = []commitMode{
	{"sync", nil},
	{"background", []func(*limiter.Options){func(o *limiter.Options) { o.BackgroundCommit = true }}},
}

// available returns the whole tokens of limit name available now.
func available(t *testing.T, rl *limiter.RateLimiter, entity, name string, opts ...limiter.AcquireOption) int64 {
	t.Helper()
	avail, err := rl.Available(context.Background(), entity, "gpt", opts...)
	require.NoError(t, err)
	return avail[name]
}

// takeAll takes every whole token of limit name that rl admits now, at most
// max, and returns how many were admitted; every lease is committed. It
// counts what drain counts, with the clock standing still, in three calls
// instead of one per token: the count Available reports, taken in one
// acquire, then one token more, which must be refused. When either answer
// disagrees with Available, it goes on one token at a time as drain does,
// so that the count is what the limiter admitted whatever Available said.
func takeAll(t *testing.T, rl *limiter.RateLimiter, entity, resource, name string, max int, opts ...limiter.AcquireOption) int {
	t.Helper()
	ctx := context.Background()
	avail, err := rl.Available(ctx, entity, resource, opts...)
	require.NoError(t, err)
	n := int(min(avail[name], int64(max)))
	if n <= 0 {
		return drain(t, rl, entity, resource, name, max, opts...)
	}
	lease, err := rl.Acquire(ctx, entity, resource, store.Consume{name: int64(n)}, opts...)
	if errors.Is(err, limiter.ErrRateLimited) {
		return drain(t, rl, entity, resource, name, max, opts...)
	}
	require.NoError(t, err, "acquire %d of %s/%s: %v", n, entity, resource, err)
	require.NoError(t, lease.Commit(ctx))
	return n + drain(t, rl, entity, resource, name, max-n, opts...)
}

// refundsCapped: a refund larger than what the lease took gives back what
// it took, and Consumed reports what stays charged (a refund of 1,000,500
// on a lease of 500 once lifted a bucket from 1,000 to its capacity).
func refundsCapped(t *testing.T, b *backend) {
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("tpm", 10_000))
	for _, m := range commitModes {
		rl := b.rl(m.opts...)
		e := "k-" + m.name
		lease, err := rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 500}, lim)
		require.NoError(t, err)
		other, err := rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 8_500}, lim)
		require.NoError(t, err)
		require.NoError(t, other.Commit(ctx))
		require.EqualValues(t, 1_000, available(t, rl, e, "tpm", lim))

		require.NoError(t, lease.Adjust(store.Consume{"tpm": -1_000_500}))
		cut := lease.Consumed()["tpm"]
		require.NoError(t, lease.Commit(ctx))
		after := available(t, rl, e, "tpm", lim)
		b.note("%s: lease of 500 adjusted by -1000500: consumed %d, then %d committed; available %d", m.name, cut, lease.Consumed()["tpm"], after)
		assert.EqualValues(t, 0, lease.Consumed()["tpm"])
		assert.EqualValues(t, 1_500, after, "the 500 the lease took, no more")

		lease, err = rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 300}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Release(store.Consume{"tpm": 1_000}))
		require.NoError(t, lease.Commit(ctx))
		after = available(t, rl, e, "tpm", lim)
		b.note("%s: lease of 300 released 1000: consumed %d; available %d", m.name, lease.Consumed()["tpm"], after)
		assert.EqualValues(t, 1_500, after)

		// Adjusted up, then down by more: what it took, both parts.
		lease, err = rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 200}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(store.Consume{"tpm": 100}))
		require.NoError(t, lease.Adjust(store.Consume{"tpm": -math.MaxInt64 / 1000}))
		require.NoError(t, lease.Commit(ctx))
		after = available(t, rl, e, "tpm", lim)
		b.note("%s: lease of 200 adjusted by +100, then by the most negative amount: consumed %d; available %d", m.name, lease.Consumed()["tpm"], after)
		assert.EqualValues(t, 1_500, after)

		lease, err = rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 1_000}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Rollback(ctx))
		after = available(t, rl, e, "tpm", lim)
		b.note("%s: lease of 1000 rolled back: consumed %d; available %d", m.name, lease.Consumed()["tpm"], after)
		assert.EqualValues(t, 1_500, after)
		require.NoError(t, rl.Close())
		got := b.bucket(e, "gpt")
		b.note("%s: bucket %s", m.name, got)
		assert.Equal(t, "tpm=1500000/8500000", got, "9000 taken, 500 of it given back: tc counts the refunds too")
	}
}

// refundAfterRefill: a lease takes all 100 of a 100/min bucket; a minute
// later others take the 100 refilled; the lease gives its tokens back (by
// each path). It must give nothing: the 100 others took were those
// tokens, refilled, and giving them back too would admit 300 in one
// minute where capacity plus refill is 200. Held half a minute, it gives
// back the half the refill did not replace.
func refundAfterRefill(t *testing.T, b *backend) {
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 100))
	boom := errors.New("llm failed")
	for _, m := range commitModes {
		rl := b.rl(m.opts...)
		for _, way := range []struct {
			name   string
			refund func(l *limiter.Lease) error
		}{
			{"rollback", func(l *limiter.Lease) error { return l.Rollback(ctx) }},
			{"adjust-commit", func(l *limiter.Lease) error {
				if err := l.Adjust(store.Consume{"rpm": -100}); err != nil {
					return err
				}
				return l.Commit(ctx)
			}},
			{"release-commit", func(l *limiter.Lease) error {
				if err := l.Release(store.Consume{"rpm": 100}); err != nil {
					return err
				}
				return l.Commit(ctx)
			}},
			{"do", nil},
		} {
			for _, held := range []time.Duration{time.Minute, 30 * time.Second} {
				e := "k-" + m.name + "-" + way.name + "-" + held.String()
				others, again := 0, 0
				consumed := "-" // Do has no lease to ask
				if way.refund == nil {
					err := rl.Do(ctx, e, "gpt", store.Consume{"rpm": 100}, func(ctx context.Context, l *limiter.Lease) error {
						b.clock.Advance(held)
						others = takeAll(t, rl, e, "gpt", "rpm", 200, lim)
						return boom
					}, lim)
					require.ErrorIs(t, err, boom)
				} else {
					lease, err := rl.Acquire(ctx, e, "gpt", store.Consume{"rpm": 100}, lim)
					require.NoError(t, err)
					b.clock.Advance(held)
					others = takeAll(t, rl, e, "gpt", "rpm", 200, lim)
					require.NoError(t, way.refund(lease))
					consumed = strconv.FormatInt(lease.Consumed()["rpm"], 10)
				}
				again = takeAll(t, rl, e, "gpt", "rpm", 200, lim)
				b.note("%s, %s after %v: the lease took 100, others %d, then %d more (lease consumed %s)", m.name, way.name, held, others, again, consumed)
				refill := int(100 * held / time.Minute)
				assert.Equal(t, refill, others)
				assert.Equal(t, 100-refill, again, "capacity plus refill admitted, counting the refund: %d", 100+refill)
			}
		}
		require.NoError(t, rl.Close())
	}
}

// backgroundCommitExact: a commit queued by background commit gives the
// answers and balances of a synchronous one, whether the next acquire
// carries it or it is written alone first.
func backgroundCommitExact(t *testing.T, b *backend) {
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("tpm", 100))
	for _, m := range commitModes {
		rl := b.rl(m.opts...)
		admin := b.rl()
		// A refund that meets a full bucket: capped before the next
		// acquire takes its amount.
		e := "refund-" + m.name
		lease, err := rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 80}, lim)
		require.NoError(t, err)
		require.NoError(t, admin.Reset(ctx, e, "gpt"))
		require.NoError(t, lease.Adjust(store.Consume{"tpm": -80}))
		require.NoError(t, lease.Commit(ctx))
		next, err := rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 50}, lim)
		require.NoError(t, err)
		require.NoError(t, next.Commit(ctx))
		left := available(t, rl, e, "tpm", lim)
		b.note("%s: lease of 80, bucket reset, refund of 80, acquire of 50: %d left", m.name, left)
		assert.EqualValues(t, 50, left, "the refund capped at 100, then 50 taken")

		// An overrun committed before an acquire that it leaves no room for.
		e = "overrun-" + m.name
		lease, err = rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 10}, lim)
		require.NoError(t, err)
		require.NoError(t, lease.Adjust(store.Consume{"tpm": 90}))
		require.NoError(t, lease.Commit(ctx))
		_, err = rl.Acquire(ctx, e, "gpt", store.Consume{"tpm": 80}, lim)
		b.noteErr(m.name+": overrun of 90 committed, then acquire 80", err)
		require.ErrorIs(t, err, limiter.ErrRateLimited)
		left = available(t, rl, e, "tpm", lim)
		b.note("%s: %d left", m.name, left)
		assert.EqualValues(t, 0, left)
		require.NoError(t, rl.Close())
		b.note("%s: buckets %s, %s", m.name, b.bucket("refund-"+m.name, "gpt"), b.bucket(e, "gpt"))
	}
}
