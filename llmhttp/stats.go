package llmhttp

import "sync/atomic"

// Stats counts what a [Transport] did since it was created.
type Stats struct {
	// Requests is the requests made with [ContextWithCall]; PassedThrough those
	// without, sent untouched.
	Requests, PassedThrough int64
	// Denied is the requests the limiter refused (nothing was sent).
	Denied int64
	// Committed and RolledBack count the leases by how they ended;
	// EndErrors the adjusts, commits and rollbacks that failed (logged).
	Committed, RolledBack, EndErrors int64
	// UsageSeen is the responses whose usage was read (Tokens sums their
	// total tokens); UsageMissing those whose body, read to the end,
	// reported none: they were committed at the estimate, or at what was
	// seen when that is larger.
	UsageSeen, UsageMissing, Tokens int64
	// UsageMalformed is the responses whose usage could not be decoded,
	// held a count outside [0, 10^9], or mapped to a negative amount: they
	// were committed at the estimate.
	UsageMalformed int64
	// EndedWithoutUsage is the response bodies closed, or failed, before
	// their usage arrived: committed at the estimate, or at the prompt plus
	// the output seen so far when that is larger (rolled back instead with
	// [RollbackOnEarlyClose]).
	EndedWithoutUsage int64
	// ProviderRateLimited is the responses with status 429.
	ProviderRateLimited int64
	// HeadersMalformed is the provider rate-limit headers that were
	// present but could not be parsed, and were ignored.
	HeadersMalformed int64
	// Corrections is the times the shared bucket was lowered to the
	// provider's figures, Cooldowns the 429s that put it into a debt
	// until the provider's retry time, FeedbackErrors the feedback writes
	// that failed (logged). CorrectionsDropped is the corrections and
	// cooldowns whose write lost every retry to other writes of the bucket
	// item (the next response brings fresher figures).
	Corrections, Cooldowns, FeedbackErrors, CorrectionsDropped int64
	// TokensRemoved is what corrections and cooldowns took out of the
	// shared bucket's token limit ([QuotaMapping].Tokens), as the
	// request's lease saw the bucket.
	TokensRemoved int64
	// CooldownsClamped is the 429s whose retry time was longer than the
	// bound of [Options.MaxCooldown], and was cut to it.
	CooldownsClamped int64
	// LimitsLearned is the times a provider limit below the limit in force
	// was taken up; LimitsExpired the learned limits dropped because no
	// header confirmed them within [Options.LearnedLimitTTL].
	LimitsLearned, LimitsExpired int64
	// Cost sums the exact costs of the usages read, in micro-dollars
	// ([Options.CostLimit]); UnknownModels counts the requests refused because
	// the prices know no price for their model.
	Cost, UnknownModels int64
	// HiddenRefused is the requests refused with a [HiddenInputError]:
	// with a money limit, their provider would bill input their body does
	// not carry, which the transport could not price.
	HiddenRefused int64
	// Clamped is the requests sent with their output ceiling lowered to
	// what their budget had left ([Options.OutputClamp]); ClampRefused those
	// refused because the ceiling the budget could pay was below
	// [Options.MinOutputTokens] (counted in Denied too).
	Clamped, ClampRefused int64
	// OverReserved is the responses whose cost was settled above the
	// worst case the transport reserved for it ([Options.CostLimit]): a
	// prompt whose text the provider counts denser than the worst case
	// assumes, a provider that ignores the output ceiling, a usage the
	// body could not foresee. It is the one way a money budget is
	// overdrawn: such a response is settled exactly and logged (Warn,
	// once per transport); OverReservedCost sums, in micro-dollars, what
	// their costs exceeded their worst cases by.
	OverReserved, OverReservedCost int64
	// StreamsCut is the event streams ended with [ErrReservationExceeded]
	// because the output they showed passed what their lease reserved.
	StreamsCut int64
}

type counters struct {
	requests, passedThrough, denied        atomic.Int64
	committed, rolledBack, endErrors       atomic.Int64
	usageSeen, usageMissing, tokens        atomic.Int64
	usageMalformed, endedWithoutUsage      atomic.Int64
	providerLimited, headersMalformed      atomic.Int64
	corrections, cooldowns, feedbackErrors atomic.Int64
	correctionsDropped, tokensRemoved      atomic.Int64
	cooldownsClamped                       atomic.Int64
	limitsLearned, limitsExpired           atomic.Int64
	cost, unknownModels                    atomic.Int64
	hiddenRefused, clamped, clampRefused   atomic.Int64
	overReserved, overReservedCost         atomic.Int64
	streamsCut                             atomic.Int64
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	c := &t.st
	return Stats{
		Requests: c.requests.Load(), PassedThrough: c.passedThrough.Load(), Denied: c.denied.Load(),
		Committed: c.committed.Load(), RolledBack: c.rolledBack.Load(), EndErrors: c.endErrors.Load(),
		UsageSeen: c.usageSeen.Load(), UsageMissing: c.usageMissing.Load(), Tokens: c.tokens.Load(),
		UsageMalformed: c.usageMalformed.Load(), EndedWithoutUsage: c.endedWithoutUsage.Load(),
		ProviderRateLimited: c.providerLimited.Load(), HeadersMalformed: c.headersMalformed.Load(),
		Corrections: c.corrections.Load(), Cooldowns: c.cooldowns.Load(), FeedbackErrors: c.feedbackErrors.Load(),
		CorrectionsDropped: c.correctionsDropped.Load(), TokensRemoved: c.tokensRemoved.Load(),
		CooldownsClamped: c.cooldownsClamped.Load(),
		LimitsLearned:    c.limitsLearned.Load(), LimitsExpired: c.limitsExpired.Load(),
		Cost: c.cost.Load(), UnknownModels: c.unknownModels.Load(),
		HiddenRefused: c.hiddenRefused.Load(), Clamped: c.clamped.Load(), ClampRefused: c.clampRefused.Load(),
		OverReserved: c.overReserved.Load(), OverReservedCost: c.overReservedCost.Load(),
		StreamsCut: c.streamsCut.Load(),
	}
}

// warnings are the accounting events logged once per transport.
type warnings struct {
	tokensRemoved, cooldownClamped, usageMalformed, endedWithoutUsage atomic.Bool
	overReserved, streamCut, dropped                                  atomic.Bool
}

// warnOnce logs msg at Warn the first time flag is set.
func (t *Transport) warnOnce(flag *atomic.Bool, msg string, args ...any) {
	if !flag.Swap(true) {
		t.cfg.logger.Warn(msg+" (logged once per transport; Stats counts every time)", args...)
	}
}
