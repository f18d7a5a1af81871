package llmhttp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/lru"
	"github.com/zaelimiter/limiter/store"
)

// This file holds the provider feedback: what the provider's rate-limit
// headers and 429s do to the shared budget. Feedback only ever lowers
// what the limiter admits, and only for a bounded time.
//
//   - Correction: when a response says the provider has fewer tokens (or
//     requests) left than the shared bucket holds, the bucket is lowered
//     to the provider's figure less a reserve, when it holds more than that
//     by more than the threshold ([limiter.RateLimiter.LowerTokens]: one
//     read and one conditional write, seen by every process at once, never
//     raising a balance). The provider's figure already counts the traffic
//     of others on the same key; the reserve absorbs what the bucket gains
//     on the provider between two corrections and the requests still on
//     their way.
//   - Cooldown: a 429 puts the bucket into a debt that refill pays off at
//     the provider's retry time, cut to a few periods of the limit
//     ([Options.MaxCooldown]), so that every process's next acquire is refused
//     with that RetryAfter.
//   - Learned limits: the provider's limit figures are kept by this
//     transport, apart from the operator's configuration, and applied to
//     its acquires as caps ([limiter.WithLimitCaps]): the limit in force
//     is the lower of the configured one (per-call or stored) and the
//     learned one. A learned limit lapses unless a header confirms it
//     within [Options.LearnedLimitTTL]. Every process reads the same figure
//     from the provider, so all of them acquire with the same parameters.

// QuotaMapping names the limits that the provider's request and token
// figures correct. Empty names are not corrected.
type QuotaMapping struct {
	Requests, Tokens string
}

// DefaultQuotaMapping maps the provider's requests to "rpm" and its tokens
// to "tpm", like [DefaultUsageMapping].
var DefaultQuotaMapping = QuotaMapping{Requests: "rpm", Tokens: "tpm"}

// DefaultFeedbackThreshold is the gap, as a fraction of the limit's
// capacity, above which a provider's remaining figure lowers the shared
// bucket ([Options.FeedbackThreshold]).
const DefaultFeedbackThreshold = 0.002

// DefaultFeedbackReserve is the share of the limit's capacity that a
// correction leaves with the provider ([Options.FeedbackReserve]).
const DefaultFeedbackReserve = 0.01

// maxFeedbackKeys bounds the per-(entity, resource) feedback state a
// transport keeps; the least recently used goes first.
const maxFeedbackKeys = 10_000

// DefaultLearnedLimitTTL is how long a learned limit is kept without a
// header confirming it ([Options.LearnedLimitTTL]).
const DefaultLearnedLimitTTL = time.Minute

// DefaultCooldownPeriods is the bound of a 429's cooldown, in periods of
// the limit it lowers ([Options.MaxCooldown]).
const DefaultCooldownPeriods = 3

// feedbackKey identifies the feedback state of one (entity, resource).
type feedbackKey struct{ entity, resource string }

// learnedLimit is a provider's limit figure and when it lapses.
type learnedLimit struct {
	perMinute int64
	until     time.Time
}

