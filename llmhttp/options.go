package llmhttp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/zaelimiter/limiter"
)

// Options configures [NewTransport]. The zero value of every field is its
// default, stated in the field's doc; NewTransport resolves the defaults
// once, after the option functions ran.
type Options struct {
	// RequireCall makes the transport refuse, with [ErrNoCall], a request
	// whose context has no [ContextWithCall]. False, the default, passes
	// such a request through untouched.
	RequireCall bool

	// UsageMapping maps a response's usage to limit names. Nil means
	// [DefaultUsageMapping]. The amounts it returns replace the estimate:
	// the lease is adjusted by the difference for every limit the lease
	// holds; names it holds no limit for are dropped. With [Options.Rules]
	// the rules settle the lease instead.
	UsageMapping UsageMapping

	// Estimator estimates a request whose [ContextWithCall] gives no
	// estimate. Nil means [DefaultEstimator], or with [Options.Rules] the
	// rules' estimate; an Estimator that is set is used with Rules too.
	Estimator Estimator

	// Rollback is the set of outcomes after which a lease is rolled back;
	// after the others it is committed at its estimate, or at what the
	// body showed when that is larger. Zero means [DefaultRollback];
	// [RollbackNone] rolls back after none of them. A response other than
	// 2xx and 5xx (a 4xx: the provider refused the request and charged
	// nothing) is always rolled back, except a 429 with provider feedback
	// on (not [Options.NoFeedback]): its estimate stays taken.
	Rollback Rollback

	// AcquireOptions are passed to every Acquire, e.g. limiter.WithLimits.
	// The transport keeps a copy of the slice.
	AcquireOptions []limiter.AcquireOption

	// Logger logs what the transport cannot do silently: failed commits
	// and rollbacks (Warn), and the first time of each of the accounting
	// events that [Stats] counts (tokens removed by provider feedback, a
	// clamped cooldown, a malformed usage, a body ended without its usage;
	// Warn, once per transport). Nil, the default, logs nothing.
	Logger *slog.Logger

	// Now is the clock against which Anthropic's reset times are read and
	// learned limits expire. Nil means time.Now.
	Now func() time.Time

	// CostLimit names the limit the transport charges every request's cost
	// to, in micro-dollars, beside what the estimator and the usage mapping
	// charge. Empty, the default, charges no cost.
	//
	//   - Before the request is sent, its worst-case cost is added to the
	//     estimate ([ModelPrice.Estimate] of [RequestFromBody]): the
	//     prompt's estimate at the dearest input rate it can be billed at,
	//     plus its output ceiling (max_tokens, max_completion_tokens or
	//     max_output_tokens; the model's MaxOutputTokens when it sets none)
	//     at the output rate. An estimate given with [ContextWithCall], or
	//     by the estimator, that names the limit already is kept.
	//   - The lease is adjusted to the exact cost of the response's usage
	//     ([ModelPrice.Cost]), rounded up to the micro-dollar, and
	//     committed, unless the usage mapping names the limit itself.
	//   - A malformed usage commits the estimate; a body closed early, or
	//     read to its end without a usage, commits the larger of the
	//     estimate and the cost of what it showed (the prompt, and the
	//     output text at four bytes a token), as for tokens.
	//   - An answer the provider does not bill is rolled back as
	//     [Options.Rollback] says; a 429 whose estimate stays taken with
	//     provider feedback on gives the money back: the provider charges
	//     no refused request.
	//
	// The model is the body's "model", or the [ContextWithCall] resource
	// when the body names none; a model that the prices ([Options.Prices])
	// do not know fails the request with an error wrapping
	// [ErrUnknownModel], counted in Stats.UnknownModels, before anything is
	// acquired or sent. The limit must be one the entity has (stored, or
	// per call with limiter.WithLimits through [Options.AcquireOptions]),
	// with a capacity in micro-dollars: the limiter refuses to acquire an
	// amount no limit applies to. A limit of an entity's entity-wide bucket
	// ([limiter.AllResources]), or an ancestor's, counts: a call on any
	// model then draws on that one budget.
	CostLimit string

	// Prices are the prices [Options.CostLimit] charges at. Nil means
	// [DefaultPrices]. Build them with [NewPrices]: to change or add a few
	// models, pass the shipped tables first and yours after them (a later
	// table's model replaces an earlier one's whole).
	Prices *Prices

	// MaxHiddenInputTokens bounds the hidden input of every request that
	// has no bound of its own ([ContextWithHiddenInputTokens]). Zero or
	// less, the default, sets none: with a money limit such a request is
	// refused with a [HiddenInputError].
	MaxHiddenInputTokens int64

	// OutputClamp says whether output ceilings are lowered. [ClampAuto],
	// the zero value, lowers them with a cost limit ([Options.CostLimit])
	// and not without; [ClampOn] and [ClampOff] decide either way. When on,
	// a request whose worst case the limiter refuses has its output
	// ceiling (max_tokens, max_completion_tokens or max_output_tokens; one
	// is added when the body has none: max_output_tokens for a path
	// ending in /responses, max_tokens for /messages,
	// max_completion_tokens for /chat/completions, max_tokens elsewhere; a
	// Bedrock Converse body, whose ceiling is nested, is not lowered)
	// lowered to the largest ceiling whose worst case fits what each limit
	// has left on every bucket the acquire charged (the least Available of
	// the refusal's statuses per limit: cascade parents and any other
	// bucket included), and is acquired again at that worst case: the
	// acquire decides, so that two requests that saw the same balance
	// cannot both spend it. A ceiling below [Options.MinOutputTokens] is
	// not sent: the refusal is returned. The limits a lower ceiling cannot
	// help (requests per minute, an estimate the caller gave) are never
	// lowered around. Stats.Clamped counts the requests sent lowered,
	// Stats.ClampRefused those refused below the floor.
	OutputClamp ClampMode

	// MinOutputTokens is the least output ceiling, per choice, that the
	// output clamp sends. Zero means [DefaultMinOutputTokens]; a negative
	// value means one.
	MinOutputTokens int64

	// Rules, when they have both Admit and Settle, charge every call by a
	// provider's rules: the estimate of a call whose [ContextWithCall]
	// gives none is rules.Admit of its body ([RequestFromBody]; the model,
	// when the body names none, is read from a Bedrock path
	// /model/{id}/... or is the call's resource), raised where
	// rules.Settle of the call's worst usage would hold more (Bedrock's
	// output burndown), and the lease is settled to rules.Settle of its
	// usage instead of the usage mapping's amounts: once a call is
	// answered the limiter holds what the provider does. Configure the
	// limiter's limits to the provider's (rpm, tpm, itpm, otpm as the pack
	// charges them). The zero value charges by the estimator and the
	// usage mapping.
	Rules Rules

	// NoFeedback turns the provider feedback off: the provider's
	// rate-limit headers and 429s then change nothing in the shared
	// budget. False, the default, has it on.
	NoFeedback bool

	// QuotaMapping names the limits the provider's figures correct. Nil
	// means [DefaultQuotaMapping].
	QuotaMapping *QuotaMapping

	// FeedbackThreshold is how far above the provider's remaining figure
	// the shared bucket must be, as a fraction of the limit's capacity,
	// before it is lowered. Zero means [DefaultFeedbackThreshold]; a
	// negative value lowers it at any gap. Each lowering costs a read and
	// a write of the bucket item.
	FeedbackThreshold float64

	// FeedbackReserve is how much below the provider's remaining figure a
	// correction lowers the shared bucket, as a fraction of the limit's
	// capacity, at most one. Zero means [DefaultFeedbackReserve]; a
	// negative value keeps no reserve (the bucket is lowered to the
	// provider's figure). Between two corrections the bucket refills at
	// the configured (or learned) rate, faster than the provider when
	// other traffic shares the key, and requests admitted by other
	// processes are still on their way to the provider: the reserve
	// absorbs both, so that they do not meet a 429. It is held back once,
	// not per minute; a provider holding less than the reserve puts the
	// bucket into a debt that refill pays off.
	FeedbackReserve float64

	// LearnedLimitTTL is how long a limit learned from the provider's
	// headers is applied without a header confirming it. Zero or less
	// means [DefaultLearnedLimitTTL]. Every response that reports the
	// limit confirms it. A learned limit that refuses every call (a header
	// reporting a limit far below the real one) thus lapses after it: a
	// denial caused by it never reports a RetryAfter beyond its lapse, and
	// after it the configured limit applies again to what the bucket
	// holds.
	LearnedLimitTTL time.Duration

	// MaxCooldown bounds the debt a provider 429 puts the bucket into to
	// that much refill, whatever the provider's retry-after says. Zero or
	// less, the default, bounds it to [DefaultCooldownPeriods] periods of
	// the limit it lowers (3 minutes for a per-minute limit). A clamped
	// retry time is counted in [Stats].CooldownsClamped.
	MaxCooldown time.Duration
}

