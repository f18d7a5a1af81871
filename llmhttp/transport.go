package llmhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter"
)

// ErrNoCall is returned by [Transport.RoundTrip] for a request whose context
// has no [WithCall] when [WithRequireCall] is on.
var ErrNoCall = errors.New("llmhttp: request has no llmhttp.WithCall")

// callKey is the context key of a request's call.
type callKey struct{}

// call is who pays for a request and its estimate.
type call struct {
	entity, resource string
	estimate         limiter.Consume
}

// WithCall returns a context that makes the [Transport] charge requests made
// with it to (entity, resource). estimate is what Acquire takes before the
// request is sent, reconciled with the response's usage afterwards; nil
// means the transport's estimator ([WithEstimator]) decides.
func WithCall(ctx context.Context, entity, resource string, estimate limiter.Consume) context.Context {
	return context.WithValue(ctx, callKey{}, call{entity: entity, resource: resource, estimate: maps.Clone(estimate)})
}

// UsageMapping turns a response's usage into the amounts its lease should
// finally hold, per limit name.
type UsageMapping func(u Usage) limiter.Consume

// DefaultUsageMapping charges one request to "rpm" and the total tokens to
// "tpm".
func DefaultUsageMapping(u Usage) limiter.Consume {
	return limiter.Consume{limiter.LimitRPM: 1, limiter.LimitTPM: u.TotalTokens}
}

// Estimator returns the amounts to acquire for a request that its
// [WithCall] gave no estimate. It must not consume req.Body; read a copy
// through req.GetBody (the transport sets it when the request lacks it).
type Estimator func(req *http.Request) (limiter.Consume, error)

// DefaultEstimator acquires one "rpm" and, as "tpm", the request body's
// bytes divided by four (rounded up: about four bytes of English or JSON
// make a token, so the JSON around the prompt makes this an overestimate)
// plus the output ceiling the body asks for (max_tokens,
// max_completion_tokens or max_output_tokens), when it names one. The
// response's usage corrects it.
func DefaultEstimator(req *http.Request) (limiter.Consume, error) {
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	tokens := int64(len(body)+3) / 4
	var ceil struct {
		MaxTokens           int64 `json:"max_tokens"`
		MaxCompletionTokens int64 `json:"max_completion_tokens"`
		MaxOutputTokens     int64 `json:"max_output_tokens"`
	}
	if json.Unmarshal(body, &ceil) == nil {
		tokens += max(ceil.MaxTokens, ceil.MaxCompletionTokens, ceil.MaxOutputTokens, 0)
	}
	return limiter.Consume{limiter.LimitRPM: 1, limiter.LimitTPM: tokens}, nil
}

// requestBody returns a copy of req's body through GetBody.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return nil, nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("llmhttp: read request body: %w", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("llmhttp: read request body: %w", err)
	}
	return b, nil
}

// Rollback is a set of outcomes after which a lease is rolled back rather
// than committed at its estimate ([WithRollback]).
type Rollback uint8

// Outcomes for [WithRollback].
const (
	// RollbackOnTransportError: the base transport failed, or reading the
	// body failed before the usage was seen.
	RollbackOnTransportError Rollback = 1 << iota
	// RollbackOnServerError: the provider answered 5xx.
	RollbackOnServerError
	// RollbackOnEarlyClose: the caller closed the body before it was read
	// to the end and before any usage was seen.
	RollbackOnEarlyClose

	// DefaultRollback is every outcome above.
	DefaultRollback = RollbackOnTransportError | RollbackOnServerError | RollbackOnEarlyClose
)

// Option configures a [Transport].
type Option func(*config)

type config struct {
	requireCall bool
	mapping     UsageMapping
	estimator   Estimator
	rollback    Rollback
	acquireOpts []limiter.AcquireOption
	logger      *slog.Logger
	now         func() time.Time

	// Provider feedback (feedback.go).
	noFeedback bool
	quota      QuotaMapping
	threshold  float64
	reserve    float64
	learn      bool
}

