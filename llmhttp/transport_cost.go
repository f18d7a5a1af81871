package llmhttp

import (
	"fmt"

	"github.com/zaelimiter/limiter"
)

// This file charges money: with WithCostLimit, every request's lease also
// holds its cost in micro-dollars, estimated at the worst case before the
// request is sent and settled to the exact cost of its usage.

// WithCostLimit makes the transport charge every request's cost, in
// micro-dollars, to the limit named name, beside what the estimator and the
// usage mapping charge:
//
//   - before the request is sent, its worst-case cost is added to the
//     estimate ([ModelPrice.Estimate] of [RequestFromBody]): the prompt's
//     estimate at the dearest input rate it can be billed at, plus its
//     output ceiling (max_tokens, max_completion_tokens or
//     max_output_tokens; the model's MaxOutputTokens when it sets none) at
//     the output rate. An estimate given with [WithCall], or by the
//     estimator, that names the limit already is kept;
//   - the lease is adjusted to the exact cost of the response's usage
//     ([ModelPrice.Cost]), rounded up to the micro-dollar, and committed,
//     unless the usage mapping names the limit itself;
//   - a malformed usage commits the estimate; a body closed early, or read
//     to its end without a usage, commits the larger of the estimate and
//     the cost of what it showed (the prompt, and the output text at four
//     bytes a token), as for tokens;
//   - an answer the provider does not bill is rolled back as the rollback
//     options say ([WithRollback]); a 429 whose estimate stays taken with
//     provider feedback on gives the money back: the provider charges no
//     refused request.
//
// The model is the body's "model", or the [WithCall] resource when the
// body names none; a model that the prices ([WithPrices]) do not know
// fails the request with an error wrapping [ErrUnknownModel], counted in
// Stats.UnknownModels, before anything is acquired or sent. The limit must
// be one the entity has (stored, or per call with limiter.WithLimits
// through [WithAcquireOptions]), with a capacity in micro-dollars: the
// limiter refuses to acquire an amount no limit applies to. A limit of an
// entity's entity-wide bucket ([limiter.AllResources]), or an ancestor's,
// counts: a call on any model then draws on that one budget.
func WithCostLimit(name string) Option { return func(c *config) { c.costName = name } }

// WithPrices sets the prices [WithCostLimit] charges at: [DefaultPrices]
// when nil or not set. Build them with [NewPrices]: to change or add a few
// models, pass the shipped tables first and yours after them (a later
// table's model replaces an earlier one's whole).
func WithPrices(p *Prices) Option { return func(c *config) { c.prices = p } }

// costCall is the money side of one request's lease.
type costCall struct {
	name     string
	price    ModelPrice
	estimate int64 // what the lease acquired under name
	// worstCase: estimate is the transport's worst case, not the
	// caller's.
	worstCase bool
	// mods are the modifiers the request asked for.
	mods []Modifier
	// longCache: the request may ask for the long cache lifetime, so that
	// cache writes its usage does not split by lifetime are charged at the
	// long lifetime's rate.
	longCache bool
}

// newCostCall prices the request r of c: its model's price and worst-case
// cost.
func (t *Transport) newCostCall(r Request, c call) (*costCall, error) {
	if r.Model == "" {
		r.Model = c.resource
	}
	price, err := t.cfg.prices.Lookup(r.Model)
	if err != nil {
		t.st.unknownModels.Add(1)
		return nil, fmt.Errorf("llmhttp: cost of %s/%s: %w", c.entity, c.resource, err)
	}
	return &costCall{name: t.cfg.costName, price: price, estimate: price.Estimate(r), longCache: r.LongCache, worstCase: true,
		mods: r.Modifiers}, nil
}

// of returns the cost of the usage p holds.
func (cc *costCall) of(p parsed) int64 {
	u := p.usage
	if cc.longCache && !p.cacheSplit {
		u.CacheCreationLongTokens = u.CacheCreationTokens
	}
	return cc.price.Cost(u)
}

// refundCost gives back the money the lease acquired, for an answer the
// provider did not bill whose lease is committed nonetheless.
func (lc *leaseCall) refundCost() {
	if lc.cost == nil || lc.ended.Load() {
		return
	}
	if _, ok := lc.lease.Consumed()[lc.cost.name]; !ok || lc.cost.estimate == 0 {
		return
	}
	if err := lc.lease.Adjust(limiter.Consume{lc.cost.name: -lc.cost.estimate}); err != nil {
		lc.t.st.endErrors.Add(1)
		lc.t.cfg.logger.Warn("llmhttp: adjust failed", "entity", lc.call.entity, "resource", lc.call.resource, "err", err)
	}
}
