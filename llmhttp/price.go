package llmhttp

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// This file holds the price tables: what a model's tokens cost, in
// micro-dollars (millionths of a US dollar) per million tokens, integers so
// that every charge is exact. [ModelPrice.Cost] turns a usage into a cost
// with them.

// ErrUnknownModel is returned (wrapped, with the model's name) for a model
// that no price table names: the transport refuses such a request before
// it acquires or sends anything rather than charge it nothing.
var ErrUnknownModel = errors.New("llmhttp: no price for the model")

// ErrInvalidPrice is returned (wrapped, with the model's name) by
// [NewPrices] for a table that does not validate.
var ErrInvalidPrice = errors.New("llmhttp: invalid price table")

// USD is one US dollar in micro-dollars, the unit of every price and
// cost of this package and of money limits ([Options.CostLimit]): $2.50 is
// 2_500_000, or 5 * USD / 2.
const USD = 1_000_000

// Rates are what one million tokens of each kind cost, in micro-dollars
// ($3 per million tokens is 3 * USD). A zero rate takes the default given
// with it; no rate is free.
type Rates struct {
	// Input is an input (prompt) token that is neither read from nor
	// written to the prompt cache.
	Input int64
	// CachedInput is an input token read from the prompt cache (a cache
	// hit): Anthropic's cache_read_input_tokens, OpenAI's cached_tokens.
	// Zero means Input.
	CachedInput int64
	// CacheWrite is an input token written to the prompt cache with the
	// short lifetime: Anthropic's 5-minute writes, OpenAI's 30-minute
	// ones. Zero means Input (a provider that bills no write premium).
	CacheWrite int64
	// CacheWriteLong is an input token written with the long lifetime:
	// Anthropic's 1-hour writes, OpenAI's 12-hour ones. Zero means
	// CacheWrite.
	CacheWriteLong int64
	// Output is an output token, reasoning (thinking) tokens included:
	// both providers count them in the output and bill them as output.
	Output int64
}

// resolve returns r with its defaults filled in.
func (r Rates) resolve() Rates {
	if r.CachedInput == 0 {
		r.CachedInput = r.Input
	}
	if r.CacheWrite == 0 {
		r.CacheWrite = r.Input
	}
	if r.CacheWriteLong == 0 {
		r.CacheWriteLong = r.CacheWrite
	}
	return r
}

// maxRate bounds a rate: a million dollars per million tokens is no price a
// provider asks, and it keeps the arithmetic's intermediate values small.
const maxRate = 1_000_000 * USD

func (r Rates) validate() error {
	if r.Input <= 0 || r.Output <= 0 {
		return errors.New("input and output rates must be positive")
	}
	for _, v := range []int64{r.Input, r.CachedInput, r.CacheWrite, r.CacheWriteLong, r.Output} {
		if v < 0 || v > maxRate {
			return fmt.Errorf("rate %d is outside [0, %d] micro-dollars per million tokens", v, int64(maxRate))
		}
	}
	return nil
}

// LongContext prices a request whose prompt is long: when its prompt
// tokens (input, cache reads and cache writes together) are more than
// Above, every token of the request, output included, is charged at Rates.
// OpenAI's GPT-5.4 and later models above 272,000 prompt tokens, Claude
// Sonnet 4 and 4.5 above 200,000, Claude Haiku 5.5 above 100,000.
type LongContext struct {
	Above int64
	Rates
}

// Ratio is a price multiplier, Num/Den: {1, 2} halves a price (the batch
// discount), {11, 10} adds 10 %.
type Ratio struct{ Num, Den int64 }

// maxRatioTerm bounds a ratio's numerator and denominator.
const maxRatioTerm = 1_000_000

func (q Ratio) validate() error {
	if q.Num <= 0 || q.Den <= 0 || q.Num > maxRatioTerm || q.Den > maxRatioTerm {
		return fmt.Errorf("multiplier %d/%d: both terms must be in [1, %d]", q.Num, q.Den, maxRatioTerm)
	}
	return nil
}

