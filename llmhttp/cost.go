package llmhttp

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strings"
)

// This file turns a usage into its cost, and a request into the worst
// case of its cost, with a model's price ([ModelPrice], [Prices]).

// MaxCost is the largest cost this package returns, in micro-dollars: a
// larger one is cut to it (saturated), so that it is always an amount
// the limiter takes ([limiter.Consume] counts in millitokens).
const MaxCost = math.MaxInt64 / 1000

// perMillion is the unit of the rates: they price a million tokens.
var perMillion = big.NewInt(1_000_000)

// Modifiers returns the modifiers u reports, which select a price's
// multipliers: its service tier (none for "", "default", "standard",
// "auto", "standard_only" and "scale", OpenAI's prepaid tier; otherwise
// the tier's name, such as [Batch], [Flex] or [Priority]), its speed
// ([FastMode] for "fast"; another name than "" or "standard" as is) and its
// inference region ("geo:" + the region, such as [USInference], unless it
// is "" or "global").
func (u Usage) Modifiers() []Modifier {
	var out []Modifier
	switch t := strings.ToLower(u.ServiceTier); t {
	case "", "default", "standard", "auto", "standard_only", "scale":
	default:
		out = append(out, Modifier(t))
	}
	switch s := strings.ToLower(u.Speed); s {
	case "", "standard":
	default:
		out = append(out, Modifier(s))
	}
	switch g := strings.ToLower(u.InferenceGeo); g {
	case "", "global":
	default:
		out = append(out, Modifier("geo:"+g))
	}
	return out
}

// promptParts splits u's prompt by how its tokens are billed: neither read
// from nor written to the cache, read, written with the short lifetime,
// written with the long one. For OpenAI the cache counts are part of
// InputTokens (CacheInInput); for Anthropic they are not.
func (u Usage) promptParts() (uncached, read, short, long int64) {
	read = u.CacheReadTokens
	writes := max(u.CacheCreationTokens, u.CacheCreationLongTokens)
	long = u.CacheCreationLongTokens
	short = writes - long
	uncached = u.InputTokens
	if u.CacheInInput {
		// A usage whose parts exceed its whole is charged for the parts.
		uncached = max(u.InputTokens-read-writes, 0)
	}
	return uncached, read, short, long
}

// ratesFor returns the rates of a request with prompt tokens of prompt.
func (m ModelPrice) ratesFor(prompt int64) Rates {
	if m.LongContext != nil && prompt > m.LongContext.Above {
		return m.LongContext.Rates.resolve()
	}
	return m.Rates.resolve()
}

// Cost returns what u costs at m, in micro-dollars: each kind of token at
// its rate (the long-context rates when the prompt is long), times the
// multipliers of the modifiers u reports ([Usage.Modifiers]), rounded up to
// the micro-dollar once for the whole response, so that a budget is never
// undercharged by rounding. It saturates at [MaxCost]. Reasoning tokens
// are part of OutputTokens and are not counted again.
func (m ModelPrice) Cost(u Usage) int64 {
	uncached, read, short, long := u.promptParts()
	r := m.ratesFor(uncached + read + short + long)
	return m.price(u.Modifiers(),
		[2]int64{uncached, r.Input},
		[2]int64{read, r.CachedInput},
		[2]int64{short, r.CacheWrite},
		[2]int64{long, r.CacheWriteLong},
		[2]int64{u.OutputTokens, r.Output})
}

// price returns Σ tokens × rate, times the multipliers of mods, per
// million, rounded up and saturated at MaxCost. Counts are at most 10^9
// and rates 10^12, so the exact arithmetic is done on big integers.
func (m ModelPrice) price(mods []Modifier, terms ...[2]int64) int64 {
	sum := new(big.Int)
	var x big.Int
	for _, t := range terms {
		if t[0] <= 0 {
			continue
		}
		sum.Add(sum, x.Mul(big.NewInt(t[0]), big.NewInt(t[1])))
	}
	den := new(big.Int).Set(perMillion)
	for _, q := range m.multipliers(mods) {
		sum.Mul(sum, big.NewInt(q.Num))
		den.Mul(den, big.NewInt(q.Den))
	}
	// Ceiling division of a non-negative sum.
	sum.Add(sum, den)
	sum.Sub(sum, big.NewInt(1))
	sum.Quo(sum, den)
	if !sum.IsInt64() || sum.Int64() > MaxCost {
		return MaxCost
	}
	return sum.Int64()
}

// Cost returns what u costs at the price of model ([Prices.Lookup],
// [ModelPrice.Cost]); an unknown model is an error wrapping
// [ErrUnknownModel].
func (p *Prices) Cost(model string, u Usage) (int64, error) {
	m, err := p.Lookup(model)
	if err != nil {
		return 0, err
	}
	return m.Cost(u), nil
}

