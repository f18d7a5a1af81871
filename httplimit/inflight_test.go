package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/memorystore"
)

// inFlightCap is the in-flight limit of the tests' key.
const inFlightCap = 8

// inFlightLimits are the tests' limits: 8 requests in flight per key.
var inFlightLimits = limiter.WithLimits(limiter.InFlight("inflight", inFlightCap))

// inFlightKey charges every request one slot of key-1.
func inFlightKey(*http.Request) (string, string, limiter.Consume, error) {
	return "key-1", "chat", limiter.Consume{"inflight": 1}, nil
}

// onInFlightBackends runs fn on the memory backend, and on DynamoDB Local
// on both acquire paths.
func onInFlightBackends(t *testing.T, fn func(t *testing.T, rl *limiter.RateLimiter)) {
	t.Run("memory", func(t *testing.T) {
		rl := limiter.New(memorystore.New())
		t.Cleanup(func() { _ = rl.Close() })
		fn(t, rl)
	})
	t.Run("dynamodb", func(t *testing.T) {
		forEachPath(t, func(t *testing.T, env *testEnv) {
			rl := env.limiter()
			t.Cleanup(func() { _ = rl.Close() })
			fn(t, rl)
		})
	})
}

// slotsFree returns the free slots of key-1.
func slotsFree(t *testing.T, rl *limiter.RateLimiter) int64 {
	t.Helper()
	a, err := rl.Available(context.Background(), "key-1", "chat", inFlightLimits)
	require.NoError(t, err)
	return a["inflight"]
}

// gate is a handler that counts the requests it runs at once and holds
// each until it is opened.
type gate struct {
	mu             sync.Mutex
	active, peak   int
	entered        chan struct{}
	open           chan struct{}
	panicking      bool
	waitForContext bool
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 1024), open: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.active++
	g.peak = max(g.peak, g.active)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.active--
		g.mu.Unlock()
	}()
	g.entered <- struct{}{}
	if g.waitForContext {
		<-r.Context().Done()
		return
	}
	<-g.open
	if g.panicking {
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusOK)
}

func (g *gate) counts() (active, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active, g.peak
}

// serveInFlight serves one request through h, recovering a panic of the
// handler (reported as status -1).
func serveInFlight(h http.Handler) (w *httptest.ResponseRecorder) {
	w = httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			w.Code = -1
		}
	}()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat", nil))
	return w
}

// requireSlotRefusal checks the answer of a request refused for want of a
// slot: 429, Retry-After 1, no reset time anywhere, the in-flight limit
// listed once with its quota unit, no window and no t.
func requireSlotRefusal(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	h := w.Header()
	require.Empty(t, h.Values("X-RateLimit-Reset"), "a slot has no reset time")
	var got []string
	for _, name := range []string{"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "RateLimit-Policy", "RateLimit"} {
		got = append(got, name+": "+h.Get(name))
	}
	require.Equal(t, slotRefusalHeaders, strings.Join(got, "\n"))
}

// slotRefusalHeaders are the headers of a request refused for want of a
// slot (docs/usage.md shows them).
const slotRefusalHeaders = `Retry-After: 1
X-RateLimit-Limit: 8
X-RateLimit-Remaining: 0
RateLimit-Policy: "key-1:inflight";q=8;qu="concurrency"
RateLimit: "key-1:inflight";r=0`

