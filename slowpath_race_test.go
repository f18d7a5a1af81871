package limiter

import (
	"context"
	"fmt"
	"runtime"
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

// TestLostCreateRaceReadsAgain: two keys cascade to one parent, and no
// bucket exists yet. While the first acquire on k1 creates k1 and P in one
// transaction, an acquire on k2 creates k2 and P first: the create fails
// (P exists) and so does the retry write (k1 does not). That is a lost
// race, not a shortage: the acquire reads again and is admitted. It used
// to be refused with a Retry-After of zero.
func TestLostCreateRaceReadsAgain(t *testing.T) {
	env := newTestEnv(t)
	cascadeTo(t, env.limiter(), "P", "k1", "k2")
	lim := WithLimits(PerMinute("rpm", 100))
	other := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	raced := false
	race := hook(func(op string, _ any) error {
		if op != "TransactWriteItems" || raced {
			return nil
		}
		raced = true
		l, err := other.Acquire(context.Background(), "k2", "api", Consume{"rpm": 1}, lim)
		if err != nil {
			return err
		}
		return l.Commit(context.Background())
	})
	rl := New(env.withClient(race), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	broken := brokenRefusals.Load()

	mustCommit(t, mustAcquire(t, rl, "k1", "api", Consume{"rpm": 1}, lim))
	require.True(t, raced, "the hook never raced the create")
	assert.Equal(t, int64(98_000), env.tokens("P", "api", "rpm"), "P: both acquires")
	assert.Equal(t, int64(99_000), env.tokens("k1", "api", "rpm"))
	assert.Equal(t, int64(99_000), env.tokens("k2", "api", "rpm"))
	assert.Equal(t, broken, brokenRefusals.Load(), "refusals built without a shortage")
}

// raceEnv is a bucket "e" (rpm 100/min, 99 left) and a limiter on the
// read-then-write path whose first `rounds` attempts lose the race: before
// each of their writes another writer empties the bucket and moves its
// refill timestamp, and before the next read it fills the bucket again.
// The limiter's backoffs are recorded, not slept.
type raceEnv struct {
	env    *testEnv
	rl     *RateLimiter
	lim    AcquireOption
	waits  []time.Duration
	reads  int
	writes int
}

func newRaceEnv(t *testing.T, rounds int) *raceEnv {
	env := newTestEnv(t)
	r := &raceEnv{env: env, lim: WithLimits(PerMinute("rpm", 100))}
	mustCommit(t, mustAcquire(t, env.limiter(), "e", "api", Consume{"rpm": 1}, r.lim))

	other := ddblocal.Client(t) // not recorded
	key := bucketPrimaryKey(env.repo.NamespaceID(), "e", "api", 0)
	set := func(expr string, values map[string]types.AttributeValue) error {
		_, err := other.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: aws.String(env.repo.Table()), Key: key, UpdateExpression: aws.String(expr), ExpressionAttributeValues: values,
		})
		return err
	}
	interfere := hook(func(op string, params any) error {
		switch in := params.(type) {
		case *dynamodb.BatchGetItemInput:
			r.reads++
			if r.reads > 1 && r.reads <= rounds+1 {
				return set("SET b_rpm_tk = :full", map[string]types.AttributeValue{":full": schemaN(100_000)})
			}
		case *dynamodb.UpdateItemInput:
			if in.ConditionExpression != nil && r.reads <= rounds {
				// Empty, refilled just now (each time a moment earlier, so
				// that no write's condition on the item holds twice).
				r.writes++
				rf := env.clock.now().UnixMilli() - int64(r.writes)
				return set("SET b_rpm_tk = :zero, rf = :rf", map[string]types.AttributeValue{":zero": schemaN(0), ":rf": schemaN(rf)})
			}
		}
		return nil
	})
	r.rl = New(env.withClient(interfere), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	r.rl.sleep = func(_ context.Context, d time.Duration) error { r.waits = append(r.waits, d); return nil }
	env.rec.Reset()
	return r
}

// TestLostRaceReadsAgain: the first attempt reads 99 tokens, and both its
// normal write and its retry are refused (another writer took the tokens
// meanwhile); the acquire waits a backoff, reads again and is admitted.
func TestLostRaceReadsAgain(t *testing.T) {
	r := newRaceEnv(t, 1)
	broken := brokenRefusals.Load()
	mustCommit(t, mustAcquire(t, r.rl, "e", "api", Consume{"rpm": 1}, r.lim))
	assert.Equal(t, "BatchGetItem[2], UpdateItem!, UpdateItem!, BatchGetItem[2], UpdateItem", r.env.calls())
	require.Len(t, r.waits, 1)
	assert.GreaterOrEqual(t, r.waits[0], raceBackoffBase/2, "backoff, want in [%v, %v]", raceBackoffBase/2, raceBackoffBase)
	assert.LessOrEqual(t, r.waits[0], raceBackoffBase, "backoff, want in [%v, %v]", raceBackoffBase/2, raceBackoffBase)
	assert.Equal(t, int64(2_000), r.env.n(r.env.bucket("e", "api"), bucketAttr("rpm", fieldTotalConsumed)))
	assert.Equal(t, broken, brokenRefusals.Load(), "refusals built without a shortage")
}

// TestLostRacesExhausted: every attempt reads tokens enough and loses the
// race for them. The acquire reads again maxRaceAttempts times, with
// jittered backoffs, then is refused with a positive Retry-After; nothing
// is consumed.
func TestLostRacesExhausted(t *testing.T) {
	r := newRaceEnv(t, maxRaceAttempts)
	broken := brokenRefusals.Load()

	_, err := r.rl.Acquire(r.env.ctx, "e", "api", Consume{"rpm": 1}, r.lim)
	rle := rateLimited(t, err)
	assert.Equal(t, maxRaceAttempts, r.reads, "reads")
	assert.Equal(t, 3*maxRaceAttempts, len(r.env.rec.Calls()), "calls: a read, a normal write and a retry per attempt: %s", r.env.calls())
	require.Len(t, r.waits, maxRaceAttempts-1)
	for n, w := range r.waits {
		d := min(raceBackoffBase<<n, raceBackoffMax)
		assert.GreaterOrEqual(t, w, d/2, "backoff %d, want in [%v, %v]", n, d/2, d)
		assert.LessOrEqual(t, w, d, "backoff %d, want in [%v, %v]", n, d/2, d)
	}
	assert.GreaterOrEqual(t, rle.RetryAfter, raceBackoffMax/2, "the refusal's Retry-After is the next backoff")
	assert.Equal(t, broken, brokenRefusals.Load(), "refusals built without a shortage")
	assert.Equal(t, int64(1_000), r.env.n(r.env.bucket("e", "api"), bucketAttr("rpm", fieldTotalConsumed)), "tc: nothing consumed by the refused acquire")
}

// TestLostRaceDeadline: when the context's deadline comes before the next
// backoff would end, no attempt follows and no sleep is made.
func TestLostRaceDeadline(t *testing.T) {
	rl := New(newMemory())
	rl.intN = func(n int) int { return n - 1 } // the longest backoff: raceBackoffBase
	slept := false
	rl.sleep = func(context.Context, time.Duration) error { slept = true; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), raceBackoffBase/2)
	defer cancel()
	again, wait, err := rl.afterLostRace(ctx, 0)
	require.NoError(t, err)
	assert.False(t, again)
	assert.Equal(t, raceBackoffBase, wait)
	assert.False(t, slept)

	again, wait, err = rl.afterLostRace(context.Background(), 0)
	require.NoError(t, err)
	assert.True(t, again)
	assert.True(t, slept)
	assert.Equal(t, raceBackoffBase, wait)
}

