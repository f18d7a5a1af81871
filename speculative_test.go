package limiter

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
)

func (env *testEnv) specLimiter(opts ...func(*Options)) *RateLimiter {
	return New(env.repo, append([]func(*Options){func(o *Options) { o.Clock = env.clock.now }}, opts...)...)
}

// TestSpeculativeCostTable proves the rows of the original's cost table
// (DynamoDB calls per acquire on the speculative path: single entity and
// cascade, hit and fallback) on this implementation, as recorded calls.
func TestSpeculativeCostTable(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.specLimiter()
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))

	check := env.callChecker(t)
	var l *Lease
	// An entity the cache does not know is read first (its record and
	// item): a missing item is put with the request taken.
	check("first acquire (bucket missing)", "BatchGetItem[2], PutItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	})
	check("speculative success", "UpdateItem", func() {
		l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim)
	})
	check("adjust + commit", "UpdateItem", func() {
		l.Adjust(Consume{"tpm": 5})
		mustCommit(t, l)
	})
	check("rollback", "UpdateItem", func() {
		l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1}, lim)
		env.rec.Reset()
		l.Rollback(ctx)
	})
	// CreateEntity warmed the entity cache: child and parent go out
	// together, each read first (no item of theirs is kept), and both
	// find no bucket.
	check("cascade, first acquire (warm cache, no buckets)", "GetItem, GetItem, BatchGetItem[4], TransactWriteItems[2]", func() {
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	})
	check("cascade, warm cache", "UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	})
	// A minute later every bucket is full again: its refilled state,
	// computed from the item the last write returned, in one write each.
	env.clock.advance(time.Minute)
	check("speculative success, bucket full (the refilled state)", "UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	})
	check("cascade, buckets full", "UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1, "tpm": 10}, lim))
	})

	// Fast rejection: a drained bucket whose refill would not help.
	mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 96}, lim))
	before := env.bucket("solo", "api")
	check("fast rejection", "UpdateItem!", func() {
		_, err := rl.Acquire(ctx, "solo", "api", Consume{"rpm": 50}, lim)
		rle := rateLimited(t, err)
		if assert.Len(t, rle.Statuses, 1, "statuses = %+v", rle.Statuses) {
			assert.Equal(t, "rpm", rle.Statuses[0].LimitName, "statuses = %+v", rle.Statuses)
		}
	})
	after := env.bucket("solo", "api")
	assert.Equal(t, env.n(before, "b_rpm_tk"), env.n(after, "b_rpm_tk"), "fast rejection wrote b_rpm_tk")
	assert.Equal(t, env.n(before, "b_wcu_tk"), env.n(after, "b_wcu_tk"), "fast rejection wrote b_wcu_tk")

	// Refill would help: failed UpdateItem, then the slow path.
	env.clock.advance(30 * time.Second)
	check("speculative fallback (refill would help)", "UpdateItem!, BatchGetItem[2], UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 40}, lim))
	})
	st := rl.Stats().Speculative
	assert.EqualValues(t, 1, st.Counts[store.SpecFastRejection], "fast rejections, stats = %+v", st)
	assert.EqualValues(t, 1, st.Counts[store.SpecFallbackRefillWouldHelp], "refill-would-help fallbacks, stats = %+v", st)
	assert.EqualValues(t, 2, st.Counts[store.SpecFallbackBucketMissing], "bucket-missing fallbacks, stats = %+v", st)
	assert.EqualValues(t, 6, st.Counts[store.SpecSuccess], "successes, stats = %+v", st)
	assert.EqualValues(t, 10, st.Attempts, "attempts, stats = %+v", st)
}