// Modifier names what a response reports about how it was served that
// changes its price: a service tier (OpenAI's service_tier, Anthropic's
// usage.service_tier), Anthropic's fast mode (usage.speed) or an inference
// region (Anthropic's usage.inference_geo). A price's multiplier for each
// modifier the response reports applies; a modifier a price has no
// multiplier for changes nothing.
type Modifier string

// The modifiers the providers report.
const (
	// Batch: a request of the Batch APIs (OpenAI, Anthropic), half price.
	Batch Modifier = "batch"
	// Flex: OpenAI's flex processing (service_tier "flex"), half price.
	Flex Modifier = "flex"
	// Priority: OpenAI's priority processing, which a request for fast
	// mode also reports (service_tier "priority"); Anthropic's Priority
	// Tier (usage.service_tier "priority").
	Priority Modifier = "priority"
	// FastMode: Anthropic's fast mode (usage.speed "fast").
	FastMode Modifier = "fast"
	// USInference: Anthropic's US-only inference (usage.inference_geo
	// "us"). Any other region r reports the modifier "geo:" + r.
	USInference Modifier = "geo:us"
)

// ModelPrice is what one model's tokens cost.
type ModelPrice struct {
	// Rates are the standard rates.
	Rates
	// LongContext, when set, replaces Rates for a request with a long
	// prompt.
	LongContext *LongContext
	// MaxOutputTokens is the most output the model gives one request: the
	// worst-case estimate assumes it for a request that sets no output
	// ceiling (max_tokens, max_completion_tokens, max_output_tokens).
	// Required.
	MaxOutputTokens int64
	// Multipliers apply to every rate when the response reports their
	// modifier; they replace the table's of the same modifier.
	Multipliers map[Modifier]Ratio
}

func (m ModelPrice) validate() error {
	if err := m.Rates.validate(); err != nil {
		return err
	}
	if m.LongContext != nil {
		if m.LongContext.Above <= 0 {
			return errors.New("long context threshold must be positive")
		}
		if err := m.LongContext.Rates.validate(); err != nil {
			return fmt.Errorf("long context: %w", err)
		}
	}
	if m.MaxOutputTokens <= 0 || m.MaxOutputTokens > maxUsageTokens {
		return fmt.Errorf("max output tokens %d is outside [1, %d]", m.MaxOutputTokens, maxUsageTokens)
	}
	for mod, q := range m.Multipliers {
		if err := q.validate(); err != nil {
			return fmt.Errorf("%s: %w", mod, err)
		}
	}
	return nil
}

// PriceTable is one provider's prices, as published on one day.
type PriceTable struct {
	// Name names the table, e.g. "openai".
	Name string
	// AsOf is the day the prices were read (YYYY-MM-DD), and Source
	// where: for the reader, and for [Prices.Tables].
	AsOf, Source string
	// Models maps a model name (lower case, without a date suffix: see
	// [Prices.Lookup]) to its price.
	Models map[string]ModelPrice
	// Multipliers apply to every model of the table that has none of its
	// own for the modifier.
	Multipliers map[Modifier]Ratio
}

// Prices is a set of price tables merged into one lookup by model name.
// It is immutable and safe for concurrent use; build it with [NewPrices] or
// take [DefaultPrices].
type Prices struct {
	models map[string]ModelPrice // each with its table's multipliers merged in
	tables []PriceTable          // without their models, for Tables
}

