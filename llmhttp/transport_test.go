package llmhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/memorystore"
)

const (
	entity   = "api-key-1"
	resource = "gpt-4o"
	tpmLimit = 100_000
)

// newLimiter returns a limiter on the memory backend with a frozen clock
// (nothing refills during a test) and rpm/tpm limits for entity.
func newLimiter(t *testing.T, tpm int64) *limiter.RateLimiter {
	t.Helper()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	rl := limiter.New(memorystore.New(), func(o *limiter.Options) { o.Clock = func() time.Time { return now } })
	t.Cleanup(func() { _ = rl.Close() })
	require.NoError(t, rl.Admin().SetLimits(context.Background(), limiter.Scope{Entity: entity, Resource: resource}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", tpm)}))
	return rl
}

func available(t *testing.T, rl *limiter.RateLimiter) (rpm, tpm int64) {
	t.Helper()
	a, err := rl.Available(context.Background(), entity, resource)
	require.NoError(t, err)
	return a["rpm"], a["tpm"]
}

// fixtureServer answers every request with a recorded body, written in
// small pieces with a flush after each, as a provider streams.
func fixtureServer(t *testing.T, file, contentType string, status int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		for b := body; len(b) > 0; {
			n := min(97, len(b))
			_, _ = w.Write(b[:n])
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func post(t *testing.T, client *http.Client, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// TestTransportCommitsRecordedUsage: for each recorded response of either
// provider, the caller reads exactly the provider's bytes, and the bucket
// ends charged with one request and the response's total tokens (the
// 500-token estimate adjusted to it).
func TestTransportCommitsRecordedUsage(t *testing.T) {
	for _, fx := range []struct {
		file, contentType string
		tokens            int64
	}{
		{"openai_chat.json", "application/json", 1163},
		{"openai_chat_stream.txt", "text/event-stream; charset=utf-8", 30},
		{"openai_responses_stream.txt", "text/event-stream", 48},
		{"anthropic_message.json", "application/json", 4418},
		{"anthropic_stream.txt", "text/event-stream", 2023},
		{"openai_chat_stream_nousage.txt", "text/event-stream", 500}, // no usage: the estimate stays
	} {
		t.Run(fx.file, func(t *testing.T) {
			rl := newLimiter(t, tpmLimit)
			srv, _ := fixtureServer(t, fx.file, fx.contentType, http.StatusOK)
			tr := llmhttp.NewTransport(rl, nil)
			client := &http.Client{Transport: tr}
			ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 500})
			resp, err := post(t, client, ctx, srv.URL, `{"model":"m"}`)
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, string(readFile(t, fx.file)), string(got), "the caller reads the provider's bytes")
			rpm, tpm := available(t, rl)
			assert.Equal(t, int64(999), rpm)
			assert.Equal(t, tpmLimit-fx.tokens, tpm)
			st := tr.Stats()
			assert.Equal(t, int64(1), st.Committed)
			assert.Equal(t, int64(0), st.RolledBack)
		})
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// TestTransportStreamsUnbuffered: the first event of a stream reaches the
// caller while the provider still holds the rest back, and the lease is
// still open until the end.
func TestTransportStreamsUnbuffered(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n")
	}))
	defer srv.Close()
	tr := llmhttp.NewTransport(rl, nil)
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 100})
	resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var first []byte
	for !bytes.Contains(first, []byte("\n\n")) {
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		first = append(first, buf[:n]...)
	}
	assert.Contains(t, string(first), "message_start")
	_, tpm := available(t, rl)
	assert.Equal(t, int64(tpmLimit-100), tpm, "the estimate is held while the stream runs")
	close(release)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	_, tpm = available(t, rl)
	assert.Equal(t, int64(tpmLimit-30), tpm, "10 input + 20 output tokens")
}

// TestTransportDenialSendsNothing: a request the limiter refuses fails with
// the limiter's *RateLimitExceededError, and the provider never sees it.
func TestTransportDenialSendsNothing(t *testing.T) {
	rl := newLimiter(t, 1000)
	srv, hits := fixtureServer(t, "openai_chat.json", "application/json", http.StatusOK)
	tr := llmhttp.NewTransport(rl, nil)
	client := &http.Client{Transport: tr}
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 800})
	resp, err := post(t, client, ctx, srv.URL, `{}`)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // 1163 tokens: the bucket is now in debt

	_, err = post(t, client, ctx, srv.URL, `{}`)
	var denied *limiter.RateLimitExceededError
	require.ErrorAs(t, err, &denied)
	assert.ErrorIs(t, err, limiter.ErrRateLimited)
	assert.Positive(t, denied.RetryAfter)
	assert.Equal(t, int64(1), hits.Load(), "the denied request was not sent")
	assert.Equal(t, int64(1), tr.Stats().Denied)
}

