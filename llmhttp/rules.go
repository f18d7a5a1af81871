package llmhttp

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/zaelimiter/limiter"
)

// This file holds the providers' rule packs: how each provider counts a
// call against its own rate limits, when it admits the call and after it
// answers, so that a limiter charged by the same rules holds what the
// provider's own remaining figures say.

// The token limits of the rule packs, beside "rpm" and
// "tpm" (total tokens per minute).
const (
	// LimitITPM is input tokens per minute (Anthropic, Bedrock's
	// OpenAI-compatible endpoint).
	LimitITPM = "itpm"
	// LimitOTPM is output tokens per minute.
	LimitOTPM = "otpm"
)

// Rules is one provider's way of counting calls against its rate limits,
// as published on one day: what it takes from each limit when it admits a
// call (Admit, from the request: r.PromptTokens is the prompt's worst
// case, r.HiddenTokens the input the body does not carry, r.OutputCeiling
// and r.Choices the output it may bill), and what the call holds once the
// provider has answered (Settle, from the request and the response's
// usage). Both return amounts per limit name: ["rpm"],
// ["tpm"], [LimitITPM], [LimitOTPM].
//
// [Options.Rules] charges a transport's calls by them; llmtest's Config.Rules
// makes the fake provider count by them.
type Rules struct {
	// Name names the pack; AsOf is the day the rules were read
	// (YYYY-MM-DD), Source where.
	Name, AsOf, Source string
	Admit              func(r Request) limiter.Consume
	Settle             func(r Request, u Usage) limiter.Consume
}

// outputOf returns the output r may bill: its ceiling times its choices.
func outputOf(r Request) int64 {
	return satMul(max(r.OutputCeiling, 0), max(r.Choices, 1))
}

// inputOf returns r's prompt and hidden input.
func inputOf(r Request) int64 { return satAdd(r.PromptTokens, r.HiddenTokens) }

func satMul(a, b int64) int64 {
	if a != 0 && b > MaxCost/a {
		return MaxCost
	}
	return a * b
}

// OpenAIRules are OpenAI's (and Azure OpenAI's): a request takes one
// request and, from the tokens per minute, its prompt's estimate plus its
// output ceiling (max_tokens, max_completion_tokens or max_output_tokens)
// times its choices when it is admitted, and the provider keeps that
// count whatever the answer's length: the remaining tokens its headers
// report fall by the admission's count.
func OpenAIRules() Rules {
	admit := func(r Request) limiter.Consume {
		return limiter.Consume{"rpm": 1, "tpm": satAdd(inputOf(r), outputOf(r))}
	}
	return Rules{Name: "openai", AsOf: "2026-11-29", Source: "https://platform.openai.com/docs/guides/rate-limits",
		Admit: admit, Settle: func(r Request, _ Usage) limiter.Consume { return admit(r) }}
}

// AzureOpenAIRules are Azure OpenAI's, which count as OpenAI does
// ([OpenAIRules]): tokens per minute are the prompt's estimate plus the
// output ceiling, taken at admission.
func AzureOpenAIRules() Rules {
	r := OpenAIRules()
	r.Name, r.Source = "azure-openai", "https://learn.microsoft.com/azure/ai-foundry/openai/how-to/quota"
	return r
}

// AnthropicRules are Anthropic's: separate input and output tokens per
// minute. At admission the input limit takes the prompt's estimate (the
// cache reads it may hold are not known yet) and the output limit
// max_tokens; once answered, the input limit holds the usage's
// input_tokens plus its cache writes — cache reads do not count — and the
// output limit its output_tokens.
func AnthropicRules() Rules {
	return Rules{Name: "anthropic", AsOf: "2026-11-29", Source: "https://docs.anthropic.com/en/api/rate-limits",
		Admit: func(r Request) limiter.Consume {
			return limiter.Consume{"rpm": 1, LimitITPM: inputOf(r), LimitOTPM: outputOf(r)}
		},
		Settle: func(_ Request, u Usage) limiter.Consume {
			return limiter.Consume{"rpm": 1, LimitITPM: uncachedInput(u), LimitOTPM: u.OutputTokens}
		}}
}

