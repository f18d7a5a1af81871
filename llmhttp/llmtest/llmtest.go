// Package llmtest is a fake LLM provider for tests: an HTTP server that
// speaks enough of OpenAI's chat completions API (POST /v1/chat/completions)
// and Anthropic's messages API (POST /v1/messages) for their SDKs, and
// enforces its own rate limits the way the providers do.
//
// Each API key (x-api-key, or the bearer token of Authorization) has
// a request bucket and a token bucket, refilled continuously at
// [Config.RPM] and [Config.TPM] per minute. A request is answered 429,
// with retry-after (and retry-after-ms for OpenAI), when either bucket
// cannot pay for it; otherwise it costs one request and its input plus
// output tokens. Every response carries the provider's rate-limit headers
// in its real format: x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// with Go-style reset durations for OpenAI,
// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset} with RFC
// 3339 reset times for Anthropic. Bodies carry the usage object; with
// "stream": true the answer is a server-sent event stream (OpenAI's final
// usage chunk when stream_options.include_usage is set; Anthropic's
// message_start and message_delta).
//
// [Config.HiddenShare] simulates another application on the same key, which
// the client under test does not see: it takes that share of each bucket's
// refill before the client can.
//
// [Config.EditHeaders] and [Config.EditUsage] make it send unusual but
// possible answers (a limit header far too low, a retry-after of years, a
// negative usage count), to test a client's defences.
//
// Token counts are deterministic: a text counts one token per four ASCII
// bytes (rounded up) and one per byte of anything else (the most a
// byte-level tokenizer bills: a Chinese prompt costs about three times what
// English of the same bytes does), each message four more; the answer has
// [Config.OutputTokens] tokens, fewer when the request's max_tokens (or
// max_completion_tokens, or max_output_tokens) says so, per choice: a
// request for n (or best_of) choices is billed each.
//
// POST /v1/responses is OpenAI's Responses API: its input is a string or a
// list of messages, and a previous_response_id (of a response this server
// gave) bills the whole earlier conversation (that response's input and
// output tokens) as input again, as the provider does.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zaelimiter/limiter/llmhttp"
)

// Config sets the fake provider's limits and answers. Zero fields take the
// defaults given.
type Config struct {
	// RPM and TPM are each key's requests and tokens per minute (and
	// bucket capacities). Zero means 10,000 and 1,000,000.
	RPM, TPM int64
	// HiddenShare is the fraction, in [0, 1), of each bucket's refill that
	// an unseen consumer takes.
	HiddenShare float64
	// OutputTokens is the length of each answer. Zero means 64.
	OutputTokens int64
	// Latency is how long the server thinks before answering.
	Latency time.Duration
	// StreamChunks is the number of content events of a stream. Zero
	// means 4.
	StreamChunks int
	// StartEmpty starts each key's buckets empty rather than full (no
	// initial burst).
	StartEmpty bool
	// Now is the server's clock. Nil means time.Now.
	Now func() time.Time
	// EditHeaders, when set, edits the headers of every answer (status
	// is its status code) before they are sent, to test a client against
	// unusual rate-limit headers (a limit far too low, a retry-after of
	// years).
	EditHeaders func(status int, h http.Header)
	// EditUsage, when set, edits every usage object the server writes (a
	// JSON body's, each usage event of a stream) before it is sent, to
	// test a client against unusual counts (negative, or too large to
	// sum). The server's own counters are not changed.
	EditUsage func(usage map[string]any)
	// Shape, when set, is asked how to answer each request, with its body,
	// before the rate limits: to report prompt caching and reasoning, a
	// service tier, or a provider error, per request.
	Shape func(body []byte) Shape
	// IgnoreCeiling makes every answer OutputTokens long whatever the
	// request's output ceiling: a provider (or a proxy) that does not
	// enforce max_tokens.
	IgnoreCeiling bool
	// Rules, when set, make the server count calls as that provider does
	// (a pack of llmhttp: [llmhttp.OpenAIRules], [llmhttp.AnthropicRules],
	// [llmhttp.BedrockRules], [llmhttp.BedrockOpenAIRules]): a call is
	// admitted when every limit the rules charge can pay what Admit takes
	// of it, and settled to what Settle holds. The limits are RPM, and
	// per minute those of Limits by name (tpm, itpm, otpm; tpm is TPM
	// when Limits has none).
	Rules *llmhttp.Rules
	// Limits are the per-minute token limits that Rules charge, by name.
	Limits map[string]int64
}

