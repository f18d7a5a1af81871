package llmhttp

import (
	"fmt"

	"github.com/zaelimiter/limiter"
)

// This file charges money: with Options.CostLimit, every request's lease also
// holds its cost in micro-dollars, estimated at the worst case before the
// request is sent and settled to the exact cost of its usage.

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