// TestRefusalRetryAfterPositive: every refusal carries a positive
// Retry-After. One built from statuses that do not explain it (an exceeded
// status with no Retry-After, or none exceeded) gets minRetryAfter and is
// counted as a broken refusal (TestMain fails the run on any; the ones
// this test builds on purpose are taken back at its end).
func TestRefusalRetryAfterPositive(t *testing.T) {
	var made int64
	t.Cleanup(func() { brokenRefusals.Add(-made) })
	lim := PerMinute("rpm", 100)
	for _, tc := range []struct {
		name     string
		statuses []LimitStatus
		want     time.Duration
		broken   bool
	}{
		{"shortage", []LimitStatus{{LimitName: "rpm", Limit: lim, Requested: 1, Exceeded: true, RetryAfter: 601 * time.Millisecond}}, 601 * time.Millisecond, false},
		{"exceeded without a wait", []LimitStatus{{LimitName: "rpm", Limit: lim, Requested: 1, Available: 50, Exceeded: true}}, minRetryAfter, true},
		{"nothing exceeded", []LimitStatus{{LimitName: "rpm", Limit: lim, Requested: 1, Available: 50}}, minRetryAfter, true},
		{"negative", []LimitStatus{{LimitName: "rpm", Limit: lim, Requested: 1, Exceeded: true, RetryAfter: -time.Second}}, minRetryAfter, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := brokenRefusals.Load()
			e := newRateLimitExceededError(tc.statuses)
			assert.Equal(t, tc.want, e.RetryAfter)
			assert.Equal(t, tc.want, e.Primary.RetryAfter)
			for _, v := range e.Violations {
				assert.Positive(t, v.RetryAfter, "violation %s", v.LimitName)
			}
			counted := brokenRefusals.Load() - before
			made += counted
			assert.Equal(t, map[bool]int64{false: 0, true: 1}[tc.broken], counted, "broken refusals counted")
		})
	}
}