// Shape is how the server answers one request ([Config.Shape]). The zero
// Shape is the plain answer.
type Shape struct {
	// CacheRead and CacheWrite are the prompt's tokens the usage reports
	// read from and written to the prompt cache, CacheWriteLong the part
	// of CacheWrite written with the long lifetime (Anthropic's 1-hour
	// cache; OpenAI's chat completions report no such part). They are
	// cut to the prompt: OpenAI's prompt_tokens include them, Anthropic's
	// input_tokens are the rest.
	CacheRead, CacheWrite, CacheWriteLong int64
	// Reasoning is the part of the output the usage reports as reasoning
	// (OpenAI's reasoning_tokens, Anthropic's thinking_tokens), cut to
	// the output.
	Reasoning int64
	// ServiceTier replaces the service tier the answer reports (OpenAI's
	// "default", Anthropic's "standard").
	ServiceTier string
	// Status, when 400 or more, answers with that error instead, before
	// the rate limits: nothing is counted but the request and the error.
	Status int
	// Hang makes the server answer nothing until the client gives up (its
	// request's context ends).
	Hang bool
	// Stall makes a streamed answer stop after its first event until the
	// client gives up: the usage that reports the whole answer is never
	// sent. A JSON answer is sent whole.
	Stall bool
	// EditUsage edits this answer's usage objects, after Config.EditUsage.
	EditUsage func(usage map[string]any)
}

// KeyStats counts what the server did for one key.
type KeyStats struct {
	// Requests is every request; Admitted those answered 200,
	// RateLimited those the rate limits answered 429, and Errors those
	// answered with the error of their [Shape].
	Requests, Admitted, RateLimited, Errors int64
	// Tokens is the input plus output tokens of the admitted requests.
	Tokens int64
	// HiddenTokens and HiddenRequests are what the hidden consumer took.
	HiddenTokens, HiddenRequests float64
	// TokensLeft is the token bucket's balance.
	TokensLeft float64
}

// Server is the fake provider. It is safe for concurrent use; call Close
// when done.
type Server struct {
	// URL is the server's base URL (without /v1), for the SDKs' base URL
	// options.
	URL string

	cfg Config
	srv *httptest.Server

	mu   sync.Mutex // guards keys, seq and history
	keys map[string]*keyState
	seq  int64
	// history holds each Responses API response's input plus output
	// tokens, by id: what a turn continuing it bills as input.
	history map[string]int64
}

type keyState struct {
	reqs, toks bucket
	named      map[string]*bucket // Config.Rules' other limits
	stats      KeyStats
}

// bucket is a continuously refilled token bucket in float tokens.
type bucket struct {
	capacity, perMs float64
	level           float64
	last            time.Time
}

// advance refills b to now, then lets the hidden consumer take its share
// of the refill; it returns what the hidden consumer took.
func (b *bucket) advance(now time.Time, share float64) float64 {
	dt := float64(now.Sub(b.last).Microseconds()) / 1000
	if dt <= 0 {
		return 0
	}
	b.last = now
	earned := dt * b.perMs
	b.level = math.Min(b.capacity, b.level+earned)
	hidden := math.Min(share*earned, math.Max(b.level, 0))
	b.level -= hidden
	return hidden
}

// wait returns how long until b holds n at its nominal rate, as a provider
// computes its reset and retry-after figures: it cannot know what other
// traffic on the key will take meanwhile.
func (b *bucket) wait(n float64) time.Duration {
	if b.level >= n {
		return 0
	}
	ms := (n - b.level) / b.perMs
	return time.Duration(math.Ceil(ms * float64(time.Millisecond)))
}

// toFull returns how long until b is full at its nominal rate.
func (b *bucket) toFull() time.Duration { return b.wait(b.capacity) }

