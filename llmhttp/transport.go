package llmhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/zaelimiter/limiter"
)

// ErrNoCall is returned by [Transport.RoundTrip] for a request whose context
// has no [ContextWithCall] when [Options.RequireCall] is on.
var ErrNoCall = errors.New("llmhttp: request has no llmhttp.ContextWithCall")

// callKey is the context key of a request's call.
type callKey struct{}

// call is who pays for a request and its estimate.
type call struct {
	entity, resource string
	estimate         limiter.Consume
}

// ContextWithCall returns a context that makes the [Transport] charge
// requests made with it to (entity, resource). estimate is what Acquire
// takes before the request is sent, reconciled with the response's usage
// afterwards; nil means the transport's estimator ([Options.Estimator])
// decides.
func ContextWithCall(ctx context.Context, entity, resource string, estimate limiter.Consume) context.Context {
	return context.WithValue(ctx, callKey{}, call{entity: entity, resource: resource, estimate: maps.Clone(estimate)})
}

// UsageMapping turns a response's usage into the amounts its lease should
// finally hold, per limit name.
type UsageMapping func(u Usage) limiter.Consume

// DefaultUsageMapping charges one request to "rpm" and the total tokens to
// "tpm".
func DefaultUsageMapping(u Usage) limiter.Consume {
	return limiter.Consume{"rpm": 1, "tpm": u.TotalTokens}
}

// Estimator returns the amounts to acquire for a request that its
// [ContextWithCall] gave no estimate. It must not consume req.Body; read a copy
// through req.GetBody (the transport sets it when the request lacks it).
type Estimator func(req *http.Request) (limiter.Consume, error)

// DefaultEstimator acquires one "rpm" and, as "tpm", the most tokens the
// request can be billed: its prompt counted as [RequestFromBody] counts it
// (a token per four ASCII bytes of the body, per non-ASCII byte, and a
// bound per image and tool), the input it bills without carrying it as the
// transport priced it (or as [ContextWithHiddenInputTokens] bounds it), and the
// output ceiling the body asks for (max_tokens, max_completion_tokens or
// max_output_tokens), when it names one, times its choices (n, best_of).
// The response's usage corrects it.
func DefaultEstimator(req *http.Request) (limiter.Consume, error) {
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	r := RequestFromBody(body)
	hidden, ok := req.Context().Value(resolvedHiddenKey{}).(int64)
	if !ok && len(r.Hidden) > 0 {
		hidden, _ = hiddenBound(req.Context())
	}
	tokens := satAdd(r.PromptTokens, hidden)
	if r.OutputCeiling > 0 {
		tokens = satAdd(tokens, outputOf(r))
	}
	return limiter.Consume{"rpm": 1, "tpm": min(tokens, MaxCost)}, nil
}

// resolvedHiddenKey is the context key of the hidden input the transport
// priced for a request, for its estimator.
type resolvedHiddenKey struct{}

// estimatorRequest returns req with the hidden input the transport priced
// in its context.
func estimatorRequest(req *http.Request, hidden int64) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), resolvedHiddenKey{}, hidden))
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
// than committed at its estimate ([Options.Rollback]).
type Rollback uint8

// Outcomes for [Options.Rollback].
const (
	// RollbackOnTransportError: the base transport failed (no answer).
	RollbackOnTransportError Rollback = 1 << iota
	// RollbackOnServerError: the provider answered 5xx.
	RollbackOnServerError
	// RollbackOnEarlyClose: the body was closed, or reading it failed,
	// before the usage that reports the whole response was seen. Off by
	// default: the provider bills an answer it has begun, so the lease is
	// committed at the larger of the estimate and the prompt plus the
	// output seen so far.
	RollbackOnEarlyClose

	// DefaultRollback rolls back the answers the provider does not bill:
	// transport errors and 5xx.
	DefaultRollback = RollbackOnTransportError | RollbackOnServerError

	// RollbackNone, as [Options.Rollback], rolls back after none of the
	// outcomes above (the zero Rollback means DefaultRollback); with
	// others, it is ignored.
	RollbackNone Rollback = 1 << 7
)

// Transport is an [http.RoundTripper] that rate-limits LLM API calls with a
// [limiter.RateLimiter]: it acquires the estimate of a request made with
// [ContextWithCall] before sending it, reads the real token usage from the
// response body (JSON or an event stream) while the caller reads it, and
// adjusts and commits the lease when the body is read to the end or
// closed. Transport is safe for concurrent use; the zero value is not
// usable: call [NewTransport].
type Transport struct {
	rl   *limiter.RateLimiter
	base http.RoundTripper
	cfg  config
	st   counters
	warn warnings
	fb   feedbackStates
	hist history
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that limits with rl and sends through
// base (nil means [http.DefaultTransport]), configured by the option
// functions, which set fields of [Options].
func NewTransport(rl *limiter.RateLimiter, base http.RoundTripper, optFns ...func(*Options)) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	var o Options
	for _, fn := range optFns {
		fn(&o)
	}
	return &Transport{rl: rl, base: base, cfg: o.resolve()}
}