// TestSpeculativeCascadeIsParallel proves that with a warm cache the child
// and parent writes are in flight at the same time: a barrier holds each
// UpdateItem until both have arrived.
func TestSpeculativeCascadeIsParallel(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	lim := WithLimits(PerMinute("rpm", 100))
	warm := env.specLimiter()
	warm.Admin().CreateEntity(ctx, Entity{ID: "P"})
	warm.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	mustCommit(t, mustAcquire(t, warm, "C", "api", Consume{"rpm": 1}, lim))

	var mu sync.Mutex
	arrived := 0
	both := make(chan struct{})
	barrier := hook(func(op string, _ any) error {
		if op != "UpdateItem" {
			return nil
		}
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the other UpdateItem never started: writes are sequential")
		}
	})
	rl := New(env.withClient(barrier), func(o *Options) { o.Clock = env.clock.now })
	_, err := rl.Admin().Entity(ctx, "C") // warms rl's entity cache
	require.NoError(t, err)
	env.rec.Reset()
	mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
	got := env.calls()
	require.EqualValues(t, "UpdateItem, UpdateItem", got, "calls = %q", got)
	c, p := env.tokens("C", "api", "rpm"), env.tokens("P", "api", "rpm")
	require.Equal(t, [2]int64{98_000, 98_000}, [2]int64{c, p}, "tokens of C and P")
}

// TestRetryUnderContentionNoReread: when the optimistic lock is lost between
// read and write, one UpdateItem follows, computed from the item the refused
// write returned, and no second read. Another writer (of another library:
// it moves neither ts nor fa) moved rf and took 5: from rf just now the
// retry takes from the balance without refilling; from an rf long ago the
// bucket is full again by now, and the retry refills it first (the
// original took from the stored balance there, and the capped refill
// would have given the 10 back).
func TestRetryUnderContentionNoReread(t *testing.T) {
	for _, tc := range []struct {
		name    string
		movedRf func(env *testEnv) int64
		want    int64
	}{
		{"rf moved to now", func(env *testEnv) int64 { return env.clock.now().UnixMilli() }, 99_000 - 5_000 - 10_000},
		{"rf moved back", func(*testEnv) int64 { return 1 }, 100_000 - 10_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			lim := WithLimits(PerMinute("rpm", 100))
			mustCommit(t, mustAcquire(t, env.limiter(), "e", "api", Consume{"rpm": 1}, lim))
			env.clock.advance(time.Second)

			interfered := false
			other := ddblocal.Client(t)
			var rl *RateLimiter
			moveRf := hook(func(op string, params any) error {
				if in, ok := params.(*dynamodb.UpdateItemInput); ok && !interfered && in.ConditionExpression != nil {
					interfered = true
					// Another writer (not recorded) moves rf first.
					_, err := other.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
						TableName: in.TableName, Key: in.Key, UpdateExpression: aws.String("SET rf = :x ADD b_rpm_tk :d"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":x": schemaN(tc.movedRf(env)), ":d": schemaN(-5000)},
					})
					return err
				}
				return nil
			})
			rl = New(env.withClient(moveRf), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
			env.rec.Reset()
			mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 10}, lim))
			got := env.calls()
			require.EqualValues(t, "BatchGetItem[2], UpdateItem!, UpdateItem", got, "calls = %q, want read, lost lock, retry", got)
			require.Equal(t, tc.want, env.tokens("e", "api", "rpm"))
		})
	}
}

// TestTransactionConflictRetried: a TransactionConflict retries the same
// transaction (25/50/100 ms) instead of falling into the retry path.
func TestTransactionConflictRetried(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	env.limiter().Admin().CreateEntity(ctx, Entity{ID: "P"})
	env.limiter().Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 100))
	conflicts := 2
	inject := hook(func(op string, _ any) error {
		if op == "TransactWriteItems" && conflicts > 0 {
			conflicts--
			return &types.TransactionCanceledException{Message: aws.String("conflict"), CancellationReasons: []types.CancellationReason{
				{Code: aws.String("TransactionConflict")}, {Code: aws.String("None")}}}
		}
		return nil
	})
	rl := New(env.withClient(inject), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	var waits []time.Duration
	rl.sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
	require.Equal(t, []time.Duration{25 * time.Millisecond, 50 * time.Millisecond}, waits, "backoff")
	conflicts = 10
	_, err := rl.Acquire(ctx, "C", "api", Consume{"rpm": 1}, lim)
	require.ErrorIs(t, err, ErrUnavailable, "persistent conflict")
	require.NotErrorIs(t, err, ErrRateLimited, "persistent conflict: a false rate limit")
	c := env.tokens("C", "api", "rpm")
	require.EqualValues(t, 99_000, c, "tokens = %d, want 99000", c)
}