// feedbackState is what the transport knows of one (entity, resource).
type feedbackState struct {
	mu sync.Mutex // guards learned
	// learned maps a limit name to the provider's limit (per minute)
	// while a header confirmed it within the TTL.
	learned map[string]learnedLimit

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
// plus the learned limits as caps; and those learned limits. Lapsed ones
// are dropped.
func (t *Transport) acquireOptions(c call) ([]limiter.AcquireOption, map[string]learnedLimit) {
	if t.cfg.noFeedback {
		return t.cfg.acquireOpts, nil
	}
	st := t.fb.get(feedbackKey{c.entity, c.resource}, false)
	if st == nil {
		return t.cfg.acquireOpts, nil
	}
	now := t.cfg.now()
	var caps []limiter.Limit
	var learned map[string]learnedLimit
	st.mu.Lock()
	for name, l := range st.learned {
		if !now.Before(l.until) {
			delete(st.learned, name)
			t.st.limitsExpired.Add(1)
			t.cfg.logger.Info("llmhttp: no header confirmed the provider's limit; dropped",
				"entity", c.entity, "resource", c.resource, "limit", name, "provider_per_minute", l.perMinute)
			continue
		}
		if learned == nil {
			learned = make(map[string]learnedLimit, len(st.learned))
		}
		caps = append(caps, limiter.PerMinute(name, l.perMinute))
		learned[name] = l
	}
	st.mu.Unlock()
	if len(caps) == 0 {
		return t.cfg.acquireOpts, nil
	}
	slices.SortFunc(caps, func(a, b limiter.Limit) int { return strings.Compare(a.Name, b.Name) })
	return append(slices.Clip(t.cfg.acquireOpts), limiter.WithLimitCaps(caps...)), learned
}

// binds reports whether the learned limit is what set l, the limit in
// force: its capacity, or its refill amount as the cap computes it.
func (l learnedLimit) binds(in limiter.Limit) bool {
	rate := float64(l.perMinute) / float64(time.Minute)
	return in.Capacity == l.perMinute || in.RefillAmount == max(int64(rate*float64(in.RefillPeriod)), 1)
}

// boundRetryAfter cuts the RetryAfter of a denial to when the learned
// limits it ran into lapse: after that the configured limits apply, and a
// learned limit never keeps an entity out for longer than its TTL.
func (t *Transport) boundRetryAfter(c call, learned map[string]learnedLimit, err error) error {
	rle, ok := err.(*limiter.RateLimitExceededError)
	if !ok || len(learned) == 0 {
		return err
	}
	now := t.cfg.now()
	clamp := func(s limiter.LimitStatus) (limiter.LimitStatus, bool) {
		if s.EntityID != c.entity || s.Resource != c.resource {
			return s, false
		}
		l, ok := learned[s.LimitName]
		if !ok || !l.binds(s.Limit) || l.until.Sub(now) >= s.RetryAfter {
			return s, false
		}
		s.RetryAfter = max(l.until.Sub(now), 0)
		return s, true
	}
	out := &limiter.RateLimitExceededError{Statuses: slices.Clone(rle.Statuses), Violations: slices.Clone(rle.Violations)}
	clamped := false
	for i, s := range out.Statuses {
		out.Statuses[i], _ = clamp(s)
	}
	for i, s := range out.Violations {
		var ok bool
		out.Violations[i], ok = clamp(s)
		clamped = clamped || ok
		if i == 0 || out.Violations[i].RetryAfter > out.Primary.RetryAfter {
			out.Primary = out.Violations[i]
		}
	}
	if !clamped {
		return err
	}
	out.RetryAfter = out.Primary.RetryAfter
	return out
}

// ownStatuses returns the statuses of the lease's limits on c's own bucket
// (not a cascade parent's), when the response's headers give feedback
// anything to do.
func (t *Transport) ownStatuses(c call, lease *limiter.Lease, q Quota) []limiter.LeaseStatus {
	if t.cfg.noFeedback || !q.Known() {
		return nil
	}
	var out []limiter.LeaseStatus
	for _, s := range lease.Statuses() {
		if s.EntityID == c.entity && s.Resource == c.resource {
			out = append(out, s)
		}
	}
	return out
}

// statusOf returns the status of the limit named name.
func statusOf(statuses []limiter.LeaseStatus, name string) (limiter.LeaseStatus, bool) {
	for _, s := range statuses {
		if s.Limit.Name == name {
			return s, true
		}
	}
	return limiter.LeaseStatus{}, false
}

// feedback applies what a response's headers say: learned limits, then a
// correction (2xx) or a cooldown (429). statuses are the request's lease's
// limits on its own bucket, as the limits in force.
func (t *Transport) feedback(ctx context.Context, c call, q Quota, status int, statuses []limiter.LeaseStatus) {
	if t.cfg.noFeedback || !q.Known() {
		return
	}
	st := t.fb.get(feedbackKey{c.entity, c.resource}, true)
	t.learnLimits(c, q, st, statuses)
	if status == http.StatusTooManyRequests {
		t.cooldown(ctx, c, q, st, statuses)
		return
	}
	t.correct(ctx, c, q, st, statuses)
}

// maxLearned bounds a learned figure: a limit above it is no limit a
// provider enforces, and its millitokens would not fit in int64.
const maxLearned = math.MaxInt64 / 1000

// learnLimits keeps the provider's limit figures, each until it lapses
// unconfirmed; a figure of zero, or one too large to be a limit, drops
// what was learned.
func (t *Transport) learnLimits(c call, q Quota, st *feedbackState, statuses []limiter.LeaseStatus) {
	figures := []struct {
		name string
		ql   QuotaLimit
	}{{t.cfg.quota.Tokens, q.Tokens}, {t.cfg.quota.Requests, q.Requests}}
	until := t.cfg.now().Add(t.cfg.learnedTTL)
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, f := range figures {
		if f.name == "" || f.ql.Has&HasLimit == 0 {
			continue
		}
		perMinute := f.ql.Limit
		if perMinute <= 0 || perMinute >= maxLearned || limiter.PerMinute(f.name, perMinute).Validate() != nil {
			delete(st.learned, f.name)
			continue
		}
		old, had := st.learned[f.name]
		if st.learned == nil {
			st.learned = make(map[string]learnedLimit)
		}
		st.learned[f.name] = learnedLimit{perMinute: perMinute, until: until}
		if had && old.perMinute == perMinute {
			continue
		}
		if s, ok := statusOf(statuses, f.name); ok && perMinute < perMinuteOf(s.Limit) {
			t.st.limitsLearned.Add(1)
			t.cfg.logger.Info("llmhttp: the provider's limit is below the one in force; enforcing it",
				"entity", c.entity, "resource", c.resource, "limit", f.name,
				"in_force_per_minute", perMinuteOf(s.Limit), "provider_per_minute", perMinute)
		}
	}
}

func perMinuteOf(l limiter.Limit) int64 {
	if l.RefillPeriod <= 0 {
		return 0
	}
	return int64(float64(l.RefillAmount) * float64(time.Minute) / float64(l.RefillPeriod))
}

// feedbackTimeout bounds a feedback write, which runs detached from the
// request's cancellation.
const feedbackTimeout = 5 * time.Second

// correct lowers the shared bucket to the provider's remaining figures
// less the reserve, when the lease saw it hold more than that by more
// than the threshold.
func (t *Transport) correct(ctx context.Context, c call, q Quota, st *feedbackState, statuses []limiter.LeaseStatus) {
	figures := []struct {
		name string
		ql   QuotaLimit
	}{{t.cfg.quota.Tokens, q.Tokens}, {t.cfg.quota.Requests, q.Requests}}
	var target limiter.Consume
	var removed int64
	for _, f := range figures {
		s, ok := statusOf(statuses, f.name)
		if f.name == "" || !ok || f.ql.Has&HasRemaining == 0 {
			continue
		}
		capacity := float64(s.Limit.Capacity)
		want := f.ql.Remaining - int64(t.cfg.reserve*capacity)
		if gap := float64(s.Remaining - want); gap > t.cfg.threshold*capacity && gap > 0 {
			if target == nil {
				target = limiter.Consume{}
			}
			target[f.name] = want
			if f.name == t.cfg.quota.Tokens {
				removed = s.Remaining - want
			}
		}
	}
	if target != nil {
		t.lower(ctx, c, st, target, false, removed)
	}
}

// cooldown puts the bucket into a debt that refill pays off at the
// provider's retry time, at most the bound of Options.MaxCooldown: the token
// limit, or the request limit when the provider says its requests ran out
// while tokens are left. It works from the limits in force, per-call or
// stored.
func (t *Transport) cooldown(ctx context.Context, c call, q Quota, st *feedbackState, statuses []limiter.LeaseStatus) {
	retry := q.RetryAfter
	if retry <= 0 {
		return
	}
	name := t.cfg.quota.Tokens
	if q.Requests.Has&HasRemaining != 0 && q.Requests.Remaining == 0 &&
		(q.Tokens.Has&HasRemaining == 0 || q.Tokens.Remaining > 0) || name == "" {
		name = t.cfg.quota.Requests
	}
	s, ok := statusOf(statuses, name)
	if name == "" || !ok || s.Limit.RefillPeriod <= 0 {
		return
	}
	l := s.Limit
	bound := t.cfg.maxCooldown
	if bound <= 0 {
		bound = time.Duration(math.MaxInt64)
		if l.RefillPeriod < bound/DefaultCooldownPeriods {
			bound = DefaultCooldownPeriods * l.RefillPeriod
		}
	}
	if retry > bound {
		t.st.cooldownsClamped.Add(1)
		t.warnOnce(&t.warn.cooldownClamped, "llmhttp: a provider's retry-after was longer than the cooldown's bound; cut to it",
			"entity", c.entity, "resource", c.resource, "limit", name, "retry_after", retry, "bound", bound)
		retry = bound
	}
	debt := float64(l.RefillAmount) * float64(retry) / float64(l.RefillPeriod)
	if debt < 1 {
		return
	}
	d := int64(min(debt, float64(maxLearned)))
	var removed int64
	if name == t.cfg.quota.Tokens {
		removed = max(s.Remaining, 0) + d
	}
	t.lower(ctx, c, st, limiter.Consume{name: -d}, true, removed)
}

// lower asks the limiter to lower the bucket, one request at a time per
// (entity, resource) in this transport: while one is in flight, others
// are dropped (the next response brings fresher figures), and so is one
// that loses every retry of its conditional write to other writes of the
// item. removed is the tokens it takes from the token limit, as the
// request's lease saw the bucket.
func (t *Transport) lower(ctx context.Context, c call, st *feedbackState, target limiter.Consume, cooldown bool, removed int64) {
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
		if cooldown {
			t.st.cooldowns.Add(1)
		} else {
			t.st.corrections.Add(1)
		}
		if removed > 0 {
			t.st.tokensRemoved.Add(removed)
			t.warnOnce(&t.warn.tokensRemoved, "llmhttp: provider feedback removed tokens from the shared budget",
				"entity", c.entity, "resource", c.resource, "tokens", removed, "cooldown", cooldown)
		}
	}
}
