package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
)

func mustAcquire(t *testing.T, rl *RateLimiter, entity, resource string, c Consume, opts ...AcquireOption) *Lease {
	t.Helper()
	l, err := rl.Acquire(context.Background(), entity, resource, c, opts...)
	require.NoError(t, err, "Acquire(%s, %s, %v): %v", entity, resource, c, err)
	return l
}

func mustCommit(t *testing.T, l *Lease) {
	t.Helper()
	err := l.Commit(context.Background())
	require.NoError(t, err, "Commit: %v", err)
}

func rateLimited(t *testing.T, err error) *RateLimitExceededError {
	t.Helper()
	var rle *RateLimitExceededError
	require.ErrorAs(t, err, &rle)
	require.ErrorIs(t, err, ErrRateLimited)
	return rle
}

// TestAcquireCreatesCascadeBuckets checks the items the first cascade acquire
// writes, attribute for attribute, against those the original writes for the
// same call (child C of parent P, rpm 10/min, consume 1, TTL multiplier 7 so
// ttl = now + 10/10×60×7 s): the same keys, GSI keys, hidden wcu limit and
// counters, the child with cascade and parent_id, the parent without; and
// besides, per limit, the exact state of the speculative write, which the
// original neither writes nor reads: ts = tk, fa = when it is full again
// (1 token at 10/min: 6 s), fp its parameters.
func TestAcquireCreatesCascadeBuckets(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		ctx := env.ctx
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
		require.NoError(t, err)
		_, err = rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
		require.NoError(t, err)
		l := mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 10)))
		mustCommit(t, l)

		ns := env.repo.NamespaceID()
		T := epoch.UnixMilli()
		want := func(entity string, cascade bool, parent string) map[string]types.AttributeValue {
			// The item's incarnation is random: any positive number.
			inc, ok, err := schemaGetN(env.bucket(entity, "api"), "inc")
			require.NoError(t, err)
			require.True(t, ok, "%s: no incarnation", entity)
			require.Positive(t, inc, "%s: the create's incarnation", entity)
			m := map[string]types.AttributeValue{
				"inc": schemaN(inc),
				"PK":  schemaS(ns + "/BUCKET#" + entity + "#api#0"), "SK": schemaS("#STATE"),
				"entity_id": schemaS(entity), "resource": schemaS("api"), "rf": schemaN(T),
				"shard_count": schemaN(1), "cascade": schemaBool(cascade),
				"ttl":    schemaN(T/1000 + 420),
				"GSI2PK": schemaS(ns + "/RESOURCE#api"), "GSI2SK": schemaS("BUCKET#" + entity + "#0"),
				"GSI3PK": schemaS(ns + "/ENTITY#" + entity), "GSI3SK": schemaS("BUCKET#api#0"),
				"GSI4PK": schemaS(ns), "GSI4SK": schemaS("BUCKET#" + entity + "#api#0"),
				"b_wcu_tk": schemaN(1000000), "b_wcu_cp": schemaN(1000000), "b_wcu_ra": schemaN(1000000),
				"b_wcu_rp": schemaN(1000), "b_wcu_tc": schemaN(0),
				"b_rpm_tk": schemaN(9000), "b_rpm_cp": schemaN(10000), "b_rpm_ra": schemaN(10000),
				"b_rpm_rp": schemaN(60000), "b_rpm_tc": schemaN(1000),
				"b_rpm_ts": schemaN(9000), "b_rpm_fa": schemaN(T + 6000),
				"b_rpm_fp": &types.AttributeValueMemberN{Value: "10000000000000100000000060000"},
			}
			if parent != "" {
				m["parent_id"] = schemaS(parent)
			}
			return m
		}
		assert.Equal(t, want("C", true, "P"), env.bucket("C", "api"), "child item")
		assert.Equal(t, want("P", false, ""), env.bucket("P", "api"), "parent item")
	})
}

