package limiter

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// coldRepo opens another repository on env's table and namespace, as
// another process would: it keeps no item yet.
func coldRepo(t *testing.T, env *testEnv, optFns ...func(*DynamoDBOptions)) *dynamoRepository {
	t.Helper()
	repo, err := openDynamo(env.ctx, env.client, append([]func(*DynamoDBOptions){func(o *DynamoDBOptions) {
		o.Table, o.Namespace, o.Now = env.repo.Table(), "default", env.clock.now
	}}, optFns...)...)
	require.NoError(t, err)
	env.rec.Reset()
	return repo
}

// knownWithoutRecord has rl's entity cache hold ids as entities without a
// record, as a read of them leaves it: rl's acquires of them make no
// first-sight read (which would leave the item kept), so that its writes
// start from no kept item.
func knownWithoutRecord(rl *RateLimiter, ids ...string) {
	for _, id := range ids {
		rl.ents.setEntity(id, false, false, "")
	}
}

// burst acquires 1 of limit name from id until refused, at the frozen
// clock's instant, and returns how many were admitted.
func burst(t *testing.T, rl *RateLimiter, id string, lim AcquireOption) int {
	t.Helper()
	for n := 0; ; n++ {
		l, err := rl.Acquire(context.Background(), id, "api", Consume{"rpm": 1}, lim)
		if errors.Is(err, ErrRateLimited) {
			return n
		}
		require.NoError(t, err)
		require.NoError(t, l.Commit(context.Background()))
		require.Less(t, n, 1000, "no refusal")
	}
}

// exactAvailable returns the whole tokens of limit rpm of id's item as
// stored, refilled to now with the limiter's arithmetic: what an exact
// bucket holds.
func exactAvailable(env *testEnv, id string, now time.Time) int64 {
	item := env.bucket(id, "api")
	tk, _ := bucketmath.Refill(env.n(item, "b_rpm_tk"), env.n(item, "rf"), now.UnixMilli(),
		env.n(item, "b_rpm_cp"), env.n(item, "b_rpm_ra"), env.n(item, "b_rpm_rp"))
	return bucketmath.FloorDiv(tk, 1000)
}

// TestSpeculativeFullBucketOneWrite: a bucket that has refilled to its
// capacity takes one write per acquire on the speculative path: the
// refilled state, computed from the item the repository's last write
// returned, conditioned on the item being unchanged. Without a kept item
// (another process, or one evicted) the item is read first, and the
// refilled state written from it: a read and a write. Without any cache
// the take is refused (the bucket may be full: fa is not after now) and
// returns the item, from which the refilled state is written: two writes.
func TestSpeculativeFullBucketOneWrite(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.specLimiter()
	lim := WithLimits(PerMinute("rpm", 100))
	check := env.callChecker(t)
	acquire := func(rl *RateLimiter, n int64) {
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": n}, lim))
	}
	check("new bucket: the entity read first, the item put", "BatchGetItem[2], PutItem", func() { acquire(rl, 1) })
	env.clock.advance(time.Minute)
	check("full, item kept: the refilled state", "UpdateItem", func() { acquire(rl, 1) })
	now := env.clock.now().UnixMilli()
	item := env.bucket("e", "api")
	require.Equal(t, []int64{99_000, now, 99_000, now + 600}, []int64{env.n(item, "b_rpm_tk"), env.n(item, "rf"), env.n(item, "b_rpm_ts"), env.n(item, "b_rpm_fa")})
	check("not full: the take", "UpdateItem", func() { acquire(rl, 1) })
	item = env.bucket("e", "api")
	require.Equal(t, []int64{98_000, now, 98_000, now + 1200}, []int64{env.n(item, "b_rpm_tk"), env.n(item, "rf"), env.n(item, "b_rpm_ts"), env.n(item, "b_rpm_fa")})

	env.clock.advance(time.Minute)
	cold := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	knownWithoutRecord(cold, "e")
	check("full, no item kept: the item read, the refilled state", "GetItem, UpdateItem", func() { acquire(cold, 1) })
	check("the item kept now: the take", "UpdateItem", func() { acquire(cold, 1) })
	require.EqualValues(t, 98_000, env.tokens("e", "api", "rpm"))

	// No cache at all: every full bucket costs the refused take.
	env.clock.advance(time.Minute)
	none := New(coldRepo(t, env, func(o *DynamoDBOptions) { o.BucketCacheSize = -1 }), func(o *Options) { o.Clock = env.clock.now })
	knownWithoutRecord(none, "e")
	check("full, no cache", "UpdateItem!, UpdateItem", func() { acquire(none, 1) })
	check("not full, no cache: the take", "UpdateItem", func() { acquire(none, 1) })
	st := rl.Stats().Speculative
	require.EqualValues(t, 2, st.Counts[store.SpecSuccess], "stats %+v", st)
	require.EqualValues(t, 0, st.Fallbacks()-st.Counts[store.SpecFallbackBucketMissing], "stats %+v", st)
}

