package llmhttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// This file holds the provider feedback: what the provider's rate-limit
// headers and 429s do to the shared budget.
//
//   - Correction: when a response says the provider has fewer tokens (or
//     requests) left than the shared bucket holds, by more than the
//     threshold, the bucket is lowered to the provider's figure
//     ([limiter.RateLimiter.LowerTokens]: one read and one conditional write,
//     seen by every process at once, never raising a balance).
//   - Cooldown: a 429 puts the bucket into a debt that refill pays off at
//     the provider's retry time, so that every process's next acquire is
//     refused with that RetryAfter.
//   - Learned limits: a provider limit below the configured one is
//     enforced by this transport's acquires for as long as the provider
//     reports it (with a log line and Stats.LimitsLearned); with
//     [WithLearnLimits] it is also written as the entity's stored limit,
//     audited with the principal "provider:" + the API's host.

// QuotaMapping names the limits that the provider's request and token
// figures correct. Empty names are not corrected.
type QuotaMapping struct {
	Requests, Tokens string
}

// DefaultQuotaMapping maps the provider's requests to "rpm" and its tokens
// to "tpm", like [DefaultUsageMapping].
var DefaultQuotaMapping = QuotaMapping{Requests: limiter.LimitRPM, Tokens: limiter.LimitTPM}

// DefaultFeedbackThreshold is the gap, as a fraction of the limit's
// capacity, above which a provider's remaining figure lowers the shared
// bucket ([WithFeedbackThreshold]).
const DefaultFeedbackThreshold = 0.002

// DefaultFeedbackReserve is the share of the limit's capacity that a
// correction leaves with the provider ([WithFeedbackReserve]).
const DefaultFeedbackReserve = 0.01

// maxFeedbackKeys bounds the per-(entity, resource) feedback state a
// transport keeps; the least recently used goes first.
const maxFeedbackKeys = 10_000

// WithFeedback turns the provider feedback on (the default) or off.
func WithFeedback(on bool) Option { return func(c *config) { c.noFeedback = !on } }

// WithQuotaMapping sets which limits the provider's figures correct
// ([DefaultQuotaMapping] by default).
func WithQuotaMapping(m QuotaMapping) Option { return func(c *config) { c.quota = m } }

// WithFeedbackThreshold sets how far above the provider's remaining figure
// the shared bucket must be, as a fraction of the limit's capacity, before
// it is lowered ([DefaultFeedbackThreshold] by default). Each lowering
// costs a read and a write of the bucket item.
func WithFeedbackThreshold(fraction float64) Option {
	return func(c *config) { c.threshold = max(fraction, 0) }
}

// WithFeedbackReserve sets how much below the provider's remaining figure
// a correction lowers the shared bucket, as a fraction of the limit's
// capacity ([DefaultFeedbackReserve] by default). Between two corrections
// the bucket refills at the configured (or learned) rate, faster than the
// provider when other traffic shares the key, and requests admitted by
// other processes are still on their way to the provider: the reserve
// absorbs both, so that they do not meet a 429. It is held back once, not
// per minute; a provider holding less than the reserve puts the bucket
// into a debt that refill pays off.
func WithFeedbackReserve(fraction float64) Option {
	return func(c *config) { c.reserve = min(max(fraction, 0), 1) }
}

// WithLearnLimits makes a provider limit below the configured one also
// be written as the entity's stored limit for the resource (an audit event
// whose principal is "provider:" + the API's host), so that every process
// enforces it from its next config read. Off by default: the lower limit is
// then enforced by this transport only, for as long as the provider reports
// it. Either way a limit is only ever lowered.
func WithLearnLimits(on bool) Option { return func(c *config) { c.learn = on } }

// feedbackKey identifies the feedback state of one (entity, resource).
type feedbackKey struct{ entity, resource string }

// feedbackState is what the transport knows of one (entity, resource).
type feedbackState struct {
	mu sync.Mutex // guards learned
	// learned maps a limit name to the provider's lower limit (tokens per
	// minute), present while the provider reports it.
	learned map[string]int64

	lowering atomic.Bool // a correction is in flight
}

// feedbackStates is the bounded map of feedback states.
type feedbackStates struct {
	mu    sync.Mutex // guards cache
	cache *lru.Cache[feedbackKey, *feedbackState]
}

func (f *feedbackStates) get(k feedbackKey, create bool) *feedbackState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cache == nil {
		f.cache = lru.New[feedbackKey, *feedbackState](maxFeedbackKeys, 0)
	}
	now := time.Time{}
	if s, ok := f.cache.Get(k, now); ok {
		return s
	}
	if !create {
		return nil
	}
	s := &feedbackState{}
	f.cache.Add(k, s, now)
	return s
}

