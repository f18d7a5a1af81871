package llmhttp

import (
	"bytes"
	"encoding/json"
)

// Usage is the token count a provider reported for one response.
type Usage struct {
	// InputTokens is the prompt: OpenAI's prompt_tokens (or input_tokens of
	// the Responses API), Anthropic's input_tokens (which exclude the cache
	// fields below).
	InputTokens int64
	// OutputTokens is the completion: OpenAI's completion_tokens (or
	// output_tokens), Anthropic's output_tokens.
	OutputTokens int64
	// CacheCreationTokens and CacheReadTokens are Anthropic's
	// cache_creation_input_tokens and cache_read_input_tokens. For OpenAI,
	// CacheReadTokens is prompt_tokens_details.cached_tokens, which is
	// already part of InputTokens.
	CacheCreationTokens int64
	CacheReadTokens     int64
	// TotalTokens is OpenAI's total_tokens when the body has it; otherwise
	// (Anthropic) InputTokens + CacheCreationTokens + CacheReadTokens +
	// OutputTokens: every token the request made the model process.
	TotalTokens int64
}

// rawUsage is the union of both providers' usage objects. Pointers tell a
// field that is absent from one that is zero: Anthropic's message_delta
// repeats only the counts that changed.
type rawUsage struct {
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
	TotalTokens              *int64 `json:"total_tokens"`
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	PromptTokensDetails      *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usageAcc accumulates rawUsage objects: a later field replaces an earlier
// one, an absent field keeps it.
type usageAcc struct {
	seen                                   bool
	input, output, total, cacheNew, cached *int64
	openAI                                 bool // prompt_tokens style: cached tokens are part of input
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
	if r.PromptTokensDetails != nil {
		a.openAI = true
		set(&a.cached, r.PromptTokensDetails.CachedTokens)
	}
	if r.InputTokensDetails != nil {
		a.openAI = true // the Responses API: cached tokens are part of input_tokens
		set(&a.cached, r.InputTokensDetails.CachedTokens)
	}
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// usage returns the accumulated counts and whether any was seen.
func (a *usageAcc) usage() (Usage, bool) {
	if !a.seen {
		return Usage{}, false
	}
	u := Usage{
		InputTokens: deref(a.input), OutputTokens: deref(a.output),
		CacheCreationTokens: deref(a.cacheNew), CacheReadTokens: deref(a.cached),
	}
	switch {
	case a.total != nil:
		u.TotalTokens = *a.total
	case a.openAI:
		u.TotalTokens = u.InputTokens + u.OutputTokens
	default:
		u.TotalTokens = u.InputTokens + u.CacheCreationTokens + u.CacheReadTokens + u.OutputTokens
	}
	return u, true
}

// usageParser is fed a response body chunk by chunk as the caller reads it.
type usageParser interface {
	write(p []byte)
	usage() (Usage, bool)
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
	capturing  bool // inside the value of "usage"
	capDepth   int
	captured   []byte
	acc        usageAcc
	done       bool
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
		switch c {
		case '"':
			j.inString = true
			if j.depth == 1 && !j.capturing {
				j.key = j.key[:0]
				j.keyTooBig = false
			}
		case ':':
			if j.depth == 1 && !j.capturing {
				j.afterColon = true
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
				var r rawUsage
				if len(j.captured) < maxCapture && json.Unmarshal(j.captured, &r) == nil {
					j.acc.merge(&r)
				}
				j.captured = nil
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

func (j *jsonUsageParser) usage() (Usage, bool) { return j.acc.usage() }

// sseEvent is what an event of either provider's stream may carry: a
// top-level usage (OpenAI's final chunk, Anthropic's message_delta), the
// message's usage (Anthropic's message_start) or the response's (OpenAI's
// Responses API, response.completed).
type sseEvent struct {
	Usage   *rawUsage `json:"usage"`
	Message *struct {
		Usage *rawUsage `json:"usage"`
	} `json:"message"`
	Response *struct {
		Usage *rawUsage `json:"usage"`
	} `json:"response"`
}

// sseUsageParser reads a text/event-stream line by line and decodes the
// data lines that mention usage.
type sseUsageParser struct {
	line    []byte
	tooLong bool
	acc     usageAcc
}

var (
	dataPrefix = []byte("data:")
	usageKey   = []byte(`"usage"`)
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
	if tooLong || !bytes.HasPrefix(line, dataPrefix) || !bytes.Contains(line, usageKey) {
		return
	}
	var ev sseEvent
	if json.Unmarshal(bytes.TrimSpace(line[len(dataPrefix):]), &ev) != nil {
		return
	}
	s.acc.merge(ev.Usage)
	if ev.Message != nil {
		s.acc.merge(ev.Message.Usage)
	}
	if ev.Response != nil {
		s.acc.merge(ev.Response.Usage)
	}
}

func (s *sseUsageParser) usage() (Usage, bool) { return s.acc.usage() }