// TestSpeculativeIdleBurstDynamoDB is the measure on DynamoDB Local:
// a 100/min bucket, one token taken, 60 s idle, then a burst at one
// instant admits exactly 100 (199 before), also through a repository that
// keeps no item, with the cascade's parent, and with background commit
// folding a lease's charge into the burst's first write.
func TestSpeculativeIdleBurstDynamoDB(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 100))
	for _, tc := range []struct {
		name, id string
		rl       func() *RateLimiter
		adj      bool
	}{
		{"item kept", "kept", func() *RateLimiter { return env.specLimiter() }, false},
		{"no item kept", "cold", func() *RateLimiter {
			return New(coldRepo(t, env, func(o *DynamoDBOptions) { o.BucketCacheSize = -1 }), func(o *Options) { o.Clock = env.clock.now })
		}, false},
		{"background commit", "bg", func() *RateLimiter { return env.specLimiter(func(o *Options) { o.BackgroundCommit = true }) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := tc.rl()
			l := mustAcquire(t, rl, tc.id, "api", Consume{"rpm": 1}, lim)
			if tc.adj {
				require.NoError(t, l.Adjust(Consume{"rpm": 1}))
			}
			mustCommit(t, l)
			env.clock.advance(time.Minute)
			got := burst(t, rl, tc.id, lim)
			if tc.adj {
				// The queued charge of 1 goes out with a write of the
				// burst (the fold refused while the bucket may be full,
				// it is requeued and folded into a later take), after the
				// refill rather than before it as a synchronous commit
				// writes it: 99 or 100, never more.
				require.LessOrEqual(t, got, 100)
				require.GreaterOrEqual(t, got, 99)
			} else {
				require.Equal(t, 100, got)
			}
			require.NoError(t, rl.Close())
		})
	}
	rl := env.specLimiter()
	rl.Admin().CreateEntity(env.ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(env.ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
	env.clock.advance(time.Minute)
	require.Equal(t, 100, burst(t, rl, "C", lim))
	require.EqualValues(t, 0, env.tokens("P", "api", "rpm"))
}

// TestForeignWritesNeverOverAdmit: the Python library (and versions of this
// one before the exact state) write bucket items without b_L_ts, b_L_fa
// and b_L_fp. Each of their writes, simulated here with the raw SDK as the
// Python library sends it, leaves the speculative write's exact state
// stale; the speculative write must then refuse and write the exact state,
// never take more than an exact bucket holds: a burst at one instant
// admits exactly the whole tokens the item holds, refilled to now.
func TestForeignWritesNeverOverAdmit(t *testing.T) {
	t.Parallel()
	n := func(v int64) types.AttributeValue { return schemaN(v) }
	for _, tc := range []struct {
		name string
		// foreign is the other library's write of item key at now.
		foreign func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, now int64)
		lim     Limit // the limit the burst resolves (after a limit change: the new one)
	}{
		{
			// A lease's refund: ADD to tk, tc down. The bucket, 1 of 100
			// after a 99 take 30 s ago, holds 51 tokens and is full again
			// with the 50 refilled; the stale fa (full 59.4 s after the
			// take) would let the take subtract from the stored 51.
			name: "refund",
			foreign: func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, _ int64) {
				_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(env.repo.Table()), Key: key,
					UpdateExpression:          aws.String("ADD b_rpm_tk :g, b_rpm_tc :ng"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":g": n(50_000), ":ng": n(-50_000)},
				})
				require.NoError(t, err)
			},
			lim: PerMinute("rpm", 100),
		},
		{
			// The speculative write of the original: ADD −1 to tk and wcu.
			name: "speculative write",
			foreign: func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, _ int64) {
				_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(env.repo.Table()), Key: key,
					UpdateExpression:          aws.String("ADD b_rpm_tk :neg, b_rpm_tc :pos, b_wcu_tk :wneg, b_wcu_tc :wpos"),
					ConditionExpression:       aws.String("attribute_exists(PK) AND b_rpm_tk >= :pos AND b_wcu_tk >= :wpos"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":neg": n(-1000), ":pos": n(1000), ":wneg": n(-1000), ":wpos": n(1000)},
				})
				var ccf *types.ConditionalCheckFailedException
				if !errors.As(err, &ccf) { // refused when the stored balance is short: nothing written
					require.NoError(t, err)
				}
			},
			lim: PerMinute("rpm", 100),
		},
		{
			// The normal write of the original, taking 1: the refill to
			// now and the take as ADDs under the rf lock, rf = now.
			name: "normal write",
			foreign: func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, now int64) {
				item := env.bucket("e", "api")
				tk, rf := env.n(item, "b_rpm_tk"), env.n(item, "rf")
				refilled, _ := bucketmath.Refill(tk, rf, now, 100_000, 100_000, 60_000)
				_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(env.repo.Table()), Key: key,
					UpdateExpression:          aws.String("SET rf = :now ADD b_rpm_tk :d, b_rpm_tc :c"),
					ConditionExpression:       aws.String("rf = :rf"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(now), ":rf": n(rf), ":d": n(refilled - tk - 1000), ":c": n(1000)},
				})
				require.NoError(t, err)
			},
			lim: PerMinute("rpm", 100),
		},
		{
			// A limit change by the original's set_limits: SET of the
			// parameters alone (10× the rate), no tk, no rf. The stale fa,
			// computed at the old rate, lies 59.4 s after the take; at the
			// new rate the bucket was full 5.94 s after it.
			name: "limit change",
			foreign: func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, _ int64) {
				_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(env.repo.Table()), Key: key,
					UpdateExpression:          aws.String("SET b_rpm_ra = :ra, b_rpm_rp = :rp"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":ra": n(100_000), ":rp": n(6000)},
				})
				require.NoError(t, err)
			},
			lim: Limit{Name: "rpm", Capacity: 100, RefillAmount: 100, RefillPeriod: 6 * time.Second},
		},
		{
			// The original's aggregator refill: SET rf = now and ADD the
			// refill accrued (capped) to tk.
			name: "aggregator refill",
			foreign: func(t *testing.T, env *testEnv, key map[string]types.AttributeValue, now int64) {
				item := env.bucket("e", "api")
				tk, rf := env.n(item, "b_rpm_tk"), env.n(item, "rf")
				refilled, _ := bucketmath.Refill(tk, rf, now, 100_000, 100_000, 60_000)
				_, err := env.client.UpdateItem(env.ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(env.repo.Table()), Key: key,
					UpdateExpression:          aws.String("SET rf = :now ADD b_rpm_tk :d"),
					ConditionExpression:       aws.String("rf = :rf"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":now": n(now), ":rf": n(rf), ":d": n(refilled - tk)},
				})
				require.NoError(t, err)
			},
			lim: PerMinute("rpm", 100),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			rl := env.specLimiter()
			lim := WithLimits(PerMinute("rpm", 100))
			mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 99}, lim)) // 1 left, full again in 59.4 s
			env.clock.advance(30 * time.Second)
			key := bucketPrimaryKey(env.repo.NamespaceID(), "e", "api", 0)
			tc.foreign(t, env, key, env.clock.now().UnixMilli())
			want := exactAvailable(env, "e", env.clock.now())
			got := burst(t, rl, "e", WithLimits(tc.lim))
			assert.EqualValues(t, want, got, "admitted at one instant after the other library's write")
			// And a process that keeps no item decides alike.
			env.clock.advance(30 * time.Second)
			tc.foreign(t, env, key, env.clock.now().UnixMilli())
			want = exactAvailable(env, "e", env.clock.now())
			cold := New(coldRepo(t, env, func(o *DynamoDBOptions) { o.BucketCacheSize = -1 }), func(o *Options) { o.Clock = env.clock.now })
			got = burst(t, cold, "e", WithLimits(tc.lim))
			assert.EqualValues(t, want, got, "admitted at one instant after the other library's write (no item kept)")
		})
	}
}