// RoundTrip sends req. A request without [ContextWithCall] is passed to the base
// transport untouched (or refused with [ErrNoCall], [Options.RequireCall]).
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
	a := attempt{req: req, estimate: c.estimate}
	if c.estimate == nil || t.cfg.costName != "" || t.clampOn() || t.cfg.rules != nil {
		var err error
		if a.req, err = withGetBody(req); err != nil {
			return nil, err
		}
		if a.body, err = requestBody(a.req); err != nil {
			closeBody(a.req)
			return nil, err
		}
		a.r = RequestFromBody(a.body)
		if unpriced := t.priceHidden(ctx, &a.r); len(unpriced) > 0 && t.cfg.costName != "" {
			closeBody(a.req)
			t.st.hiddenRefused.Add(1)
			return nil, &HiddenInputError{Entity: c.entity, Resource: c.resource, What: unpriced}
		}
	}
	if t.cfg.costName != "" {
		var err error
		if a.cost, err = t.newCostCall(a.r, c); err != nil {
			closeBody(a.req)
			return nil, err
		}
	}
	if a.estimate == nil {
		est, err := t.cfg.estimator(estimatorRequest(a.req, a.r.HiddenTokens))
		if err != nil {
			closeBody(a.req)
			return nil, fmt.Errorf("llmhttp: estimate %s/%s: %w", c.entity, c.resource, err)
		}
		a.estimate = est
	}
	if a.cost != nil {
		if v, ok := a.estimate[a.cost.name]; ok {
			a.cost.estimate, a.cost.worstCase = v, false // the caller's own estimate of the cost
		} else {
			a.estimate = maps.Clone(a.estimate)
			if a.estimate == nil {
				a.estimate = limiter.Consume{}
			}
			a.estimate[a.cost.name] = a.cost.estimate
		}
	}
	opts, learned := t.acquireOptions(c)
	lease, err := t.rl.Acquire(ctx, c.entity, c.resource, a.estimate, opts...)
	if err != nil && errors.Is(err, limiter.ErrRateLimited) {
		lease, a, err = t.clampAcquire(ctx, c, a, c.estimate, opts, err)
	}
	if err != nil {
		if errors.Is(err, limiter.ErrRateLimited) {
			t.st.denied.Add(1)
			err = t.boundRetryAfter(c, learned, err)
		}
		closeBody(a.req)
		return nil, err
	}
	req, estimate, cost := a.req, a.estimate, a.cost
	lc := &leaseCall{t: t, ctx: ctx, call: c, estimate: estimate, lease: lease, cost: cost,
		conversation: a.r.Conversation, rq: a.r}
	lc.rq.Model = requestModel(lc.rq.Model, req)
	// A panic from here to the hand-over of the body (the base transport's,
	// or a usage mapping's) ends the lease before it goes on, so that its
	// slots in flight come back.
	defer lc.endOnPanic()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		lc.endUnbilled(t.cfg.rollback&RollbackOnTransportError != 0)
		return nil, err
	}
	q := ParseQuota(resp.Header, t.cfg.now())
	if q.Malformed > 0 {
		t.st.headersMalformed.Add(int64(q.Malformed))
	}
	switch {
	case resp.StatusCode >= 500:
		lc.endUnbilled(t.cfg.rollback&RollbackOnServerError != 0)
		return resp, nil
	case resp.StatusCode == http.StatusTooManyRequests && !t.cfg.noFeedback:
		// The provider's budget is spent: the estimate stays taken (given
		// back, it would let the next caller into the same refusal), and
		// the cooldown lowers the bucket further.
		t.st.providerLimited.Add(1)
		statuses := t.ownStatuses(c, lease, q)
		lc.refundCost() // the provider bills no refused request
		lc.endUnbilled(false)
		t.feedback(ctx, c, q, resp.StatusCode, statuses)
		return resp, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		if resp.StatusCode == http.StatusTooManyRequests {
			t.st.providerLimited.Add(1)
		}
		lc.endUnbilled(true)
		return resp, nil
	}
	t.feedback(ctx, c, q, resp.StatusCode, t.ownStatuses(c, lease, q))
	if resp.Body == nil || resp.Body == http.NoBody {
		lc.end(endMissing, parsed{})
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
	cost     *costCall // nil without Options.CostLimit
	ended    atomic.Bool
	// conversation is the request's conversation id: its usage is the
	// history the next turn bills.
	conversation string
	// rq is the request as sent, for the settlement of provider rules.
	rq Request
}