// TestContendedStatuses: a refusal after lost races marks every limit
// asked for exceeded, with at least the backoff as Retry-After.
func TestContendedStatuses(t *testing.T) {
	lim := PerMinute("rpm", 100)
	in := []LimitStatus{
		{EntityID: "k", LimitName: "rpm", Limit: lim, Requested: 1, Available: 40},
		{EntityID: "k", LimitName: "tpm", Limit: lim, Requested: 0, Available: 40},
		{EntityID: "p", LimitName: "rpm", Limit: lim, Requested: 1, Available: 9, Exceeded: true, RetryAfter: time.Second},
	}
	out := contendedStatuses(in, 20*time.Millisecond)
	assert.Equal(t, []bool{true, false, true}, []bool{out[0].Exceeded, out[1].Exceeded, out[2].Exceeded})
	assert.Equal(t, []time.Duration{20 * time.Millisecond, 0, time.Second}, []time.Duration{out[0].RetryAfter, out[1].RetryAfter, out[2].RetryAfter})
	assert.False(t, in[0].Exceeded, "the input is not modified")
	e := newRateLimitExceededError(out)
	assert.Equal(t, time.Second, e.RetryAfter, fmt.Sprint(e))
}

// TestFallbacksCoalesce: 16 goroutines of one limiter acquire at once on a
// key that cascades to its parent (known to it), before any bucket exists.
// All fall back from the speculative path; one reads and creates both buckets
// while the 15 others wait for it, then their speculative writes apply:
// one transaction instead of one per goroutine, and every acquire
// admitted.
func TestFallbacksCoalesce(t *testing.T) {
	env := newTestEnv(t)
	cascadeTo(t, env.limiter(), "P", "k")
	lim := WithLimits(PerMinute("rpm", 100))
	g := newGate("BatchGetItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now })
	rl.ents.setEntity("k", true, true, "P") // as read before: no first-sight read
	key := store.BucketKey{EntityID: "k", Resource: "api"}
	env.rec.Reset()

	const n = 16
	errs := acquireBehindLeader(t, g, rl, key, n, lim)
	for i, err := range errs {
		assert.NoError(t, err, "acquire %d", i)
	}
	assert.Equal(t, 1, env.rec.Count("TransactWriteItems"), "calls: %s", env.calls())
	assert.Equal(t, 1, env.rec.Count("BatchGetItem"), "the leader's read (the child and its parent, known): %s", env.calls())
	assert.Equal(t, int64(100_000-n*1_000), env.tokens("P", "api", "rpm"))
	assert.Equal(t, int64(100_000-n*1_000), env.tokens("k", "api", "rpm"))
	st := rl.Stats().Speculative
	assert.Equal(t, int64(n), st.Counts[store.SpecFallbackBucketMissing], "stats %+v", st)
	assert.Equal(t, int64(n-1), st.Counts[store.SpecSuccess], "stats %+v", st)
}

// TestLostRaceFullParentWrites: a parent full whenever it is written (a
// project of many keys) is taken from by another process between this
// one's read and its write. The read-then-write is conditioned on the
// parent still being full, not on it being unchanged: it applies at once,
// and the parent holds what one bucket taken from in turn holds.
func TestLostRaceFullParentWrites(t *testing.T) {
	env := newTestEnv(t)
	cascadeTo(t, env.limiter(), "P", "k1", "k2")
	lim := WithLimits(PerMinute("rpm", 100))
	// Fast-path writes take the parent's wcu below its capacity: the
	// write refills it too.
	spec := env.specLimiter()
	for _, k := range []string{"k1", "k2", "k1", "k1"} {
		mustCommit(t, mustAcquire(t, spec, k, "api", Consume{"rpm": 1}, lim))
	}
	require.Less(t, env.n(env.bucket("P", "api"), "b_wcu_tk"), env.n(env.bucket("P", "api"), "b_wcu_cp"))
	env.clock.advance(time.Minute)
	// The other process's clock is 2 s behind: its write leaves the
	// parent 1 short of full 2 s before this one's, and 3⅓ refill since.
	other := New(env.repo, func(o *Options) { o.Clock = func() time.Time { return env.clock.now().Add(-2 * time.Second) } },
		func(o *Options) { o.SpeculativeWrites = false })
	raced, writes := false, 0
	race := hook(func(op string, _ any) error {
		if op != "TransactWriteItems" {
			return nil
		}
		writes++
		if raced {
			return nil
		}
		raced = true
		l, err := other.Acquire(context.Background(), "k2", "api", Consume{"rpm": 1}, lim)
		if err != nil {
			return err
		}
		return l.Commit(context.Background())
	})
	rl := New(env.withClient(race), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.SpeculativeWrites = false })
	mustCommit(t, mustAcquire(t, rl, "k1", "api", Consume{"rpm": 1}, lim))
	require.True(t, raced, "the hook never raced the write")
	assert.Equal(t, 1, writes, "one transaction: the parent's write applied though the other process moved the parent")
	item := env.bucket("P", "api")
	assert.Equal(t, []int64{99_000, env.clock.now().UnixMilli()}, []int64{env.n(item, "b_rpm_tk"), env.n(item, "rf")}, "P: full when both took, less this one's")
	assert.EqualValues(t, 6_000, env.n(item, "b_rpm_tc"), "P: every take counted")
	assert.Equal(t, env.n(item, "b_wcu_cp"), env.n(item, "b_wcu_tk"), "P: wcu refilled to its capacity")
	assert.Equal(t, int64(99_000), env.tokens("k1", "api", "rpm"))
}

