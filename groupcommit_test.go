package limiter

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zaelimiter/limiter/store"
	"github.com/zaelimiter/limiter/store/bucketmath"
)

// gate blocks the DynamoDB calls of one operation while closed: a test
// holds a write in flight while it queues others behind it.
type gate struct {
	op      string
	mu      sync.Mutex
	open    chan struct{} // nil: calls pass
	entered chan struct{} // a blocked call arrived
}

func newGate(op string) *gate { return &gate{op: op, entered: make(chan struct{}, 64)} }

// hold makes the next calls wait until release.
func (g *gate) hold() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

// await waits, at most 10 s, for a call to arrive at the held gate; on
// a time-out it lets the calls through and fails the test with what.
func (g *gate) await(t testing.TB, what string) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		g.release()
		t.Fatal(what)
	}
}

// release lets the held calls (and later ones) through.
func (g *gate) release() {
	g.mu.Lock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
	g.mu.Unlock()
}

// step lets the held calls through and holds the next ones.
func (g *gate) step() {
	g.mu.Lock()
	close(g.open)
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) before(op string, _ any) error {
	if op != g.op {
		return nil
	}
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	if ch != nil {
		g.entered <- struct{}{}
		<-ch
	}
	return nil
}

// waitQueued waits until n requests are queued behind the write in flight
// for key (no sleeping: it yields until they are, or fails after 10 s).
func waitQueued(t *testing.T, rl *RateLimiter, key store.BucketKey, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rl.gc.mu.Lock()
		got := 0
		if s := rl.gc.slots[key]; s != nil {
			got = len(s.queue)
		}
		rl.gc.mu.Unlock()
		if got == n {
			return
		}
		require.False(t, time.Now().After(deadline), "queued for %v: %d, want %d", key, got, n)
		runtime.Gosched()
	}
}

// TestGroupCommitHotKey: 32 goroutines acquire and commit (half with an
// adjustment) on one bucket item. The writes are batched (far fewer calls
// than acquires + adjusting commits) and the item's total consumed equals
// exactly what the callers were admitted and adjusted, with tk + tc = cp
// (the clock is frozen: no refill).
func TestGroupCommitHotKey(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	rl := New(env.repo, func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.GroupCommit = true })
	lim := WithLimits(PerMinute("rpm", 1_000_000), PerMinute("tpm", 100_000_000))
	mustCommit(t, mustAcquire(t, rl, "hot", "gpt", Consume{"rpm": 1, "tpm": 1}, lim)) // create the bucket
	env.rec.Reset()

	const goroutines, each = 32, 20
	var rpm, tpm, writes atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := int64(1 + (g+i)%7)
				l, err := rl.Acquire(env.ctx, "hot", "gpt", Consume{"rpm": 1, "tpm": 100 * k}, lim)
				if !assert.NoError(t, err, "acquire") {
					return
				}
				rpm.Add(1)
				tpm.Add(100 * k)
				if i%2 == 0 {
					err := l.Adjust(Consume{"tpm": k})
					assert.NoError(t, err)
					tpm.Add(k)
					writes.Add(1)
				}
				assert.NoError(t, l.Commit(env.ctx), "commit")
			}
		})
	}
	wg.Wait()
	calls := env.rec.Count("UpdateItem")
	acquires := int64(goroutines * each)
	t.Logf("%d acquires, %d adjusting commits: %d UpdateItem calls (%.3f per acquire), %d calls in all",
		acquires, writes.Load(), calls, float64(calls)/float64(acquires), len(env.rec.Calls()))
	assert.Len(t, env.rec.Calls(), calls, "calls, want only UpdateItem: %s", env.calls())
	// Without group commit: one call per acquire and per adjusting commit.
	assert.LessOrEqual(t, int64(calls), (acquires+writes.Load())/2, "UpdateItem calls for %d acquires and %d adjusting commits: want at most half (batched)", acquires, writes.Load())
	b := env.bucket("hot", "gpt")
	for name, want := range map[string]int64{"rpm": rpm.Load() + 1, "tpm": tpm.Load() + 1} {
		tc, tk, cp := env.n(b, bucketAttr(name, fieldTotalConsumed)), env.n(b, bucketAttr(name, fieldTokens)), env.n(b, bucketAttr(name, fieldCapacity))
		assert.Equal(t, want*1000, tc, "%s: tc", name)
		assert.Equal(t, cp, tk+tc, "%s: tk %d + tc %d, want cp", name, tk, tc)
	}
}