// amountsOf maps a usage to the amounts the lease should hold: the
// provider rules' settlement ([Options.Rules]), or the usage mapping's.
func (lc *leaseCall) amountsOf(u Usage) limiter.Consume {
	if r := lc.t.cfg.rules; r != nil {
		return r.Settle(lc.rq, u)
	}
	return lc.t.cfg.mapping(u)
}

// endKind is how a lease ends.
type endKind int

const (
	// endUsage: the usage reporting the whole response was read; the
	// lease is adjusted to it.
	endUsage endKind = iota
	// endMalformed: a usage was malformed; the estimate is committed.
	endMalformed
	// endMissing: the body ended without its usage; the larger of the
	// estimate and what was seen is committed.
	endMissing
	// endEarly: the body was closed or failed before its usage; like
	// endMissing, or rolled back with RollbackOnEarlyClose.
	endEarly
	// endCut: a stream's output passed its reservation and was cut;
	// what it showed is committed.
	endCut
)

// endUnbilled ends a lease whose answer had no body to read: rolled back,
// or committed at the estimate.
func (lc *leaseCall) endUnbilled(rollback bool) {
	if lc.ended.Swap(true) {
		return
	}
	if rollback {
		lc.rollback()
		return
	}
	lc.commit()
}

// endOnPanic, deferred, ends the lease when the call panics before its
// lease ended (rolled back: no answer was read) and lets the panic go on.
func (lc *leaseCall) endOnPanic() {
	if p := recover(); p != nil {
		lc.endUnbilled(true)
		panic(p)
	}
}

// end ends the lease of an answer whose body was read (p is what its
// parser saw). It runs once.
func (lc *leaseCall) end(kind endKind, p parsed) {
	if lc.ended.Swap(true) {
		return
	}
	if lc.settle(kind, p) {
		lc.commit()
	}
}

// settle adjusts the lease to the answer's end, and reports whether it is
// to be committed (false: it was rolled back). A panic of the code it runs
// (a usage mapping's, provider rules') commits the lease as it stands, at
// its estimate, and goes on: the lease still ends, and its slots in flight
// come back.
func (lc *leaseCall) settle(kind endKind, p parsed) (commit bool) {
	defer func() {
		if r := recover(); r != nil {
			lc.commit()
			panic(r)
		}
	}()
	t := lc.t
	switch kind {
	case endUsage:
		amounts := lc.amountsOf(p.usage)
		if negativeAmount(amounts) {
			lc.malformed("the usage mapping returned a negative amount")
			break
		}
		t.st.usageSeen.Add(1)
		t.st.tokens.Add(p.usage.TotalTokens)
		var overCost int64
		if lc.cost != nil {
			c := lc.cost.of(p)
			t.st.cost.Add(c)
			amounts = withAmount(amounts, lc.cost.name, c)
			overCost = max(amounts[lc.cost.name]-lc.cost.estimate, 0)
		}
		lc.overReserved(overCost)
		if strings.HasPrefix(p.responseID, "resp_") {
			// A Responses API response, which a later turn may continue
			// (chat completions' ids are never continued: not kept).
			t.hist.put("resp:"+p.responseID, p.usage.TotalTokens)
		}
		if lc.conversation != "" {
			t.hist.put("conv:"+lc.conversation, p.usage.TotalTokens)
		}
		lc.adjustTo(amounts, false)
	case endMalformed:
		lc.malformed("the response's usage is malformed")
	case endEarly:
		if t.cfg.rollback&RollbackOnEarlyClose != 0 {
			lc.rollback()
			return false
		}
		t.st.endedWithoutUsage.Add(1)
		t.warnOnce(&t.warn.endedWithoutUsage, "llmhttp: a response body ended before its usage; charged the estimate or what was seen, if larger",
			"entity", lc.call.entity, "resource", lc.call.resource)
		lc.adjustTo(lc.seenAmounts(p), true)
	case endMissing:
		t.st.usageMissing.Add(1)
		lc.adjustTo(lc.seenAmounts(p), true)
	case endCut:
		t.st.streamsCut.Add(1)
		t.warnOnce(&t.warn.streamCut, "llmhttp: a stream's output passed its reservation; cut, and charged what it showed",
			"entity", lc.call.entity, "resource", lc.call.resource)
		seen := lc.seenAmounts(p)
		var overCost int64
		if lc.cost != nil {
			overCost = max(seen[lc.cost.name]-lc.cost.estimate, 0)
		}
		lc.overReserved(overCost)
		lc.adjustTo(seen, true)
	}
	return true
}