// TestPlanFold: the exact write of an acquire with a pending adjustment
// folded in applies the adjustment first, as a store.WriteAdjust would (a
// refund capped at the capacity), then the acquire (refilling first when a
// limit may be full), each balance conditioned on the item's and each
// total moved by both.
func TestPlanFold(t *testing.T) {
	const rf = 1_700_000_000_000
	base := &store.Bucket{Key: store.BucketKey{EntityID: "e", Resource: "r"}, RefillMs: rf, States: []store.BucketState{
		{LimitName: "rpm", TokensMilli: 99_000, CapacityMilli: 100_000, RefillAmountMilli: 100_000, RefillPeriodMs: 60_000},
		{LimitName: "tpm", TokensMilli: 9_000_000, CapacityMilli: 10_000_000, RefillAmountMilli: 10_000_000, RefillPeriodMs: 60_000},
	}, Private: &itemExtras{wcu: &store.BucketState{LimitName: wcuLimitName, TokensMilli: 1_000_000, CapacityMilli: 1_000_000, RefillAmountMilli: 1_000_000, RefillPeriodMs: 1000},
		exact: []exactState{{valid: true, fullAtMs: rf + 600}, {valid: true, fullAtMs: rf + 6000}}}}
	limits := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 10_000)}
	req := store.SpeculativeRequest{Key: base.Key, Consume: Consume{"rpm": 1}, Limits: storeLimits(limits), NowMs: rf + 100}
	refund := store.BucketWrite{Kind: store.WriteAdjust, Key: base.Key, Limits: []store.LimitWrite{{Name: "tpm", ConsumedMilli: -1_000_000, CapacityMilli: 10_000_000}}}

	// 100 ms on nothing is full, and the refund fits whole: the take of
	// both would do.
	w, reason, direct := planFold(base, req, refund, nil, nil)
	require.Equal(t, store.RefusedNone, reason)
	require.False(t, direct)
	require.Equal(t, []string{"rpm", "tpm"}, []string{w.Limits[0].Name, w.Limits[1].Name})
	assert.Equal(t, []int64{99_000, 98_000, 1000}, []int64{w.Limits[0].OldMilli, w.Limits[0].NewMilli, w.Limits[0].TakenMilli})
	assert.Equal(t, []int64{9_000_000, 10_000_000, -1_000_000}, []int64{w.Limits[1].OldMilli, w.Limits[1].NewMilli, w.Limits[1].TakenMilli})
	assert.Equal(t, int64(rf), w.NewRefillMs)

	// A refund the capacity cuts: the take of both would be refused (its
	// refund must fit whole), so the exact write, the refund capped.
	capped := store.BucketWrite{Kind: store.WriteAdjust, Key: base.Key, Limits: []store.LimitWrite{{Name: "tpm", ConsumedMilli: -2_000_000, CapacityMilli: 10_000_000}}}
	w, reason, direct = planFold(base, req, capped, nil, nil)
	require.Equal(t, store.RefusedNone, reason)
	require.True(t, direct)
	assert.Equal(t, []int64{9_000_000, 10_000_000, -2_000_000}, []int64{w.Limits[1].OldMilli, w.Limits[1].NewMilli, w.Limits[1].TakenMilli}, "the refund capped")

	// A refund that brings rpm's full time before now: the exact write.
	rpmRefund := store.BucketWrite{Kind: store.WriteAdjust, Key: base.Key, Limits: []store.LimitWrite{{Name: "rpm", ConsumedMilli: -1000, CapacityMilli: 100_000}}}
	w, reason, direct = planFold(base, req, rpmRefund, nil, nil)
	require.Equal(t, store.RefusedNone, reason)
	require.True(t, direct)
	assert.Equal(t, []int64{99_000, 99_000, 0}, []int64{w.Limits[0].OldMilli, w.Limits[0].NewMilli, w.Limits[0].TakenMilli}, "refunded to 100, refilled (full), 1 taken")
	assert.Equal(t, int64(rf+100), w.NewRefillMs)

	// A minute on both are full: refilled, then the charge and the take.
	req.NowMs = rf + 60_000
	charge := store.BucketWrite{Kind: store.WriteAdjust, Key: base.Key, Limits: []store.LimitWrite{{Name: "tpm", ConsumedMilli: 500_000}}}
	w, reason, direct = planFold(base, req, charge, nil, nil)
	require.Equal(t, store.RefusedNone, reason)
	require.True(t, direct)
	assert.Equal(t, int64(rf+60_000), w.NewRefillMs)
	assert.Equal(t, []int64{99_000, 99_000, 1000}, []int64{w.Limits[0].OldMilli, w.Limits[0].NewMilli, w.Limits[0].TakenMilli})
	assert.Equal(t, []int64{9_000_000, 9_500_000, 500_000}, []int64{w.Limits[1].OldMilli, w.Limits[1].NewMilli, w.Limits[1].TakenMilli},
		"refilled to the capacity, then charged 500: the cap never absorbs a charge")

	// An acquire that does not fit once charged is refused.
	req.NowMs = rf + 100
	req.Consume = Consume{"tpm": 9_000}
	_, reason, _ = planFold(base, req, charge, nil, nil)
	assert.Equal(t, store.RefusedLimitExhausted, reason)
}