// TestHTTPInFlightLimit: 24 requests at once on one key with 8 slots in
// flight: at most 8 handlers run at once (counted inside the handler) and
// the others are refused with 429; once 8 hold their slots, every further
// request is refused, with Retry-After 1 and no reset time; a served
// response lists the in-flight limit once, without a reset time. After
// the handlers return every slot is free. On the memory backend and
// DynamoDB Local (both acquire paths).
func TestHTTPInFlightLimit(t *testing.T) {
	onInFlightBackends(t, func(t *testing.T, rl *limiter.RateLimiter) {
		g := newGate()
		h := Middleware(rl, inFlightKey, func(o *Options) { o.AcquireOptions = []limiter.AcquireOption{inFlightLimits} })(g)
		const n = 3 * inFlightCap
		results := make(chan *httptest.ResponseRecorder, 2*n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				results <- serveInFlight(h)
			})
		}
		close(start)
		// Every request is either in the handler or answered.
		entered, answered := 0, 0
		deadline := time.After(30 * time.Second)
		for entered+answered < n {
			select {
			case <-g.entered:
				entered++
			case w := <-results:
				answered++
				// On DynamoDB, an acquire that lost too many races to the
				// others' transactions answers 503: nothing was taken.
				require.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, w.Code)
			case <-deadline:
				t.Fatalf("%d requests entered, %d answered of %d", entered, answered, n)
			}
		}
		require.LessOrEqual(t, entered, inFlightCap, "handlers run at once")
		require.Positive(t, entered)
		// Fill the slots left by requests that lost races, one at a time.
		for entered < inFlightCap {
			wg.Go(func() { results <- serveInFlight(h) })
			select {
			case <-g.entered:
				entered++
			case w := <-results:
				require.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, w.Code)
			}
		}
		require.Zero(t, slotsFree(t, rl))
		for range 4 {
			requireSlotRefusal(t, serveInFlight(h))
		}
		active, peak := g.counts()
		require.Equal(t, inFlightCap, active)
		require.Equal(t, inFlightCap, peak, "handlers run at once")
		close(g.open)
		wg.Wait()
		close(results)
		served := 0
		for w := range results {
			if w.Code == http.StatusOK {
				served++
				require.Empty(t, w.Header().Values("X-RateLimit-Reset"), "a slot has no reset time")
				require.Equal(t, `"key-1:inflight";q=8;qu="concurrency"`, w.Header().Get("RateLimit-Policy"))
				require.Regexp(t, `^"key-1:inflight";r=[0-7]$`, w.Header().Get("RateLimit"))
				require.Equal(t, "8", w.Header().Get("X-RateLimit-Limit"))
			}
		}
		require.Equal(t, inFlightCap, served)
		require.Equal(t, int64(inFlightCap), slotsFree(t, rl), "every slot is back")
	})
}

// TestHTTPInFlightSlotComesBack: a handler that panics, and one whose
// client goes away, hold their slot until they return and give it back
// then. On the memory backend and DynamoDB Local (both acquire paths).
func TestHTTPInFlightSlotComesBack(t *testing.T) {
	onInFlightBackends(t, func(t *testing.T, rl *limiter.RateLimiter) {
		mw := Middleware(rl, inFlightKey, func(o *Options) { o.AcquireOptions = []limiter.AcquireOption{inFlightLimits} })

		t.Run("panic", func(t *testing.T) {
			g := newGate()
			g.panicking = true
			done := make(chan int)
			go func() { done <- serveInFlight(mw(g)).Code }()
			<-g.entered
			require.Equal(t, int64(inFlightCap-1), slotsFree(t, rl), "the handler holds its slot")
			close(g.open)
			require.Equal(t, -1, <-done, "the panic goes on")
			require.Equal(t, int64(inFlightCap), slotsFree(t, rl), "the slot is back")
		})

		t.Run("client gone", func(t *testing.T) {
			g := newGate()
			g.waitForContext = true
			returned := make(chan struct{})
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(returned)
				g.ServeHTTP(w, r)
			})))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
				if err == nil {
					var resp *http.Response
					if resp, err = http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
				errc <- err
			}()
			<-g.entered
			require.Equal(t, int64(inFlightCap-1), slotsFree(t, rl), "the handler holds its slot")
			cancel()
			require.ErrorIs(t, <-errc, context.Canceled)
			<-returned
			// The middleware commits after the handler returns.
			require.Eventually(t, func() bool { return slotsFree(t, rl) == inFlightCap }, 10*time.Second, 5*time.Millisecond, "the slot is back")
		})
	})
}

// TestHTTPInFlightHeadersBesideRate: a served request of a key with an
// in-flight limit and a rate lists each once; the rate's entry has its
// window and t, the slots' entry neither, and X-RateLimit-Reset is left
// out when the limit with the smallest share left is the slots'.
func TestHTTPInFlightHeadersBesideRate(t *testing.T) {
	now := epoch
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	t.Cleanup(func() { _ = rl.Close() })
	lim := limiter.WithLimits(limiter.InFlight("inflight", inFlightCap), limiter.PerMinute("rpm", 100))
	key := func(*http.Request) (string, string, limiter.Consume, error) {
		return "key-1", "chat", limiter.Consume{"inflight": 1, "rpm": 1}, nil
	}
	h := Middleware(rl, key, func(o *Options) { o.AcquireOptions = []limiter.AcquireOption{lim} })(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := serveInFlight(h)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `"key-1:inflight";q=8;qu="concurrency", "key-1:rpm";q=100;w=60`, w.Header().Get("RateLimit-Policy"))
	require.Equal(t, `"key-1:inflight";r=7, "key-1:rpm";r=99;t=1`, w.Header().Get("RateLimit"))
	require.Equal(t, "8", w.Header().Get("X-RateLimit-Limit"))
	require.Equal(t, "7", w.Header().Get("X-RateLimit-Remaining"))
	require.Empty(t, w.Header().Values("X-RateLimit-Reset"))
}
