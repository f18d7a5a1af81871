package limiter

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/internal/ddblocal"
)

// Soak tests: a long-running service sees a steady stream of new
// keys; its heap must stay flat however many it has seen. Each acquire is
// on a new entity id, under resource-default limits (so that the config
// cache holds two negative entries for every entity), with the over-limit
// cache on. After every phase the test collects garbage and reads the live
// heap: once the caches are full, it must not grow with the key count.
//
// They run at two sizes. By default (and so under -race in `make test`),
// with small ceilings, so that the caches fill early: 40,000 keys on the
// memory backend, 2,000 (and 200 to warm up) on DynamoDB Local. With SOAK=1
// (`make soak`, which CI runs after `make test`, without -race: the race
// detector makes every acquire several times slower), at full size with
// the default ceilings: 1,000,000 keys on the memory backend, and on DynamoDB Local the
// measure of the issue, 20,000 keys by 32 goroutines.

// envSoak selects the full size.
const envSoak = "SOAK"

// soakResource is the resource of the soak tests; its limits are stored at
// the resource level.
const soakResource = "gpt-4"

const mib = 1 << 20

func mibs(b int64) string { return fmt.Sprintf("%+.2f MiB", float64(b)/mib) }

// heapLive returns the bytes of live heap objects after a full collection.
func heapLive() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// soakSize is one size of a soak test.
type soakSize struct {
	// checkpoints are the key counts after which the heap is read; the
	// caches are full at the first one.
	checkpoints []int
	// workers is the number of goroutines acquiring.
	workers int
	// opts sets the ceilings (none: the defaults).
	opts []func(*Options)
	// bucketCache is the DynamoDB repository's ceiling
	// (DynamoDBOptions.BucketCacheSize; 0: the default).
	bucketCache int
	// maxGrowth bounds the heap's growth from the first checkpoint on.
	maxGrowth int64
	// maxTotal bounds the heap's growth over the start (0: not checked).
	maxTotal int64
}

// soakKeys acquires and commits once on each of the entities from..to-1
// with workers goroutines, and fails t on any error. Entity ids are prefix
// followed by the number.
func soakKeys(t *testing.T, rl *RateLimiter, prefix string, from, to, workers int, tick func()) {
	t.Helper()
	ctx := context.Background()
	var next atomic.Int64
	next.Store(int64(from))
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			id := make([]byte, 0, len(prefix)+8)
			for {
				i := next.Add(1) - 1
				if i >= int64(to) || failed.Load() != nil {
					return
				}
				id = strconv.AppendInt(append(id[:0], prefix...), i, 10)
				lease, err := rl.Acquire(ctx, string(id), soakResource, Consume{"rpm": 1})
				if err == nil {
					err = lease.Commit(ctx)
				}
				if err != nil {
					err = fmt.Errorf("key %d: %w", i, err)
					failed.CompareAndSwap(nil, &err)
					return
				}
				if tick != nil {
					tick()
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		t.Fatal(*p)
	}
}

// soak runs size's keys through rl and checks the bounds: the heap, the
// goroutine count, the caches' ceilings and group commit's slots. held
// (optional) reports what the backend holds, for the log.
func soak(t *testing.T, rl *RateLimiter, size soakSize, tick func(), held func() string) {
	t.Helper()
	type checkpoint struct {
		keys       int
		heap       uint64
		goroutines int
	}
	start := time.Now()
	base := heapLive()
	points := []checkpoint{{keys: 0, heap: base, goroutines: runtime.NumGoroutine()}}
	for _, to := range size.checkpoints {
		soakKeys(t, rl, "soak-", points[len(points)-1].keys, to, size.workers, tick)
		p := checkpoint{keys: to, heap: heapLive(), goroutines: settledGoroutines(points[0].goroutines)}
		points = append(points, p)
		extra := ""
		if held != nil {
			extra = ", " + held()
		}
		t.Logf("%8d keys: heap %s over start, %d goroutines%s (%v)", to, mibs(int64(p.heap)-int64(base)), p.goroutines, extra,
			time.Since(start).Round(time.Millisecond))
	}

	full := points[1]
	for _, p := range points[2:] {
		grew := int64(p.heap) - int64(full.heap)
		assert.Less(t, grew, size.maxGrowth, "heap growth (%s) from %d to %d keys, want less than %s", mibs(grew), full.keys, p.keys, mibs(size.maxGrowth))
	}
	for _, p := range points[1:] {
		grew := int64(p.heap) - int64(base)
		if size.maxTotal > 0 {
			assert.LessOrEqual(t, grew, size.maxTotal, "heap growth (%s) over %d keys, want at most %s", mibs(grew), p.keys, mibs(size.maxTotal))
		}
		assert.LessOrEqual(t, p.goroutines, points[0].goroutines, "goroutines after %d keys, want no more than at the start", p.keys)
	}
	for _, c := range []CacheName{CacheConfigs, CacheEntities, CacheOverLimit} {
		st := cacheStats(rl.Stats(), c)
		t.Logf("%s cache: %+v", c, st)
		assert.LessOrEqual(t, st.Size, st.MaxEntries, "%s cache entries, want within its ceiling", c)
	}
	st := rl.Stats().Entities
	assert.NotZero(t, st.Evictions, "entity cache: no eviction; the soak should fill it: %+v", st)
	slots := 0
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rl.gc.mu.Lock()
		slots = len(rl.gc.slots)
		rl.gc.mu.Unlock()
		if slots == 0 || time.Now().After(deadline) {
			break
		}
	}
	assert.EqualValues(t, 0, slots, "%d group-commit slots left 5s after the writes returned, want 0", slots)
}

