package llmhttp_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/zaelimiter/limiter/llmhttp"
	"github.com/zaelimiter/limiter/llmhttp/internal/pricecheck"
)

// TestShippedPrices: the shipped tables validate, say when and where they
// were read, and give every model an output ceiling; both providers'
// current models are priced.
func TestShippedPrices(t *testing.T) {
	for _, table := range []llmhttp.PriceTable{llmhttp.OpenAIPrices(), llmhttp.AnthropicPrices()} {
		assert.Regexp(t, `^\d{4}-\d{2}-\d{2}$`, table.AsOf, table.Name)
		assert.True(t, strings.HasPrefix(table.Source, "https://"), "%s: source %q", table.Name, table.Source)
		for name, m := range table.Models {
			assert.Positive(t, m.MaxOutputTokens, "%s/%s", table.Name, name)
			assert.Equal(t, strings.ToLower(name), name, "%s: names are lower case", table.Name)
		}
		_, err := llmhttp.NewPrices(table)
		require.NoError(t, err, table.Name)
	}
	prices := llmhttp.DefaultPrices()
	for _, model := range []string{
		"gpt-6-astra", "gpt-6.1-sol", "gpt-6.1-terra", "gpt-6-luna", "gpt-5.6-sol", "gpt-5.5", "gpt-5", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "o3",
		"claude-fable-5-2", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-sonnet-4-5", "claude-haiku-4-5",
	} {
		_, err := prices.Lookup(model)
		assert.NoError(t, err, model)
	}
	tables := prices.Tables()
	require.Len(t, tables, 2)
	assert.Equal(t, "openai", tables[0].Name)
	assert.Equal(t, "anthropic", tables[1].Name)
	assert.Empty(t, tables[0].Models, "Tables leaves the models out")
}

// TestPricesLookup: a model is found by its name, or by its name without a
// dated snapshot suffix, in any case; nothing else matches, and an unknown
// model is ErrUnknownModel.
func TestPricesLookup(t *testing.T) {
	prices := llmhttp.DefaultPrices()
	same := map[string]string{
		"gpt-4o-2024-08-06":          "gpt-4o",
		"GPT-4o":                     "gpt-4o",
		"gpt-4o-mini-2024-07-18":     "gpt-4o-mini",
		"o3-2025-04-16":              "o3",
		"claude-sonnet-4-5-20250929": "claude-sonnet-4-5",
		"claude-sonnet-4-5@20250929": "claude-sonnet-4-5",
		"claude-haiku-4-5-20251001":  "claude-haiku-4-5",
		"claude-opus-4-20250514":     "claude-opus-4-0",
		"claude-3-5-haiku-latest":    "claude-3-5-haiku",
		"claude-3-7-sonnet-20250219": "claude-3-7-sonnet",
		"gpt-5.6":                    "gpt-5.6-sol",
	}
	for name, base := range same {
		got, err := prices.Lookup(name)
		require.NoError(t, err, name)
		want, err := prices.Lookup(base)
		require.NoError(t, err, base)
		assert.Equal(t, want, got, "%s is priced as %s", name, base)
	}
	mini, err := prices.Lookup("gpt-4o-mini")
	require.NoError(t, err)
	full, err := prices.Lookup("gpt-4o")
	require.NoError(t, err)
	assert.NotEqual(t, full.Rates, mini.Rates, "gpt-4o-mini is not gpt-4o")

	for _, name := range []string{"gpt-7", "gpt-4o-2024", "claude-sonnet-9", "", "gpt-4o-x-2024-08-06"} {
		_, err := prices.Lookup(name)
		require.ErrorIs(t, err, llmhttp.ErrUnknownModel, name)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", name))
		_, err = prices.Cost(name, llmhttp.Usage{InputTokens: 1})
		require.ErrorIs(t, err, llmhttp.ErrUnknownModel)
		_, err = prices.Estimate(llmhttp.Request{Model: name, PromptTokens: 1})
		require.ErrorIs(t, err, llmhttp.ErrUnknownModel)
	}
}