// TestGroupCommitRefusalDecidesAlone: one write in flight; four acquires
// queue behind it (3, 3, 1 and 10 tokens) while 5 are left. Their combined
// write is refused; then each is decided alone, in queue order, on the
// states DynamoDB returned: 3 and 1 are admitted (3 + 3 would not fit, 1
// still does), the second 3 is refused after the first took its tokens, and
// 10 is refused with the Retry-After a solo acquire computes on the same
// item. Nobody who fits alone is refused; nothing is over-admitted.
func TestGroupCommitRefusalDecidesAlone(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	g := newGate("UpdateItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.GroupCommit = true })
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 94}, lim)) // 6 left
	key := store.BucketKey{EntityID: "k", Resource: "api"}
	env.rec.Reset()

	g.hold()
	first := make(chan error, 1)
	go func() {
		_, err := rl.Acquire(env.ctx, "k", "api", Consume{"rpm": 1}, lim)
		first <- err
	}()
	<-g.entered // the first write is in flight: 5 will be left
	amounts := []int64{3, 3, 1, 10}
	errs := make([]error, len(amounts))
	var wg sync.WaitGroup
	for i, n := range amounts {
		wg.Go(func() { _, errs[i] = rl.Acquire(env.ctx, "k", "api", Consume{"rpm": n}, lim) })
		waitQueued(t, rl, key, i+1)
	}
	g.release()
	err := <-first
	require.NoError(t, err, "first acquire: %v", err)
	wg.Wait()

	for i, want := range []bool{true, false, true, false} {
		if want {
			assert.NoError(t, errs[i], "acquire %d tokens (#%d), want admitted", amounts[i], i)
		} else {
			assert.Error(t, errs[i], "acquire %d tokens (#%d), want refused", amounts[i], i)
		}
	}
	if errs[1] != nil {
		// Refused on the item after the first 3 was taken: 2 left.
		rle := rateLimited(t, errs[1])
		assert.EqualValues(t, 2, rle.Primary.Available, "3 tokens refused: available")
		assert.Equal(t, bucketmath.RetryAfter(1000, 100_000, 60_000), rle.RetryAfter, "3 tokens refused: retry after")
	}
	if errs[3] != nil {
		// Refused on the item the combined write saw: 5 left.
		rle := rateLimited(t, errs[3])
		assert.EqualValues(t, 5, rle.Primary.Available, "10 tokens refused: available")
		assert.Equal(t, bucketmath.RetryAfter(5000, 100_000, 60_000), rle.RetryAfter, "10 tokens refused: retry after")
	}
	// first alone, the refused batch, 3 alone, 1 alone.
	got, want := env.calls(), "UpdateItem, UpdateItem!, UpdateItem, UpdateItem"
	assert.Equal(t, want, got, "calls = %q, want %q", got, want)
	tc, tk := env.n(env.bucket("k", "api"), "b_rpm_tc"), env.tokens("k", "api", "rpm")
	assert.Equal(t, [2]int64{99_000, 1_000}, [2]int64{tc, tk}, "rpm tc and tk")
}

// gatedSpec is a repository whose speculative writes pass g and are
// counted.
type gatedSpec struct {
	Repository
	spec  store.SpeculativeStore
	g     *gate
	calls atomic.Int64
}

func (r *gatedSpec) SpeculativeConsume(ctx context.Context, req store.SpeculativeRequest) (store.SpeculativeResult, error) {
	if err := r.g.before("SpeculativeConsume", nil); err != nil {
		return store.SpeculativeResult{}, err
	}
	r.calls.Add(1)
	return r.spec.SpeculativeConsume(ctx, req)
}