// ClampMode says whether the transport lowers output ceilings
// ([Options.OutputClamp]).
type ClampMode uint8

// Values of [ClampMode].
const (
	// ClampAuto lowers output ceilings with a cost limit and not without.
	ClampAuto ClampMode = iota
	// ClampOn lowers output ceilings, with a cost limit or not.
	ClampOn
	// ClampOff never lowers an output ceiling.
	ClampOff
)

// config is the transport's resolved [Options]: every default filled in,
// every bound applied.
type config struct {
	requireCall bool
	mapping     UsageMapping
	estimator   Estimator
	rollback    Rollback
	acquireOpts []limiter.AcquireOption
	logger      *slog.Logger
	now         func() time.Time

	// Money: the limit charged the cost, and its prices.
	costName string
	prices   *Prices

	// The worst case: the bound on hidden input of every call, and the
	// lowering of output ceilings.
	maxHidden int64
	clamp     ClampMode
	minOutput int64

	// rules, when set, charge and settle calls as a provider counts them.
	rules *Rules

	// Provider feedback.
	noFeedback  bool
	quota       QuotaMapping
	threshold   float64
	reserve     float64
	learnedTTL  time.Duration
	maxCooldown time.Duration
}

// resolve returns o's configuration with its defaults filled in.
func (o *Options) resolve() config {
	c := config{
		requireCall: o.RequireCall,
		mapping:     o.UsageMapping,
		estimator:   o.Estimator,
		rollback:    o.Rollback,
		acquireOpts: append([]limiter.AcquireOption(nil), o.AcquireOptions...),
		logger:      o.Logger,
		now:         o.Now,
		costName:    o.CostLimit,
		prices:      o.Prices,
		maxHidden:   max(o.MaxHiddenInputTokens, 0),
		clamp:       o.OutputClamp,
		minOutput:   o.MinOutputTokens,
		noFeedback:  o.NoFeedback,
		quota:       DefaultQuotaMapping,
		threshold:   o.FeedbackThreshold,
		reserve:     min(o.FeedbackReserve, 1),
		learnedTTL:  o.LearnedLimitTTL,
		maxCooldown: max(o.MaxCooldown, 0),
	}
	if c.mapping == nil {
		c.mapping = DefaultUsageMapping
	}
	if o.Rules.Admit != nil && o.Rules.Settle != nil {
		r := o.Rules
		c.rules = &r
		if c.estimator == nil {
			c.estimator = rulesEstimator(r)
		}
	}
	if c.estimator == nil {
		c.estimator = DefaultEstimator
	}
	switch {
	case c.rollback == 0:
		c.rollback = DefaultRollback
	case c.rollback&RollbackNone != 0:
		c.rollback &^= RollbackNone
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.prices == nil {
		c.prices = DefaultPrices()
	}
	switch {
	case c.minOutput == 0:
		c.minOutput = DefaultMinOutputTokens
	case c.minOutput < 0:
		c.minOutput = 1
	}
	if o.QuotaMapping != nil {
		c.quota = *o.QuotaMapping
	}
	switch {
	case c.threshold == 0:
		c.threshold = DefaultFeedbackThreshold
	case c.threshold < 0:
		c.threshold = 0
	}
	switch {
	case c.reserve == 0:
		c.reserve = DefaultFeedbackReserve
	case c.reserve < 0:
		c.reserve = 0
	}
	if c.learnedTTL <= 0 {
		c.learnedTTL = DefaultLearnedLimitTTL
	}
	return c
}

// rulesEstimator returns the estimator of [Options.Rules] r.
func rulesEstimator(r Rules) Estimator {
	return func(req *http.Request) (limiter.Consume, error) {
		body, err := requestBody(req)
		if err != nil {
			return nil, err
		}
		rq := RequestFromBody(body)
		if h, ok := req.Context().Value(resolvedHiddenKey{}).(int64); ok {
			rq.HiddenTokens = h
		} else if len(rq.Hidden) > 0 {
			rq.HiddenTokens, _ = hiddenBound(req.Context())
		}
		rq.Model = requestModel(rq.Model, req)
		return rulesEstimate(r, rq), nil
	}
}