// TestExhaustWaitAcquire guards against a regression the original once had
// (an existing bucket read back as new, so every acquire failed with a
// retry-after of 0 for good): after draining a bucket, an immediate acquire
// fails with a positive retry-after and one after the refill succeeds.
func TestExhaustWaitAcquire(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(Limit{Name: "rpm", Capacity: 100, RefillAmount: 100, RefillPeriod: time.Second})
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 100}, lim))

		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 100}, lim)
		rle := rateLimited(t, err)
		require.Positive(t, rle.RetryAfter, "RetryAfter")
		env.clock.advance(1100 * time.Millisecond)
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 50}, lim)
		got := l.Consumed()
		require.Equal(t, map[string]int64{"rpm": 50}, got, "Consumed()")
		mustCommit(t, l)
		require.EqualValues(t, 50_000, env.tokens("e", "api", "rpm"), "tokens, want 100 refilled, 50 taken")
	})
}

func TestAcquireWithoutEntityRecord(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10))
		for i := range 3 {
			mustCommit(t, mustAcquire(t, rl, "ghost", "api", Consume{"rpm": 1}, lim))
			got := env.tokens("ghost", "api", "rpm")
			require.Equal(t, int64(9000-1000*i), got, "after %d acquires tokens = %d", i+1, got)
		}
	})
}

// TestLimitAddedToExistingBucket: a limit the item does not have yet is
// initialised by the write that first needs it, with or without SetLimits.
// The original never initialised it, so every acquire consuming it failed
// with a retry-after of 0 for good.
func TestLimitAddedToExistingBucket(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 10))))

		// Override path: tpm appears only in the caller's limits.
		two := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 100}, two))
		b := env.bucket("e", "api")
		got := env.n(b, "b_tpm_tk")
		assert.EqualValues(t, 900_000, got, "b_tpm_tk = %d, want 900000", got)
		assert.EqualValues(t, 1_000_000, env.n(b, "b_tpm_cp"), "b_tpm_cp")
		assert.EqualValues(t, 100_000, env.n(b, "b_tpm_tc"), "b_tpm_tc")
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"tpm": 100}, two))
		got = env.tokens("e", "api", "tpm")
		assert.EqualValues(t, 800_000, got, "tokens after second tpm acquire = %d, want 800000", got)

		// Stored path: SetLimits adds tph to an existing bucket.
		ctx := env.ctx
		err := rl.Admin().SetLimits(ctx, Scope{Entity: "e", Resource: "api"}, []Limit{PerMinute("rpm", 10), PerMinute("tpm", 1000), PerHour("tph", 5000)})
		require.NoError(t, err)
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"tph": 10}))
		got = env.tokens("e", "api", "tph")
		assert.EqualValues(t, 4_990_000, got, "tph tokens = %d, want 4990000", got)
	})
}

// TestLimitNamesWithDashAndDot: limit names with "-" or "." are valid, and
// the expressions name them by index placeholders (the original put the raw
// name in a placeholder, which DynamoDB rejects as a syntax error).
func TestLimitNamesWithDashAndDot(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("tpm-x", 100), PerMinute("a.b", 100))
		for range 2 {
			l := mustAcquire(t, rl, "e", "api", Consume{"tpm-x": 10, "a.b": 1}, lim)
			err := l.Adjust(Consume{"tpm-x": 5})
			require.NoError(t, err)
			mustCommit(t, l)
		}
		got := env.tokens("e", "api", "tpm-x")
		assert.EqualValues(t, 70_000, got, "tpm-x tokens = %d, want 70000", got)
		got = env.tokens("e", "api", "a.b")
		assert.EqualValues(t, 98_000, got, "a.b tokens = %d, want 98000", got)
	})
}

func TestCascadeParentDenies(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		ctx := env.ctx
		rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
		rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
		lim := WithLimits(PerMinute("rpm", 10))
		mustCommit(t, mustAcquire(t, rl, "P", "api", Consume{"rpm": 10}, lim))
		mustCommit(t, mustAcquire(t, rl, "C2", "api", Consume{"rpm": 1}, lim)) // unrelated entity

		_, err := rl.Acquire(ctx, "C", "api", Consume{"rpm": 1}, lim)
		rle := rateLimited(t, err)
		require.Len(t, rle.Violations, 1, "violations = %+v, want the parent's rpm", rle.Violations)
		require.Equal(t, "P", rle.Primary.EntityID, "violations = %+v, want the parent's rpm", rle.Violations)
		require.Len(t, rle.Statuses, 2, "statuses = %+v, want child then parent", rle.Statuses)
		require.Equal(t, []string{"C", "P"}, []string{rle.Statuses[0].EntityID, rle.Statuses[1].EntityID}, "statuses, want child then parent")
		item := env.bucket("C", "api")
		require.Len(t, item, 0, "child bucket written although the parent denied: %v", item)
	})
}