// TestGroupCommitSecondWrite: while a batch is in flight for a hot item,
// the requests queued behind it go out beside it once the queue holds half
// of the item's recent requests, instead of waiting for its return, and no
// third write goes out while two are in flight. On DynamoDB, whose writes
// of an item are applied one after the other and each take a write-capacity
// unit, they wait for the write in flight.
func TestGroupCommitSecondWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		second bool // a second write goes out beside the first
		open   func(t *testing.T, g *gate) (Repository, func() int64)
	}{
		{"memory", true, func(t *testing.T, g *gate) (Repository, func() int64) {
			mem := newMemory()
			r := &gatedSpec{Repository: mem, spec: mem.(store.SpeculativeStore), g: g}
			return r, r.calls.Load
		}},
		{"dynamodb", false, func(t *testing.T, g *gate) (Repository, func() int64) {
			env := newTestEnv(t)
			g.op = "UpdateItem"
			repo := env.withClient(hook(g.before))
			return repo, func() int64 { return int64(env.rec.Count("UpdateItem")) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := newGate("SpeculativeConsume")
			repo, calls := tc.open(t, g)
			rl := New(repo, func(o *Options) { o.GroupCommit = true })
			t.Cleanup(func() { _ = rl.Close() })
			lim := WithLimits(PerMinute("rpm", 1000))
			mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 1}, lim))
			key := store.BucketKey{EntityID: "k", Resource: "api"}
			entered := func(what string) {
				t.Helper()
				select {
				case <-g.entered:
				case <-time.After(10 * time.Second):
					require.FailNow(t, "no write in flight: "+what)
				}
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer g.release()
			acquire := func(n int64) {
				wg.Go(func() {
					_, err := rl.Acquire(ctx, "k", "api", Consume{"rpm": n}, lim)
					assert.NoError(t, err)
				})
			}
			before := calls()
			g.hold()
			acquire(1) // alone
			entered("the first acquire")
			for i := range 4 {
				acquire(2)
				waitQueued(t, rl, key, i+1)
			}
			g.step() // the first returns; its queue of four goes out
			entered("the batch of four")
			// Five requests seen (one delivered, four in flight): the
			// third queued goes out with the other two beside the batch
			// of four.
			for i := range 3 {
				acquire(4)
				if i < 2 || !tc.second {
					waitQueued(t, rl, key, i+1)
				}
			}
			if tc.second {
				entered("the batch of three, beside the batch of four")
				waitQueued(t, rl, key, 0)
				acquire(8) // two writes in flight: it waits
				waitQueued(t, rl, key, 1)
			} else {
				acquire(8)
				waitQueued(t, rl, key, 4)
			}
			select {
			case <-g.entered:
				assert.Fail(t, "one write too many in flight")
			default:
			}
			g.release()
			wg.Wait()

			want := int64(4) // the first alone, the four, the three, the last
			if !tc.second {
				want = 3 // the first alone, the four, the four others
			}
			assert.Equal(t, want, calls()-before, "speculative writes")
			b, err := repo.GetBucket(ctx, key)
			require.NoError(t, err)
			st, ok := b.State("rpm")
			require.True(t, ok)
			assert.EqualValues(t, (1+1+4*2+3*4+8)*1000, st.TotalConsumedMilli, "rpm tc")
		})
	}
}