// WithRequireCall makes the transport refuse, with [ErrNoCall], a request
// whose context has no [WithCall]. Off by default: such a request passes
// through untouched.
func WithRequireCall(on bool) Option { return func(c *config) { c.requireCall = on } }

// WithUsageMapping sets how a response's usage maps to limit names
// ([DefaultUsageMapping] by default). The amounts it returns replace the
// estimate: the lease is adjusted by the difference for every limit the
// lease holds; names it holds no limit for are dropped.
func WithUsageMapping(m UsageMapping) Option {
	return func(c *config) {
		if m != nil {
			c.mapping = m
		}
	}
}

// WithEstimator sets the estimate of a request whose [WithCall] has none
// ([DefaultEstimator] by default).
func WithEstimator(e Estimator) Option {
	return func(c *config) {
		if e != nil {
			c.estimator = e
		}
	}
}

// WithRollback sets the outcomes after which the lease is rolled back;
// after the others it is committed at its estimate ([DefaultRollback] by
// default). A response other than 2xx and 5xx (a 4xx: the provider refused
// the request and charged nothing) is always rolled back, except a 429 with
// provider feedback on ([WithFeedback]): its estimate stays taken.
func WithRollback(r Rollback) Option { return func(c *config) { c.rollback = r } }

// WithAcquireOptions passes opts to every Acquire, e.g.
// limiter.WithLimits.
func WithAcquireOptions(opts ...limiter.AcquireOption) Option {
	return func(c *config) { c.acquireOpts = append([]limiter.AcquireOption(nil), opts...) }
}

// WithLogger makes the transport log what it cannot do silently: failed
// commits and rollbacks (Warn). Nil, the default, logs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithClock sets the clock against which Anthropic's reset times are
// read. Nil means time.Now, the default.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Transport is an [http.RoundTripper] that rate-limits LLM API calls with a
// [limiter.RateLimiter]: it acquires the estimate of a request made with
// [WithCall] before sending it, reads the real token usage from the
// response body (JSON or an event stream) while the caller reads it, and
// adjusts and commits the lease when the body is read to the end or
// closed. Transport is safe for concurrent use; the zero value is not
// usable: call [NewTransport].
type Transport struct {
	rl   *limiter.RateLimiter
	base http.RoundTripper
	cfg  config
	st   counters
	fb   feedbackStates
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that limits with rl and sends through
// base (nil means [http.DefaultTransport]).
func NewTransport(rl *limiter.RateLimiter, base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{rl: rl, base: base, cfg: config{
		mapping: DefaultUsageMapping, estimator: DefaultEstimator, rollback: DefaultRollback,
		quota: DefaultQuotaMapping, threshold: DefaultFeedbackThreshold,
		reserve: DefaultFeedbackReserve,
	}}
	for _, o := range opts {
		o(&t.cfg)
	}
	if t.cfg.now == nil {
		t.cfg.now = time.Now
	}
	if t.cfg.logger == nil {
		t.cfg.logger = slog.New(slog.DiscardHandler)
	}
	return t
}

// RoundTrip sends req. A request without [WithCall] is passed to the base
// transport untouched (or refused with [ErrNoCall], [WithRequireCall]).
// Otherwise the estimate is acquired first; a denial returns the limiter's
// *[limiter.RateLimitExceededError] (its RetryAfter says when to retry) and
// nothing is sent. The response's body is handed to the caller byte for
// byte as it arrives; the lease ends when it is read to the end or closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, ok := req.Context().Value(callKey{}).(call)
	if !ok {
		if t.cfg.requireCall {
			closeBody(req)
			return nil, ErrNoCall
		}
		t.st.passedThrough.Add(1)
		return t.base.RoundTrip(req)
	}
	t.st.requests.Add(1)
	ctx := req.Context()
	estimate := c.estimate
	if estimate == nil {
		var err error
		if req, err = withGetBody(req); err != nil {
			return nil, err
		}
		if estimate, err = t.cfg.estimator(req); err != nil {
			closeBody(req)
			return nil, fmt.Errorf("llmhttp: estimate %s/%s: %w", c.entity, c.resource, err)
		}
	}
	lease, err := t.rl.Acquire(ctx, c.entity, c.resource, estimate, t.acquireOptions(ctx, c)...)
	if err != nil {
		if errors.Is(err, limiter.ErrRateLimited) {
			t.st.denied.Add(1)
		}
		closeBody(req)
		return nil, err
	}
	lc := &leaseCall{t: t, ctx: ctx, call: c, estimate: estimate, lease: lease}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		lc.end(t.cfg.rollback&RollbackOnTransportError != 0, nil)
		return nil, err
	}
	q := ParseQuota(resp.Header, t.cfg.now())
	if q.Malformed > 0 {
		t.st.headersMalformed.Add(int64(q.Malformed))
	}
	switch {
	case resp.StatusCode >= 500:
		lc.end(t.cfg.rollback&RollbackOnServerError != 0, nil)
		return resp, nil
	case resp.StatusCode == http.StatusTooManyRequests && !t.cfg.noFeedback:
		// The provider's budget is spent: the estimate stays taken (given
		// back, it would let the next caller into the same refusal), and
		// the cooldown lowers the bucket further.
		t.st.providerLimited.Add(1)
		lc.end(false, nil)
		t.feedback(ctx, req, c, q, resp.StatusCode, nil)
		return resp, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		if resp.StatusCode == http.StatusTooManyRequests {
			t.st.providerLimited.Add(1)
		}
		lc.end(true, nil)
		return resp, nil
	}
	t.feedback(ctx, req, c, q, resp.StatusCode, lease)
	if resp.Body == nil || resp.Body == http.NoBody {
		lc.end(false, nil)
		return resp, nil
	}
	resp.Body = newUsageBody(resp.Body, newParser(resp.Header.Get("Content-Type")), lc)
	return resp, nil
}