func TestDoRollsBackOnErrorAndPanic(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 100}, lim))

		boom := errors.New("llm call failed")
		err := rl.Do(env.ctx, "e", "api", Consume{"rpm": 1, "tpm": 200}, func(ctx context.Context, l *Lease) error {
			got := env.tokens("e", "api", "tpm")
			assert.EqualValues(t, 700_000, got, "inside Do: tpm tokens = %d, want 700000 (write-on-enter)", got)
			l.Adjust(Consume{"tpm": 300})
			return boom
		}, lim)
		require.ErrorIs(t, err, boom, "Do = %v, want %v", err, boom)
		got := env.tokens("e", "api", "tpm")
		require.EqualValues(t, 900_000, got, "after rollback tpm tokens = %d, want 900000", got)

		func() {
			defer func() {
				r := recover()
				assert.Equal(t, "kaboom", r, "recovered, want the re-raised panic")
			}()
			rl.Do(env.ctx, "e", "api", Consume{"rpm": 1, "tpm": 200}, func(ctx context.Context, l *Lease) error {
				panic("kaboom")
			}, lim)
		}()
		got = env.tokens("e", "api", "tpm")
		require.EqualValues(t, 900_000, got, "after panic tpm tokens = %d, want 900000", got)
		b := env.bucket("e", "api")
		got = env.n(b, "b_tpm_tc")
		require.EqualValues(t, 100_000, got, "b_tpm_tc = %d, want 100000 (rolled back consumption is not counted)", got)

		// Success commits the adjustment.
		err = rl.Do(env.ctx, "e", "api", Consume{"rpm": 1, "tpm": 100}, func(ctx context.Context, l *Lease) error {
			return l.Adjust(Consume{"tpm": 150})
		}, lim)
		require.NoError(t, err)
		got = env.tokens("e", "api", "tpm")
		require.EqualValues(t, 650_000, got, "after commit tpm tokens = %d, want 650000", got)
	})
}

// TestAdjustIntoDebtRetryAfter reproduces the original's worked example of a
// debt: rpm 10/min adjusted to −11 tokens; a status of that limit when it is
// not consumed waits 11,000×60,000//10,000 ms + 1 ms = 66.001 s, its
// Retry-After header says 67 and its message "retry in 1m7s".
func TestAdjustIntoDebtRetryAfter(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10))
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim)
		require.NoError(t, l.Adjust(Consume{"rpm": 20})) // 10 - 21 = -11 tokens
		mustCommit(t, l)
		got := env.tokens("e", "api", "rpm")
		require.EqualValues(t, -11_000, got, "tokens = %d, want -11000", got)
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
		rle := rateLimited(t, err)
		// deficit 12 tokens (need 1, have -11) at 10/min → 72 s + 1 ms
		assert.Equal(t, 72001*time.Millisecond, rle.RetryAfter, "RetryAfter")
		// The worked example: a status of the indebted limit when it is not
		// consumed.
		s := buildLimitStatus("e", "api", store.Limit(PerMinute("rpm", 10)), store.BucketState{
			LimitName: "rpm", TokensMilli: -11_000, LastRefillMs: 0, CapacityMilli: 10_000, RefillAmountMilli: 10_000, RefillPeriodMs: 60_000,
		}, 0, 0)
		e := newRateLimitExceededError([]LimitStatus{s})
		assert.Equal(t, 66001*time.Millisecond, e.RetryAfter, "debt of 11 tokens: RetryAfter")
		assert.Equal(t, "67", e.RetryAfterHeader(), "debt of 11 tokens: Retry-After header")
		assert.EqualError(t, e, "limiter: rate limit exceeded for e on api: rpm; retry in 1m7s", "debt of 11 tokens: message")
	})
}