// Request is what the worst-case cost of a call depends on, read from its
// body before it is sent ([RequestFromBody]).
type Request struct {
	// Model is the body's "model".
	Model string
	// PromptTokens is the most tokens the body's prompt can be billed as:
	// its ASCII bytes divided by four, rounded up, and a token per byte of
	// anything else (a non-ASCII byte may be a token of its own), plus
	// [ImageTokens] per image part and [ToolTokens] per tool.
	PromptTokens int64
	// OutputCeiling is the body's max_tokens, max_completion_tokens,
	// max_output_tokens or Bedrock Converse's inferenceConfig.maxTokens
	// (the largest); zero when it names none.
	OutputCeiling int64
	// Choices is how many answers the output ceiling applies to: the
	// body's n or best_of (the larger; every choice is billed), at least
	// one.
	Choices int64
	// Hidden names what the body makes the provider bill as input without
	// carrying it: "previous_response_id", "conversation", "prompt" (a
	// stored prompt), file inputs ("input_file", "file", "document"),
	// "item_reference", hosted tools ("tool web_search"), ...
	// HiddenTokens prices them: the estimate adds it to the prompt. The
	// transport sets it from the history it has read or the caller's
	// bound ([ContextWithHiddenInputTokens]); RequestFromBody leaves it zero.
	Hidden       []string
	HiddenTokens int64
	// PreviousResponseID and Conversation are the body's
	// previous_response_id and conversation id (OpenAI's Responses API).
	PreviousResponseID, Conversation string
	// LongCache is set when the body may ask for the long cache lifetime
	// (it holds the string "1h", "12h" or "24h", as Anthropic's
	// cache_control ttl and OpenAI's prompt_cache_retention spell it).
	LongCache bool
	// Modifiers are those the body asks for: its service_tier ("flex":
	// [Flex]; "priority" or "fast": [Priority]), Anthropic's speed
	// ("fast": [FastMode]) and inference_geo ("us": [USInference]).
	Modifiers []Modifier
}

// RequestFromBody reads what the worst-case cost of a call depends on from
// the JSON body of an OpenAI or Anthropic request. A body that is not a
// JSON object gives only PromptTokens (and one choice).
func RequestFromBody(body []byte) Request {
	r := Request{PromptTokens: countTokens(body), Choices: 1}
	// The members are matched by their exact names, as the providers
	// match them (a struct decode would take "MAX_TOKENS" or "Model" for
	// them too, and a body naming both would be read otherwise than the
	// provider reads it); a later duplicate wins, as with the providers.
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return r
	}
	analyzeBody(top, body, &r)
	r.Model = stringOf(top["model"])
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		r.OutputCeiling = max(r.OutputCeiling, intOf(top[k]))
	}
	var converse map[string]json.RawMessage
	if json.Unmarshal(top["inferenceConfig"], &converse) == nil {
		// Bedrock's Converse API.
		r.OutputCeiling = max(r.OutputCeiling, intOf(converse["maxTokens"]))
	}
	for _, s := range []string{`"1h"`, `"12h"`, `"24h"`} {
		if bytes.Contains(body, []byte(s)) {
			r.LongCache = true
		}
	}
	switch strings.ToLower(stringOf(top["service_tier"])) {
	case "flex":
		r.Modifiers = append(r.Modifiers, Flex)
	case "priority", "fast":
		r.Modifiers = append(r.Modifiers, Priority)
	}
	if strings.EqualFold(stringOf(top["speed"]), "fast") {
		r.Modifiers = append(r.Modifiers, FastMode)
	}
	if g := strings.ToLower(stringOf(top["inference_geo"])); g != "" && g != "global" {
		r.Modifiers = append(r.Modifiers, Modifier("geo:"+g))
	}
	return r
}

// intOf returns a JSON number, or a string holding one, as an integer
// (a fraction rounded up: a provider may take 8.0 or "8" for 8); 0 for
// anything else or a negative number, MaxCost for a larger one.
func intOf(raw json.RawMessage) int64 {
	if len(raw) > 1 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f <= 0 || math.IsNaN(f) {
		return 0
	}
	if f >= MaxCost {
		return MaxCost
	}
	return int64(math.Ceil(f))
}

// Estimate returns the worst case of what r costs at m, in micro-dollars,
// rounded up and saturated at [MaxCost]: the prompt's tokens and its hidden
// input's (PromptTokens + HiddenTokens) at the dearest rate an input token
// of r can be billed at (Input, or a cache write's rate when it is higher:
// the long lifetime's when r.LongCache), plus the output ceiling
// (m.MaxOutputTokens when r sets none) times the choices at the output
// rate; the long-context rates when the prompt is long; times the
// multipliers of r's modifiers.
func (m ModelPrice) Estimate(r Request) int64 {
	prompt := satAdd(r.PromptTokens, r.HiddenTokens)
	rates := m.ratesFor(prompt)
	in := max(rates.Input, rates.CachedInput, rates.CacheWrite)
	if r.LongCache {
		in = max(in, rates.CacheWriteLong)
	}
	return m.price(r.Modifiers, [2]int64{prompt, in}, [2]int64{m.outputTokens(r), rates.Output})
}

// outputTokens returns the most output r can be billed: its ceiling (the
// model's when it sets none) times its choices, saturated.
func (m ModelPrice) outputTokens(r Request) int64 {
	out := r.OutputCeiling
	if out <= 0 {
		out = m.MaxOutputTokens
	}
	choices := max(r.Choices, 1)
	if out > math.MaxInt64/choices {
		return math.MaxInt64
	}
	return out * choices
}

// satAdd returns a+b for non-negative a and b, saturated.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Estimate returns the worst case of what r costs at the price of r.Model
// ([ModelPrice.Estimate]); an unknown model is an error wrapping
// [ErrUnknownModel].
func (p *Prices) Estimate(r Request) (int64, error) {
	m, err := p.Lookup(r.Model)
	if err != nil {
		return 0, err
	}
	return m.Estimate(r), nil
}