// TestNewPricesMerge: a later table replaces an earlier table's model
// whole and leaves the others; a table's multipliers apply to its own
// models only, and a model's own multipliers win.
func TestNewPricesMerge(t *testing.T) {
	base := llmhttp.PriceTable{Name: "base", Models: map[string]llmhttp.ModelPrice{
		"a": {Rates: llmhttp.Rates{Input: 1, CachedInput: 1, Output: 2}, MaxOutputTokens: 10},
		"b": {Rates: llmhttp.Rates{Input: 3, Output: 4}, MaxOutputTokens: 10,
			Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{llmhttp.Batch: {1, 4}}},
	}, Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{llmhttp.Batch: {1, 2}, llmhttp.Priority: {3, 1}}}
	mine := llmhttp.PriceTable{Name: "mine", Models: map[string]llmhttp.ModelPrice{
		"A": {Rates: llmhttp.Rates{Input: 5, Output: 6}, MaxOutputTokens: 20},
	}}
	p, err := llmhttp.NewPrices(base, mine)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, p.Models())
	a, err := p.Lookup("a")
	require.NoError(t, err)
	assert.Equal(t, llmhttp.Rates{Input: 5, Output: 6}, a.Rates, "replaced whole: no cached rate is left over")
	assert.Equal(t, int64(20), a.MaxOutputTokens)
	assert.Empty(t, a.Multipliers, "the base table's multipliers are not the later table's")
	b, err := p.Lookup("b")
	require.NoError(t, err)
	assert.Equal(t, map[llmhttp.Modifier]llmhttp.Ratio{llmhttp.Batch: {1, 4}, llmhttp.Priority: {3, 1}}, b.Multipliers)

	b.Multipliers[llmhttp.Batch] = llmhttp.Ratio{9, 1}
	again, err := p.Lookup("b")
	require.NoError(t, err)
	assert.Equal(t, llmhttp.Ratio{1, 4}, again.Multipliers[llmhttp.Batch], "Lookup returns a copy")
}

// TestNewPricesInvalid: a price that could charge nothing, or overflow,
// is refused with ErrInvalidPrice naming the table and model.
func TestNewPricesInvalid(t *testing.T) {
	ok := llmhttp.ModelPrice{Rates: llmhttp.Rates{Input: 1, Output: 1}, MaxOutputTokens: 1}
	for name, m := range map[string]llmhttp.ModelPrice{
		"no input":      {Rates: llmhttp.Rates{Output: 1}, MaxOutputTokens: 1},
		"no output":     {Rates: llmhttp.Rates{Input: 1}, MaxOutputTokens: 1},
		"negative":      {Rates: llmhttp.Rates{Input: 1, Output: 1, CachedInput: -1}, MaxOutputTokens: 1},
		"too dear":      {Rates: llmhttp.Rates{Input: 1 << 60, Output: 1}, MaxOutputTokens: 1},
		"no ceiling":    {Rates: ok.Rates},
		"zero ratio":    {Rates: ok.Rates, MaxOutputTokens: 1, Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{llmhttp.Batch: {0, 1}}},
		"long no limit": {Rates: ok.Rates, MaxOutputTokens: 1, LongContext: &llmhttp.LongContext{Rates: ok.Rates}},
		"long no rates": {Rates: ok.Rates, MaxOutputTokens: 1, LongContext: &llmhttp.LongContext{Above: 5}},
	} {
		_, err := llmhttp.NewPrices(llmhttp.PriceTable{Name: "t", Models: map[string]llmhttp.ModelPrice{"m": m}})
		require.ErrorIs(t, err, llmhttp.ErrInvalidPrice, name)
		assert.Contains(t, err.Error(), `table "t", model "m"`, name)
	}
	_, err := llmhttp.NewPrices(llmhttp.PriceTable{Name: "t", Models: map[string]llmhttp.ModelPrice{"m": ok},
		Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{llmhttp.Flex: {1, 0}}})
	require.ErrorIs(t, err, llmhttp.ErrInvalidPrice)
	_, err = llmhttp.NewPrices(llmhttp.PriceTable{Name: "t", Models: map[string]llmhttp.ModelPrice{" ": ok}})
	require.ErrorIs(t, err, llmhttp.ErrInvalidPrice)
}