// NewPrices merges tables into a Prices. A later table overrides an
// earlier one model by model: a model's price is replaced whole (its rates,
// long context, output ceiling and multipliers), never field by field, and
// the models a later table does not name keep their price. A table's
// multipliers apply to its own models only. Every price is validated; the
// error wraps [ErrInvalidPrice] and names the table and model.
//
// To change one price of the shipped tables, pass them first:
//
//	prices, err := llmhttp.NewPrices(llmhttp.OpenAIPrices(), llmhttp.AnthropicPrices(), mine)
//
// To price only your own models, pass only your tables.
func NewPrices(tables ...PriceTable) (*Prices, error) {
	p := &Prices{models: make(map[string]ModelPrice)}
	for _, t := range tables {
		for name, q := range t.Multipliers {
			if err := q.validate(); err != nil {
				return nil, fmt.Errorf("%w: table %q: %s: %w", ErrInvalidPrice, t.Name, name, err)
			}
		}
		for name, m := range t.Models {
			key := strings.ToLower(strings.TrimSpace(name))
			if key == "" {
				return nil, fmt.Errorf("%w: table %q: empty model name", ErrInvalidPrice, t.Name)
			}
			if err := m.validate(); err != nil {
				return nil, fmt.Errorf("%w: table %q, model %q: %w", ErrInvalidPrice, t.Name, name, err)
			}
			if m.LongContext != nil {
				lc := *m.LongContext
				m.LongContext = &lc
			}
			mult := maps.Clone(t.Multipliers)
			if mult == nil {
				mult = make(map[Modifier]Ratio)
			}
			maps.Copy(mult, m.Multipliers)
			m.Multipliers = mult
			p.models[key] = m
		}
		info := t
		info.Models, info.Multipliers = nil, maps.Clone(t.Multipliers)
		p.tables = append(p.tables, info)
	}
	return p, nil
}

// defaultPrices is DefaultPrices, built once.
var defaultPrices = func() *Prices {
	p, err := NewPrices(OpenAIPrices(), AnthropicPrices())
	if err != nil {
		panic(err) // the shipped tables are checked by the package's tests
	}
	return p
}()

// DefaultPrices returns the tables shipped with the package,
// [OpenAIPrices] and [AnthropicPrices], merged.
func DefaultPrices() *Prices { return defaultPrices }

// Tables returns the merged tables' names, dates and sources (and
// table-wide multipliers), without their models, in merge order.
func (p *Prices) Tables() []PriceTable {
	out := slices.Clone(p.tables)
	for i := range out {
		out[i].Multipliers = maps.Clone(out[i].Multipliers)
	}
	return out
}

// Models returns the names the prices know, sorted.
func (p *Prices) Models() []string {
	return slices.Sorted(maps.Keys(p.models))
}

// dateSuffix matches the snapshot suffixes of model names: OpenAI's
// -2024-08-06, Anthropic's -20250929, Vertex AI's @20250929, and -latest.
var dateSuffix = regexp.MustCompile(`(-\d{4}-\d{2}-\d{2}|[-@]\d{8}|-latest)$`)

// Lookup returns the price of model. The name is matched in lower case,
// first whole, then without a dated snapshot suffix (gpt-4o-2024-08-06
// is priced as gpt-4o, claude-sonnet-4-5-20250929 as claude-sonnet-4-5,
// claude-sonnet-4-5@20250929 and claude-3-5-haiku-latest likewise). No
// other matching is done: gpt-4o-mini is not gpt-4o. A model no table names
// returns an error wrapping [ErrUnknownModel]. The returned price's
// Multipliers include its table's.
func (p *Prices) Lookup(model string) (ModelPrice, error) {
	key := strings.ToLower(strings.TrimSpace(model))
	if m, ok := p.models[key]; ok {
		return m.clone(), nil
	}
	if base := dateSuffix.ReplaceAllString(key, ""); base != key {
		if m, ok := p.models[base]; ok {
			return m.clone(), nil
		}
	}
	return ModelPrice{}, fmt.Errorf("%w: %q", ErrUnknownModel, model)
}

func (m ModelPrice) clone() ModelPrice {
	m.Multipliers = maps.Clone(m.Multipliers)
	if m.LongContext != nil {
		lc := *m.LongContext
		m.LongContext = &lc
	}
	return m
}

// multipliers returns the multipliers of mods (each modifier once); a
// modifier without a multiplier has none.
func (m ModelPrice) multipliers(mods []Modifier) []Ratio {
	var out []Ratio
	seen := make(map[Modifier]bool, len(mods))
	for _, mod := range mods {
		if q, ok := m.Multipliers[mod]; ok && !seen[mod] {
			out = append(out, q)
		}
		seen[mod] = true
	}
	return out
}
