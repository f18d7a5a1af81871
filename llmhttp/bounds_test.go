package llmhttp_test

// The bounds of provider feedback, each case through the transport
// against the fake provider (llmtest) sending an unusual but possible
// answer, on the memory backend and on DynamoDB Local: feedback may only
// lower what the limiter admits, and only for a bounded time.

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/llmtest"
	"github.com/zaelimiter/limiter/memorystore"
)

// manualClock is one clock for the limiter, the transport and the
// provider, moved by the test only.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock {
	return &manualClock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *manualClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// onBackends runs fn on the memory backend and on DynamoDB Local, with a
// limiter on clk.
func onBackends(t *testing.T, fn func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter)) {
	for _, backend := range []string{"memory", "dynamodb"} {
		t.Run(backend, func(t *testing.T) {
			var repo limiter.Repository = memorystore.New()
			if backend == "dynamodb" {
				r, err := limiter.OpenDynamoDB(context.Background(), ddblocal.Client(t, ddblocal.WithoutStreams), func(o *limiter.DynamoDBOptions) {
					o.Table, o.CreateTable = ddblocal.TableName(t), true
				})
				require.NoError(t, err)
				repo = r
			}
			clk := newManualClock()
			rl := limiter.New(repo, func(o *limiter.Options) { o.Clock = clk.now })
			t.Cleanup(func() { _ = rl.Close() })
			fn(t, clk, rl)
		})
	}
}

// logCapture collects a transport's log lines.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// count returns the lines that contain s.
func (l *logCapture) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// apiCall is one call to the fake provider.
type apiCall struct {
	anthropic, stream bool
	prompt            string          // the user message ("hello there" when empty)
	estimate          limiter.Consume // nil: the transport's estimator
}

func (a apiCall) request(t *testing.T, srv *llmtest.Server) *http.Request {
	t.Helper()
	prompt := a.prompt
	if prompt == "" {
		prompt = "hello there"
	}
	path, body := "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":100,"messages":[{"role":"user","content":"`+prompt+`"}]`
	if a.anthropic {
		path, body = "/v1/messages", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"`+prompt+`"}]`
	}
	if a.stream {
		body += `,"stream":true`
		if !a.anthropic {
			body += `,"stream_options":{"include_usage":true}`
		}
	}
	body += "}"
	ctx := llmhttp.ContextWithCall(context.Background(), entity, resource, a.estimate)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer k1")
	return req
}

// do sends the call and reads its body to the end; it returns the status,
// or the transport's error.
func (a apiCall) do(t *testing.T, client *http.Client, srv *llmtest.Server) (int, error) {
	t.Helper()
	resp, err := client.Do(a.request(t, srv))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, nil
}

// consumed returns the tokens of limit name taken from entity's bucket
// under limits (nil: the stored ones).
func consumed(t *testing.T, rl *limiter.RateLimiter, name string, capacity int64, opts ...limiter.AcquireOption) int64 {
	t.Helper()
	a, err := rl.Available(context.Background(), entity, resource, opts...)
	require.NoError(t, err)
	return capacity - a[name]
}

func deniedBy(t *testing.T, err error) *limiter.RateLimitExceededError {
	t.Helper()
	var denied *limiter.RateLimitExceededError
	require.ErrorAs(t, err, &denied)
	return denied
}

// TestBoundsHeaderNeverRaises: the transport built with per-call limits
// (rpm 10, tpm 1000) over system defaults of rpm 1000, and a provider
// reporting a limit of 900 requests a minute: the limit in force stays the
// per-call 10; and the same with the limits stored for the entity. With
// the clock frozen, exactly 10 of 20 calls reach the provider. A provider
// reporting 5 lowers the per-call limit to 5.
func TestBoundsHeaderNeverRaises(t *testing.T) {
	onBackends(t, func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter) {
		ctx := context.Background()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{}, []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000)}))
		limits := []limiter.Limit{limiter.PerMinute("rpm", 10), limiter.PerMinute("tpm", 1000)}
		for _, r := range []struct {
			perCall     bool
			providerRPM int64
			inForce     int64
			sent        int64 // of 20 calls
		}{
			{true, 900, 10, 10},
			{false, 900, 10, 10},
			// The first call takes 1 of 10 and learns 5; the provider
			// says 4 are left, and the bucket is lowered to that: 5 calls
			// are sent.
			{true, 5, 5, 5},
		} {
			srv := llmtest.NewServer(llmtest.Config{RPM: r.providerRPM, TPM: 1_000_000, OutputTokens: 10, Now: clk.now})
			opts := []func(*llmhttp.Options){func(o *llmhttp.Options) { o.Now = clk.now }}
			if r.perCall {
				opts = append(opts, func(o *llmhttp.Options) { o.AcquireOptions = []limiter.AcquireOption{limiter.WithLimits(limits...)} })
			} else {
				require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: entity, Resource: resource}, limits))
			}
			tr := llmhttp.NewTransport(rl, nil, opts...)
			client := &http.Client{Transport: tr}
			call := apiCall{estimate: limiter.Consume{"rpm": 1, "tpm": 20}}
			var last error
			for range 20 {
				if _, err := call.do(t, client, srv); err != nil {
					last = err
				}
			}
			assert.Equal(t, r.sent, srv.Stats("k1").Requests, "%+v: calls that reached the provider", r)
			assert.Equal(t, 20-r.sent, tr.Stats().Denied)
			assert.Equal(t, limiter.PerMinute("rpm", r.inForce), deniedBy(t, last).Primary.Limit, "%+v", r)
			srv.Close()
			clk.add(time.Hour) // the next round starts from full buckets
		}
	})
}

