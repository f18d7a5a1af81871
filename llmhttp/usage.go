package llmhttp

import (
	"bytes"
	"encoding/json"
)

// Usage is the token count a provider reported for one response.
type Usage struct {
	// InputTokens is the prompt: OpenAI's prompt_tokens (or input_tokens of
	// the Responses API), which include the cache fields below
	// (CacheInInput is then set), Anthropic's input_tokens, which exclude
	// them.
	InputTokens int64
	// OutputTokens is the completion: OpenAI's completion_tokens (or
	// output_tokens), Anthropic's output_tokens. Both include the
	// reasoning tokens.
	OutputTokens int64
	// CacheCreationTokens is the prompt's tokens written to the prompt
	// cache: Anthropic's cache_creation_input_tokens, OpenAI's
	// cache_write_tokens (of prompt_tokens_details or
	// input_tokens_details). CacheCreationLongTokens is the part of them
	// written with the long lifetime: Anthropic's
	// cache_creation.ephemeral_1h_input_tokens, OpenAI's
	// cache_write_tokens_details.ttl_12h_tokens.
	CacheCreationTokens     int64
	CacheCreationLongTokens int64
	// CacheReadTokens is the prompt's tokens read from the cache:
	// Anthropic's cache_read_input_tokens, OpenAI's cached_tokens.
	CacheReadTokens int64
	// ReasoningTokens is the part of OutputTokens the model spent
	// reasoning: OpenAI's reasoning_tokens (of completion_tokens_details
	// or output_tokens_details), Anthropic's
	// output_tokens_details.thinking_tokens. It is billed as output, and
	// already counted in OutputTokens and TotalTokens.
	ReasoningTokens int64
	// CacheInInput is set when InputTokens includes CacheReadTokens and
	// CacheCreationTokens (OpenAI's usage objects).
	CacheInInput bool
	// ServiceTier is the tier that served the response (OpenAI's
	// top-level service_tier, Anthropic's usage.service_tier), Speed
	// Anthropic's usage.speed and InferenceGeo its usage.inference_geo;
	// empty when the response did not say. They select a price's
	// multipliers ([Usage.Modifiers]).
	ServiceTier, Speed, InferenceGeo string
	// TotalTokens is every token the request made the model process: for
	// OpenAI, InputTokens + OutputTokens, or total_tokens when the body
	// has a larger one; for Anthropic, InputTokens + CacheCreationTokens +
	// CacheReadTokens + OutputTokens.
	//
	// Every count of a usage is within [0, 10^9]; a usage object with a
	// count outside that range, or one that cannot be decoded, is
	// malformed: the transport then commits the estimate and counts it in
	// Stats.UsageMalformed.
	TotalTokens int64
}