// TestGroupCommitCancelledMembers: a member whose context ends while queued
// returns its error and takes nothing; one whose context ends while its
// batch is in flight returns its error at once, and the tokens its part
// took are given back. The item holds exactly what the others took.
func TestGroupCommitCancelledMembers(t *testing.T) {
	env := newTestEnv(t)
	g := newGate("UpdateItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.GroupCommit = true })
	lim := WithLimits(PerMinute("rpm", 100))
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 10}, lim))
	key := store.BucketKey{EntityID: "k", Resource: "api"}

	acquire := func(ctx context.Context, n int64) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := rl.Acquire(ctx, "k", "api", Consume{"rpm": n}, lim)
			ch <- err
		}()
		return ch
	}
	g.hold()
	a := acquire(env.ctx, 1) // in flight
	<-g.entered
	queuedCtx, cancelQueued := context.WithCancel(env.ctx)
	q := acquire(queuedCtx, 2)
	waitQueued(t, rl, key, 1)
	b := acquire(env.ctx, 4)
	waitQueued(t, rl, key, 2)
	flightCtx, cancelFlight := context.WithCancel(env.ctx)
	c := acquire(flightCtx, 8)
	waitQueued(t, rl, key, 3)

	cancelQueued() // q leaves the queue: nothing of it is written
	err := <-q
	assert.ErrorIs(t, err, context.Canceled, "queued member: err %v, want context.Canceled", err)
	waitQueued(t, rl, key, 2)
	g.step()
	err = <-a
	require.NoError(t, err)
	<-g.entered // the batch {b, c} is in flight
	cancelFlight()
	err = <-c
	assert.ErrorIs(t, err, context.Canceled, "in-flight member: err %v, want context.Canceled", err)
	g.release()
	err = <-b
	require.NoError(t, err)
	// The give-back of c's 8 tokens is queued for the item; a last
	// acquire goes after it (or with it).
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rpm": 16}, lim))
	waitQueued(t, rl, key, 0)
	tc := env.n(env.bucket("k", "api"), "b_rpm_tc")
	assert.EqualValues(t, (10+1+4+16)*1000, tc, "rpm tc = %d, want %d (c given back, q never written)", tc, (10+1+4+16)*1000)
}

// TestHotKeyOptionsSequentialCalls: used one call at a time, a limiter
// makes the same DynamoDB calls with group commit and the over-limit cache
// off as with group commit on (the first request for an idle item goes out
// alone, at once): the rows of the cost table.
func TestHotKeyOptionsSequentialCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []func(*Options)
	}{
		{"both off", []func(*Options){func(o *Options) { o.GroupCommit = false }, func(o *Options) { o.OverLimitCacheMaxWait = 0 }}},
		{"group commit on", []func(*Options){func(o *Options) { o.GroupCommit = true }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			rl := New(env.repo, append([]func(*Options){func(o *Options) { o.Clock = env.clock.now }}, tc.opts...)...)
			for _, e := range []Entity{{ID: "P"}, {ID: "C", ParentID: "P", Cascade: true}} {
				_, err := rl.Admin().CreateEntity(env.ctx, e)
				require.NoError(t, err)
			}
			lim := WithLimits(PerMinute("rpm", 100), PerMinute("tpm", 10_000))
			check := env.callChecker(t)
			var l *Lease
			check("bucket missing: the entity read first, the item put", "BatchGetItem[2], PutItem", func() {
				mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1, "tpm": 10}, lim))
			})
			check("speculative success", "UpdateItem", func() { l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1}, lim) })
			check("adjust + commit", "UpdateItem", func() {
				l.Adjust(Consume{"tpm": 5})
				mustCommit(t, l)
			})
			l = mustAcquire(t, rl, "solo", "api", Consume{"rpm": 1}, lim)
			check("rollback", "UpdateItem", func() { l.Rollback(env.ctx) })
			check("cascade, no buckets", "GetItem, GetItem, BatchGetItem[4], TransactWriteItems[2]", func() {
				mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
			})
			check("cascade", "UpdateItem, UpdateItem", func() {
				mustCommit(t, mustAcquire(t, rl, "C", "api", Consume{"rpm": 1}, lim))
			})
			mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 96}, lim))
			for range 2 {
				check("fast rejection", "UpdateItem!", func() {
					rateLimited(t, func() error { _, err := rl.Acquire(env.ctx, "solo", "api", Consume{"rpm": 50}, lim); return err }())
				})
			}
			env.clock.advance(30 * time.Second)
			check("refill helps", "UpdateItem!, BatchGetItem[2], UpdateItem", func() {
				mustCommit(t, mustAcquire(t, rl, "solo", "api", Consume{"rpm": 40}, lim))
			})
		})
	}
}