// TestBoundsUsageChecked: a negative total, Anthropic counts whose sum
// overflows, and counts that are no integers: each commits the estimate
// (nothing refunded) and is counted, and logged once.
func TestBoundsUsageChecked(t *testing.T) {
	cases := []struct {
		name              string
		anthropic, stream bool
		edit              func(u map[string]any)
	}{
		{"openai negative total", false, false, func(u map[string]any) { u["total_tokens"] = -1_000_000 }},
		{"openai stream negative total", false, true, func(u map[string]any) { u["total_tokens"] = -1_000_000 }},
		{"anthropic overflowing sum", true, false, func(u map[string]any) {
			u["input_tokens"], u["cache_read_input_tokens"] = int64(1)<<62, int64(1)<<62
		}},
		{"anthropic stream overflowing sum", true, true, func(u map[string]any) {
			u["output_tokens"], u["cache_creation_input_tokens"] = int64(1)<<62, int64(1)<<62
		}},
		{"a count that is a string", false, false, func(u map[string]any) { u["prompt_tokens"] = "lots" }},
	}
	onBackends(t, func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter) {
		limits := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1000))
		var logs logCapture
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.Now = clk.now
			o.AcquireOptions = []limiter.AcquireOption{limits}
			o.Logger = logs.logger()
		})
		client := &http.Client{Transport: tr}
		for i, c := range cases {
			srv := llmtest.NewServer(llmtest.Config{OutputTokens: 10, Now: clk.now, EditUsage: c.edit})
			status, err := apiCall{anthropic: c.anthropic, stream: c.stream, estimate: limiter.Consume{"rpm": 1, "tpm": 50}}.do(t, client, srv)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, status)
			assert.Equal(t, int64(50*(i+1)), consumed(t, rl, "tpm", 1000, limits), "%s: the estimate stays charged", c.name)
			srv.Close()
		}
		st := tr.Stats()
		assert.Equal(t, int64(len(cases)), st.UsageMalformed)
		assert.Equal(t, int64(0), st.UsageSeen)
		assert.Equal(t, int64(len(cases)), st.Committed)
		assert.Equal(t, 1, logs.count("usage is malformed"), "logged once per transport")
	})
}