// rawUsage is the union of both providers' usage objects. Pointers tell a
// field that is absent from one that is zero: Anthropic's message_delta
// repeats only the counts that changed. The names of tiers are kept raw
// and read only when they are strings: an unexpected type there does not
// make the counts malformed.
type rawUsage struct {
	PromptTokens             *int64           `json:"prompt_tokens"`
	CompletionTokens         *int64           `json:"completion_tokens"`
	TotalTokens              *int64           `json:"total_tokens"`
	InputTokens              *int64           `json:"input_tokens"`
	OutputTokens             *int64           `json:"output_tokens"`
	CacheCreationInputTokens *int64           `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64           `json:"cache_read_input_tokens"`
	CacheCreation            *rawCacheTTL     `json:"cache_creation"`
	PromptTokensDetails      *rawInputDetail  `json:"prompt_tokens_details"`
	InputTokensDetails       *rawInputDetail  `json:"input_tokens_details"`
	CompletionTokensDetails  *rawOutputDetail `json:"completion_tokens_details"`
	OutputTokensDetails      *rawOutputDetail `json:"output_tokens_details"`
	// Bedrock's Converse API: Anthropic's counts in camel case (the
	// input excludes the cache counts).
	ConverseInput      *int64          `json:"inputTokens"`
	ConverseOutput     *int64          `json:"outputTokens"`
	ConverseTotal      *int64          `json:"totalTokens"`
	ConverseCacheRead  *int64          `json:"cacheReadInputTokens"`
	ConverseCacheWrite *int64          `json:"cacheWriteInputTokens"`
	ServiceTier        json.RawMessage `json:"service_tier"`
	Speed              json.RawMessage `json:"speed"`
	InferenceGeo       json.RawMessage `json:"inference_geo"`
}

// rawCacheTTL is Anthropic's cache_creation breakdown.
type rawCacheTTL struct {
	Ephemeral5m *int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
}

// rawInputDetail is OpenAI's prompt_tokens_details (Chat Completions) or
// input_tokens_details (Responses API).
type rawInputDetail struct {
	CachedTokens     *int64 `json:"cached_tokens"`
	CacheWriteTokens *int64 `json:"cache_write_tokens"`
	CacheWriteTTL    *struct {
		TTL12h *int64 `json:"ttl_12h_tokens"`
		TTL30m *int64 `json:"ttl_30m_tokens"`
	} `json:"cache_write_tokens_details"`
}

// rawOutputDetail is OpenAI's completion_tokens_details or
// output_tokens_details, or Anthropic's output_tokens_details.
type rawOutputDetail struct {
	ReasoningTokens *int64 `json:"reasoning_tokens"`
	ThinkingTokens  *int64 `json:"thinking_tokens"`
}

// counts returns every count of r, for the range check.
func (r *rawUsage) counts() []*int64 {
	c := []*int64{r.PromptTokens, r.CompletionTokens, r.TotalTokens, r.InputTokens, r.OutputTokens,
		r.CacheCreationInputTokens, r.CacheReadInputTokens,
		r.ConverseInput, r.ConverseOutput, r.ConverseTotal, r.ConverseCacheRead, r.ConverseCacheWrite}
	if r.CacheCreation != nil {
		c = append(c, r.CacheCreation.Ephemeral5m, r.CacheCreation.Ephemeral1h)
	}
	for _, d := range []*rawInputDetail{r.PromptTokensDetails, r.InputTokensDetails} {
		if d != nil {
			c = append(c, d.CachedTokens, d.CacheWriteTokens)
			if d.CacheWriteTTL != nil {
				c = append(c, d.CacheWriteTTL.TTL12h, d.CacheWriteTTL.TTL30m)
			}
		}
	}
	for _, d := range []*rawOutputDetail{r.CompletionTokensDetails, r.OutputTokensDetails} {
		if d != nil {
			c = append(c, d.ReasoningTokens, d.ThinkingTokens)
		}
	}
	return c
}

// maxUsageTokens bounds each count of a usage object: no model call
// processes a billion tokens, so a larger count (or a negative one) is a
// malformed usage, and sums of four counts stay far from overflow.
const maxUsageTokens = 1_000_000_000

// usageAcc accumulates rawUsage objects: a later field replaces an earlier
// one, an absent field keeps it.
type usageAcc struct {
	seen                                   bool
	input, output, total, cacheNew, cached *int64
	cacheLong, reasoning                   *int64
	// cacheSplit is set when a usage said how its cache writes split by
	// lifetime (Anthropic's cache_creation, OpenAI's
	// cache_write_tokens_details).
	cacheSplit                       bool
	serviceTier, speed, inferenceGeo string
	openAI                           bool // prompt_tokens style: cached tokens are part of input
	responseID                       string
	// final is set by a usage that reports the whole response (a JSON
	// body's, OpenAI's final chunk, Anthropic's message_delta), as opposed
	// to Anthropic's message_start, sent before the output.
	final bool
	// malformed is set by a usage object that could not be decoded or
	// held a count outside [0, maxUsageTokens]; it is not merged.
	malformed bool
}

// valid reports whether every count r has is within [0, maxUsageTokens].
func (r *rawUsage) valid() bool {
	for _, p := range r.counts() {
		if p != nil && (*p < 0 || *p > maxUsageTokens) {
			return false
		}
	}
	return true
}

// mergeRaw decodes a usage member (nil or JSON null: nothing) and merges
// it; final says whether it reports the whole response.
func (a *usageAcc) mergeRaw(raw []byte, final bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return
	}
	var r rawUsage
	if json.Unmarshal(raw, &r) != nil || !r.valid() {
		a.malformed = true
		return
	}
	a.merge(&r)
	if final {
		a.final = true
	}
}

func (a *usageAcc) merge(r *rawUsage) {
	if r == nil {
		return
	}
	set := func(dst **int64, v *int64) {
		if v != nil {
			x := *v
			*dst = &x
			a.seen = true
		}
	}
	if r.PromptTokens != nil || r.CompletionTokens != nil {
		a.openAI = true
	}
	set(&a.input, r.PromptTokens)
	set(&a.input, r.InputTokens)
	set(&a.output, r.CompletionTokens)
	set(&a.output, r.OutputTokens)
	set(&a.total, r.TotalTokens)
	set(&a.cacheNew, r.CacheCreationInputTokens)
	set(&a.cached, r.CacheReadInputTokens)
	set(&a.input, r.ConverseInput)
	set(&a.output, r.ConverseOutput)
	set(&a.total, r.ConverseTotal)
	set(&a.cached, r.ConverseCacheRead)
	set(&a.cacheNew, r.ConverseCacheWrite)
	if c := r.CacheCreation; c != nil {
		set(&a.cacheLong, c.Ephemeral1h)
		a.cacheSplit = a.cacheSplit || c.Ephemeral1h != nil || c.Ephemeral5m != nil
	}
	for _, d := range []*rawInputDetail{r.PromptTokensDetails, r.InputTokensDetails} {
		if d == nil {
			continue
		}
		// OpenAI's details (the Responses API's too): the cache counts
		// are part of the input tokens.
		a.openAI = true
		set(&a.cached, d.CachedTokens)
		set(&a.cacheNew, d.CacheWriteTokens)
		if t := d.CacheWriteTTL; t != nil {
			set(&a.cacheLong, t.TTL12h)
			a.cacheSplit = a.cacheSplit || t.TTL12h != nil || t.TTL30m != nil
		}
	}
	for _, d := range []*rawOutputDetail{r.CompletionTokensDetails, r.OutputTokensDetails} {
		if d != nil {
			set(&a.reasoning, d.ReasoningTokens)
			set(&a.reasoning, d.ThinkingTokens)
		}
	}
	setString(&a.serviceTier, r.ServiceTier)
	setString(&a.speed, r.Speed)
	setString(&a.inferenceGeo, r.InferenceGeo)
}

// setString sets *dst to raw when raw is a non-empty JSON string.
func setString(dst *string, raw json.RawMessage) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil && s != "" {
		*dst = s
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// usage returns the accumulated counts and whether any was seen. Each
// count is within [0, maxUsageTokens], so the sums cannot overflow.
func (a *usageAcc) usage() (Usage, bool) {
	if !a.seen {
		return Usage{}, false
	}
	u := Usage{
		InputTokens: deref(a.input), OutputTokens: deref(a.output),
		CacheCreationTokens: deref(a.cacheNew), CacheReadTokens: deref(a.cached),
		CacheCreationLongTokens: deref(a.cacheLong), ReasoningTokens: deref(a.reasoning),
		CacheInInput: a.openAI,
		ServiceTier:  a.serviceTier, Speed: a.speed, InferenceGeo: a.inferenceGeo,
	}
	sum := u.InputTokens + u.CacheCreationTokens + u.CacheReadTokens + u.OutputTokens
	if a.openAI {
		sum = u.InputTokens + u.OutputTokens
	}
	u.TotalTokens = max(deref(a.total), sum)
	return u, true
}

// parsed is what a parser read of a body so far.
type parsed struct {
	usage Usage
	// seen: a usage was read; final: one that reports the whole response;
	// malformed: a usage object was unreadable or out of bounds.
	seen, final, malformed bool
	// cacheSplit: the usage said how its cache writes split by lifetime.
	cacheSplit bool
	// outputSeen is the output text of a stream's content events so far,
	// in tokens of four bytes (rounded up); zero for a JSON body.
	outputSeen int64
	// responseID is the response's id (a JSON body's top-level "id", a
	// Responses API stream's response.id).
	responseID string
}

func (a *usageAcc) parsed() parsed {
	u, seen := a.usage()
	return parsed{usage: u, seen: seen, final: a.final, malformed: a.malformed, cacheSplit: a.cacheSplit,
		responseID: a.responseID}
}

// usageParser is fed a response body chunk by chunk as the caller reads it.
type usageParser interface {
	write(p []byte)
	parsed() parsed
}

// maxCapture bounds what a parser keeps in memory: the usage object of a
// JSON body, or one line of an event stream. Anything longer is skipped.
const maxCapture = 1 << 20

// jsonUsageParser finds the top-level "usage" member of a JSON object as
// it streams by and keeps only that member's bytes: a small scanner that
// tracks nesting and strings, so the rest of the body is never copied.
type jsonUsageParser struct {
	depth    int
	inString bool
	escape   bool
	// key collects the current string at depth 1 (a candidate key).
	key       []byte
	keyTooBig bool
	lastKey   string // the last complete string at depth 1
	// state of the member after a key at depth 1.
	afterColon bool // ':' seen after lastKey
	awaitUsage bool // ':' seen after the key "usage", its value not yet begun
	capturing  bool // inside the value of "usage"
	capDepth   int
	captured   []byte
	capTooBig  bool
	acc        usageAcc
	done       bool
	// valueOf is the key whose value the string being read is, at depth 1.
	valueOf string
}

func (j *jsonUsageParser) write(p []byte) {
	if j.done {
		return
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if j.capturing {
			if len(j.captured) < maxCapture {
				j.captured = append(j.captured, c)
			} else {
				j.capTooBig = true
			}
		}
		if j.inString {
			switch {
			case j.escape:
				j.escape = false
			case c == '\\':
				j.escape = true
			case c == '"':
				j.inString = false
				if j.depth == 1 && !j.capturing {
					if j.valueOf == "service_tier" && !j.keyTooBig {
						// OpenAI's top-level service_tier.
						j.acc.serviceTier = string(j.key)
					}
					if j.valueOf == "id" && !j.keyTooBig {
						j.acc.responseID = string(j.key)
					}
					if j.keyTooBig {
						j.lastKey = ""
					} else {
						j.lastKey = string(j.key)
					}
					j.afterColon = false
				}
				continue
			}
			if j.depth == 1 && !j.capturing {
				if len(j.key) < 64 {
					j.key = append(j.key, c)
				} else {
					j.keyTooBig = true
				}
			}
			continue
		}
		if j.awaitUsage && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			// The value of the top-level "usage": an object, or null;
			// anything else is malformed.
			j.awaitUsage = false
			if c != '{' && c != 'n' {
				j.acc.malformed = true
			}
		}
		switch c {
		case '"':
			j.inString = true
			if j.depth == 1 && !j.capturing {
				j.key = j.key[:0]
				j.keyTooBig = false
				j.valueOf = ""
				if j.afterColon {
					j.valueOf = j.lastKey
				}
			}
		case ':':
			if j.depth == 1 && !j.capturing {
				j.afterColon = true
				j.awaitUsage = j.lastKey == "usage"
			}
		case '{', '[':
			if j.depth == 1 && j.afterColon && j.lastKey == "usage" && c == '{' && !j.capturing {
				j.capturing = true
				j.capDepth = j.depth + 1
				j.captured = append(j.captured[:0], c)
			}
			j.depth++
		case '}', ']':
			j.depth--
			if j.capturing && j.depth < j.capDepth {
				j.capturing = false
				if j.capTooBig {
					j.acc.malformed = true
				} else {
					j.acc.mergeRaw(j.captured, true)
				}
				j.captured, j.capTooBig = nil, false
			}
			if j.depth <= 0 {
				j.done = true // the end of the top-level value
				return
			}
		case ',':
			if j.depth == 1 {
				j.afterColon = false
				j.lastKey = ""
			}
		}
	}
}

func (j *jsonUsageParser) parsed() parsed { return j.acc.parsed() }

// sseEvent is what an event of either provider's stream may carry, each
// member kept raw so that an event of another shape is not an error: a
// top-level usage (OpenAI's final chunk, Anthropic's message_delta), the
// message's usage (Anthropic's message_start, sent before the output), the
// response's (OpenAI's Responses API, response.completed), and the output
// text: OpenAI's choices[].delta.content, Anthropic's delta.text, the
// Responses API's delta string.
type sseEvent struct {
	Usage       json.RawMessage `json:"usage"`
	Message     json.RawMessage `json:"message"`
	Response    json.RawMessage `json:"response"`
	Choices     json.RawMessage `json:"choices"`
	Delta       json.RawMessage `json:"delta"`
	ServiceTier json.RawMessage `json:"service_tier"` // OpenAI's chunks
}

// sseUsageParser reads a text/event-stream line by line and decodes the
// data lines that mention usage or carry output.
type sseUsageParser struct {
	line    []byte
	tooLong bool
	acc     usageAcc
	// outputBytes is the output text of the content events so far.
	outputBytes int64
}

var (
	dataPrefix = []byte("data:")
	usageKey   = []byte(`"usage"`)
	deltaKey   = []byte(`"delta"`)
)

func (s *sseUsageParser) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.appendLine(p)
			return
		}
		s.appendLine(p[:i])
		s.endLine()
		p = p[i+1:]
	}
}

func (s *sseUsageParser) appendLine(p []byte) {
	if s.tooLong {
		return
	}
	if len(s.line)+len(p) > maxCapture {
		s.tooLong = true
		return
	}
	s.line = append(s.line, p...)
}

func (s *sseUsageParser) endLine() {
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	tooLong := s.tooLong
	s.line, s.tooLong = s.line[:0], false
	if tooLong || !bytes.HasPrefix(line, dataPrefix) {
		return
	}
	hasUsage := bytes.Contains(line, usageKey)
	if !hasUsage && !bytes.Contains(line, deltaKey) {
		return
	}
	var ev sseEvent
	if json.Unmarshal(bytes.TrimSpace(line[len(dataPrefix):]), &ev) != nil {
		if hasUsage {
			s.acc.malformed = true
		}
		return
	}
	s.acc.mergeRaw(ev.Usage, true)
	setString(&s.acc.serviceTier, ev.ServiceTier)
	var inner struct {
		Usage       json.RawMessage `json:"usage"`
		ServiceTier json.RawMessage `json:"service_tier"`
		ID          json.RawMessage `json:"id"`
	}
	if isObject(ev.Message) && json.Unmarshal(ev.Message, &inner) == nil {
		s.acc.mergeRaw(inner.Usage, false)
	}
	inner.Usage = nil
	if isObject(ev.Response) && json.Unmarshal(ev.Response, &inner) == nil {
		s.acc.mergeRaw(inner.Usage, true)
		setString(&s.acc.serviceTier, inner.ServiceTier) // the Responses API's response
		setString(&s.acc.responseID, inner.ID)
	}
	s.outputBytes += outputText(ev)
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }

// outputText returns the bytes of output text an event carries. Members of
// another shape count nothing.
func outputText(ev sseEvent) int64 {
	var n int64
	if len(ev.Choices) > 0 && ev.Choices[0] == '[' {
		var choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		}
		if json.Unmarshal(ev.Choices, &choices) == nil {
			for _, c := range choices {
				n += int64(len(c.Delta.Content))
			}
		}
	}
	switch {
	case len(ev.Delta) > 0 && ev.Delta[0] == '"':
		var text string
		if json.Unmarshal(ev.Delta, &text) == nil {
			n += int64(len(text))
		}
	case isObject(ev.Delta):
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Delta, &d) == nil {
			n += int64(len(d.Text))
		}
	}
	return n
}

func (s *sseUsageParser) parsed() parsed {
	p := s.acc.parsed()
	p.outputSeen = (s.outputBytes + 3) / 4
	return p
}
