package llmtest

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/llmhttp"
)

// This file counts calls by a provider's rule pack ([Config.Rules]): each
// limit the pack charges is a bucket of its own, taken the pack's Admit
// amounts at admission and settled to its Settle amounts once the answer
// is known (at once: the fake answers as soon as it admits).

// ruleBucket returns key's bucket of the limit name, or nil when the
// server enforces no such limit. s.mu must be held.
func (s *Server) ruleBucket(k *keyState, name string, now time.Time) *bucket {
	if name == "rpm" {
		return &k.reqs
	}
	if name == "tpm" && s.cfg.Limits[name] == 0 {
		return &k.toks
	}
	perMin := s.cfg.Limits[name]
	if perMin <= 0 {
		return nil
	}
	if k.named == nil {
		k.named = make(map[string]*bucket)
	}
	b := k.named[name]
	if b == nil {
		b = &bucket{capacity: float64(perMin), perMs: float64(perMin) / 60_000, level: float64(perMin), last: now}
		if s.cfg.StartEmpty {
			b.level = 0
		}
		k.named[name] = b
	}
	return b
}

// ruleUsage is the usage the server reports for a prompt of in tokens and
// out of output, in the provider's format (Anthropic's input excludes the
// cache counts).
func ruleUsage(p provider, in, out int64, sh Shape) llmhttp.Usage {
	u := llmhttp.Usage{InputTokens: in, OutputTokens: out, CacheReadTokens: sh.CacheRead,
		CacheCreationTokens: sh.CacheWrite, CacheCreationLongTokens: sh.CacheWriteLong, CacheInInput: true}
	if p == anthropic || p == bedrock {
		u.InputTokens, u.CacheInInput = in-sh.CacheRead-sh.CacheWrite, false
	}
	return u
}

// admitRules admits a call of key by the rules: admit is what it takes at
// admission, settle what it holds once answered. It returns the quota of
// the buckets after it, whether it was admitted, and its sequence number.
func (s *Server) admitRules(key string, admit, settle limiter.Consume, tokens int64, now time.Time) (ruleQuota, bool, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keyLocked(key, now)
	share := s.cfg.HiddenShare
	k.stats.Requests++
	q := ruleQuota{limits: map[string]int64{}, left: map[string]int64{}, reset: map[string]time.Duration{}}
	ok := true
	buckets := map[string]*bucket{}
	for _, name := range []string{"rpm", "tpm", llmhttp.LimitITPM, llmhttp.LimitOTPM} {
		b := s.ruleBucket(k, name, now)
		if b == nil {
			continue
		}
		hidden := b.advance(now, share)
		if name == "rpm" {
			k.stats.HiddenRequests += hidden
		} else {
			k.stats.HiddenTokens += hidden
		}
		buckets[name] = b
		if b.level < float64(admit[name]) {
			ok = false
			q.retryAfter = max(q.retryAfter, b.wait(float64(admit[name])))
		}
	}
	if ok {
		for name, b := range buckets {
			b.level -= float64(admit[name])
			b.level -= float64(settle[name] - admit[name])
		}
		k.stats.Admitted++
		k.stats.Tokens += tokens
	} else {
		k.stats.RateLimited++
	}
	for name, b := range buckets {
		q.limits[name] = int64(b.capacity)
		q.left[name] = int64(math.Max(math.Floor(b.level), 0))
		q.reset[name] = b.toFull()
	}
	k.stats.TokensLeft = k.toks.level
	s.seq++
	return q, ok, s.seq
}

// ruleQuota is the state of a key's rule buckets after a call.
type ruleQuota struct {
	limits, left map[string]int64
	reset        map[string]time.Duration
	retryAfter   time.Duration
}

// setRuleHeaders writes the rate-limit headers of the provider's format:
// OpenAI's requests and tokens (tpm), Anthropic's requests, input tokens
// (itpm) and output tokens (otpm); Bedrock sends none.
func setRuleHeaders(h http.Header, p provider, q ruleQuota, now time.Time) {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch p {
	case openAI, responses:
		for name, kind := range map[string]string{"rpm": "requests", "tpm": "tokens"} {
			if _, ok := q.limits[name]; ok {
				h.Set("X-Ratelimit-Limit-"+kind, itoa(q.limits[name]))
				h.Set("X-Ratelimit-Remaining-"+kind, itoa(q.left[name]))
				h.Set("X-Ratelimit-Reset-"+kind, q.reset[name].Round(time.Millisecond).String())
			}
		}
	case anthropic:
		for name, kind := range map[string]string{"rpm": "Requests", llmhttp.LimitITPM: "Input-Tokens", llmhttp.LimitOTPM: "Output-Tokens"} {
			if _, ok := q.limits[name]; ok {
				h.Set("Anthropic-Ratelimit-"+kind+"-Limit", itoa(q.limits[name]))
				h.Set("Anthropic-Ratelimit-"+kind+"-Remaining", itoa(q.left[name]))
				h.Set("Anthropic-Ratelimit-"+kind+"-Reset", now.Add(q.reset[name]).UTC().Format(time.RFC3339))
			}
		}
	}
}

// Remaining returns what key's buckets hold now, per limit name (rpm, tpm,
// and with [Config.Rules] the other limits the rules charge): the
// provider's own remaining figures, whether or not its headers report
// them.
func (s *Server) Remaining(key string) map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	k := s.keyLocked(key, now)
	out := map[string]float64{}
	for _, name := range []string{"rpm", "tpm", llmhttp.LimitITPM, llmhttp.LimitOTPM} {
		if b := s.ruleBucket(k, name, now); b != nil {
			b.advance(now, s.cfg.HiddenShare)
			out[name] = b.level
		}
	}
	return out
}