// TestDebtDoesNotGateOtherLimits: only limits with a positive amount gate
// admission, on every path (the original's speculative path admitted a
// request on a limit in debt that its slow path rejected).
func TestDebtDoesNotGateOtherLimits(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 1}, lim)
		l.Adjust(Consume{"rpm": 20})
		mustCommit(t, l)
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"tpm": 5}, lim))
		got := env.tokens("e", "api", "tpm")
		require.EqualValues(t, 994_000, got, "tpm tokens = %d, want 994000", got)
	})
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 100}, lim)
		err := l.Consume(Consume{"tpm": 2000})
		require.ErrorIs(t, err, ErrRateLimited, "Consume over capacity = %v", err)
		err = l.Consume(Consume{"tpm": 100})
		require.NoError(t, err)
		err = l.Release(Consume{"tpm": 50})
		require.NoError(t, err)
		got := l.Consumed()
		require.Equal(t, map[string]int64{"rpm": 1, "tpm": 150}, got, "Consumed")
		mustCommit(t, l)
		for name, err := range map[string]error{
			"Commit": l.Commit(env.ctx), "Rollback": l.Rollback(env.ctx),
			"Adjust": l.Adjust(Consume{"tpm": 1}), "Consume": l.Consume(Consume{"tpm": 1}),
		} {
			assert.ErrorIs(t, err, ErrLeaseDone, "%s after Commit = %v, want ErrLeaseDone", name, err)
		}
		b := env.bucket("e", "api")
		require.EqualValues(t, 850_000, env.n(b, "b_tpm_tk"), "tpm tk")
		require.EqualValues(t, 150_000, env.n(b, "b_tpm_tc"), "tpm tc")
	})
}

// TestCallCounts asserts the DynamoDB calls of each operation on this path.
func TestCallCounts(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := env.limiter()
	ctx := env.ctx
	rl.Admin().CreateEntity(ctx, Entity{ID: "P"})
	rl.Admin().CreateEntity(ctx, Entity{ID: "C", ParentID: "P", Cascade: true})
	lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))

	check := env.callChecker(t)
	var l *Lease
	check("acquire (new bucket)", "BatchGetItem[2], PutItem", func() {
		l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim)
	})
	check("commit without changes", "", func() { mustCommit(t, l) })
	check("acquire (existing bucket)", "BatchGetItem[2], UpdateItem", func() {
		l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim)
	})
	check("commit with adjustment", "UpdateItem", func() {
		l.Adjust(Consume{"tpm": 5})
		mustCommit(t, l)
	})
	check("cascade acquire", "BatchGetItem[4], TransactWriteItems[2]", func() {
		l = mustAcquire(t, rl, "C", "api", Consume{"rpm": 1, "tpm": 10}, lim)
	})
	check("cascade commit with adjustment", "UpdateItem, UpdateItem", func() {
		l.Adjust(Consume{"tpm": 5})
		mustCommit(t, l)
	})
	check("cascade acquire (existing)", "BatchGetItem[4], TransactWriteItems[2]", func() {
		l = mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim)
	})
	check("cascade rollback", "UpdateItem, UpdateItem", func() { l.Rollback(ctx) })
	check("available", "GetItem", func() {
		_, err := rl.Available(ctx, "solo", "api", lim)
		require.NoError(t, err)
	})
	// A calendar and a prepaid limit beside the rolling ones: their period
	// and balance buckets are read with the bucket, in one call.
	money := WithLimits(PerMinute("rpm", 100), PerCalendarMonth("usd", 1000), Prepaid("credit"))
	check("available with a month and a balance", "BatchGetItem[3]", func() {
		_, err := rl.Available(ctx, "solo", "api", money)
		require.NoError(t, err)
	})
	check("time until available with a month and a balance", "BatchGetItem[3]", func() {
		_, err := rl.TimeUntilAvailable(ctx, "solo", "api", Consume{"usd": 1, "credit": 1}, money)
		require.NoError(t, err)
	})

	// Stored limits: a miss costs one BatchGetItem, a hit nothing. SetLimits
	// resolved the limits in force before storing (to carry the spend of a
	// limit that changes kind or zone), and its write evicted only the
	// entity's slot: the miss reads that one.
	err := rl.Admin().SetLimits(ctx, Scope{Entity: "solo", Resource: "api"}, []Limit{PerMinute("rpm", 100)})
	require.NoError(t, err)
	check("resolution miss", "BatchGetItem[1]", func() {
		_, _, err := rl.Admin().ResolveLimits(ctx, "solo", "api")
		require.NoError(t, err)
	})
	check("resolution hit", "", func() {
		_, _, err := rl.Admin().ResolveLimits(ctx, "solo", "api")
		require.NoError(t, err)
	})
	// ResolveLimits read the resource's slots: the acquire reads the
	// entity-wide bucket's two, once.
	check("acquire with stored limits (entity-wide slots missing)", "BatchGetItem[2], BatchGetItem[2], UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1}))
	})
	check("acquire with stored limits (cached)", "BatchGetItem[2], UpdateItem", func() {
		mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1}))
	})
}