// TestTakeBatch: a batch stops before the first acquire with other limits
// and before the first request whose amount would take a limit's running
// sum past ±maxAmount; amounts that cancel out stay in one batch.
func TestTakeBatch(t *testing.T) {
	rpm := []Limit{PerMinute("rpm", 100)}
	tpm := []Limit{PerMinute("tpm", 100)}
	acq := func(n int64, limits []Limit) *gcOp {
		return &gcOp{kind: gcConsume, delta: Consume{"rpm": n}, limits: storeLimits(limits)}
	}
	adj := func(n int64) *gcOp { return &gcOp{kind: gcAdjust, delta: Consume{"rpm": n}} }
	half := int64(maxAmount/2 + 1)

	for _, tc := range []struct {
		name  string
		queue []*gcOp
		taken int
	}{
		{"small amounts", []*gcOp{acq(1, rpm), adj(-1), acq(2, rpm)}, 3},
		{"other limits", []*gcOp{acq(1, rpm), adj(1), acq(1, tpm), acq(1, rpm)}, 2},
		{"sum past maxAmount", []*gcOp{acq(half, rpm), acq(1, rpm), acq(half, rpm), acq(1, rpm)}, 2},
		{"sum below -maxAmount", []*gcOp{adj(-half), adj(-half), adj(1)}, 1},
		{"large amounts that cancel", []*gcOp{acq(half, rpm), adj(-half), acq(half, rpm), adj(-half)}, 4},
		{"one request past maxAmount alone", []*gcOp{adj(maxAmount), adj(maxAmount)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch, rest := takeBatch(tc.queue)
			assert.Equal(t, tc.queue[:tc.taken], batch)
			assert.Len(t, rest, len(tc.queue)-tc.taken)
			if len(rest) > 0 {
				assert.Same(t, tc.queue[tc.taken], rest[0])
			}
		})
	}
}

// TestGroupCommitDecidesAtSendTime: an acquire queued behind the item's
// write in flight is decided at the time its batch goes out, not at the
// time it asked: the bucket had 8 of the 9 it asks for then, and is full
// again when its write goes out a second later, which admits it and
// leaves the item refilled to that time. (Decided at the time it asked,
// its write would be refused, and a write that refills the item at a time
// other writers have passed is refused for that.)
func TestGroupCommitDecidesAtSendTime(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t)
	g := newGate("UpdateItem")
	rl := New(env.withClient(hook(g.before)), func(o *Options) { o.Clock = env.clock.now }, func(o *Options) { o.GroupCommit = true })
	t.Cleanup(func() { _ = rl.Close() })
	ctx := context.Background()
	lim := WithLimits(PerSecond("rps", 10))
	mustCommit(t, mustAcquire(t, rl, "k", "api", Consume{"rps": 1}, lim)) // the item: 9 left
	key := store.BucketKey{EntityID: "k", Resource: "api"}

	var wg sync.WaitGroup
	defer wg.Wait()
	defer g.release()
	g.hold()
	wg.Go(func() {
		l, err := rl.Acquire(ctx, "k", "api", Consume{"rps": 1}, lim)
		if assert.NoError(t, err, "the first") {
			assert.NoError(t, l.Commit(ctx))
		}
	})
	g.await(t, "no write in flight")
	var queued error
	wg.Go(func() {
		l, err := rl.Acquire(ctx, "k", "api", Consume{"rps": 9}, lim)
		if queued = err; err == nil {
			assert.NoError(t, l.Commit(ctx))
		}
	})
	waitQueued(t, rl, key, 1)
	asked := env.clock.now()
	env.clock.advance(time.Second) // 10 refill: full again
	g.release()
	wg.Wait()
	require.NoError(t, queued, "asked at %v with 8 left, written a second later when full", asked)
	item := env.bucket("k", "api")
	require.Equal(t, []int64{1000, env.clock.now().UnixMilli()}, []int64{env.n(item, "b_rps_tk"), env.n(item, "rf")}, "full at the write's time, less 9")
}