// TestBoundsCooldownClamped: a 429 whose retry-after says a day, 285
// years or a date in the year 9999 puts the bucket into a debt of at most
// three periods of the limit (or Options.MaxCooldown), with per-call limits
// as with stored ones; each clamp is counted, and logged once; once the
// debt is paid off the entity is admitted again.
func TestBoundsCooldownClamped(t *testing.T) {
	retries := []string{"86400", "9000000000", "Fri, 31 Dec 9999 23:59:59 GMT"}
	onBackends(t, func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter) {
		ctx := context.Background()
		limits := []limiter.Limit{limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1000)}
		for _, perCall := range []bool{true, false} {
			for _, maxCooldown := range []time.Duration{0, 10 * time.Second} {
				var logs logCapture
				opts := []func(*llmhttp.Options){func(o *llmhttp.Options) {
					o.Now = clk.now
					o.Logger = logs.logger()
					o.MaxCooldown = maxCooldown
				}}
				if perCall {
					opts = append(opts, func(o *llmhttp.Options) { o.AcquireOptions = []limiter.AcquireOption{limiter.WithLimits(limits...)} })
				} else {
					require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Entity: entity, Resource: resource}, limits))
				}
				tr := llmhttp.NewTransport(rl, nil, opts...)
				client := &http.Client{Transport: tr}
				bound := maxCooldown
				if bound == 0 {
					bound = 3 * time.Minute
				}
				for _, retry := range retries {
					name := retry + ", per-call=" + map[bool]string{true: "yes", false: "no"}[perCall]
					// The provider's bucket (2000 tpm, above the
					// configured 1000, so that its figure lowers nothing)
					// never holds a call with a prompt of 3000 tokens:
					// every call is refused with 429.
					srv := llmtest.NewServer(llmtest.Config{TPM: 2000, Now: clk.now,
						EditHeaders: func(status int, h http.Header) {
							if status == http.StatusTooManyRequests {
								h.Del("Retry-After-Ms")
								h.Set("Retry-After", retry)
							}
						}})
					call := apiCall{prompt: strings.Repeat("abcd", 3000), estimate: limiter.Consume{"rpm": 1, "tpm": 500}}
					status, err := call.do(t, client, srv)
					require.NoError(t, err)
					require.Equal(t, http.StatusTooManyRequests, status, name)
					_, err = call.do(t, client, srv)
					denied := deniedBy(t, err)
					// The 429's estimate (500) stays taken, and the debt
					// is at most bound × 1000 tpm: the next 500 wait for
					// the bound and at most one period more.
					assert.LessOrEqual(t, denied.RetryAfter, bound+time.Minute, name)
					assert.Greater(t, denied.RetryAfter, bound, name)
					assert.Equal(t, int64(1), srv.Stats("k1").Requests, "%s: the denied call was not sent", name)
					clk.add(denied.RetryAfter)
					status, err = call.do(t, client, srv)
					require.NoError(t, err, "%s: admitted once the debt is paid off", name)
					assert.Equal(t, http.StatusTooManyRequests, status)
					clk.add(time.Hour) // paid off again, for the next case
					srv.Close()
				}
				st := tr.Stats()
				assert.Equal(t, int64(2*len(retries)), st.Cooldowns)
				assert.Equal(t, int64(2*len(retries)), st.CooldownsClamped)
				assert.Equal(t, 1, logs.count("cut to it"), "logged once per transport")
				debt := int64(1000 * bound / time.Minute)
				assert.GreaterOrEqual(t, st.TokensRemoved, int64(2*len(retries))*debt, "each cooldown removes the balance and its debt")
				assert.Equal(t, 1, logs.count("removed tokens"), "logged once per transport")
			}
		}
	})
}

// TestBoundsLearnedLimitsLapse: a header reporting a limit of 1 token a
// minute makes the transport refuse every call locally, with a RetryAfter
// no later than the learned limit's lapse; a minute later, unconfirmed,
// it is dropped and the stored limit applies again. The learned limits are kept
// apart from the stored configuration: a lower limit stored later at the
// resource level applies at once.
func TestBoundsLearnedLimitsLapse(t *testing.T) {
	onBackends(t, func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter) {
		ctx := context.Background()
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: resource}, []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)}))
		srv := llmtest.NewServer(llmtest.Config{RPM: 50, OutputTokens: 10, Now: clk.now,
			EditHeaders: func(status int, h http.Header) { h.Set("X-Ratelimit-Limit-Tokens", "1") }})
		defer srv.Close()
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) { o.Now = clk.now })
		client := &http.Client{Transport: tr}
		call := apiCall{estimate: limiter.Consume{"rpm": 1, "tpm": 100}}

		status, err := call.do(t, client, srv)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		assert.Equal(t, int64(2), tr.Stats().LimitsLearned, "tpm 1 and rpm 50, both below the stored limits")

		_, err = call.do(t, client, srv)
		denied := deniedBy(t, err)
		assert.Equal(t, limiter.PerMinute("tpm", 1), denied.Primary.Limit, "the learned limit is in force")
		assert.LessOrEqual(t, denied.RetryAfter, llmhttp.DefaultLearnedLimitTTL, "no RetryAfter beyond the lapse")
		assert.Equal(t, int64(1), srv.Stats("k1").Requests)

		// A minute later, unconfirmed, the learned limits lapse: the stored
		// ones apply again, to what the bucket holds (at most the learned
		// capacity), so the call waits only for its estimate's refill at
		// the stored rate (100 tokens at 10,000 a minute).
		clk.add(denied.RetryAfter)
		_, err = call.do(t, client, srv)
		denied = deniedBy(t, err)
		assert.Equal(t, limiter.PerMinute("tpm", 10_000), denied.Primary.Limit, "the stored limit is in force again")
		assert.LessOrEqual(t, denied.RetryAfter, 600*time.Millisecond+time.Millisecond)
		assert.Equal(t, int64(2), tr.Stats().LimitsExpired)
		clk.add(denied.RetryAfter)
		status, err = call.do(t, client, srv)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)

		// The operator lowers the resource's rpm to 5, below the learned
		// 50: it applies at once. (The provider's tpm header is fixed to
		// a sane figure from here on.)
		clk.add(llmhttp.DefaultLearnedLimitTTL)
		require.NoError(t, rl.Admin().SetLimits(ctx, limiter.Scope{Resource: resource}, []limiter.Limit{limiter.PerMinute("rpm", 5), limiter.PerMinute("tpm", 10_000)}))
		srv2 := llmtest.NewServer(llmtest.Config{RPM: 50, OutputTokens: 10, Now: clk.now})
		defer srv2.Close()
		var last error
		for range 10 {
			if _, err := call.do(t, client, srv2); err != nil {
				last = err
			}
		}
		assert.Equal(t, int64(5), srv2.Stats("k1").Requests, "the stored rpm of 5 applies")
		assert.Equal(t, limiter.PerMinute("rpm", 5), deniedBy(t, last).Primary.Limit)
	})
}