// TestCostExamples: costs worked out by hand.
func TestCostExamples(t *testing.T) {
	prices := llmhttp.DefaultPrices()
	for _, tc := range []struct {
		name, model string
		u           llmhttp.Usage
		want        int64 // micro-dollars
	}{
		// 93 uncached × $2.50 + 1024 cached × $1.25 + 46 × $10 per
		// million: 232.5 + 1280 + 460 = 1972.5, rounded up.
		{"openai fixture", "gpt-4o-2024-08-06", llmhttp.Usage{InputTokens: 1117, CacheReadTokens: 1024, OutputTokens: 46, CacheInInput: true}, 1973},
		// 472 × $3 + 1536 × $3.75 (5-minute writes) + 15 × $15.
		{"anthropic fixture", "claude-sonnet-4-5", llmhttp.Usage{InputTokens: 472, CacheCreationTokens: 1536, OutputTokens: 15}, 1416 + 5760 + 225},
		// The same writes with the 1-hour lifetime: × $6.
		{"anthropic 1h writes", "claude-sonnet-4-5", llmhttp.Usage{InputTokens: 472, CacheCreationTokens: 1536, CacheCreationLongTokens: 1536, OutputTokens: 15}, 1416 + 9216 + 225},
		// Reasoning is part of the output: 100 output tokens, not 180.
		{"reasoning counted once", "o3", llmhttp.Usage{InputTokens: 10, OutputTokens: 100, ReasoningTokens: 80, CacheInInput: true}, 20 + 800},
		// One token of $0.15 per million is 0.15 micro-dollars: 1.
		{"rounded up", "gpt-4o-mini", llmhttp.Usage{InputTokens: 1, CacheInInput: true}, 1},
		{"nothing", "gpt-4o-mini", llmhttp.Usage{}, 0},
		// Batch: half of 1000 × $3 + 1 × $15 = half of 3015.
		{"batch", "claude-sonnet-4-5", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1, ServiceTier: "batch"}, 1508},
		{"flex", "gpt-5", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1000, ServiceTier: "flex", CacheInInput: true}, (1250 + 10_000) / 2},
		{"priority", "gpt-5", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1000, ServiceTier: "priority", CacheInInput: true}, 2 * (1250 + 10_000)},
		{"default tier", "gpt-5", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1000, ServiceTier: "default", CacheInInput: true}, 1250 + 10_000},
		// Fast mode on Opus 4.6 is six times, US-only inference 1.1.
		{"fast, us", "claude-opus-4-6", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1000, Speed: "fast", InferenceGeo: "us"}, 6 * 11 * (5000 + 25_000) / 10},
		{"fast on opus 5", "claude-opus-5", llmhttp.Usage{InputTokens: 1000, OutputTokens: 1000, Speed: "fast"}, 2 * (5000 + 25_000)},
		// Haiku 5.5: 100,000 prompt tokens at the low rates, 100,001 at
		// the high ones, output included.
		{"haiku 5.5 short", "claude-haiku-5-5", llmhttp.Usage{InputTokens: 90_000, CacheReadTokens: 10_000, OutputTokens: 1000}, 9000 + 100 + 500},
		{"haiku 5.5 long", "claude-haiku-5-5", llmhttp.Usage{InputTokens: 90_001, CacheReadTokens: 10_000, OutputTokens: 1000}, 48_001}, // 45,000.5 + 500 + 2500, rounded up
		// GPT-6 Sol above 272,000 prompt tokens: twice the input, 1.5 ×
		// the output.
		{"gpt-6 long", "gpt-6-sol", llmhttp.Usage{InputTokens: 300_000, OutputTokens: 1000, CacheInInput: true}, 300_000*4 + 15_000},
		{"gpt-6 cache writes", "gpt-6-sol", llmhttp.Usage{InputTokens: 1000, CacheCreationTokens: 400, CacheReadTokens: 500, OutputTokens: 0, CacheInInput: true},
			200 + 1000 + 100},
	} {
		got, err := prices.Cost(tc.model, tc.u)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

// TestCostSaturates: a cost beyond MaxCost is cut to it.
func TestCostSaturates(t *testing.T) {
	dear := llmhttp.ModelPrice{Rates: llmhttp.Rates{Input: 1_000_000 * llmhttp.USD, Output: 1_000_000 * llmhttp.USD}, MaxOutputTokens: 1,
		Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{"a": {1_000_000, 1}, "b": {1_000_000, 1}, "c": {1_000_000, 1}}}
	u := llmhttp.Usage{InputTokens: 1_000_000_000, OutputTokens: 1_000_000_000, ServiceTier: "a", Speed: "b", InferenceGeo: "c"}
	dear.Multipliers["geo:c"] = dear.Multipliers["c"]
	assert.Equal(t, int64(llmhttp.MaxCost), dear.Cost(u))
	assert.Equal(t, int64(llmhttp.MaxCost), dear.Estimate(llmhttp.Request{PromptTokens: 1 << 62, OutputCeiling: 1 << 62}))
}

// refCost is the cost of u at m worked out plainly: see pricecheck.Cost.
func refCost(m llmhttp.ModelPrice, u llmhttp.Usage) int64 { return pricecheck.Cost(m, u) }

// TestCostAgainstModel: seeded random prices and usages, of both
// providers' shapes, cost what the plain model says, to the micro-dollar.
func TestCostAgainstModel(t *testing.T) {
	seed := uint64(20261126)
	rnd := rand.New(rand.NewPCG(seed, 1))
	rate := func() int64 {
		switch rnd.IntN(5) {
		case 0:
			return 0 // the default
		case 1:
			return 1 + rnd.Int64N(1000)
		default:
			return 1 + rnd.Int64N(200*llmhttp.USD)
		}
	}
	count := func() int64 {
		switch rnd.IntN(6) {
		case 0:
			return 0
		case 1:
			return 1_000_000_000
		case 2:
			return rnd.Int64N(1_000_000_000)
		default:
			return rnd.Int64N(5000)
		}
	}
	rates := func() llmhttp.Rates {
		return llmhttp.Rates{Input: 1 + rnd.Int64N(200*llmhttp.USD), CachedInput: rate(), CacheWrite: rate(), CacheWriteLong: rate(),
			Output: 1 + rnd.Int64N(200*llmhttp.USD)}
	}
	tiers := []string{"", "default", "standard", "batch", "flex", "priority", "scale", "odd"}
	for i := range 20_000 {
		m := llmhttp.ModelPrice{Rates: rates(), MaxOutputTokens: 1000, Multipliers: map[llmhttp.Modifier]llmhttp.Ratio{}}
		if rnd.IntN(3) == 0 {
			m.LongContext = &llmhttp.LongContext{Above: rnd.Int64N(10_000), Rates: rates()}
		}
		for _, mod := range []llmhttp.Modifier{llmhttp.Batch, llmhttp.Flex, llmhttp.Priority, llmhttp.FastMode, llmhttp.USInference} {
			if rnd.IntN(2) == 0 {
				m.Multipliers[mod] = llmhttp.Ratio{Num: 1 + rnd.Int64N(20), Den: 1 + rnd.Int64N(20)}
			}
		}
		u := llmhttp.Usage{InputTokens: count(), OutputTokens: count(), CacheReadTokens: count(), CacheCreationTokens: count(),
			ReasoningTokens: count(), CacheInInput: rnd.IntN(2) == 0, ServiceTier: tiers[rnd.IntN(len(tiers))]}
		if rnd.IntN(2) == 0 {
			u.CacheCreationLongTokens = rnd.Int64N(u.CacheCreationTokens + 1)
		}
		if rnd.IntN(4) == 0 {
			u.Speed = "fast"
		}
		if rnd.IntN(4) == 0 {
			u.InferenceGeo = "us"
		}
		require.Equal(t, refCost(m, u), m.Cost(u), "seed %d, case %d: %+v at %+v", seed, i, u, m)
	}
}

// TestEstimate: the worst case is the prompt's estimate at the dearest
// input rate plus the output ceiling (or the model's) at the output rate.
func TestEstimate(t *testing.T) {
	prices := llmhttp.DefaultPrices()
	body := `{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3911) + `"}]}`
	r := llmhttp.RequestFromBody([]byte(body))
	assert.Equal(t, "claude-sonnet-4-5", r.Model)
	assert.Equal(t, int64(1000), r.PromptTokens, "4000 bytes / 4")
	assert.Equal(t, int64(1000), r.OutputCeiling)
	assert.False(t, r.LongCache)
	got, err := prices.Estimate(r)
	require.NoError(t, err)
	assert.Equal(t, int64(1000*3750/1000+1000*15), got, "input at the 5-minute write rate, which is dearer")

	long := `{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[{"role":"user","content":[{"type":"text",` +
		`"cache_control":{"type":"ephemeral","ttl":"1h"},"text":"` + strings.Repeat("x", 3911) + `"}]}]}`
	r = llmhttp.RequestFromBody([]byte(long))
	assert.True(t, r.LongCache)
	got, err = prices.Estimate(r)
	require.NoError(t, err)
	assert.Equal(t, r.PromptTokens*6+15_000, got, "input at the 1-hour write rate")

	r = llmhttp.RequestFromBody([]byte(`{"model":"gpt-4o","service_tier":"flex","messages":[]}`))
	assert.Zero(t, r.OutputCeiling)
	assert.Equal(t, []llmhttp.Modifier{llmhttp.Flex}, r.Modifiers)
	got, err = prices.Estimate(r)
	require.NoError(t, err)
	assert.Equal(t, (r.PromptTokens*2_500_000+16_384*10_000_000+2_000_000-1)/2_000_000, got, "no ceiling: the model's 16,384, at half price")

	r = llmhttp.RequestFromBody([]byte(`{"model":"claude-opus-5","max_tokens":10,"speed":"fast","inference_geo":"us","messages":[]}`))
	assert.Equal(t, []llmhttp.Modifier{llmhttp.FastMode, llmhttp.USInference}, r.Modifiers)
	r = llmhttp.RequestFromBody([]byte(`{"model":"gpt-5","max_completion_tokens":7,"service_tier":"fast"}`))
	assert.Equal(t, []llmhttp.Modifier{llmhttp.Priority}, r.Modifiers)
	assert.Equal(t, int64(7), r.OutputCeiling)
	r = llmhttp.RequestFromBody([]byte(`{"model":"gpt-5","max_tokens":"lots"}`))
	assert.Equal(t, "gpt-5", r.Model, "a field of an unexpected type leaves the model readable")
	r = llmhttp.RequestFromBody([]byte(`not json`))
	assert.Equal(t, llmhttp.Request{PromptTokens: 2, Choices: 1}, r)
}
