// Package llmhttp rate-limits LLM API calls at the HTTP layer: [Transport]
// is an [net/http.RoundTripper] for the OpenAI and Anthropic SDKs (through
// their WithHTTPClient options) or any [net/http.Client]. A request whose
// context carries [ContextWithCall] is charged to an (entity, resource) of a
// [github.com/zaelimiter/limiter.RateLimiter]: the estimate is acquired
// before the request is sent (a denial returns the limiter's
// *RateLimitExceededError and sends nothing), the real usage is read from
// the response — the JSON body's usage object, or the usage events of a
// server-sent event stream — while the caller reads the body, and the lease
// is adjusted to it and committed when the body is read to the end or
// closed.
//
// # Usage
//
//	rl := limiter.New(repo)
//	client := &http.Client{Transport: llmhttp.NewTransport(rl, nil)}
//	ctx = llmhttp.ContextWithCall(ctx, "api-key-1", "gpt-4o", limiter.Consume{"rpm": 1, "tpm": 1500})
//	// make the SDK call with ctx, the SDK built with option.WithHTTPClient(client)
//
// The transport's settings are the fields of [Options], set by functions
// passed to [NewTransport]; the zero value of each field is its default:
//
//	tr := llmhttp.NewTransport(rl, nil, func(o *llmhttp.Options) {
//		o.CostLimit = "usd"
//		o.Logger = slog.Default()
//	})
//
// # Budgets in money
//
// [Options.CostLimit] also charges each call's cost in micro-dollars
// ([USD]) to a limit: the worst case is acquired before the request is
// sent, and the lease is settled to the exact cost of the response's
// usage, at the prices of [DefaultPrices] ([OpenAIPrices] and
// [AnthropicPrices], dated) or of [Options.Prices] ([NewPrices] merges
// tables). The worst case prices every choice, counts a non-ASCII byte a
// token, and prices the input a body makes the provider bill without
// carrying it from the history the transport read or a bound the caller
// gives ([ContextWithHiddenInputTokens]), or refuses the call
// ([HiddenInputError]). A call whose worst case the budget cannot cover
// has its output ceiling lowered to what is left ([Options.OutputClamp],
// [Options.MinOutputTokens]); a stream that runs past its worst case is
// cut ([ErrReservationExceeded]). [Prices.Cost] and [Prices.Estimate]
// price usages and requests for callers that charge the limiter
// themselves.
//
// # Calls in flight
//
// With an in-flight limit ([github.com/zaelimiter/limiter.InFlight]) and
// its name in the call's amounts, e.g. limiter.Consume{"calls": 1, "rpm":
// 1, "tpm": 1500}, a call holds its slot from the acquire until its lease
// ends: when the body is read to the end, fails (a cancelled context, a
// broken connection) or is closed, or when no body is handed to the
// caller (a transport error, a 5xx or other refusal by the provider, a
// panic of the base transport, rolled back). A panic of the usage mapping
// or provider rules while the lease ends commits it at its estimate and
// goes on to the caller. The caller must close the body, as with any
// [net/http.Response]: a body dropped without being closed nor read to its
// end holds its slot until the garbage collector finds it unreachable
// (then its lease ends as a body closed early). The slots are capped
// across every process sharing the store, per entity and, with cascade,
// per parent too.
//
// [ParseQuota] reads the rate-limit headers of OpenAI, Anthropic and Azure
// OpenAI. The package llmtest holds a fake provider to test against.
package llmhttp