// uncachedInput returns u's input tokens that are not cache reads: the
// uncached input and the cache writes.
func uncachedInput(u Usage) int64 {
	uncached, _, short, long := u.promptParts()
	return uncached + short + long
}

// burnFive matches the models whose output Bedrock burns at five times
// against tokens per minute: Claude 3.7 Sonnet and the Claude 4 class and
// later.
var burnFive = regexp.MustCompile(`claude-(3-7-sonnet|(opus|sonnet|haiku)-[4-9]|[4-9])`)

// BedrockBurndown returns the rate at which Bedrock counts a model's
// output tokens against its tokens per minute: 5 for Claude 3.7 Sonnet
// and the Claude 4 class and later, 1 otherwise.
func BedrockBurndown(model string) int64 {
	if burnFive.MatchString(strings.ToLower(model)) {
		return 5
	}
	return 1
}

// BedrockRules are Amazon Bedrock runtime's (InvokeModel, Converse): at
// admission the tokens per minute take the whole prompt (input, cache
// writes and cache reads) plus maxTokens; once answered they hold the
// input and the cache writes plus the output times the model's burndown
// rate ([BedrockBurndown]): the cache reads are given back.
func BedrockRules() Rules {
	return Rules{Name: "bedrock", AsOf: "2026-11-29", Source: "https://docs.aws.amazon.com/bedrock/latest/userguide/quotas-token-burndown.html",
		Admit: func(r Request) limiter.Consume {
			return limiter.Consume{"rpm": 1, "tpm": satAdd(inputOf(r), outputOf(r))}
		},
		Settle: func(r Request, u Usage) limiter.Consume {
			out := satMul(u.OutputTokens, BedrockBurndown(r.Model))
			return limiter.Consume{"rpm": 1, "tpm": satAdd(uncachedInput(u), out)}
		}}
}

// BedrockOpenAIRules are those of Bedrock's OpenAI-compatible endpoint
// (/openai/v1/chat/completions): separate input and output tokens per
// minute, the prompt's estimate and the output ceiling at admission, the
// usage's prompt and completion tokens once answered.
func BedrockOpenAIRules() Rules {
	return Rules{Name: "bedrock-openai", AsOf: "2026-11-29", Source: "https://docs.aws.amazon.com/bedrock/latest/userguide/inference-chat-completions.html",
		Admit: func(r Request) limiter.Consume {
			return limiter.Consume{"rpm": 1, LimitITPM: inputOf(r), LimitOTPM: outputOf(r)}
		},
		Settle: func(_ Request, u Usage) limiter.Consume {
			return limiter.Consume{"rpm": 1, LimitITPM: u.InputTokens, LimitOTPM: u.OutputTokens}
		}}
}

// rulesEstimate returns what a call of rq acquires by r: what the
// provider takes at admission, or where more, what it may hold once
// answered (the whole prompt uncached, the whole output ceiling: Bedrock's
// burndown can settle above its admission), so that the limiter never
// holds less than the provider while the call is in flight.
func rulesEstimate(r Rules, rq Request) limiter.Consume {
	out := r.Admit(rq)
	worst := r.Settle(rq, Usage{InputTokens: inputOf(rq), OutputTokens: outputOf(rq), CacheInInput: true,
		TotalTokens: satAdd(inputOf(rq), outputOf(rq))})
	for name, v := range worst {
		if v > out[name] {
			out[name] = v
		}
	}
	return out
}

// bedrockModel matches Bedrock runtime's paths: /model/{id}/invoke,
// /model/{id}/converse and their streaming forms.
var bedrockModel = regexp.MustCompile(`/model/([^/]+)/`)

// requestModel returns model, or when it is empty the model of a Bedrock
// path, or the call's resource.
func requestModel(model string, req *http.Request) string {
	if model != "" {
		return model
	}
	if m := bedrockModel.FindStringSubmatch(req.URL.Path); m != nil {
		return m[1]
	}
	if c, ok := req.Context().Value(callKey{}).(call); ok {
		return c.resource
	}
	return ""
}