// cascadeTo creates entity parent and each of keys as its child, cascading.
func cascadeTo(t *testing.T, rl *RateLimiter, parent string, keys ...string) {
	t.Helper()
	ctx := context.Background()
	_, err := rl.Admin().CreateEntity(ctx, Entity{ID: parent})
	require.NoError(t, err)
	for _, k := range keys {
		_, err := rl.Admin().CreateEntity(ctx, Entity{ID: k, ParentID: parent, Cascade: true})
		require.NoError(t, err)
	}
}

// acquireBehindLeader has n goroutines of rl acquire and commit one rpm
// of key at once while g holds its call: once the leader has reached g and
// the n-1 others wait for it (coalesce), g is released. It returns each
// goroutine's error.
func acquireBehindLeader(t *testing.T, g *gate, rl *RateLimiter, key store.BucketKey, n int, lim AcquireOption) []error {
	t.Helper()
	ctx := context.Background()
	g.hold()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := rl.Acquire(ctx, key.EntityID, key.Resource, Consume{"rpm": 1}, lim)
			if err == nil {
				err = l.Commit(ctx)
			}
			errs[i] = err
		})
	}
	g.await(t, "the leader never reached the gate")
	deadline := time.Now().Add(10 * time.Second)
	for rl.slowFlights.waiting(key) < n-1 {
		if time.Now().After(deadline) {
			g.release()
			t.Fatalf("waiting for the leader: %d, want %d", rl.slowFlights.waiting(key), n-1)
		}
		runtime.Gosched()
	}
	g.release()
	wg.Wait()
	return errs
}