// TestQuietBucketNeverShards: ~1040 sequential acquires at 500/s keep one
// shard. The original never refilled the hidden wcu limit, so after about
// 1000 lifetime writes a quiet bucket doubled its shards again and again
// (it reached 32).
func TestQuietBucketNeverShards(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("1040 acquires")
	}
	env := newTestEnv(t)
	rl := env.specLimiter()
	lim := WithLimits(PerSecond("rps", 1_000_000))
	for range 1040 {
		env.clock.advance(2 * time.Millisecond)
		mustCommit(t, mustAcquire(t, rl, "quiet", "api", Consume{"rps": 1}, lim))
	}
	got := env.n(env.bucket("quiet", "api"), "shard_count")
	require.EqualValues(t, 1, got, "shard_count = %d, want 1", got)
	st := rl.Stats().Speculative
	require.EqualValues(t, 0, st.Counts[store.SpecFallbackShardDoubled], "stats = %+v", st)
	require.GreaterOrEqual(t, st.Counts[store.SpecSuccess], int64(1000), "acquires of 1040 on the fast path")
}

// TestHotPartitionDoublesShards: above 1000 writes/s the wcu limit runs out
// for real and the shard count doubles (once per exhaustion).
func TestHotPartitionDoublesShards(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("1100 acquires")
	}
	env := newTestEnv(t)
	rl := env.specLimiter()
	rl.intN = func(int) int { return 0 } // stay on shard 0, as if shards were not created yet
	lim := WithLimits(PerSecond("rps", 1_000_000))
	n := 0
	for ; n < 1300; n++ {
		env.clock.advance(100 * time.Microsecond) // 10,000 acquires/s
		mustCommit(t, mustAcquire(t, rl, "hot", "api", Consume{"rps": 1}, lim))
		// The limiter counts a doubling once its write of the new shard
		// count returned (no read of the item per acquire); the stored
		// count is checked below.
		if rl.Stats().Speculative.Counts[store.SpecFallbackShardDoubled] != 0 {
			break
		}
	}
	// wcu holds 1000 writes and refills 1000/s: at 10,000/s it runs out after
	// 1000 + 100 + 10 + 1 writes, when refill no longer covers a write.
	got := env.n(env.bucket("hot", "api"), "shard_count")
	require.EqualValues(t, 2, got, "shard_count after %d acquires", n+1)
	require.GreaterOrEqual(t, n, 1100, "acquires before the shard count doubled, want about 1111")
	require.LessOrEqual(t, n, 1200, "acquires before the shard count doubled, want about 1111")
	st := rl.Stats().Speculative
	require.EqualValues(t, 1, st.Counts[store.SpecFallbackShardDoubled], "stats = %+v", st)
}

// TestShardRetryLeaseUsesItsShard: a lease served by a retry on shard 1 can
// be adjusted, and adjusts and rolls back on shard 1. The original marked
// such a lease committed (Adjust failed, an error in the body did not roll
// back) and sent every adjustment and rollback to shard 0.
func TestShardRetryLeaseUsesItsShard(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	ns := env.repo.NamespaceID()
	// Two shard items: shard 0 drained, shard 1 full.
	for shard, tk := range []int64{0, 100_000} {
		item := bucketItem(ns, &store.Bucket{Key: store.BucketKey{EntityID: "e", Resource: "api", Shard: shard}, ShardCount: 2, RefillMs: epoch.UnixMilli(),
			States: []store.BucketState{{LimitName: "rpm", TokensMilli: tk, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000}}})
		_, err := env.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
		require.NoError(t, err)
	}
	rl := env.specLimiter()
	rl.ents.setShards("e", "api", 2)
	rl.intN = func(int) int { return 0 } // first pick shard 0; the retry's only choice is shard 1
	l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 10}, WithLimits(PerMinute("rpm", 100)))
	shard1 := func() int64 { return env.n(env.item(pkBucket(ns, "e", "api", 1), skState), "b_rpm_tk") }
	got := shard1()
	require.EqualValues(t, 90_000, got, "shard 1 tokens = %d, want 90000", got)
	err := l.Adjust(Consume{"rpm": 5})
	require.NoError(t, err, "Adjust on a shard-retry lease = %v, want it adjustable", err)
	err = l.Rollback(ctx)
	require.NoError(t, err)
	got = shard1()
	require.EqualValues(t, 100_000, got, "shard 1 tokens after rollback = %d, want 100000 (rolled back on its own shard)", got)
	got = env.tokens("e", "api", "rpm")
	require.EqualValues(t, 0, got, "shard 0 tokens = %d, want 0 (untouched)", got)
	st := rl.Stats().Speculative
	require.EqualValues(t, 1, st.Counts[store.SpecShardRetrySuccess], "stats = %+v", st)
}