func TestOnUnavailable(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	ctx := env.ctx
	// A repository whose client points at a closed port.
	dead := newDeadRepo(t, env)
	rl := New(dead, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	lim := WithLimits(PerMinute("rpm", 10))

	_, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim)
	var ue *UnavailableError
	require.ErrorAs(t, err, &ue, "block")
	require.ErrorIs(t, err, ErrUnavailable, "block")
	require.Equal(t, "e", ue.EntityID, "UnavailableError = %+v", ue)
	require.Equal(t, "api", ue.Resource, "UnavailableError = %+v", ue)
	require.Error(t, ue.Cause, "UnavailableError = %+v, want a cause", ue)
	l, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 1}, lim, WithOnUnavailable(OnUnavailableAllow))
	require.NoError(t, err, "allow")
	require.True(t, l.FailedOpen(), "allow: lease %v, want a no-op lease", l)
	require.NoError(t, l.Adjust(Consume{"rpm": 5}))
	require.NoError(t, l.Commit(ctx), "no-op Commit")
	require.Empty(t, l.Consumed(), "no-op lease consumed")
	// Validation and rate-limit errors pass through whatever the mode.
	_, err = rl.Acquire(ctx, "bad#id", "api", Consume{"rpm": 1}, lim, WithOnUnavailable(OnUnavailableAllow))
	require.ErrorIs(t, err, ErrInvalidIdentifier, "invalid id under allow")
}

// TestAdjustLimitNotNamedAtAcquire: a lease covers every limit of the
// bucket on both paths, so a limit not named at Acquire (tpm estimated as 0)
// can be adjusted afterwards.
func TestAdjustLimitNotNamedAtAcquire(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 1000))
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim)) // creates the bucket
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim)
		err := l.Adjust(Consume{"tpm": 300})
		require.NoError(t, err)
		got := l.Consumed()
		require.EqualValues(t, 300, got["tpm"], "Consumed = %v", got)
		require.EqualValues(t, 1, got["rpm"], "Consumed = %v", got)
		mustCommit(t, l)
		require.EqualValues(t, 700_000, env.tokens("e", "api", "tpm"), "tpm tokens")
	})
}

// TestRefundSurvivesCancellation: Rollback and Commit write on a context
// detached from the caller's cancellation.
func TestRefundSurvivesCancellation(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10))
		mustCommit(t, mustAcquire(t, rl, "e", "api", Consume{"rpm": 1}, lim))
		ctx, cancel := context.WithCancel(context.Background())
		l, err := rl.Acquire(ctx, "e", "api", Consume{"rpm": 3}, lim)
		require.NoError(t, err)
		cancel()
		require.NoError(t, l.Rollback(ctx), "Rollback after cancel")
		got := env.tokens("e", "api", "rpm")
		require.EqualValues(t, 9_000, got, "tokens = %d, want 9000 (refunded)", got)
	})
}

// TestEnterWriteFailureFollowsOnUnavailable: a failing enter-time write is
// an infrastructure error like any other, and follows the on-unavailable
// policy (the original returned the raw error under both policies).
func TestEnterWriteFailureFollowsOnUnavailable(t *testing.T) {
	forEachPath(t, func(t *testing.T, env *testEnv) {
		throttled := errors.New("ThrottlingException: rate exceeded")
		failWrites := hook(func(op string, _ any) error {
			switch op {
			case "PutItem", "UpdateItem", "TransactWriteItems":
				return throttled
			}
			return nil
		})
		rl := New(env.withClient(failWrites), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = env.spec })
		lim := WithLimits(PerMinute("rpm", 10))
		_, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim)
		require.ErrorIs(t, err, ErrUnavailable, "block")
		require.ErrorIs(t, err, throttled, "block: want ErrUnavailable wrapping the cause")
		l, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, lim, WithOnUnavailable(OnUnavailableAllow))
		require.NoError(t, err, "allow")
		require.True(t, l.FailedOpen(), "allow: %v, want a no-op lease", l)
		item := env.bucket("e", "api")
		require.Len(t, item, 0, "bucket written: %v", item)
	})
}

