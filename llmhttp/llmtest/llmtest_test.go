package llmtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/llmhttp/llmtest"
)

// clock is a manual clock for the server.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)} }

const (
	openAIBody    = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the rate limiter."}]}`
	anthropicBody = `{"model":"claude-sonnet-4-5","max_tokens":40,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Say hello to the rate limiter."}]}]}`
)

func call(t *testing.T, srv *llmtest.Server, anthropic bool, body string) *http.Response {
	t.Helper()
	path, key := "/v1/chat/completions", "Authorization"
	val := "Bearer sk-test"
	if anthropic {
		path, key, val = "/v1/messages", "X-Api-Key", "sk-test"
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(key, val)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestOpenAIAnswer(t *testing.T) {
	c := newClock()
	srv := llmtest.NewServer(llmtest.Config{RPM: 60, TPM: 1000, Now: c.now})
	defer srv.Close()
	in, err := llmtest.InputTokens([]byte(openAIBody))
	require.NoError(t, err)
	assert.Equal(t, int64(4+3+4+8), in) // "Be brief." 9 bytes, 30 bytes of user text
	resp := call(t, srv, false, openAIBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var raw struct {
		Usage map[string]any `json:"usage"`
	}
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, float64(in), raw.Usage["prompt_tokens"])
	assert.Equal(t, float64(64), raw.Usage["completion_tokens"])
	assert.Equal(t, float64(in+64), raw.Usage["total_tokens"])
	h := resp.Header
	assert.Equal(t, "60", h.Get("x-ratelimit-limit-requests"))
	assert.Equal(t, "1000", h.Get("x-ratelimit-limit-tokens"))
	assert.Equal(t, "59", h.Get("x-ratelimit-remaining-requests"))
	assert.Equal(t, strconv.FormatInt(1000-in-64, 10), h.Get("x-ratelimit-remaining-tokens"))
	assert.Equal(t, "1s", h.Get("x-ratelimit-reset-requests"))
	assert.Equal(t, (time.Duration(in+64) * 60 * time.Millisecond).String(), h.Get("x-ratelimit-reset-tokens"))
}

// TestRateLimited: the token bucket refuses with 429 and retry-after when
// it cannot pay, and admits again once the wait has passed.
func TestRateLimited(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		c := newClock()
		srv := llmtest.NewServer(llmtest.Config{TPM: 250, OutputTokens: 50, Now: c.now})
		body := openAIBody
		if anthropic {
			body = anthropicBody
		}
		in, _ := llmtest.InputTokens([]byte(body))
		cost := in + 40
		if !anthropic {
			cost = in + 50
		}
		n := 0
		for ; n < 10; n++ {
			if call(t, srv, anthropic, body).StatusCode != http.StatusOK {
				break
			}
		}
		assert.Equal(t, int(250/cost), n)
		resp := call(t, srv, anthropic, body)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.Positive(t, retry)
		if !anthropic {
			ms, err := strconv.Atoi(resp.Header.Get("Retry-After-Ms"))
			require.NoError(t, err)
			assert.LessOrEqual(t, ms, retry*1000)
			c.add(time.Duration(ms) * time.Millisecond)
		} else {
			assert.NotEmpty(t, resp.Header.Get("anthropic-ratelimit-tokens-reset"))
			c.add(time.Duration(retry) * time.Second)
		}
		assert.Equal(t, http.StatusOK, call(t, srv, anthropic, body).StatusCode)
		st := srv.Stats("sk-test")
		assert.Equal(t, int64(n+1), st.Admitted)
		assert.Equal(t, int64(2), st.RateLimited)
		srv.Close()
	}
}

// TestHiddenShare: over a minute the visible client gets the part of the
// refill the hidden consumer leaves.
func TestHiddenShare(t *testing.T) {
	c := newClock()
	srv := llmtest.NewServer(llmtest.Config{TPM: 60_000, HiddenShare: 0.3, OutputTokens: 400, Now: c.now})
	defer srv.Close()
	in, _ := llmtest.InputTokens([]byte(openAIBody))
	cost := in + 400
	// Drain the bucket, then run a minute in 100 ms steps, calling as long as admitted.
	for call(t, srv, false, openAIBody).StatusCode == http.StatusOK {
	}
	start := srv.Stats("sk-test")
	for i := 0; i < 60; i++ {
		c.add(time.Second)
		for call(t, srv, false, openAIBody).StatusCode == http.StatusOK {
		}
	}
	st := srv.Stats("sk-test")
	got := st.Tokens - start.Tokens
	assert.InDelta(t, 42_000, got, float64(cost)+1)
	assert.InDelta(t, 18_000, st.HiddenTokens-start.HiddenTokens, 100)
}

// TestStreams: both providers' streams carry their usage events.
func TestStreams(t *testing.T) {
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 12})
	defer srv.Close()
	in, _ := llmtest.InputTokens([]byte(openAIBody))
	resp := call(t, srv, false, strings.Replace(openAIBody, `{"model"`, `{"stream":true,"stream_options":{"include_usage":true},"model"`, 1))
	assert.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	lines := dataLines(t, resp.Body)
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "[DONE]", lines[len(lines)-1])
	assert.JSONEq(t, `{"prompt_tokens":`+strconv.FormatInt(in, 10)+`,"completion_tokens":12,"total_tokens":`+strconv.FormatInt(in+12, 10)+
		`,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		field(t, lines[len(lines)-2], "usage"))

	resp = call(t, srv, true, strings.Replace(anthropicBody, `{"model"`, `{"stream":true,"model"`, 1))
	lines = dataLines(t, resp.Body)
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Contains(t, lines[0], `"type":"message_start"`)
	assert.JSONEq(t, `{"output_tokens":12}`, field(t, lines[len(lines)-2], "usage"))
}

func dataLines(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, s)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func field(t *testing.T, line, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(line), &m))
	return string(m[name])
}

// TestEdits: EditHeaders changes the headers of 200s and 429s, EditUsage
// every usage object written, and the server's own counts stay exact.
func TestEdits(t *testing.T) {
	c := newClock()
	srv := llmtest.NewServer(llmtest.Config{TPM: 100, OutputTokens: 12, Now: c.now,
		EditHeaders: func(status int, h http.Header) {
			h.Set("X-Ratelimit-Limit-Tokens", "1")
			if status == http.StatusTooManyRequests {
				h.Set("Retry-After", "86400")
			}
		},
		EditUsage: func(u map[string]any) { u["total_tokens"] = -5 },
	})
	defer srv.Close()
	in, _ := llmtest.InputTokens([]byte(openAIBody))
	resp := call(t, srv, false, openAIBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("X-Ratelimit-Limit-Tokens"))
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var raw struct {
		Usage map[string]any `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(b, &raw))
	assert.Equal(t, float64(-5), raw.Usage["total_tokens"])
	assert.Equal(t, in+12, srv.Stats("sk-test").Tokens)

	resp = call(t, srv, true, strings.Replace(anthropicBody, `{"model"`, `{"stream":true,"model"`, 1))
	lines := dataLines(t, resp.Body)
	assert.JSONEq(t, `{"output_tokens":12,"total_tokens":-5}`, field(t, lines[len(lines)-2], "usage"))

	for call(t, srv, false, openAIBody).StatusCode == http.StatusOK {
	}
	resp = call(t, srv, false, openAIBody)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "86400", resp.Header.Get("Retry-After"))
	assert.Equal(t, "1", resp.Header.Get("X-Ratelimit-Limit-Tokens"))
}