// TestCascadeParentExhaustedSpeculative: a fast rejection by the parent is a
// RateLimitExceededError with no hidden wcu status, the child compensated.
// The original built a status of wcu and failed with "reserved limit name".
func TestCascadeParentExhaustedSpeculative(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.specLimiter()
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 10))
	mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
	mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 9}, lim))
	_, err := rl.Acquire(ctx, "C", "api", Consume{"rpm": 5}, lim)
	rle := rateLimited(t, err)
	for _, s := range rle.Statuses {
		require.NotEqual(t, "wcu", s.LimitName, "the hidden wcu limit is in the statuses")
	}
	require.Equal(t, "P", rle.Primary.EntityID, "statuses = %+v", rle.Statuses)
	require.Len(t, rle.Statuses, 2, "statuses = %+v", rle.Statuses)
	got := env.tokens("C", "api", "rpm")
	require.EqualValues(t, 9_000, got, "child tokens = %d, want 9000 (compensated)", got)
}

// TestParentOnlyPathKeepsOverride: the parent-only slow path uses the
// caller's limits, so a parent without stored config works (the original
// dropped them there and failed with "no limits configured").
func TestParentOnlyPathKeepsOverride(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.specLimiter()
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 60))
	mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
	mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 59}, lim)) // parent at 0
	env.clock.advance(10 * time.Second)                                    // parent earns 10
	env.rec.Reset()
	l := mustAcquire(t, rl, "C", "api", Consume{"rpm": 5}, lim)
	got := env.sortedCalls()
	assert.EqualValues(t, "BatchGetItem[1], UpdateItem, UpdateItem, UpdateItem!", got, "calls = %q, want child ok, parent refused, parent-only read and write", got)
	mustCommit(t, l)
	// C had refilled to its capacity (59 + 10 s of 1/s): its write
	// refilled it first, 60 − 5.
	c, p := env.tokens("C", "api", "rpm"), env.tokens("P", "api", "rpm")
	require.Equal(t, [2]int64{55_000, 5_000}, [2]int64{c, p}, "tokens of C and P")
	st := rl.Stats().Speculative
	require.EqualValues(t, 1, st.Counts[store.SpecParentOnlyPath], "stats = %+v", st)
}

// TestThreeLevelHierarchy: cascade goes on up while each ancestor
// cascades, on every path — acquiring on P consumes P and G, acquiring on
// C consumes C, P and the grandparent G.
func TestThreeLevelHierarchy(t *testing.T) {
	t.Parallel()
	for _, spec := range []bool{false, true} {
		t.Run(map[bool]string{false: "slow", true: "speculative"}[spec], func(t *testing.T) {
			env := newTestEnv(t)
			ctx := env.ctx
			rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = spec })
			rl.Admin().CreateEntity(ctx, Entity{ID: "G"})
			rl.Admin().CreateEntity(ctx, Entity{ID: "P", ParentID: "G", Cascade: true})
			rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
			lim := WithLimits(PerMinute("rpm", 100))
			mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 1}, lim)) // P and G
			for range 3 {
				mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim)) // C, P and G
			}
			c, p, g := env.tokens("C", "api", "rpm"), env.tokens("P", "api", "rpm"), env.tokens("G", "api", "rpm")
			require.Equal(t, [3]int64{97_000, 96_000, 96_000}, [3]int64{c, p, g}, "tokens of C, P and G")
		})
	}
}