// TestTransportRollback: a 5xx and a transport error give the estimate
// back; with the rollback options off, the estimate is committed instead.
// A body closed before its usage keeps the estimate (the provider bills
// it), unless RollbackOnEarlyClose says otherwise. A 429 is given back
// without feedback, and kept with it (the provider's budget is spent).
func TestTransportRollback(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rollback   llmhttp.Rollback
		noFeedback bool
		file       string
		status     int
		closeSrv   bool
		early      bool
		wantTPM    int64
	}{
		{name: "5xx", file: "openai_chat.json", status: 503, wantTPM: tpmLimit},
		{name: "5xx kept", rollback: llmhttp.RollbackNone, file: "openai_chat.json", status: 503, wantTPM: tpmLimit - 500},
		{name: "429 without feedback", rollback: llmhttp.RollbackNone, noFeedback: true, file: "openai_chat.json", status: 429, wantTPM: tpmLimit},
		{name: "429 with feedback", file: "openai_chat.json", status: 429, wantTPM: tpmLimit - 500},
		{name: "transport error", file: "openai_chat.json", status: 200, closeSrv: true, wantTPM: tpmLimit},
		{name: "transport error kept", rollback: llmhttp.RollbackOnServerError, file: "openai_chat.json", status: 200, closeSrv: true, wantTPM: tpmLimit - 500},
		{name: "closed early", file: "anthropic_stream.txt", status: 200, early: true, wantTPM: tpmLimit - 500},
		{name: "closed early rolled back", rollback: llmhttp.RollbackOnEarlyClose, file: "openai_chat_stream.txt", status: 200, early: true, wantTPM: tpmLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newLimiter(t, tpmLimit)
			srv, _ := fixtureServer(t, tc.file, "text/event-stream", tc.status)
			if tc.closeSrv {
				srv.Close()
			}
			tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
				o.Rollback = tc.rollback
				o.NoFeedback = tc.noFeedback
			})
			ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 500})
			resp, err := post(t, &http.Client{Transport: tr}, ctx, srv.URL, `{}`)
			if tc.closeSrv {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				if tc.early {
					_, err = resp.Body.Read(make([]byte, 10))
					require.NoError(t, err)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
				require.NoError(t, resp.Body.Close())
			}
			_, tpm := available(t, rl)
			assert.Equal(t, tc.wantTPM, tpm)
		})
	}
}

// TestTransportWithoutCall: a request without ContextWithCall passes through
// untouched, or is refused with ErrNoCall when the option says so.
func TestTransportWithoutCall(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	srv, hits := fixtureServer(t, "openai_chat.json", "application/json", http.StatusOK)
	tr := llmhttp.NewTransport(rl, nil)
	resp, err := post(t, &http.Client{Transport: tr}, context.Background(), srv.URL, `{}`)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, readFile(t, "openai_chat.json"), got)
	_, tpm := available(t, rl)
	assert.Equal(t, int64(tpmLimit), tpm)
	assert.Equal(t, int64(1), tr.Stats().PassedThrough)

	strict := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.RequireCall = true })
	_, err = post(t, &http.Client{Transport: strict}, context.Background(), srv.URL, `{}`)
	require.ErrorIs(t, err, llmhttp.ErrNoCall)
	assert.Equal(t, int64(1), hits.Load())
}

// TestTransportDefaultEstimate: without an estimate in ContextWithCall, the
// transport acquires the body's bytes / 4 plus max_tokens, and the body it
// sends is the caller's, whole.
func TestTransportDefaultEstimate(t *testing.T) {
	rl := newLimiter(t, tpmLimit)
	var sent atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sent.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x"}`) // no usage: the estimate is committed
	}))
	defer srv.Close()
	body := `{"model":"gpt-4o","max_tokens":300,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1001) + `"}]}`
	for _, readable := range []bool{true, false} {
		tr := llmhttp.NewTransport(rl, nil)
		ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, nil)
		var r io.Reader = strings.NewReader(body)
		if !readable {
			r = io.MultiReader(r) // no GetBody: the transport buffers the body
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, r)
		require.NoError(t, err)
		_, before := available(t, rl)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_, after := available(t, rl)
		assert.Equal(t, int64((len(body)+3)/4+300), before-after)
		assert.Equal(t, body, sent.Load())
		assert.Equal(t, int64(1), tr.Stats().UsageMissing)
	}
}
