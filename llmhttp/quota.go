package llmhttp

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// QuotaField says which parts of a [QuotaLimit] a response reported.
type QuotaField uint8

// Parts of a [QuotaLimit].
const (
	HasLimit QuotaField = 1 << iota
	HasRemaining
	HasReset
)

// QuotaLimit is one of the provider's limits as a response reports it.
type QuotaLimit struct {
	// Limit is the provider's ceiling: requests or tokens per minute.
	Limit int64
	// Remaining is what the provider would still admit now.
	Remaining int64
	// Reset is how long until the provider's bucket is full again
	// (OpenAI's Go-style duration; Anthropic's RFC 3339 time minus the
	// response's time).
	Reset time.Duration
	// Has says which of the three fields were present and well formed.
	Has QuotaField
}

// Quota is what a provider's response headers say about its rate limits.
type Quota struct {
	// Requests and Tokens are the request and token limits (OpenAI's
	// x-ratelimit-*-requests/-tokens, Anthropic's
	// anthropic-ratelimit-requests-*/-tokens-*, Azure OpenAI's
	// x-ratelimit-remaining-requests/-tokens).
	Requests, Tokens QuotaLimit
	// InputTokens and OutputTokens are Anthropic's separate input and
	// output token limits.
	InputTokens, OutputTokens QuotaLimit
	// RetryAfter is the provider's retry-after-ms or retry-after (seconds
	// or an HTTP date); zero when absent.
	RetryAfter time.Duration
	// Malformed counts the rate-limit headers that were present but could
	// not be parsed; they are ignored.
	Malformed int
}

// Known reports whether the headers carried any quota figure.
func (q Quota) Known() bool {
	return q.Requests.Has|q.Tokens.Has|q.InputTokens.Has|q.OutputTokens.Has != 0 || q.RetryAfter > 0
}

// ParseQuota reads the rate-limit headers of OpenAI, Anthropic and Azure
// OpenAI from h; now is the response's time, against which Anthropic's
// reset times are turned into durations. Missing headers are left out and
// malformed ones are ignored and counted in [Quota.Malformed]: it never
// fails.
func ParseQuota(h http.Header, now time.Time) Quota {
	var q Quota
	openAI := func(dst *QuotaLimit, suffix string) {
		q.count(parseInt(h, "X-Ratelimit-Limit-"+suffix, dst, HasLimit, &dst.Limit))
		q.count(parseInt(h, "X-Ratelimit-Remaining-"+suffix, dst, HasRemaining, &dst.Remaining))
		if v := h.Get("X-Ratelimit-Reset-" + suffix); v != "" {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < 0 {
				q.Malformed++
			} else {
				dst.Reset, dst.Has = d, dst.Has|HasReset
			}
		}
	}
	openAI(&q.Requests, "Requests")
	openAI(&q.Tokens, "Tokens")
	anthropic := func(dst *QuotaLimit, kind string) {
		prefix := "Anthropic-Ratelimit-" + kind + "-"
		q.count(parseInt(h, prefix+"Limit", dst, HasLimit, &dst.Limit))
		q.count(parseInt(h, prefix+"Remaining", dst, HasRemaining, &dst.Remaining))
		if v := h.Get(prefix + "Reset"); v != "" {
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			if err != nil {
				q.Malformed++
			} else {
				dst.Reset, dst.Has = max(t.Sub(now), 0), dst.Has|HasReset
			}
		}
	}
	anthropic(&q.Requests, "Requests")
	anthropic(&q.Tokens, "Tokens")
	anthropic(&q.InputTokens, "Input-Tokens")
	anthropic(&q.OutputTokens, "Output-Tokens")
	if v := h.Get("Retry-After-Ms"); v != "" {
		ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || ms < 0 || math.IsNaN(ms) || ms > float64(math.MaxInt64/int64(time.Millisecond)) {
			q.Malformed++
		} else {
			q.RetryAfter = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" && q.RetryAfter == 0 {
		v = strings.TrimSpace(v)
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < float64(math.MaxInt64/int64(time.Second)) {
			q.RetryAfter = time.Duration(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			q.RetryAfter = max(t.Sub(now), 0)
		} else {
			q.Malformed++
		}
	}
	return q
}

// count adds one to Malformed when ok is false.
func (q *Quota) count(ok bool) {
	if !ok {
		q.Malformed++
	}
}

// parseInt parses header name into *dst and sets bit in l.Has. It reports
// false only when the header is present and malformed.
func parseInt(h http.Header, name string, l *QuotaLimit, bit QuotaField, dst *int64) bool {
	v := h.Get(name)
	if v == "" {
		return true
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return false
	}
	*dst = n
	l.Has |= bit
	return true
}