// TestOnUnavailableFromSystemConfig: without a per-call mode, the stored
// system on_unavailable decides.
func TestOnUnavailableFromSystemConfig(t *testing.T) {
	env := newTestEnv(t)
	require.NoError(t, env.limiter().Admin().SetSystemDefaults(env.ctx, nil, OnUnavailableAllow))
	failWrites := hook(func(op string, _ any) error {
		if op == "PutItem" || op == "UpdateItem" {
			return errors.New("boom")
		}
		return nil
	})
	rl := New(env.withClient(failWrites), func(o *Options) { o.Clock = env.clock.now })
	l, err := rl.Acquire(env.ctx, "e", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 10)))
	require.NoError(t, err, "stored allow")
	require.True(t, l.FailedOpen(), "stored allow: %v, want a no-op lease", l)
}

func TestAvailableAndTimeUntilAvailable(t *testing.T) {
	t.Parallel()
	forEachPath(t, func(t *testing.T, env *testEnv) {
		rl := env.limiter()
		lim := WithLimits(PerMinute("rpm", 10), PerMinute("tpm", 600))
		got, err := rl.Available(env.ctx, "e", "api", lim)
		require.NoError(t, err, "Available before any acquire")
		require.EqualValues(t, 10, got["rpm"], "Available before any acquire = %v", got)
		require.EqualValues(t, 600, got["tpm"], "Available before any acquire = %v", got)
		l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1, "tpm": 100}, lim)
		l.Adjust(Consume{"tpm": 560}) // 600 - 660 = -60
		mustCommit(t, l)
		got, _ = rl.Available(env.ctx, "e", "api", lim)
		require.EqualValues(t, 9, got["rpm"], "Available = %v", got)
		require.EqualValues(t, -60, got["tpm"], "Available = %v", got)
		wait, err := rl.TimeUntilAvailable(env.ctx, "e", "api", Consume{"tpm": 40, "rpm": 1}, lim)
		// need 100 tpm at 10/s → 10 s + 1 ms
		require.NoError(t, err, "TimeUntilAvailable")
		require.Equal(t, 10*time.Second+time.Millisecond, wait, "TimeUntilAvailable")
		env.clock.advance(10 * time.Second)
		wait, _ = rl.TimeUntilAvailable(env.ctx, "e", "api", Consume{"tpm": 40}, lim)
		require.Zero(t, wait, "TimeUntilAvailable after waiting")
	})
}

func TestBucketTTLDisabled(t *testing.T) {
	env := newTestEnv(t)
	mustCommit(t, mustAcquire(t, env.limiter(func(o *Options) { o.BucketTTLPeriods = 0 }), "e", "api", Consume{"rpm": 1}, WithLimits(PerMinute("rpm", 10))))
	require.NotContains(t, env.bucket("e", "api"), "ttl", "ttl written with multiplier 0")
	got := bucketTTLSeconds(storeLimits([]Limit{PerMinute("rpm", 100), PerHour("tph", 50).WithBurst(100)}), 7)
	require.EqualValues(t, 100*3600/50*7, got, "bucketTTLSeconds = %d, want the slowest limit's time to fill × 7", got)
}

// TestEmptyLimitOverride: WithLimits() with no limits checks nothing and, on
// the read-then-write path, costs no call.
func TestEmptyLimitOverride(t *testing.T) {
	env := newTestEnv(t)
	rl := env.limiter()
	env.rec.Reset()
	l := mustAcquire(t, rl, "e", "api", Consume{"rpm": 1_000_000}, WithLimits())
	mustCommit(t, l)
	got := env.calls()
	require.EqualValues(t, "", got, "calls = %q", got)
}
