// Package pricecheck works out the costs and estimates of LLM calls
// plainly, with exact rationals, one step at a time: the reference that
// the tests of llmhttp check its arithmetic against. Only tests import it.
package pricecheck

import (
	"math/big"
	"strings"

	"github.com/zaelimiter/limiter/llmhttp"
)

// Cost is the cost of u at m worked out plainly, with exact rationals,
// one step at a time: the model the arithmetic of llmhttp.ModelPrice.Cost
// is checked against.
func Cost(m llmhttp.ModelPrice, u llmhttp.Usage) int64 {
	writes := max(u.CacheCreationTokens, u.CacheCreationLongTokens)
	shortWrites := writes - u.CacheCreationLongTokens
	uncached := u.InputTokens
	if u.CacheInInput {
		uncached = max(0, u.InputTokens-u.CacheReadTokens-writes)
	}
	prompt := uncached + u.CacheReadTokens + writes
	r := m.Rates
	if m.LongContext != nil && prompt > m.LongContext.Above {
		r = m.LongContext.Rates
	}
	or := func(v, d int64) int64 {
		if v == 0 {
			return d
		}
		return v
	}
	cached, write := or(r.CachedInput, r.Input), or(r.CacheWrite, r.Input)
	writeLong := or(r.CacheWriteLong, write)
	total := new(big.Rat)
	for _, term := range [][2]int64{{uncached, r.Input}, {u.CacheReadTokens, cached}, {shortWrites, write},
		{u.CacheCreationLongTokens, writeLong}, {u.OutputTokens, r.Output}} {
		n := new(big.Int).Mul(big.NewInt(term[0]), big.NewInt(term[1]))
		total.Add(total, new(big.Rat).SetFrac(n, big.NewInt(1_000_000)))
	}
	seen := map[llmhttp.Modifier]bool{}
	for _, mod := range u.Modifiers() {
		if q, ok := m.Multipliers[mod]; ok && !seen[mod] {
			total.Mul(total, big.NewRat(q.Num, q.Den))
		}
		seen[mod] = true
	}
	ceil := new(big.Int).Quo(total.Num(), total.Denom())
	if new(big.Rat).SetInt(ceil).Cmp(total) < 0 {
		ceil.Add(ceil, big.NewInt(1))
	}
	if !ceil.IsInt64() || ceil.Int64() > llmhttp.MaxCost {
		return llmhttp.MaxCost
	}
	return ceil.Int64()
}

// Estimate is the worst case of a call at m worked out plainly: the
// body's bytes / 4 at the dearest input rate it can be billed at, plus the
// output ceiling (or the model's when 0) at the output rate, times the
// multipliers of what the call asks for (tier "flex" or "priority", fast
// mode, US-only inference), rounded up: the model llmhttp.ModelPrice.Estimate
// is checked against.
func Estimate(m llmhttp.ModelPrice, body string, ceiling int64, tier string, fast, us bool) int64 {
	prompt := (int64(len(body)) + 3) / 4
	r := m.Rates
	if m.LongContext != nil && prompt > m.LongContext.Above {
		r = m.LongContext.Rates
	}
	in := max(r.Input, r.CachedInput, r.CacheWrite)
	if strings.Contains(body, `"1h"`) || strings.Contains(body, `"24h"`) {
		in = max(in, r.CacheWriteLong)
	}
	out := ceiling
	if out == 0 {
		out = m.MaxOutputTokens
	}
	total := new(big.Rat).SetFrac(big.NewInt(prompt*in+out*r.Output), big.NewInt(1_000_000))
	var mods []llmhttp.Modifier
	switch tier {
	case "flex":
		mods = append(mods, llmhttp.Flex)
	case "priority":
		mods = append(mods, llmhttp.Priority)
	}
	if fast {
		mods = append(mods, llmhttp.FastMode)
	}
	if us {
		mods = append(mods, llmhttp.USInference)
	}
	for _, mod := range mods {
		if q, ok := m.Multipliers[mod]; ok {
			total.Mul(total, big.NewRat(q.Num, q.Den))
		}
	}
	ceil := new(big.Int).Quo(total.Num(), total.Denom())
	if new(big.Rat).SetInt(ceil).Cmp(total) < 0 {
		ceil.Add(ceil, big.NewInt(1))
	}
	return ceil.Int64()
}