// withGetBody returns req, or a shallow copy of it whose body can be read
// again through GetBody (the body read into memory), so that an estimator
// can look at it without consuming what the base transport sends.
func withGetBody(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody || req.GetBody != nil {
		return req, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("llmhttp: read request body: %w", err)
	}
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r2.ContentLength = int64(len(b))
	return r2, nil
}

// closeBody closes req's body, as a RoundTripper must even when it sends
// nothing.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// newParser picks the usage parser for a response's content type.
func newParser(contentType string) usageParser {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		return &sseUsageParser{}
	}
	return &jsonUsageParser{}
}

// leaseCall is one request's lease until it ends.
type leaseCall struct {
	t        *Transport
	ctx      context.Context
	call     call
	estimate limiter.Consume
	lease    *limiter.Lease
	ended    atomic.Bool
}

// end commits the lease, adjusted to usage when it is known, or rolls it
// back. It runs once.
func (lc *leaseCall) end(rollback bool, usage *Usage) {
	if lc.ended.Swap(true) {
		return
	}
	t := lc.t
	if rollback {
		if err := lc.lease.Rollback(lc.ctx); err != nil {
			t.st.endErrors.Add(1)
			t.cfg.logger.Warn("llmhttp: rollback failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
			return
		}
		t.st.rolledBack.Add(1)
		return
	}
	if usage != nil {
		t.st.usageSeen.Add(1)
		t.st.tokens.Add(usage.TotalTokens)
		held := lc.lease.Consumed()
		delta := limiter.Consume{}
		for name, v := range t.cfg.mapping(*usage) {
			if _, ok := held[name]; ok {
				if d := v - lc.estimate[name]; d != 0 {
					delta[name] = d
				}
			}
		}
		if len(delta) > 0 {
			if err := lc.lease.Adjust(delta); err != nil {
				t.st.endErrors.Add(1)
				t.cfg.logger.Warn("llmhttp: adjust failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
			}
		}
	} else {
		t.st.usageMissing.Add(1)
	}
	if err := lc.lease.Commit(lc.ctx); err != nil {
		t.st.endErrors.Add(1)
		t.cfg.logger.Warn("llmhttp: commit failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
		return
	}
	t.st.committed.Add(1)
}