// TestShape: a request's Shape puts prompt caching, reasoning and a
// service tier into both providers' usage objects (cut to the prompt and
// the output), answers the error it names without charging, stalls a
// stream after its first event, or hangs until the client gives up.
func TestShape(t *testing.T) {
	shape := llmtest.Shape{CacheRead: 5, CacheWrite: 100, CacheWriteLong: 50, Reasoning: 7, ServiceTier: "flex"}
	hanging := make(chan struct{})
	srv := llmtest.NewServer(llmtest.Config{OutputTokens: 12, Shape: func(body []byte) llmtest.Shape {
		switch {
		case strings.Contains(string(body), "fail"):
			return llmtest.Shape{Status: http.StatusServiceUnavailable}
		case strings.Contains(string(body), "stall"):
			return llmtest.Shape{Stall: true}
		case strings.Contains(string(body), "hang"):
			close(hanging)
			return llmtest.Shape{Hang: true}
		}
		return shape
	}})
	defer srv.Close()
	in, _ := llmtest.InputTokens([]byte(openAIBody))
	require.Less(t, in, int64(105), "the shape's counts are cut to the prompt")

	resp := call(t, srv, false, openAIBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var chat struct {
		ServiceTier string          `json:"service_tier"`
		Usage       json.RawMessage `json:"usage"`
	}
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, json.Unmarshal(b, &chat))
	assert.Equal(t, "flex", chat.ServiceTier)
	assert.JSONEq(t, fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":12,"total_tokens":%d,`+
		`"prompt_tokens_details":{"cached_tokens":5,"cache_write_tokens":%d,"audio_tokens":0},`+
		`"completion_tokens_details":{"reasoning_tokens":7,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		in, in+12, in-5), string(chat.Usage))

	ain, _ := llmtest.InputTokens([]byte(anthropicBody))
	resp = call(t, srv, true, strings.Replace(anthropicBody, `{"model"`, `{"stream":true,"model"`, 1))
	lines := dataLines(t, resp.Body)
	var start struct {
		Message struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"message"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &start))
	write := ain - 5
	assert.JSONEq(t, fmt.Sprintf(`{"input_tokens":0,"cache_creation_input_tokens":%d,"cache_read_input_tokens":5,`+
		`"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d},"output_tokens":1,"service_tier":"flex"}`,
		write, write-min(50, write), min(50, write)), string(start.Message.Usage))
	assert.JSONEq(t, `{"output_tokens":12,"output_tokens_details":{"thinking_tokens":7}}`, field(t, lines[len(lines)-2], "usage"))

	before := srv.Stats("sk-test")
	resp = call(t, srv, false, strings.Replace(openAIBody, "hello", "fail", 1))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	st := srv.Stats("sk-test")
	assert.Equal(t, before.Errors+1, st.Errors)
	assert.Equal(t, before.Tokens, st.Tokens, "an error is not charged")

	resp = call(t, srv, true, strings.Replace(strings.Replace(anthropicBody, `{"model"`, `{"stream":true,"model"`, 1), "hello", "stall", 1))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event: message_start\n", line, "the first event is sent")
	resp.Body.Close() // the client gives up; the server sends nothing more

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(strings.Replace(openAIBody, "hello", "hang", 1)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk-test")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-hanging // the request reached the server, which answers nothing
	select {
	case err := <-done:
		require.FailNow(t, "answered while hanging", "%v", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
