package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/faultproxy"
	"github.com/zaelimiter/limiter/internal/redisserver"
	"github.com/zaelimiter/limiter/redisstore"
	"github.com/zaelimiter/limiter/store"
)

// bucketCall reports whether request is a call of the store's Lua code
// that changes balances (consume, consume_each, write, as a function or a
// script): one that names a write identifier's key.
func bucketCall(request []byte) bool { return bytes.Contains(request, []byte("}:w:")) }

// TestDroppedRepliesChargedOnce: every third call that changes balances
// runs on the server, but its reply is lost (the connection closes as the
// answer begins); go-redis sends the command again (MaxRetries, 3 by
// default), and the script, which finds the key of its write identifier,
// answers from it instead of applying again. The tokens charged equal
// exactly those of the admitted and committed sequences (acquire, adjust,
// commit, on an entity and on one that cascades to its parent; eight at
// once, whose consumes the store batches), and at most a tenth of them
// fail (none: each retry goes through).
func TestDroppedRepliesChargedOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		concurrent bool
		opts       []func(*limiter.Options)
		store      []func(*redisstore.Options)
	}{
		{name: "sequential"},
		{name: "sequential, scripts", store: []func(*redisstore.Options){scriptsOnly}},
		{name: "sequential, read-then-write", opts: []func(*limiter.Options){func(o *limiter.Options) { o.SpeculativeWrites = false }}},
		{name: "sequential, background commit", opts: []func(*limiter.Options){func(o *limiter.Options) { o.BackgroundCommit = true }}},
		{name: "concurrent", concurrent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := redisserver.Prefix(t)
			direct, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = prefix })
			require.NoError(t, err)
			p := faultproxy.StartTCP(t, redisserver.Addr(t))
			c := clientRetrying(t, p.Addr, 3) // go-redis's default
			s, err := redisstore.New(c, append([]func(*redisstore.Options){func(o *redisstore.Options) { o.Prefix = prefix }}, tc.store...)...)
			require.NoError(t, err)
			at := time.Unix(1_800_000_000, 0) // the clock stands still: nothing refills
			rl := limiter.New(s, append([]func(*limiter.Options){func(o *limiter.Options) { o.Clock = func() time.Time { return at } }}, tc.opts...)...)
			ctx := context.Background()
			for _, e := range []limiter.Entity{{ID: "p"}, {ID: "c", ParentID: "p", Cascade: true}, {ID: "solo"}} {
				_, err := rl.Admin().CreateEntity(ctx, e)
				require.NoError(t, err)
			}
			p.Add(faultproxy.TCPRule{Match: bucketCall, Every: 3})

			lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))
			const sequences = 60
			var (
				mu      sync.Mutex
				charged = map[string]int64{}
				failed  []error
			)
			sequence := func(i int) {
				entity := []string{"solo", "c"}[i%2]
				est, actual := int64(100+i), int64(50+3*i)
				lease, err := rl.Acquire(ctx, entity, "api", limiter.Consume{"rpm": 1, "tpm": est}, lim)
				if err == nil {
					if err = lease.Adjust(limiter.Consume{"tpm": actual - est}); err == nil {
						err = lease.Commit(ctx)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, fmt.Errorf("sequence %d on %s: %w", i, entity, err))
					return
				}
				charged[entity] += actual * 1000
				if entity == "c" {
					charged["p"] += actual * 1000
				}
			}
			if tc.concurrent {
				var wg sync.WaitGroup
				next := make(chan int)
				for range 8 {
					wg.Go(func() {
						for i := range next {
							sequence(i)
						}
					})
				}
				for i := range sequences {
					next <- i
				}
				close(next)
				wg.Wait()
			} else {
				for i := range sequences {
					sequence(i)
				}
			}
			require.NoError(t, rl.Close())
			faults := p.Faults()
			p.Clear()
			batches, batched := s.BatchStats()
			t.Logf("%d replies dropped after their call ran; %d of %d sequences failed: %v; %d batches of %d consumes", faults, len(failed), sequences, errors.Join(failed...), batches, batched)
			require.Greater(t, faults, sequences/3, "too few faults: the test did not test")
			for _, err := range failed {
				require.ErrorIs(t, err, limiter.ErrUnavailable, "a sequence failed otherwise")
			}
			assert.LessOrEqual(t, len(failed), sequences/10, "more than 10 %% of the sequences failed")
			for _, e := range []string{"solo", "c", "p"} {
				b, err := direct.GetBucket(ctx, store.BucketKey{EntityID: e, Resource: "api"})
				require.NoError(t, err)
				require.NotNil(t, b, e)
				st, ok := b.State("tpm")
				require.True(t, ok, e)
				assert.Equal(t, charged[e], st.TotalConsumedMilli, "%s: tpm consumed = the committed sequences'", e)
				assert.Equal(t, 1_000_000_000-charged[e], st.TokensMilli, "%s: tpm balance", e)
			}
		})
	}
}

// TestDroppedReplyWithoutRetriesTakenOnce: on a client whose retries are
// off (its calls carry no write identifier), a consume whose reply is
// lost after it ran is not sent again, by go-redis or by the limiter: the
// acquire fails as unavailable, and the bucket holds the take once.
func TestDroppedReplyWithoutRetriesTakenOnce(t *testing.T) {
	prefix := redisserver.Prefix(t)
	direct, err := redisstore.New(redisserver.Client(t), func(o *redisstore.Options) { o.Prefix = prefix })
	require.NoError(t, err)
	p := faultproxy.StartTCP(t, redisserver.Addr(t))
	s, err := redisstore.New(clientRetrying(t, p.Addr, -1), func(o *redisstore.Options) { o.Prefix = prefix })
	require.NoError(t, err)
	at := time.Unix(1_800_000_000, 0) // nothing refills
	rl := limiter.New(s, func(o *limiter.Options) { o.Clock = func() time.Time { return at } })
	ctx := context.Background()
	lim := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))
	lease, err := rl.Acquire(ctx, "solo", "api", limiter.Consume{"rpm": 1, "tpm": 70}, lim)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	consumeCall := func(request []byte) bool { return bytes.Contains(request, []byte("_consume")) }
	p.Add(faultproxy.TCPRule{Match: consumeCall, Times: 1})
	_, err = rl.Acquire(ctx, "solo", "api", limiter.Consume{"rpm": 1, "tpm": 100}, lim)
	require.ErrorIs(t, err, limiter.ErrUnavailable)
	require.Equal(t, 1, p.Faults(), "the reply of one consume was dropped")
	require.NoError(t, rl.Close())

	b, err := direct.GetBucket(ctx, store.BucketKey{EntityID: "solo", Resource: "api"})
	require.NoError(t, err)
	require.NotNil(t, b)
	st, ok := b.State("tpm")
	require.True(t, ok)
	assert.Equal(t, int64(170_000), st.TotalConsumedMilli, "the committed 70 and the dropped call's 100, once")
	rpm, ok := b.State("rpm")
	require.True(t, ok)
	assert.Equal(t, int64(2_000), rpm.TotalConsumedMilli, "two takes of one request")
}
