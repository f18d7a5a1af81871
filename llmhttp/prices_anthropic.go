package llmhttp

// AnthropicPrices returns the prices of Anthropic's Claude models, read on
// 2026-11-26 from https://platform.claude.com/docs/en/about-claude/pricing
// and the models' pages
// (https://platform.claude.com/docs/en/models/<model>/overview), in
// micro-dollars per million tokens. Each call returns a fresh copy.
//
// The columns are the pricing page's: base input, 5-minute cache writes
// (CacheWrite), 1-hour cache writes (CacheWriteLong), cache hits
// (CachedInput), output. The Message Batches API is half price; US-only
// inference (inference_geo "us", Claude Opus 4.6 and later) costs 1.1
// times; fast mode costs twice the price on Claude Opus 4.8, 5 and 5.5 and
// six times on Claude Opus 4.6 and 4.7. Claude Sonnet 4 and 4.5 charge a
// request whose prompt is over 200,000 tokens twice the input rates and
// 1.5 times the output rate; Claude Haiku 5.5 charges one over 100,000
// tokens five times every rate (LongContext).
//
// Where uncertainty remains:
//   - Fast mode on models whose fast-mode price is not published (the
//     Fable models): the table-wide multiplier, six times, the highest
//     published, so that such a request is overcharged rather than
//     undercharged.
//   - The Priority Tier draws down a prepaid capacity commitment at the
//     list rates' ratios rather than billing per token; it is priced at
//     the standard rates. It is no longer sold.
//   - Claude Sonnet 5.5's cache hits cost $0.20 until 2026-10-07 and $0.10
//     since; the table has today's rate.
//   - Claude Fable 5.2 (released 2026-11-09): its rates come from the
//     release's announcement as resellers quoted it; the pricing page
//     stored here predates it.
//   - Tools billed per call (web search, web fetch, code execution) are
//     not priced: usage reports their calls, not their tokens.
func AnthropicPrices() PriceTable {
	const m = USD / 1000 // a tenth of a cent
	claude := func(in, write5m, write1h, hit, out, maxOut int64) ModelPrice {
		return ModelPrice{
			Rates:           Rates{Input: in, CacheWrite: write5m, CacheWriteLong: write1h, CachedInput: hit, Output: out},
			MaxOutputTokens: maxOut,
		}
	}
	fast2 := func(p ModelPrice) ModelPrice {
		p.Multipliers = map[Modifier]Ratio{FastMode: {2, 1}}
		return p
	}
	// Claude Sonnet 4 and 4.5 above 200,000 prompt tokens.
	sonnet4 := func(maxOut int64) ModelPrice {
		p := claude(3*USD, 3_750*m, 6*USD, 300*m, 15*USD, maxOut)
		p.LongContext = &LongContext{Above: 200_000, Rates: Rates{
			Input: 6 * USD, CacheWrite: 7_500 * m, CacheWriteLong: 12 * USD, CachedInput: 600 * m, Output: 22_500 * m,
		}}
		return p
	}
	haiku55 := claude(100*m, 125*m, 200*m, 10*m, 500*m, 128_000)
	haiku55.LongContext = &LongContext{Above: 100_000, Rates: Rates{
		Input: 500 * m, CacheWrite: 625 * m, CacheWriteLong: 1 * USD, CachedInput: 50 * m, Output: 2_500 * m,
	}}
	opus4 := claude(15*USD, 18_750*m, 30*USD, 1_500*m, 75*USD, 32_000)
	sonnet := claude(3*USD, 3_750*m, 6*USD, 300*m, 15*USD, 64_000)
	models := map[string]ModelPrice{
		"claude-fable-5-2":  claude(8*USD, 10*USD, 16*USD, 200*m, 40*USD, 128_000),
		"claude-fable-5-1":  claude(10*USD, 12_500*m, 20*USD, 250*m, 50*USD, 128_000),
		"claude-mythos-5-1": claude(10*USD, 12_500*m, 20*USD, 250*m, 50*USD, 128_000),
		"claude-fable-5":    claude(10*USD, 12_500*m, 20*USD, 1*USD, 50*USD, 128_000),
		"claude-mythos-5":   claude(10*USD, 12_500*m, 20*USD, 1*USD, 50*USD, 128_000),

		"claude-opus-5-5": fast2(claude(4*USD, 5*USD, 8*USD, 200*m, 20*USD, 128_000)),
		"claude-opus-5":   fast2(claude(5*USD, 6_250*m, 10*USD, 500*m, 25*USD, 128_000)),
		"claude-opus-4-8": fast2(claude(5*USD, 6_250*m, 10*USD, 500*m, 25*USD, 128_000)),
		"claude-opus-4-7": claude(5*USD, 6_250*m, 10*USD, 500*m, 25*USD, 128_000),
		"claude-opus-4-6": claude(5*USD, 6_250*m, 10*USD, 500*m, 25*USD, 128_000),
		"claude-opus-4-5": claude(5*USD, 6_250*m, 10*USD, 500*m, 25*USD, 64_000),
		"claude-opus-4-1": opus4,
		"claude-opus-4":   opus4, // claude-opus-4-20250514
		"claude-opus-4-0": opus4,

		"claude-sonnet-5-5": claude(2*USD, 2_500*m, 4*USD, 100*m, 10*USD, 128_000),
		"claude-sonnet-5":   claude(2*USD, 2_500*m, 4*USD, 200*m, 10*USD, 128_000),
		"claude-sonnet-4-6": sonnet,
		"claude-sonnet-4-5": sonnet4(64_000),
		"claude-sonnet-4":   sonnet4(64_000), // claude-sonnet-4-20250514
		"claude-sonnet-4-0": sonnet4(64_000),
		"claude-3-7-sonnet": sonnet,

		"claude-haiku-5-5": haiku55,
		"claude-haiku-4-5": claude(1*USD, 1_250*m, 2*USD, 100*m, 5*USD, 64_000),
		"claude-3-5-haiku": claude(800*m, 1*USD, 1_600*m, 80*m, 4*USD, 8_192),
		"claude-3-haiku":   claude(250*m, 300*m, 500*m, 30*m, 1_250*m, 4_096),
	}
	return PriceTable{
		Name:   "anthropic",
		AsOf:   "2026-11-26",
		Source: "https://platform.claude.com/docs/en/about-claude/pricing",
		Models: models,
		Multipliers: map[Modifier]Ratio{
			Batch:       {1, 2},
			FastMode:    {6, 1},
			USInference: {11, 10},
			Priority:    {1, 1},
		},
	}
}