// acquireOptions returns the options of an acquire for c: the transport's,
// plus the learned lower limits.
func (t *Transport) acquireOptions(ctx context.Context, c call) []limiter.AcquireOption {
	if t.cfg.noFeedback {
		return t.cfg.acquireOpts
	}
	st := t.fb.get(feedbackKey{c.entity, c.resource}, false)
	if st == nil {
		return t.cfg.acquireOpts
	}
	st.mu.Lock()
	learned := len(st.learned) > 0
	st.mu.Unlock()
	if !learned {
		return t.cfg.acquireOpts
	}
	limits, ok := t.effectiveLimits(ctx, c, st)
	if !ok {
		return t.cfg.acquireOpts
	}
	return append(append([]limiter.AcquireOption(nil), t.cfg.acquireOpts...), limiter.WithLimits(limits...))
}

// effectiveLimits returns the configured limits of c with the learned
// ones lowered, and whether any is lowered.
func (t *Transport) effectiveLimits(ctx context.Context, c call, st *feedbackState) ([]limiter.Limit, bool) {
	configured, _, err := t.rl.ResolveLimits(ctx, c.entity, c.resource)
	if err != nil || len(configured) == 0 {
		return nil, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]limiter.Limit, len(configured))
	lowered := false
	for i, l := range configured {
		out[i] = l
		if perMinute, ok := st.learned[l.Name]; ok {
			if nl, ok := lowerLimit(l, perMinute); ok {
				out[i], lowered = nl, true
			}
		}
	}
	return out, lowered
}

// lowerLimit returns l scaled down so that it refills perMinute tokens a
// minute (its capacity scaled alike), when that is lower than l.
func lowerLimit(l limiter.Limit, perMinute int64) (limiter.Limit, bool) {
	if l.RefillPeriod <= 0 || l.RefillAmount <= 0 || perMinute <= 0 {
		return l, false
	}
	// The provider's limits are per minute; l refills RefillAmount every
	// RefillPeriod.
	configuredPerMinute := float64(l.RefillAmount) * float64(time.Minute) / float64(l.RefillPeriod)
	if float64(perMinute) >= configuredPerMinute {
		return l, false
	}
	f := float64(perMinute) / configuredPerMinute
	out := l
	out.RefillAmount = max(int64(float64(l.RefillAmount)*f), 1)
	out.Capacity = max(int64(float64(l.Capacity)*f), 1)
	return out, true
}

// feedback applies what a response's headers say: learned limits, then a
// correction (2xx) or a cooldown (429). lease is the request's lease, nil
// for a 429 (already rolled back).
func (t *Transport) feedback(ctx context.Context, req *http.Request, c call, q Quota, status int, lease *limiter.Lease) {
	if t.cfg.noFeedback || (!q.Known()) {
		return
	}
	st := t.fb.get(feedbackKey{c.entity, c.resource}, true)
	t.learnLimits(ctx, req, c, q, st)
	if status == http.StatusTooManyRequests {
		t.cooldown(ctx, c, q, st)
		return
	}
	if lease == nil {
		return
	}
	t.correct(ctx, c, q, st, lease)
}

// learnLimits records the provider's limits that are below the configured
// ones, and forgets those it no longer reports lower.
func (t *Transport) learnLimits(ctx context.Context, req *http.Request, c call, q Quota, st *feedbackState) {
	figures := []struct {
		name string
		ql   QuotaLimit
	}{{t.cfg.quota.Tokens, q.Tokens}, {t.cfg.quota.Requests, q.Requests}}
	var changed []string
	st.mu.Lock()
	for _, f := range figures {
		if f.name == "" || f.ql.Has&HasLimit == 0 {
			continue
		}
		old, had := st.learned[f.name]
		if had && old == f.ql.Limit {
			continue
		}
		if st.learned == nil {
			st.learned = make(map[string]int64)
		}
		st.learned[f.name] = f.ql.Limit
		changed = append(changed, f.name)
	}
	st.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	// Keep only the figures below the configured limits.
	configured, _, err := t.rl.ResolveLimits(ctx, c.entity, c.resource)
	if err != nil {
		return
	}
	var lowered []limiter.Limit
	st.mu.Lock()
	for _, name := range changed {
		perMinute := st.learned[name]
		below := false
		for _, l := range configured {
			if l.Name == name {
				if nl, ok := lowerLimit(l, perMinute); ok {
					below = true
					lowered = append(lowered, nl)
					t.cfg.logger.Info("llmhttp: the provider's limit is below the configured one; enforcing it",
						"entity", c.entity, "resource", c.resource, "limit", name,
						"configured_per_minute", perMinuteOf(l), "provider_per_minute", perMinute)
				}
			}
		}
		if !below {
			delete(st.learned, name)
		} else {
			t.st.limitsLearned.Add(1)
		}
	}
	st.mu.Unlock()
	if t.cfg.learn && len(lowered) > 0 {
		t.storeLearned(ctx, req, c, configured, lowered)
	}
}

