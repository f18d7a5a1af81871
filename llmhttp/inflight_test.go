package llmhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/memorystore"
)

// panicBase is a base transport that panics.
type panicBase struct{}

func (panicBase) RoundTrip(*http.Request) (*http.Response, error) { panic("base") }

// TestInFlightPanicGivesSlotBack: a panic while a call holds the only slot
// in flight (the base transport's, inside RoundTrip; the usage mapping's,
// inside the caller's Read) reaches the caller unchanged, and the slot is
// free again: the next call is admitted. The calls of every backend, and
// every other way a call ends, are in llmhttp/internal/costcap.
func TestInFlightPanicGivesSlotBack(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	t.Cleanup(func() { _ = rl.Close() })
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: entity, Resource: resource}, []limiter.Limit{
		limiter.InFlight("calls", 1), limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000)}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	}))
	t.Cleanup(srv.Close)
	call := llmhttp.ContextWithCall(ctx, entity, resource, limiter.Consume{"calls": 1, "rpm": 1, "tpm": 100})
	post := func(t *testing.T, client *http.Client) (*http.Response, error) {
		req, err := http.NewRequestWithContext(call, http.MethodPost, srv.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		return client.Do(req)
	}
	free := func(t *testing.T) {
		t.Helper()
		a, err := rl.Available(ctx, entity, resource)
		require.NoError(t, err)
		require.Equal(t, int64(1), a["calls"], "the slot is back")
		resp, err := post(t, &http.Client{Transport: llmhttp.NewTransport(rl, nil)})
		require.NoError(t, err, "the next call is admitted")
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}

	t.Run("base transport", func(t *testing.T) {
		tr := llmhttp.NewTransport(rl, panicBase{})
		require.PanicsWithValue(t, "base", func() { _, _ = post(t, &http.Client{Transport: tr}) })
		require.Equal(t, int64(1), tr.Stats().RolledBack)
		free(t)
	})
	t.Run("usage mapping", func(t *testing.T) {
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.UsageMapping = func(llmhttp.Usage) limiter.Consume { panic("mapping") } })
		resp, err := post(t, &http.Client{Transport: tr})
		require.NoError(t, err)
		defer resp.Body.Close()
		require.PanicsWithValue(t, "mapping", func() { _, _ = io.Copy(io.Discard, resp.Body) })
		require.Equal(t, int64(1), tr.Stats().Committed, "committed at the estimate")
		free(t)
	})
}

// TestInFlightDroppedBodyGivesSlotBack: a response body the caller drops
// without closing it, half read, gives its slot back once the garbage
// collector finds it (its lease committed at the estimate, as a body
// closed early), instead of holding it while the limiter lives.
func TestInFlightDroppedBodyGivesSlotBack(t *testing.T) {
	ctx := context.Background()
	rl := limiter.New(memorystore.New())
	t.Cleanup(func() { _ = rl.Close() })
	require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: entity, Resource: resource}, []limiter.Limit{
		limiter.InFlight("calls", 1), limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000)}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	}))
	t.Cleanup(srv.Close)
	tr := llmhttp.NewTransport(rl, nil)
	func() {
		req, err := http.NewRequestWithContext(llmhttp.ContextWithCall(ctx, entity, resource, limiter.Consume{"calls": 1, "rpm": 1, "tpm": 100}),
			http.MethodPost, srv.URL, strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		_, err = resp.Body.Read(make([]byte, 4))
		require.NoError(t, err)
		// resp is dropped here, its body neither read to the end nor closed.
	}()
	a, err := rl.Available(ctx, entity, resource)
	require.NoError(t, err)
	require.Zero(t, a["calls"], "the dropped body's lease holds the slot")
	require.Eventually(t, func() bool {
		runtime.GC()
		a, err := rl.Available(ctx, entity, resource)
		return err == nil && a["calls"] == 1
	}, 10*time.Second, 10*time.Millisecond, "the slot is back")
	require.Eventually(t, func() bool { return tr.Stats().Committed == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, int64(1), tr.Stats().EndedWithoutUsage)
}