// TestStaleDenormalisedCascadeRefreshed: a bucket first created as the
// parent side of a cascade (cascade=false) gets the entity's own cascade
// settings on its next slow-path write. The original kept the stale copy, so
// its speculative path never cascaded for that entity.
func TestStaleDenormalisedCascadeRefreshed(t *testing.T) {
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.limiter()
	rl.Admin().CreateEntity(ctx, Entity{ID: "G"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "P", ParentID: "G", Cascade: true})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	// P's bucket as the original writes it when it is created as the parent
	// side of C's cascade: cascade=false, no parent_id.
	item := bucketItem(env.repo.NamespaceID(), &store.Bucket{Key: store.BucketKey{EntityID: "P", Resource: "api"}, RefillMs: epoch.UnixMilli(),
		States: []store.BucketState{{LimitName: "rpm", TokensMilli: 99_000, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000}}})
	_, err := env.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.repo.Table()), Item: item})
	require.NoError(t, err)
	mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 100))))
	b := env.bucket("P", "api")
	c, _ := schemaGetBool(b, "cascade")
	require.True(t, c, "P bucket cascade = false after a slow-path write: %v", b)
	p, _ := schemaGetS(b, "parent_id")
	require.EqualValues(t, "G", p, "P bucket parent_id = %q, want G", p)
}

// TestFloorGuardStopsOverAdmission forces the interleaving the floor guard
// exists for: between the slow path's read and its write, a speculative
// write drains tk without moving rf. The rf lock alone would let the normal
// write through and over-admit; the floor guard refuses it, the retry
// write is refused too, and the acquire reads again and refuses for the
// shortage it sees then.
func TestFloorGuardStopsOverAdmission(t *testing.T) {
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 10))
	mustCommit(t, mustAcquire(t, env.limiter(), "e", "api", Consume{"rpm": 1}, lim)) // 9 left
	env.clock.advance(time.Second)                                                   // earns 166 milli

	other := New(env.repo, func(o *Options) { o.Clock = env.clock.now }) // a speculative client (shares the clock)
	drained := false
	drain := hook(func(op string, params any) error {
		if in, ok := params.(*dynamodb.UpdateItemInput); ok && !drained && in.ConditionExpression != nil {
			drained = true
			mustCommit(t, mustAcquire(t, other, "e", "api", Consume{"rpm": 9}, lim)) // rf unchanged, tk 0
		}
		return nil
	})
	rl := New(env.withClient(drain), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	env.rec.Reset()
	_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 5}, lim)
	rle := rateLimited(t, err)
	assert.Equal(t, int64(0), rle.Primary.Available)
	assert.Positive(t, rle.RetryAfter)
	got := env.calls()
	require.EqualValues(t, "BatchGetItem[2], BatchGetItem[2], UpdateItem, UpdateItem!, UpdateItem!, BatchGetItem[2]", got,
		"calls = %q, want read, the other client's first-sight read and write, refused normal write, refused retry, read again", got)
	require.Zero(t, env.tokens("e", "api", "rpm"), "tokens, want 0: nothing over-admitted")
}

// TestParentKeptAfterReadThenWrite: a key's first acquire writes its
// parent in the read-then-write path's transaction, which returns no item;
// the item that write leaves is computed and kept, so the next acquire of
// another key under the full parent writes its refilled state at once
// rather than having a take refused first.
func TestParentKeptAfterReadThenWrite(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	rl := env.specLimiter()
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "k1", ParentID: "P", Cascade: true})
	// k2 is created by another limiter after rl saw it without a record:
	// rl learns its parent only by reading its record, on the
	// read-then-write path.
	rl.ents.setEntity("k2", false, false, "")
	env.specLimiter().Admin().CreateEntity(ctx, Entity{ID: "k2", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k1", "api", Consume{"rpm": 1}, lim))
	env.clock.advance(time.Minute)
	check := env.callChecker(t)
	// k2's item is missing: the transaction writes both.
	check("k2's first acquire: the parent written in the transaction", "", func() {
		mustCommit(t, mustAcquire(t, rl, "k2", "api", Consume{"rpm": 1}, lim))
		require.Contains(t, env.calls(), "GetItem, BatchGetItem[2], BatchGetItem[2], TransactWriteItems[2]")
		env.rec.Reset()
	})
	env.clock.advance(time.Second) // the parent is full again
	check("k1, the parent full: both items' refilled state", "UpdateItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "k1", "api", Consume{"rpm": 1}, lim))
	})
	require.EqualValues(t, 99_000, env.tokens("P", "api", "rpm"))
}
