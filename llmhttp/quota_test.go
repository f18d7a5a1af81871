package llmhttp

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestParseQuota(t *testing.T) {
	now := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    http.Header
		want Quota
	}{
		{"OpenAI", headers(
			"x-ratelimit-limit-requests", "10000",
			"x-ratelimit-limit-tokens", "30000000",
			"x-ratelimit-remaining-requests", "9999",
			"x-ratelimit-remaining-tokens", "29999982",
			"x-ratelimit-reset-requests", "6ms",
			"x-ratelimit-reset-tokens", "0s",
		), Quota{
			Requests: QuotaLimit{Limit: 10000, Remaining: 9999, Reset: 6 * time.Millisecond, Has: HasLimit | HasRemaining | HasReset},
			Tokens:   QuotaLimit{Limit: 30000000, Remaining: 29999982, Reset: 0, Has: HasLimit | HasRemaining | HasReset},
		}},
		{"OpenAI minutes and fractions", headers(
			"x-ratelimit-reset-requests", "6m0s",
			"x-ratelimit-reset-tokens", "7.66s",
		), Quota{
			Requests: QuotaLimit{Reset: 6 * time.Minute, Has: HasReset},
			Tokens:   QuotaLimit{Reset: 7660 * time.Millisecond, Has: HasReset},
		}},
		{"OpenAI 429", headers(
			"x-ratelimit-remaining-tokens", "0",
			"retry-after", "2",
			"retry-after-ms", "1350",
		), Quota{
			Tokens:     QuotaLimit{Remaining: 0, Has: HasRemaining},
			RetryAfter: 1350 * time.Millisecond,
		}},
		{"Anthropic", headers(
			"anthropic-ratelimit-requests-limit", "4000",
			"anthropic-ratelimit-requests-remaining", "3999",
			"anthropic-ratelimit-requests-reset", "2026-11-25T14:00:01Z",
			"anthropic-ratelimit-tokens-limit", "480000",
			"anthropic-ratelimit-tokens-remaining", "478000",
			"anthropic-ratelimit-tokens-reset", "2026-11-25T14:00:02Z",
			"anthropic-ratelimit-input-tokens-limit", "400000",
			"anthropic-ratelimit-input-tokens-remaining", "398000",
			"anthropic-ratelimit-input-tokens-reset", "2026-11-25T14:00:02Z",
			"anthropic-ratelimit-output-tokens-limit", "80000",
			"anthropic-ratelimit-output-tokens-remaining", "80000",
			"anthropic-ratelimit-output-tokens-reset", "2026-11-25T14:00:00Z",
		), Quota{
			Requests:     QuotaLimit{Limit: 4000, Remaining: 3999, Reset: time.Second, Has: HasLimit | HasRemaining | HasReset},
			Tokens:       QuotaLimit{Limit: 480000, Remaining: 478000, Reset: 2 * time.Second, Has: HasLimit | HasRemaining | HasReset},
			InputTokens:  QuotaLimit{Limit: 400000, Remaining: 398000, Reset: 2 * time.Second, Has: HasLimit | HasRemaining | HasReset},
			OutputTokens: QuotaLimit{Limit: 80000, Remaining: 80000, Reset: 0, Has: HasLimit | HasRemaining | HasReset},
		}},
		{"Anthropic 429", headers(
			"anthropic-ratelimit-tokens-remaining", "0",
			"retry-after", "17",
		), Quota{
			Tokens:     QuotaLimit{Has: HasRemaining},
			RetryAfter: 17 * time.Second,
		}},
		{"Azure OpenAI", headers(
			"x-ratelimit-remaining-requests", "119",
			"x-ratelimit-remaining-tokens", "119500",
		), Quota{
			Requests: QuotaLimit{Remaining: 119, Has: HasRemaining},
			Tokens:   QuotaLimit{Remaining: 119500, Has: HasRemaining},
		}},
		{"retry-after as an HTTP date", headers("retry-after", "Wed, 25 Nov 2026 14:00:30 GMT"),
			Quota{RetryAfter: 30 * time.Second}},
		{"malformed headers are ignored and counted", headers(
			"x-ratelimit-limit-tokens", "lots",
			"x-ratelimit-remaining-tokens", "-5",
			"x-ratelimit-reset-tokens", "soon",
			"x-ratelimit-remaining-requests", "12",
			"anthropic-ratelimit-tokens-reset", "tomorrow",
			"retry-after-ms", "NaN",
			"retry-after", "later",
		), Quota{
			Requests:  QuotaLimit{Remaining: 12, Has: HasRemaining},
			Malformed: 6,
		}},
		{"none", http.Header{"Content-Type": {"application/json"}}, Quota{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseQuota(tc.h, now)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.name != "none", got.Known() || tc.want.Malformed > 0)
		})
	}
}