// TestFullWriteAcrossProcesses: two processes (repositories that keep
// items of their own) take from one bucket that is full whenever either
// writes. Each write refills the item and moves rf, so the item the other
// kept is stale: its write is refused and returns the item, and the
// refilled state is written from it, conditioned on every limit being
// full by now rather than on the item being unchanged, so that a third
// writer moving the item in between (here 2 s behind, as a clock may be)
// does not refuse it again; and so are its next writes from the items it
// keeps, which the other's writes since then do not refuse either. When the other process left the bucket short
// of full, that write is refused too and the take is decided again from
// the item it returns: the balances stay those of one bucket taken from
// in turn.
func TestFullWriteAcrossProcesses(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 100))
	a := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	b := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	check := env.callChecker(t)
	acquire := func(rl *RateLimiter, n int64) {
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": n}, lim))
	}
	acquire(a, 1)
	acquire(b, 1) // both keep the item now
	env.clock.advance(time.Minute)
	check("a: full, its kept item stale (b wrote since): refused, then the refilled state", "UpdateItem!, UpdateItem", func() { acquire(a, 1) })
	env.clock.advance(2 * time.Second) // 3⅓ tokens refill: full again
	check("b: full, its kept item stale: refused, then the refilled state", "UpdateItem!, UpdateItem", func() { acquire(b, 1) })
	now := env.clock.now().UnixMilli()
	item := env.bucket("e", "api")
	require.Equal(t, []int64{99_000, now, 99_000, now + 600}, []int64{env.n(item, "b_rpm_tk"), env.n(item, "rf"), env.n(item, "b_rpm_ts"), env.n(item, "b_rpm_fa")})

	// A third writer takes 1 between c's read of the item and its write of the
	// refilled state, 2 s before now: the bucket is full by now all the
	// same, and c's write applies.
	acquire(a, 1) // creates f's item
	mustCommit(t, mustAcquire(t, a, "f", "api", Consume{"rpm": 1}, lim))
	env.clock.advance(time.Minute)
	raw := ddblocal.Client(t) // not recorded
	updates := 0
	third := hook(func(op string, _ any) error {
		if op != "UpdateItem" {
			return nil
		}
		if updates++; updates != 1 {
			return nil
		}
		_, err := raw.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: aws.String(env.repo.Table()), Key: bucketPrimaryKey(env.repo.NamespaceID(), "f", "api", 0),
			UpdateExpression: aws.String("SET rf = :rf, b_rpm_tk = :tk, b_rpm_ts = :tk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":rf": &types.AttributeValueMemberN{Value: strconv.FormatInt(env.clock.now().UnixMilli()-2000, 10)},
				":tk": &types.AttributeValueMemberN{Value: "99000"},
			},
		})
		return err
	})
	c := New(env.withClient(third), func(o *Options) { o.Clock = env.clock.now })
	knownWithoutRecord(c, "f")
	check("c: no item kept, the item moved under its write from the one read", "GetItem, UpdateItem", func() {
		mustCommit(t, mustAcquire(t, c, "f", "api", Consume{"rpm": 1}, lim))
	})
	require.Equal(t, 1, updates)
	item = env.bucket("f", "api")
	now = env.clock.now().UnixMilli()
	require.Equal(t, []int64{99_000, now}, []int64{env.n(item, "b_rpm_tk"), env.n(item, "rf")}, "f: full by now, less c's take")

	env.clock.advance(time.Minute)
	acquire(a, 1)
	acquire(b, 1) // b keeps the item a left, not full any more (98 of 100)
	env.clock.advance(time.Minute)
	// a's writes of the item were refused lately: its next writes from
	// the item it keeps are conditioned on the item being full, and b's
	// write since does not refuse it.
	check("a: full, takes 50, from its kept item though b wrote since", "UpdateItem", func() { acquire(a, 50) })
	env.clock.advance(time.Second)
	want := exactAvailable(env, "e", env.clock.now()) - 1 // 50 + 1⅔ refilled, less b's 1
	check("b: its kept item says full, the item is not: refused, then the take", "UpdateItem!, UpdateItem", func() { acquire(b, 1) })
	require.Equal(t, want, exactAvailable(env, "e", env.clock.now()))
	require.EqualValues(t, 50, want)
}

