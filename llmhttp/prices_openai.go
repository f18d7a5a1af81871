package llmhttp

// OpenAIPrices returns the prices of OpenAI's text models, read on
// 2026-11-26 from https://developers.openai.com/api/docs/pricing and the
// models' pages (https://developers.openai.com/api/docs/models/<model>),
// in micro-dollars per million tokens. Each call returns a fresh copy.
//
// The Batch API and flex processing are half price, priority processing
// (which a request for fast mode reports) twice the price: the table's
// multipliers. Above 272,000 prompt tokens, the GPT-5.4 and later models
// charge the whole request twice the input and cache rates and 1.5 times
// the output rate (LongContext).
//
// Where uncertainty remains:
//   - 12-hour cache writes: OpenAI publishes their rate for GPT-6.1 Terra
//     (twice the 30-minute rate); the other GPT-6 models are given twice
//     their 30-minute rate too. Models without a published cache-write
//     rate (GPT-5.6 and older) bill writes at the input rate.
//   - Priority processing costs twice the standard rates on the GPT-5 and
//     GPT-6 models; on GPT-4.1, GPT-4o and the o-series OpenAI charged
//     1.7 to 1.8 times. The table charges twice for all of them, which
//     overcharges those older models rather than undercharge any.
//   - GPT-5.6 Sol: the models page lists $4 / $20, as after the price cut
//     of 2026-08-21; some resellers still listed $5 / $30.
//   - Regional processing (data residency) surcharges are not applied:
//     the response does not say where it was processed. Add a table of
//     your own for such a project.
//   - Tools billed per call (web search, file search, code interpreter)
//     and audio or image tokens are not priced: usage objects report
//     text tokens only.
func OpenAIPrices() PriceTable {
	const m = USD / 1000 // a tenth of a cent, to write rates such as $0.075 exactly
	long := func(r Rates) *LongContext {
		r = r.resolve()
		return &LongContext{Above: 272_000, Rates: Rates{
			Input: 2 * r.Input, CachedInput: 2 * r.CachedInput,
			CacheWrite: 2 * r.CacheWrite, CacheWriteLong: 2 * r.CacheWriteLong,
			Output: (3*r.Output + 1) / 2, // rounded up
		}}
	}
	model := func(r Rates, maxOut int64, longContext bool) ModelPrice {
		p := ModelPrice{Rates: r, MaxOutputTokens: maxOut}
		if longContext {
			p.LongContext = long(r)
		}
		return p
	}
	gpt6 := func(in, cached, write, out int64) ModelPrice {
		return model(Rates{Input: in, CachedInput: cached, CacheWrite: write, CacheWriteLong: 2 * write, Output: out}, 128_000, true)
	}
	models := map[string]ModelPrice{
		// GPT-6 (2026-09-03 and 2026-09-22), GPT-6.1 (2026-09-30, 2026-10-26).
		"gpt-6-astra":   gpt6(10*USD, 1*USD, 12_500*m, 50*USD),
		"gpt-6-sol":     gpt6(2*USD, 200*m, 2_500*m, 10*USD),
		"gpt-6-luna":    gpt6(100*m, 10*m, 125*m, 500*m),
		"gpt-6.1-sol":   gpt6(2*USD, 100*m, 2_500*m, 10*USD),
		"gpt-6.1-terra": gpt6(1*USD, 50*m, 1_250*m, 5*USD),

		// GPT-5.6 (2026-07-09; prices cut 2026-07-30 and 2026-08-21).
		"gpt-5.6-sol":   model(Rates{Input: 4 * USD, CachedInput: 400 * m, Output: 20 * USD}, 128_000, true),
		"gpt-5.6":       model(Rates{Input: 4 * USD, CachedInput: 400 * m, Output: 20 * USD}, 128_000, true),
		"gpt-5.6-terra": model(Rates{Input: 2 * USD, CachedInput: 200 * m, Output: 12 * USD}, 128_000, true),
		"gpt-5.6-luna":  model(Rates{Input: 200 * m, CachedInput: 20 * m, Output: 1_200 * m}, 128_000, true),

		// GPT-5.5 and GPT-5.4.
		"gpt-5.5":      model(Rates{Input: 5 * USD, CachedInput: 500 * m, Output: 30 * USD}, 128_000, true),
		"gpt-5.5-pro":  model(Rates{Input: 30 * USD, Output: 180 * USD}, 128_000, true),
		"gpt-5.4":      model(Rates{Input: 2_500 * m, CachedInput: 250 * m, Output: 15 * USD}, 128_000, true),
		"gpt-5.4-pro":  model(Rates{Input: 30 * USD, Output: 180 * USD}, 128_000, true),
		"gpt-5.4-mini": model(Rates{Input: 750 * m, CachedInput: 75 * m, Output: 4_500 * m}, 128_000, false),
		"gpt-5.4-nano": model(Rates{Input: 200 * m, CachedInput: 20 * m, Output: 1_250 * m}, 128_000, false),

		// GPT-5 to GPT-5.2.
		"gpt-5.2":    model(Rates{Input: 1_750 * m, CachedInput: 175 * m, Output: 14 * USD}, 128_000, false),
		"gpt-5.1":    model(Rates{Input: 1_250 * m, CachedInput: 125 * m, Output: 10 * USD}, 128_000, false),
		"gpt-5":      model(Rates{Input: 1_250 * m, CachedInput: 125 * m, Output: 10 * USD}, 128_000, false),
		"gpt-5-pro":  model(Rates{Input: 15 * USD, Output: 120 * USD}, 272_000, false),
		"gpt-5-mini": model(Rates{Input: 250 * m, CachedInput: 25 * m, Output: 2 * USD}, 128_000, false),
		"gpt-5-nano": model(Rates{Input: 50 * m, CachedInput: 5 * m, Output: 400 * m}, 128_000, false),

		// GPT-4.1, GPT-4o and the o-series.
		"gpt-4.1":      model(Rates{Input: 2 * USD, CachedInput: 500 * m, Output: 8 * USD}, 32_768, false),
		"gpt-4.1-mini": model(Rates{Input: 400 * m, CachedInput: 100 * m, Output: 1_600 * m}, 32_768, false),
		"gpt-4.1-nano": model(Rates{Input: 100 * m, CachedInput: 25 * m, Output: 400 * m}, 32_768, false),
		"gpt-4o":       model(Rates{Input: 2_500 * m, CachedInput: 1_250 * m, Output: 10 * USD}, 16_384, false),
		"gpt-4o-mini":  model(Rates{Input: 150 * m, CachedInput: 75 * m, Output: 600 * m}, 16_384, false),
		"o1":           model(Rates{Input: 15 * USD, CachedInput: 7_500 * m, Output: 60 * USD}, 100_000, false),
		"o3":           model(Rates{Input: 2 * USD, CachedInput: 500 * m, Output: 8 * USD}, 100_000, false),
		"o3-pro":       model(Rates{Input: 20 * USD, Output: 80 * USD}, 100_000, false),
		"o3-mini":      model(Rates{Input: 1_100 * m, CachedInput: 550 * m, Output: 4_400 * m}, 100_000, false),
		"o4-mini":      model(Rates{Input: 1_100 * m, CachedInput: 275 * m, Output: 4_400 * m}, 100_000, false),
	}
	return PriceTable{
		Name:   "openai",
		AsOf:   "2026-11-26",
		Source: "https://developers.openai.com/api/docs/pricing",
		Models: models,
		Multipliers: map[Modifier]Ratio{
			Batch:    {1, 2},
			Flex:     {1, 2},
			Priority: {2, 1},
		},
	}
}