// NewServer starts a fake provider.
func NewServer(cfg Config) *Server {
	if cfg.RPM <= 0 {
		cfg.RPM = 10_000
	}
	if cfg.TPM <= 0 {
		cfg.TPM = 1_000_000
	}
	if cfg.OutputTokens <= 0 {
		cfg.OutputTokens = 64
	}
	if cfg.StreamChunks <= 0 {
		cfg.StreamChunks = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.HiddenShare = math.Min(math.Max(cfg.HiddenShare, 0), 0.99)
	s := &Server{cfg: cfg, keys: make(map[string]*keyState), history: make(map[string]int64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, openAI) })
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, anthropic) })
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, responses) })
	mux.HandleFunc("POST /model/{model}/invoke", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, bedrock) })
	mux.HandleFunc("POST /openai/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, bedrockOpenAI) })
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Stats returns the counters of key, its buckets refilled to now (the
// hidden consumer taking its share).
func (s *Server) Stats(key string) KeyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[key]
	if !ok {
		return KeyStats{}
	}
	now := s.cfg.Now()
	k.stats.HiddenRequests += k.reqs.advance(now, s.cfg.HiddenShare)
	k.stats.HiddenTokens += k.toks.advance(now, s.cfg.HiddenShare)
	k.stats.TokensLeft = k.toks.level
	return k.stats
}

type provider int

const (
	openAI provider = iota
	anthropic
	responses     // OpenAI's Responses API: OpenAI's headers and errors
	bedrock       // Bedrock runtime's InvokeModel of an Anthropic model: Anthropic's bodies, no rate-limit headers
	bedrockOpenAI // Bedrock's OpenAI-compatible chat completions: OpenAI's bodies, no rate-limit headers
)

// request is what the server reads of either API's request body.
type request struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	System              json.RawMessage `json:"system"`
	MaxTokens           int64           `json:"max_tokens"`
	MaxCompletionTokens int64           `json:"max_completion_tokens"`
	MaxOutputTokens     int64           `json:"max_output_tokens"`
	N                   int64           `json:"n"`
	BestOf              int64           `json:"best_of"`
	Input               json.RawMessage `json:"input"`
	Instructions        string          `json:"instructions"`
	PreviousResponseID  string          `json:"previous_response_id"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// countText counts a text: a token per four ASCII bytes (rounded up), one
// per byte of anything else.
func countText(s string) int64 {
	var ascii, other int64
	for i := 0; i < len(s); i++ {
		if s[i] < 0x80 {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+3)/4 + other
}

// textTokens counts a content value: a string, or an array of parts with
// "text" fields.
func textTokens(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return countText(s)
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var n int64
		for _, p := range parts {
			n += countText(p.Text)
		}
		return n
	}
	return countText(string(raw))
}

// InputTokens returns the input tokens the server counts for a request
// body of either API, as its usage reports them.
func InputTokens(body []byte) (int64, error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, fmt.Errorf("llmtest: request body: %w", err)
	}
	return req.inputTokens(), nil
}

// inputTokens counts the prompt the body carries (for the Responses API,
// without the earlier conversation a previous_response_id bills).
func (r *request) inputTokens() int64 {
	n := textTokens(r.System)
	if len(r.System) > 0 {
		n += 4
	}
	for _, m := range r.Messages {
		n += 4 + textTokens(m.Content)
	}
	if r.Instructions != "" {
		n += 4 + countText(r.Instructions)
	}
	if len(r.Input) > 0 {
		var items []message
		if r.Input[0] == '[' && json.Unmarshal(r.Input, &items) == nil {
			for _, m := range items {
				n += 4 + textTokens(m.Content)
			}
		} else {
			n += 4 + textTokens(r.Input)
		}
	}
	return n
}

// choices is how many answers the request is billed: n or best_of.
func (r *request) choices() int64 { return max(r.N, r.BestOf, 1) }

// outputTokens is the answer's length, every choice together.
func (s *Server) outputTokens(r *request) int64 {
	n := s.cfg.OutputTokens
	for _, c := range []int64{r.MaxTokens, r.MaxCompletionTokens, r.MaxOutputTokens} {
		if c > 0 && !s.cfg.IgnoreCeiling {
			n = min(n, c)
		}
	}
	return n * r.choices()
}

// apiKey returns the request's key: x-api-key (Anthropic) or the bearer
// token of Authorization (OpenAI, and Anthropic's newer SDKs).
func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// quota is the state of a key's buckets after a request, for the headers.
type quota struct {
	rpm, tpm             int64
	reqsLeft, toksLeft   int64
	reqsReset, toksReset time.Duration
	retryAfter           time.Duration // 429 only
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, p provider) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, p, http.StatusBadRequest, "invalid_request_error", "invalid JSON body")
		return
	}
	key := apiKey(r)
	if key == "" {
		writeError(w, p, http.StatusUnauthorized, "authentication_error", "missing API key")
		return
	}
	var shape Shape
	if s.cfg.Shape != nil {
		shape = s.cfg.Shape(body)
	}
	if shape.Hang {
		<-r.Context().Done()
		return
	}
	if shape.Status >= 400 {
		s.countError(key)
		typ := "api_error"
		if shape.Status == http.StatusTooManyRequests {
			typ = "rate_limit_error"
		}
		writeError(w, p, shape.Status, typ, "an error the test asked for")
		return
	}
	if s.cfg.Latency > 0 {
		t := time.NewTimer(s.cfg.Latency)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	in, out := req.inputTokens(), s.outputTokens(&req)
	if p == responses && req.PreviousResponseID != "" {
		s.mu.Lock()
		h, ok := s.history[req.PreviousResponseID]
		s.mu.Unlock()
		if !ok {
			writeError(w, p, http.StatusBadRequest, "invalid_request_error", "previous response not found")
			return
		}
		in += h
	}
	now := s.cfg.Now()
	var q quota
	var ok bool
	var id int64
	if s.cfg.Rules != nil {
		rq := llmhttp.RequestFromBody(body)
		if rq.Model == "" {
			rq.Model = r.PathValue("model")
		}
		u := ruleUsage(p, in, out, shape.cut(in, out))
		var rqq ruleQuota
		rqq, ok, id = s.admitRules(key, s.cfg.Rules.Admit(rq), s.cfg.Rules.Settle(rq, u), in+out, now)
		setRuleHeaders(w.Header(), p, rqq, now)
		q.retryAfter, q.tpm = rqq.retryAfter, rqq.limits["tpm"]
	} else {
		q, ok, id = s.admit(key, in+out, now)
		if p != bedrock && p != bedrockOpenAI {
			setQuotaHeaders(w.Header(), p, q, now)
		}
	}
	if !ok {
		retry := strconv.FormatInt(int64(math.Ceil(q.retryAfter.Seconds())), 10)
		w.Header().Set("Retry-After", retry)
		if p != anthropic && p != bedrock {
			w.Header().Set("Retry-After-Ms", strconv.FormatInt(q.retryAfter.Milliseconds()+1, 10))
		}
		if s.cfg.EditHeaders != nil {
			s.cfg.EditHeaders(http.StatusTooManyRequests, w.Header())
		}
		if p != anthropic && p != bedrock {
			writeError(w, p, http.StatusTooManyRequests, "rate_limit_exceeded",
				fmt.Sprintf("Rate limit reached for %s on tokens per min (TPM): Limit %d, Please try again in %v.", req.Model, q.tpm, q.retryAfter.Round(time.Millisecond)))
		} else {
			writeError(w, p, http.StatusTooManyRequests, "rate_limit_error",
				"This request would exceed the rate limit for your organization of "+strconv.FormatInt(q.tpm, 10)+" tokens per minute.")
		}
		return
	}
	if s.cfg.EditHeaders != nil {
		s.cfg.EditHeaders(http.StatusOK, w.Header())
	}
	a := answer{id: id, model: req.Model, in: in, out: out, created: now.Unix(), chunks: s.cfg.StreamChunks,
		edit: s.cfg.EditUsage, shape: shape.cut(in, out)}
	if shape.Stall {
		a.stall = r.Context().Done()
	}
	switch {
	case p == responses:
		s.mu.Lock()
		s.history[a.responseID()] = in + out
		s.mu.Unlock()
		if req.Stream {
			a.responsesStream(w)
		} else {
			a.responsesJSON(w)
		}
	case (p == openAI || p == bedrockOpenAI) && req.Stream:
		a.openAIStream(w, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	case p == openAI || p == bedrockOpenAI:
		a.openAIJSON(w)
	case req.Stream:
		a.anthropicStream(w)
	default:
		a.anthropicJSON(w)
	}
}

// countError counts a request answered with an error of Config.Shape.
func (s *Server) countError(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keyLocked(key, s.cfg.Now())
	k.stats.Requests++
	k.stats.Errors++
}

// keyLocked returns key's state, created with full (or, StartEmpty, empty)
// buckets at now. s.mu must be held.
func (s *Server) keyLocked(key string, now time.Time) *keyState {
	k := s.keys[key]
	if k == nil {
		k = &keyState{
			reqs: bucket{capacity: float64(s.cfg.RPM), perMs: float64(s.cfg.RPM) / 60_000, level: float64(s.cfg.RPM), last: now},
			toks: bucket{capacity: float64(s.cfg.TPM), perMs: float64(s.cfg.TPM) / 60_000, level: float64(s.cfg.TPM), last: now},
		}
		if s.cfg.StartEmpty {
			k.reqs.level, k.toks.level = 0, 0
		}
		s.keys[key] = k
	}
	return k
}

// cut returns sh with its counts cut to a prompt of in and an output of out
// tokens.
func (sh Shape) cut(in, out int64) Shape {
	sh.CacheRead = min(max(sh.CacheRead, 0), in)
	sh.CacheWrite = min(max(sh.CacheWrite, 0), in-sh.CacheRead)
	sh.CacheWriteLong = min(max(sh.CacheWriteLong, 0), sh.CacheWrite)
	sh.Reasoning = min(max(sh.Reasoning, 0), out)
	return sh
}

// admit charges key one request and tokens, if both buckets can pay.
func (s *Server) admit(key string, tokens int64, now time.Time) (quota, bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keyLocked(key, now)
	share := s.cfg.HiddenShare
	k.stats.HiddenRequests += k.reqs.advance(now, share)
	k.stats.HiddenTokens += k.toks.advance(now, share)
	k.stats.Requests++
	q := quota{rpm: s.cfg.RPM, tpm: s.cfg.TPM}
	ok := k.reqs.level >= 1 && k.toks.level >= float64(tokens)
	if ok {
		k.reqs.level--
		k.toks.level -= float64(tokens)
		k.stats.Admitted++
		k.stats.Tokens += tokens
	} else {
		k.stats.RateLimited++
		q.retryAfter = max(k.reqs.wait(1), k.toks.wait(float64(tokens)))
	}
	k.stats.TokensLeft = k.toks.level
	q.reqsLeft = int64(math.Max(math.Floor(k.reqs.level), 0))
	q.toksLeft = int64(math.Max(math.Floor(k.toks.level), 0))
	q.reqsReset, q.toksReset = k.reqs.toFull(), k.toks.toFull()
	s.seq++
	return q, ok, s.seq
}

// setQuotaHeaders writes the provider's rate-limit headers.
func setQuotaHeaders(h http.Header, p provider, q quota, now time.Time) {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	if p != anthropic {
		h.Set("X-Ratelimit-Limit-Requests", itoa(q.rpm))
		h.Set("X-Ratelimit-Limit-Tokens", itoa(q.tpm))
		h.Set("X-Ratelimit-Remaining-Requests", itoa(q.reqsLeft))
		h.Set("X-Ratelimit-Remaining-Tokens", itoa(q.toksLeft))
		h.Set("X-Ratelimit-Reset-Requests", q.reqsReset.Round(time.Millisecond).String())
		h.Set("X-Ratelimit-Reset-Tokens", q.toksReset.Round(time.Millisecond).String())
		return
	}
	at := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339) }
	h.Set("Anthropic-Ratelimit-Requests-Limit", itoa(q.rpm))
	h.Set("Anthropic-Ratelimit-Requests-Remaining", itoa(q.reqsLeft))
	h.Set("Anthropic-Ratelimit-Requests-Reset", at(q.reqsReset))
	h.Set("Anthropic-Ratelimit-Tokens-Limit", itoa(q.tpm))
	h.Set("Anthropic-Ratelimit-Tokens-Remaining", itoa(q.toksLeft))
	h.Set("Anthropic-Ratelimit-Tokens-Reset", at(q.toksReset))
}

func writeError(w http.ResponseWriter, p provider, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var v any
	if p != anthropic && p != bedrock {
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": typ}}
	} else {
		v = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	}
	_ = json.NewEncoder(w).Encode(v)
}