// TestFullWriteManyLimitsLongIdle: a full write of an item of four limits
// (and the hidden wcu one) read long ago carries a ladder per limit; all of
// them together stay within what DynamoDB accepts in one condition (300
// operators), so the write applies instead of failing as invalid.
func TestFullWriteManyLimitsLongIdle(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000), PerHour("rph", 1_000), PerDay("rpd", 10_000))
	a := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	b := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	check := env.callChecker(t)
	acquire := func(rl *RateLimiter) {
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 10, "rph": 1, "rpd": 1}, lim))
	}
	acquire(a)
	acquire(b) // both keep the item now
	env.clock.advance(48 * time.Hour)
	knownWithoutRecord(a, "e") // known still: no first-sight read
	check("a: full, its kept item stale (b wrote since): refused, then the refilled state", "UpdateItem!, UpdateItem", func() { acquire(a) })
	item := env.bucket("e", "api")
	require.Equal(t, []int64{99_000, 9_990_000, 999_000, 9_999_000, env.clock.now().UnixMilli()},
		[]int64{env.n(item, "b_rpm_tk"), env.n(item, "b_tpm_tk"), env.n(item, "b_rph_tk"), env.n(item, "b_rpd_tk"), env.n(item, "rf")})
}

// TestUnkeptItemRefusedFromRead: an item the repository keeps no copy of
// is read before its first write; one that does not cover the request is
// refused from that read, with no write, and the refusal is the one the
// refused write of a repository without a cache gives (the same
// Retry-After); nothing is taken.
func TestUnkeptItemRefusedFromRead(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 2))
	writer := env.specLimiter()
	for range 2 {
		mustCommit(t, mustAcquire(t, writer, "e", "api", Consume{"rpm": 1}, lim))
	}
	cold := New(coldRepo(t, env), func(o *Options) { o.Clock = env.clock.now })
	none := New(coldRepo(t, env, func(o *DynamoDBOptions) { o.BucketCacheSize = -1 }), func(o *Options) { o.Clock = env.clock.now })
	knownWithoutRecord(cold, "e")
	knownWithoutRecord(none, "e")
	check := env.callChecker(t)
	var fromRead, fromWrite *RateLimitExceededError
	check("no item kept: read, refused", "GetItem", func() {
		_, err := cold.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
		fromRead = rateLimited(t, err)
	})
	check("no cache: the write refused", "UpdateItem!", func() {
		_, err := none.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
		fromWrite = rateLimited(t, err)
	})
	assert.Equal(t, fromWrite.RetryAfter, fromRead.RetryAfter)
	assert.Equal(t, fromWrite.Primary, fromRead.Primary)
	assert.EqualValues(t, 0, env.tokens("e", "api", "rpm"))
	assert.EqualValues(t, 2000, env.n(env.bucket("e", "api"), "b_rpm_tc"), "nothing taken by the refusals")
}