// TestBoundsEarlyCloseCharged: ten OpenAI streams, read in part and
// closed before their usage (which comes last), are charged their
// estimates, at least what the provider billed; an Anthropic stream
// closed after its message_start with an estimate below its prompt is
// charged the prompt plus the output seen. Answers the provider does not
// bill (a transport error, a 400, a 5xx) are still rolled back.
func TestBoundsEarlyCloseCharged(t *testing.T) {
	onBackends(t, func(t *testing.T, clk *manualClock, rl *limiter.RateLimiter) {
		limits := limiter.WithLimits(limiter.PerMinute("rpm", 1000), limiter.PerMinute("tpm", 1_000_000))
		var logs logCapture
		tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
			o.Now = clk.now
			o.AcquireOptions = []limiter.AcquireOption{limits}
			o.Logger = logs.logger()
			o.NoFeedback = true
		})
		client := &http.Client{Transport: tr}
		srv := llmtest.NewServer(llmtest.Config{OutputTokens: 100, StreamChunks: 8, Now: clk.now})
		defer srv.Close()
		prompt := strings.Repeat("abcd", 1000) // 1000 tokens
		readSome := func(resp *http.Response, until string) {
			var got []byte
			buf := make([]byte, 256)
			for !bytes.Contains(got, []byte(until)) {
				n, err := resp.Body.Read(buf)
				require.NoError(t, err)
				got = append(got, buf[:n]...)
			}
			require.NoError(t, resp.Body.Close())
		}
		for range 10 {
			resp, err := client.Do(apiCall{stream: true, prompt: prompt}.request(t, srv))
			require.NoError(t, err)
			readSome(resp, "abc ")
		}
		billed := srv.Stats("k1").Tokens
		require.GreaterOrEqual(t, billed, int64(10_000))
		charged := consumed(t, rl, "tpm", 1_000_000, limits)
		assert.GreaterOrEqual(t, charged, billed, "the estimates cover what the provider billed")
		assert.Equal(t, int64(10), tr.Stats().EndedWithoutUsage)

		// Anthropic: the prompt count of message_start beats an estimate
		// of 50.
		resp, err := client.Do(apiCall{anthropic: true, stream: true, prompt: prompt, estimate: limiter.Consume{"rpm": 1, "tpm": 50}}.request(t, srv))
		require.NoError(t, err)
		readSome(resp, "content_block_delta")
		in, err := llmtest.InputTokens([]byte(`{"messages":[{"role":"user","content":"` + prompt + `"}]}`))
		require.NoError(t, err)
		extra := consumed(t, rl, "tpm", 1_000_000, limits) - charged
		assert.Greater(t, extra, in, "the prompt plus the output seen")
		assert.LessOrEqual(t, extra, in+100, "no more than the whole answer")
		assert.Equal(t, int64(11), tr.Stats().EndedWithoutUsage)
		assert.Equal(t, 1, logs.count("ended before its usage"), "logged once per transport")

		// Not billed: rolled back.
		before := consumed(t, rl, "tpm", 1_000_000, limits)
		bad, err := http.NewRequestWithContext(llmhttp.ContextWithCall(context.Background(), entity, resource, limiter.Consume{"rpm": 1, "tpm": 50}),
			http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{not json`))
		require.NoError(t, err)
		resp, err = client.Do(bad)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		resp.Body.Close()
		gone := llmtest.NewServer(llmtest.Config{})
		gone.Close()
		_, err = client.Do(apiCall{estimate: limiter.Consume{"rpm": 1, "tpm": 50}}.request(t, gone))
		require.Error(t, err)
		assert.Equal(t, before, consumed(t, rl, "tpm", 1_000_000, limits))
		assert.Equal(t, int64(2), tr.Stats().RolledBack)
	})
}
