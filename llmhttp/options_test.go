package llmhttp

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter"
)

// funcPointer identifies a function value, for comparing the functions a
// configuration resolved to.
func funcPointer(f any) uintptr { return reflect.ValueOf(f).Pointer() }

// TestOptionsZeroIsDefault: the zero Options resolves to every documented
// default.
func TestOptionsZeroIsDefault(t *testing.T) {
	var o Options
	c := o.resolve()
	require.False(t, c.requireCall)
	require.Equal(t, funcPointer(DefaultUsageMapping), funcPointer(c.mapping))
	require.Equal(t, funcPointer(DefaultEstimator), funcPointer(c.estimator))
	require.Equal(t, DefaultRollback, c.rollback)
	require.Empty(t, c.acquireOpts)
	require.NotNil(t, c.logger)
	require.Equal(t, funcPointer(time.Now), funcPointer(c.now))
	require.Empty(t, c.costName)
	require.NotNil(t, c.prices)
	_, err := c.prices.Lookup("gpt-4o")
	require.NoError(t, err, "the default prices are the shipped tables")
	require.Zero(t, c.maxHidden)
	require.Equal(t, ClampAuto, c.clamp)
	require.Equal(t, int64(DefaultMinOutputTokens), c.minOutput)
	require.Nil(t, c.rules)
	require.False(t, c.noFeedback)
	require.Equal(t, DefaultQuotaMapping, c.quota)
	require.Equal(t, DefaultFeedbackThreshold, c.threshold)
	require.Equal(t, DefaultFeedbackReserve, c.reserve)
	require.Equal(t, DefaultLearnedLimitTTL, c.learnedTTL)
	require.Zero(t, c.maxCooldown)
}

// TestOptionsBounds: the values outside a field's range resolve as its
// doc says.
func TestOptionsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want func(t *testing.T, c config)
	}{
		{"rollback none", Options{Rollback: RollbackNone}, func(t *testing.T, c config) { require.Zero(t, c.rollback) }},
		{"rollback none with early close", Options{Rollback: RollbackNone | RollbackOnEarlyClose},
			func(t *testing.T, c config) { require.Equal(t, RollbackOnEarlyClose, c.rollback) }},
		{"rollback server errors only", Options{Rollback: RollbackOnServerError},
			func(t *testing.T, c config) { require.Equal(t, RollbackOnServerError, c.rollback) }},
		{"min output negative", Options{MinOutputTokens: -5}, func(t *testing.T, c config) { require.Equal(t, int64(1), c.minOutput) }},
		{"min output one", Options{MinOutputTokens: 1}, func(t *testing.T, c config) { require.Equal(t, int64(1), c.minOutput) }},
		{"max hidden negative", Options{MaxHiddenInputTokens: -1}, func(t *testing.T, c config) { require.Zero(t, c.maxHidden) }},
		{"threshold negative", Options{FeedbackThreshold: -0.5}, func(t *testing.T, c config) { require.Zero(t, c.threshold) }},
		{"threshold set", Options{FeedbackThreshold: 0.1}, func(t *testing.T, c config) { require.Equal(t, 0.1, c.threshold) }},
		{"reserve negative", Options{FeedbackReserve: -1}, func(t *testing.T, c config) { require.Zero(t, c.reserve) }},
		{"reserve above one", Options{FeedbackReserve: 3}, func(t *testing.T, c config) { require.Equal(t, 1.0, c.reserve) }},
		{"learned TTL negative", Options{LearnedLimitTTL: -time.Second},
			func(t *testing.T, c config) { require.Equal(t, DefaultLearnedLimitTTL, c.learnedTTL) }},
		{"max cooldown negative", Options{MaxCooldown: -time.Second}, func(t *testing.T, c config) { require.Zero(t, c.maxCooldown) }},
		{"quota mapping empty", Options{QuotaMapping: &QuotaMapping{}}, func(t *testing.T, c config) { require.Equal(t, QuotaMapping{}, c.quota) }},
		{"rules without settle", Options{Rules: Rules{Admit: OpenAIRules().Admit}}, func(t *testing.T, c config) {
			require.Nil(t, c.rules)
			require.Equal(t, funcPointer(DefaultEstimator), funcPointer(c.estimator))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.want(t, tc.o.resolve()) })
	}
}

// TestOptionsCopied: what the caller changes in its Options or slices
// after the transport is built changes nothing in it.
func TestOptionsCopied(t *testing.T) {
	first := limiter.WithLimits(limiter.PerMinute("rpm", 1))
	q := QuotaMapping{Requests: "r", Tokens: "t"}
	o := Options{AcquireOptions: []limiter.AcquireOption{first}, QuotaMapping: &q, Rules: AnthropicRules()}
	c := o.resolve()
	o.AcquireOptions[0] = limiter.WithLimits(limiter.PerMinute("rpm", 2))
	q.Tokens = "changed"
	o.Rules.Name = "changed"
	require.Equal(t, funcPointer(first), funcPointer(c.acquireOpts[0]))
	require.Equal(t, "t", c.quota.Tokens)
	require.Equal(t, AnthropicRules().Name, c.rules.Name)
}

// TestOptionsRulesEstimator: with rules and no estimator, a call without
// an estimate acquires the rules' estimate; an estimator that is set is
// used with rules too.
func TestOptionsRulesEstimator(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`
	req, err := http.NewRequestWithContext(ContextWithCall(context.Background(), "e", "r", nil),
		http.MethodPost, "http://provider/v1/messages", strings.NewReader(body))
	require.NoError(t, err)
	req, err = withGetBody(req)
	require.NoError(t, err)

	c := (&Options{Rules: AnthropicRules()}).resolve()
	got, err := c.estimator(req)
	require.NoError(t, err)
	require.Equal(t, rulesEstimate(AnthropicRules(), RequestFromBody([]byte(body))), got)
	dflt, err := DefaultEstimator(req)
	require.NoError(t, err)
	require.NotEqual(t, dflt, got, "the rules' estimate, not the default one")

	mine := limiter.Consume{"rpm": 1, "tpm": 7}
	c = (&Options{Rules: AnthropicRules(), Estimator: func(*http.Request) (limiter.Consume, error) { return mine, nil }}).resolve()
	got, err = c.estimator(req)
	require.NoError(t, err)
	require.Equal(t, mine, got)
	require.NotNil(t, c.rules, "the rules still settle the lease")
}
