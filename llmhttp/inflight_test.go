package llmhttp_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/memorystore"
)

// TestInFlightSlotsComeBack: 400 seeded calls through the transport with 1
// call in flight each (cap 8, 16 goroutines): answers read to the end,
// streams closed early, 5xx answers, broken connections and timeouts.
// Every slot is back at the end (8 free), and the callers never held more
// than 8 answers at once (counted from the answer to the body's close).
func TestInFlightSlotsComeBack(t *testing.T) {
	rl := limiter.New(memorystore.New())
	t.Cleanup(func() { _ = rl.Close() })
	ctx := context.Background()
	require.NoError(t, rl.SetLimits(ctx, entity, resource,
		[]limiter.Limit{limiter.InFlight("calls", 8), limiter.PerMinute("rpm", 1_000_000), limiter.PerMinute("tpm", 1_000_000_000)}))
	body, err := os.ReadFile(filepath.Join("testdata", "openai_chat_stream.txt"))
	require.NoError(t, err)
	var mu sync.Mutex
	active, peak := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.Header.Get("X-Outcome") {
		case "5xx":
			w.WriteHeader(http.StatusBadGateway)
			return
		case "broken":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		case "slow":
			time.Sleep(50 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for b := body; len(b) > 0; {
			n := min(97, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	tr := llmhttp.NewTransport(rl, nil)
	client := &http.Client{Transport: tr}
	outcomes := []string{"ok", "early", "5xx", "broken", "slow"}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				rnd := rand.New(rand.NewPCG(uint64(g), uint64(i)))
				outcome := outcomes[rnd.IntN(len(outcomes))]
				cctx := llmhttp.WithCall(ctx, entity, resource, limiter.Consume{"calls": 1, "rpm": 1, "tpm": 500})
				if outcome == "slow" {
					var cancel context.CancelFunc
					cctx, cancel = context.WithTimeout(cctx, 10*time.Millisecond)
					defer cancel()
				}
				var resp *http.Response
				var err error
				for {
					req, rerr := http.NewRequestWithContext(cctx, http.MethodPost, srv.URL, nil)
					require.NoError(t, rerr)
					req.Header.Set("X-Outcome", outcome)
					resp, err = client.Do(req)
					if err == nil || !errors.Is(err, limiter.ErrRateLimited) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				if err != nil {
					continue
				}
				// From the answer to the body's close the lease holds the
				// slot.
				mu.Lock()
				active++
				peak = max(peak, active)
				mu.Unlock()
				if outcome == "early" {
					buf := make([]byte, 10)
					_, _ = resp.Body.Read(buf)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				mu.Lock()
				active--
				mu.Unlock()
				_ = resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	a, err := rl.Available(ctx, entity, resource)
	require.NoError(t, err)
	require.Equal(t, int64(8), a["calls"], "every slot is back")
	require.LessOrEqual(t, peak, 8, "answers held at once")
	require.Greater(t, peak, 1)
	st := tr.Stats()
	require.Equal(t, int64(0), st.EndErrors, "every lease ended cleanly")
	require.Positive(t, st.Committed)
	require.Positive(t, st.RolledBack)
}