// TestFullWritesWhileOthersWrite: two processes take in turn from one
// bucket that is full again at each of their writes. Each is refused
// once, for the item the other moved since it kept it; from then on each
// sees from the item its write returns that the other wrote in between
// (the write before its own is not the one it decided on), and keeps its
// writes full, which the other's writes do not refuse: no write is
// refused again however long they go on. When the other stops, the item
// tells that too, and the writes from kept items go back to being
// conditioned on the item being unchanged after contendedWrites of them.
func TestFullWritesWhileOthersWrite(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	lim := WithLimits(PerMinute("rpm", 100))
	ra, rb := coldRepo(t, env), coldRepo(t, env)
	a := New(ra, func(o *Options) { o.Clock = env.clock.now })
	b := New(rb, func(o *Options) { o.Clock = env.clock.now })
	check := env.callChecker(t)
	acquire := func(rl *RateLimiter) {
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim))
	}
	key := store.BucketKey{EntityID: "e", Resource: "api"}
	contended := func(r *dynamoRepository) uint8 {
		kept, _ := r.shared.buckets.getWithKey(r.nsID, key)
		require.NotNil(t, kept, "kept item")
		return contendedOf(kept)
	}
	acquire(a)
	acquire(b)                         // both keep the item now
	env.clock.advance(2 * time.Second) // 3⅓ tokens refill: full again, and by the rungs of a full write (see fullLadders)
	check("a: its kept item stale: refused, then the refilled state", "UpdateItem!, UpdateItem", func() { acquire(a) })
	env.clock.advance(2 * time.Second)
	check("b: its kept item stale: refused, then the refilled state", "UpdateItem!, UpdateItem", func() { acquire(b) })
	for i := range 3 * contendedWrites {
		env.clock.advance(2 * time.Second)
		rl, r, name := a, ra, "a"
		if i%2 == 1 {
			rl, r, name = b, rb, "b"
		}
		check(name+" "+strconv.Itoa(i)+": full, the other wrote since: the full write", "UpdateItem", func() { acquire(rl) })
		require.Equal(t, uint8(contendedWrites), contended(r), "%s %d: contended", name, i)
	}
	for i := range contendedWrites + 2 {
		env.clock.advance(2 * time.Second)
		check("a alone "+strconv.Itoa(i), "UpdateItem", func() { acquire(a) })
		// Its first write still follows one of b's; each next follows its own.
		want := uint8(max(0, contendedWrites-i))
		require.Equal(t, want, contended(ra), "a alone %d: contended", i)
	}
	require.Equal(t, int64(99), exactAvailable(env, "e", env.clock.now()), "full, less the last take")
}