func perMinuteOf(l limiter.Limit) int64 {
	if l.RefillPeriod <= 0 {
		return 0
	}
	return int64(float64(l.RefillAmount) * float64(time.Minute) / float64(l.RefillPeriod))
}

// storeLearned writes the configured limits with the lowered ones replaced
// as the entity's stored limits for the resource.
func (t *Transport) storeLearned(ctx context.Context, req *http.Request, c call, configured, lowered []limiter.Limit) {
	out := make([]limiter.Limit, len(configured))
	copy(out, configured)
	for i, l := range out {
		for _, nl := range lowered {
			if nl.Name == l.Name {
				out[i] = nl
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), feedbackTimeout)
	defer cancel()
	ctx = limiter.ContextWithPrincipal(ctx, "provider:"+req.URL.Hostname())
	if err := t.rl.SetLimits(ctx, c.entity, c.resource, out); err != nil {
		t.st.feedbackErrors.Add(1)
		t.cfg.logger.Warn("llmhttp: storing the provider's limit failed", "entity", c.entity, "resource", c.resource, "err", err)
		return
	}
	t.st.limitsStored.Add(1)
}

// feedbackTimeout bounds a feedback write, which runs detached from the
// request's cancellation.
const feedbackTimeout = 5 * time.Second

// correct lowers the shared bucket to the provider's remaining figures
// when the lease saw it hold more by more than the threshold.
func (t *Transport) correct(ctx context.Context, c call, q Quota, st *feedbackState, lease *limiter.Lease) {
	figures := []struct {
		name string
		ql   QuotaLimit
	}{{t.cfg.quota.Tokens, q.Tokens}, {t.cfg.quota.Requests, q.Requests}}
	var target limiter.Consume
	for _, s := range lease.Statuses() {
		if s.EntityID != c.entity || s.Resource != c.resource {
			continue
		}
		for _, f := range figures {
			if f.name != s.Limit.Name || f.ql.Has&HasRemaining == 0 {
				continue
			}
			capacity := float64(s.Limit.Capacity)
			want := f.ql.Remaining - int64(t.cfg.reserve*capacity)
			if gap := float64(s.Remaining - want); gap > t.cfg.threshold*capacity && gap > 0 {
				if target == nil {
					target = limiter.Consume{}
				}
				target[f.name] = want
			}
		}
	}
	if target != nil {
		t.lower(ctx, c, st, target)
	}
}

// cooldown puts the bucket into a debt that refill pays off at the
// provider's retry time: the token limit, or the request limit when the
// provider says its requests ran out while tokens are left.
func (t *Transport) cooldown(ctx context.Context, c call, q Quota, st *feedbackState) {
	retry := q.RetryAfter
	if retry <= 0 {
		return
	}
	name := t.cfg.quota.Tokens
	if q.Requests.Has&HasRemaining != 0 && q.Requests.Remaining == 0 &&
		(q.Tokens.Has&HasRemaining == 0 || q.Tokens.Remaining > 0) || name == "" {
		name = t.cfg.quota.Requests
	}
	if name == "" {
		return
	}
	limits, ok := t.effectiveLimits(ctx, c, st)
	if !ok {
		configured, _, err := t.rl.ResolveLimits(ctx, c.entity, c.resource)
		if err != nil {
			return
		}
		limits = configured
	}
	for _, l := range limits {
		if l.Name != name || l.RefillPeriod <= 0 {
			continue
		}
		debt := int64(float64(l.RefillAmount) * float64(retry) / float64(l.RefillPeriod))
		if debt <= 0 {
			return
		}
		t.st.cooldowns.Add(1)
		t.lower(ctx, c, st, limiter.Consume{name: -debt})
		return
	}
}

// lower asks the limiter to lower the bucket, one request at a time per
// (entity, resource) in this transport: while one is in flight, others
// are dropped (the next response brings fresher figures), and so is one
// that loses every retry of its conditional write to other writes of the
// item.
func (t *Transport) lower(ctx context.Context, c call, st *feedbackState, target limiter.Consume) {
	if !st.lowering.CompareAndSwap(false, true) {
		return
	}
	defer st.lowering.Store(false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), feedbackTimeout)
	defer cancel()
	lowered, err := t.rl.LowerTokens(ctx, c.entity, c.resource, target)
	switch {
	case errors.Is(err, store.ErrConditionFailed) || errors.Is(err, store.ErrTransactionConflict):
		// Other writes to the item won every retry: dropped like a
		// correction that finds one in flight.
		t.st.correctionsDropped.Add(1)
	case err != nil && !errors.Is(err, limiter.ErrUnsupported):
		t.st.feedbackErrors.Add(1)
		t.cfg.logger.Warn("llmhttp: lowering the shared budget failed", "entity", c.entity, "resource", c.resource, "err", err)
	case lowered:
		t.st.corrections.Add(1)
	}
}
