package llmhttp

import "sync/atomic"

// Stats counts what a [Transport] did since it was created.
type Stats struct {
	// Requests is the requests made with [WithCall]; PassedThrough those
	// without, sent untouched.
	Requests, PassedThrough int64
	// Denied is the requests the limiter refused (nothing was sent).
	Denied int64
	// Committed and RolledBack count the leases by how they ended;
	// EndErrors the adjusts, commits and rollbacks that failed (logged).
	Committed, RolledBack, EndErrors int64
	// UsageSeen is the responses whose usage was read (Tokens sums their
	// total tokens); UsageMissing those committed at their estimate
	// because the body, read to the end, reported none.
	UsageSeen, UsageMissing, Tokens int64
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
	// LimitsLearned is the times a provider limit below the configured one
	// was taken up; LimitsStored those written as stored limits
	// ([WithLearnLimits]).
	LimitsLearned, LimitsStored int64
}

type counters struct {
	requests, passedThrough, denied        atomic.Int64
	committed, rolledBack, endErrors       atomic.Int64
	usageSeen, usageMissing, tokens        atomic.Int64
	providerLimited, headersMalformed      atomic.Int64
	corrections, cooldowns, feedbackErrors atomic.Int64
	correctionsDropped                     atomic.Int64
	limitsLearned, limitsStored            atomic.Int64
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	c := &t.st
	return Stats{
		Requests: c.requests.Load(), PassedThrough: c.passedThrough.Load(), Denied: c.denied.Load(),
		Committed: c.committed.Load(), RolledBack: c.rolledBack.Load(), EndErrors: c.endErrors.Load(),
		UsageSeen: c.usageSeen.Load(), UsageMissing: c.usageMissing.Load(), Tokens: c.tokens.Load(),
		ProviderRateLimited: c.providerLimited.Load(), HeadersMalformed: c.headersMalformed.Load(),
		Corrections: c.corrections.Load(), Cooldowns: c.cooldowns.Load(), FeedbackErrors: c.feedbackErrors.Load(),
		CorrectionsDropped: c.correctionsDropped.Load(),
		LimitsLearned:      c.limitsLearned.Load(), LimitsStored: c.limitsStored.Load(),
	}
}