// settledGoroutines returns the goroutine count once it is at most want,
// or after 5 s: goroutines that finish a write may still be exiting.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// smallCaches are the ceilings of the default-size soak test on the
// memory backend.
var smallCaches = []func(*Options){func(o *Options) { o.ConfigCacheSize = 1000 }, func(o *Options) { o.EntityCacheSize = 500 }, func(o *Options) { o.OverLimitCacheSize = 500 }}

// tinyCaches are the ceilings of the default-size soak test on DynamoDB
// Local, whose every key costs several round trips to a JVM: two fifths of
// smallCaches, so that they are full after 400 keys (an entity takes two
// config entries).
var tinyCaches = []func(*Options){func(o *Options) { o.ConfigCacheSize = 400 }, func(o *Options) { o.EntityCacheSize = 200 }, func(o *Options) { o.OverLimitCacheSize = 200 }}

// soakMemoryBound is the documented bound (docs/performance.md) of the heap
// the limiter's per-key state takes with the default ceilings on the memory
// backend (the caches full, plus the backend's ~9,000 unexpired buckets),
// with margin: 9.5–11 MiB was measured.
const soakMemoryBound = 16 * mib

// TestSoakMemory runs distinct keys through one limiter on the memory
// backend, 8 goroutines; the clock moves 1 ms per acquire, so that configs
// and entities expire and buckets refill and are swept. Full size:
// 1,000,000 keys with the default ceilings; from 100,000 keys (caches full)
// on, the live heap grows by less than 3 MiB (a cache's map is copied
// every 2 × ceiling removals, so its table's size varies by a megabyte),
// and it stays within soakMemoryBound. Short size: from 10,000 keys on it
// grows by less than 1 MiB. The buckets held are not yet at their steady
// count at 10,000 keys (about 8,000 then, 8,800–8,950 at 40,000), which
// with the race detector and other packages' tests running beside this
// one has come to 0.2–0.6 MiB; a leak of 35 bytes a key would pass 1 MiB.
func TestSoakMemory(t *testing.T) {
	size := soakSize{checkpoints: []int{10_000, 20_000, 30_000, 40_000}, workers: 8, opts: smallCaches, maxGrowth: mib}
	if os.Getenv(envSoak) != "" {
		size = soakSize{checkpoints: []int{100_000, 325_000, 550_000, 775_000, 1_000_000}, workers: 8, maxGrowth: 3 * mib, maxTotal: soakMemoryBound}
	}
	ctx := context.Background()
	var clockMs atomic.Int64
	clockMs.Store(epoch.UnixMilli())
	now := func() time.Time { return time.UnixMilli(clockMs.Load()) }
	repo := newMemory()
	rl := New(repo, append([]func(*Options){func(o *Options) { o.Clock = now }, func(o *Options) { o.OverLimitCacheMaxWait = time.Second }}, size.opts...)...)
	// The memory store keeps a bucket until its TTL (7 × its time to fill)
	// passes, as DynamoDB does: with 10 per second and the clock moving
	// 1 ms per key, about 7,000 buckets are live at any time, whatever the
	// key count.
	err := rl.Admin().SetLimits(ctx, Scope{Resource: soakResource}, []Limit{PerSecond("rpm", 10)})
	require.NoError(t, err)
	buckets := repo.(interface{ BucketCount() int })
	soak(t, rl, size, func() { clockMs.Add(1) }, func() string { return fmt.Sprintf("%d buckets held", buckets.BucketCount()) })
	st := rl.Stats().Configs
	assert.NotZero(t, st.Evictions, "config cache: no eviction; the soak should fill it: %+v", st)
}

// TestSoakDynamoDB runs distinct keys through one limiter on DynamoDB Local,
// with 32 goroutines on the wall clock. At full size it is the measure the
// caches' bounds were made for: 32 goroutines, one RateLimiter with the default ceilings, resource-default
// limits, the over-limit cache on, each acquire on a new entity id; from
// 8,000 to 20,000 keys the live heap grows by less than 2 MiB (before the
// caches were bounded it grew by about 600 bytes per key: +7 MiB). At the
// default size, with ceilings of 200 entities and buckets, 400 configs and
// 200 over-limit entries (full after 200 keys), from 400 to 2,000 keys it
// grows by less than 0.6 MiB: a leak of about 390 bytes a key would pass
// that (the 1 MiB over 3,000 keys this size once had: 350 bytes). Measured
// alone: +0.02 to +0.06 MiB at either size; in the package's run, where
// the goroutines of earlier tests are still ending, -0.2 to -0.4 MiB.
func TestSoakDynamoDB(t *testing.T) {
	size := soakSize{checkpoints: []int{400, 1_200, 2_000}, workers: 32, opts: tinyCaches, bucketCache: 200, maxGrowth: 3 * mib / 5}
	if os.Getenv(envSoak) != "" {
		size = soakSize{checkpoints: []int{8_000, 10_000, 15_000, 20_000}, workers: 32, maxGrowth: 2 * mib}
	}
	ctx := context.Background()
	// A client without a call recorder: a recorder keeps every call.
	client := ddblocal.Client(t, ddblocal.WithoutStreams)
	table := ddblocal.TableName(t)
	repo, err := openDynamo(ctx, client, func(o *DynamoDBOptions) {
		o.Table, o.Namespace, o.CreateTable = table, "default", true
		o.BucketCacheSize = size.bucketCache
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	rl := New(repo, append([]func(*Options){func(o *Options) { o.OverLimitCacheMaxWait = time.Second }}, size.opts...)...)
	require.NoError(t, rl.Admin().SetLimits(ctx, Scope{Resource: soakResource}, []Limit{PerMinute("rpm", 1000)}))
	// Warm up: connections open, the SDK's caches filled.
	soakKeys(t, rl, "warm-", 0, 200, size.workers, nil)
	soak(t, rl, size, nil, nil)
}