// overReserved counts and logs a settlement of the cost above the worst
// case the transport reserved for it; overCost is the excess.
func (lc *leaseCall) overReserved(overCost int64) {
	if overCost <= 0 || lc.cost == nil || !lc.cost.worstCase {
		return
	}
	t := lc.t
	t.st.overReserved.Add(1)
	t.st.overReservedCost.Add(overCost)
	t.warnOnce(&t.warn.overReserved, "llmhttp: a response was billed more than its worst case; settled exactly, the budget overdrawn by the difference",
		"entity", lc.call.entity, "resource", lc.call.resource, "reserved", lc.cost.estimate, "over", overCost)
}

// malformed counts a malformed usage, whose lease keeps its estimate.
func (lc *leaseCall) malformed(why string) {
	t := lc.t
	t.st.usageMalformed.Add(1)
	t.warnOnce(&t.warn.usageMalformed, "llmhttp: "+why+"; charged the estimate",
		"entity", lc.call.entity, "resource", lc.call.resource)
}

// seenAmounts maps what a body showed before its usage: the usage events
// so far (Anthropic's message_start has the prompt) with the output text
// seen so far when that is more, and its cost; nil when nothing was seen.
func (lc *leaseCall) seenAmounts(p parsed) limiter.Consume {
	if !p.seen && p.outputSeen == 0 {
		return nil
	}
	u := p.usage
	if p.outputSeen > u.OutputTokens {
		u.TotalTokens += p.outputSeen - u.OutputTokens
		u.OutputTokens = p.outputSeen
	}
	amounts := lc.amountsOf(u)
	if negativeAmount(amounts) {
		amounts = nil
	}
	if lc.cost != nil {
		p.usage = u
		amounts = withAmount(amounts, lc.cost.name, lc.cost.of(p))
	}
	return amounts
}

// pastReservation reports whether what a stream showed (p) costs more than
// the worst case its lease reserved for its cost ([Options.CostLimit]; an
// estimate of the cost given by the caller is not a worst case, nor are
// the token estimates, which count no output without a ceiling).
func (lc *leaseCall) pastReservation(p parsed) bool {
	if lc.cost == nil || !lc.cost.worstCase {
		return false
	}
	u := p.usage
	if p.outputSeen > u.OutputTokens {
		u.TotalTokens += p.outputSeen - u.OutputTokens
		u.OutputTokens = p.outputSeen
	}
	p.usage = u
	// Before the usage says how the answer was served, it is priced as the
	// request asked, as its estimate is.
	for _, m := range lc.cost.mods {
		switch {
		case m == FastMode && u.Speed == "":
			p.usage.Speed = string(m)
		case strings.HasPrefix(string(m), "geo:") && u.InferenceGeo == "":
			p.usage.InferenceGeo = strings.TrimPrefix(string(m), "geo:")
		case (m == Flex || m == Priority) && u.ServiceTier == "":
			p.usage.ServiceTier = string(m)
		}
	}
	return lc.cost.of(p) > lc.cost.estimate
}

// withAmount returns a copy of c that holds v under name, unless c holds
// the name already (a usage mapping's own amount).
func withAmount(c limiter.Consume, name string, v int64) limiter.Consume {
	if _, ok := c[name]; ok {
		return c
	}
	out := maps.Clone(c)
	if out == nil {
		out = limiter.Consume{}
	}
	out[name] = v
	return out
}

func negativeAmount(c limiter.Consume) bool {
	for _, v := range c {
		if v < 0 {
			return true
		}
	}
	return false
}

// adjustTo adjusts the lease so that it holds amounts instead of the
// estimate, for every limit it holds; raiseOnly keeps the estimate where
// amounts are lower.
func (lc *leaseCall) adjustTo(amounts limiter.Consume, raiseOnly bool) {
	if len(amounts) == 0 {
		return
	}
	held := lc.lease.Consumed()
	delta := limiter.Consume{}
	for name, v := range amounts {
		if _, ok := held[name]; !ok {
			continue
		}
		if d := v - lc.estimate[name]; d > 0 || (d < 0 && !raiseOnly) {
			delta[name] = d
		}
	}
	if len(delta) == 0 {
		return
	}
	if err := lc.lease.Adjust(delta); err != nil {
		lc.t.st.endErrors.Add(1)
		lc.t.cfg.logger.Warn("llmhttp: adjust failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
	}
}

func (lc *leaseCall) commit() {
	t := lc.t
	if err := lc.lease.Commit(lc.ctx); err != nil {
		t.st.endErrors.Add(1)
		t.cfg.logger.Warn("llmhttp: commit failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
		return
	}
	t.st.committed.Add(1)
}

func (lc *leaseCall) rollback() {
	t := lc.t
	if err := lc.lease.Rollback(lc.ctx); err != nil {
		t.st.endErrors.Add(1)
		t.cfg.logger.Warn("llmhttp: rollback failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
		return
	}
	t.st.rolledBack.Add(1)
}
