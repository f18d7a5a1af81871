package llmhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file bounds what a request can be billed before it is sent: the
// prompt's tokens counted so that no text in the body can be billed more
// (a non-ASCII byte may be a token of its own), every choice the body asks
// for, and the input the provider bills that the body does not carry
// (earlier turns of a conversation, files by id, hosted tools' results):
// priced from the conversations the transport has seen, or from a bound
// the caller gives, or refused.

// ImageTokens is what each image part of a request (an image_url,
// input_image or image content part, inline or by URL) adds to its
// prompt's worst case: the providers scale an image down to a bounded size
// before they count it, and bill no image above this many tokens.
const ImageTokens = 10_000

// ToolTokens is what each tool of a request's "tools" adds to its prompt's
// worst case beside its definition's bytes: the system prompt the
// providers add for tool use, and the hidden definitions of built-in tools
// (Anthropic's bash, text editor and computer use).
const ToolTokens = 1_000

// ErrHiddenInput is matched by a *[HiddenInputError].
var ErrHiddenInput = errors.New("llmhttp: the request bills input its body does not carry")

// HiddenInputError refuses, before anything is acquired or sent, a request
// with a money limit ([Options.CostLimit]) whose provider bills input that its
// body does not carry and the transport cannot price: a previous_response_id
// or conversation it has not seen the history of, files by id or URL,
// hosted tools whose results are billed as input. Give the most such input
// a call may bill, in tokens, with [ContextWithHiddenInputTokens] (per call) or
// [Options.MaxHiddenInputTokens] (every call) to allow it.
type HiddenInputError struct {
	// Entity and Resource are the call's.
	Entity, Resource string
	// What names each part the body does not carry, e.g.
	// "previous_response_id", "input_file", "tool web_search".
	What []string
}

func (e *HiddenInputError) Error() string {
	return fmt.Sprintf("llmhttp: %s/%s: the request bills input its body does not carry (%s); "+
		"bound it with llmhttp.ContextWithHiddenInputTokens(ctx, n) or llmhttp.Options.MaxHiddenInputTokens",
		e.Entity, e.Resource, strings.Join(e.What, ", "))
}

// Is matches [ErrHiddenInput].
func (e *HiddenInputError) Is(target error) bool { return target == ErrHiddenInput }

// hiddenKey is the context key of a caller's bound on hidden input.
type hiddenKey struct{}

// ContextWithHiddenInputTokens returns a context whose requests may bill up to n
// input tokens their body does not carry ([HiddenInputError]): their worst
// case adds n tokens at the dearest input rate, beyond what the transport
// knows of a conversation's history. n ≤ 0 removes the bound.
func ContextWithHiddenInputTokens(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, hiddenKey{}, max(n, 0))
}

// hiddenBound returns the caller's bound on hidden input, if any.
func hiddenBound(ctx context.Context) (int64, bool) {
	n, ok := ctx.Value(hiddenKey{}).(int64)
	return n, ok && n > 0
}

// countTokens returns the most tokens the text of a JSON document b can be
// billed as: a token per four ASCII bytes (rounded up), and a token per
// byte of anything else, raw or \u-escaped (a non-ASCII byte may be a
// token of its own; an escape counts its character's UTF-8 bytes).
func countTokens(b []byte) int64 {
	var ascii, other int64
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= utf8.RuneSelf:
			other++
		case c == '\\' && i+1 < len(b) && b[i+1] == 'u' && i+5 < len(b):
			r, ok := hex4(b[i+2 : i+6])
			if !ok || r < utf8.RuneSelf {
				ascii += 2
				i++
				continue
			}
			switch {
			case r < 0x800 || (r >= 0xD800 && r < 0xE000): // a surrogate: half of a 4-byte character
				other += 2
			default:
				other += 3
			}
			i += 5
		case c == '\\' && i+1 < len(b):
			ascii += 2
			i++
		default:
			ascii++
		}
	}
	return (ascii+3)/4 + other
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// hostedTools are the prefixes of the tool types whose results the
// provider bills as input without the client sending them: OpenAI's hosted
// tools, Anthropic's server tools.
var hostedTools = []string{"web_search", "web_fetch", "file_search", "code_interpreter", "code_execution",
	"computer_use_preview", "mcp", "image_generation", "tool_search"}

// analyzeBody reads from a request body (top: its members) what its worst
// case depends on beyond its bytes: the choices it asks for, its image
// parts and tools, and what it makes the provider bill that it does not
// carry.
func analyzeBody(top map[string]json.RawMessage, body []byte, r *Request) {
	r.Choices = max(intOf(top["n"]), intOf(top["best_of"]), 1)
	if s := stringOf(top["previous_response_id"]); s != "" {
		r.PreviousResponseID = s
		r.Hidden = append(r.Hidden, "previous_response_id")
	}
	if c := top["conversation"]; len(c) > 0 && string(c) != "null" {
		r.Conversation = stringOf(c)
		if r.Conversation == "" {
			var obj struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(c, &obj)
			r.Conversation = obj.ID
		}
		r.Hidden = append(r.Hidden, "conversation")
	}
	for _, k := range []string{"prompt", "web_search_options", "mcp_servers"} {
		if v := top[k]; len(v) > 0 && v[0] != '"' && string(v) != "null" && string(v) != "[]" {
			r.Hidden = append(r.Hidden, k)
		}
	}
	var tools []map[string]any
	if json.Unmarshal(top["tools"], &tools) == nil {
		for _, tool := range tools {
			r.PromptTokens += ToolTokens
			typ, _ := tool["type"].(string)
			for _, h := range hostedTools {
				if strings.HasPrefix(typ, h) {
					r.Hidden = append(r.Hidden, "tool "+typ)
					break
				}
			}
		}
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return
	}
	seen := map[string]bool{}
	walkObjects(doc, func(m map[string]any) {
		typ, _ := m["type"].(string)
		switch typ {
		case "image_url", "input_image", "image":
			r.PromptTokens += ImageTokens
		case "input_file", "file", "document", "container_upload", "item_reference":
			// A file's tokens (a PDF's pages as text and images) are
			// not its bytes'; an item_reference names an earlier
			// item by id. Anthropic's plain-text documents carry
			// their text.
			if src, _ := m["source"].(map[string]any); typ == "document" && src != nil &&
				(src["type"] == "text" || src["type"] == "content") {
				return
			}
			if !seen[typ] {
				seen[typ] = true
				r.Hidden = append(r.Hidden, typ)
			}
		}
	})
}

// walkObjects calls f on every JSON object within v.
func walkObjects(v any, f func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(x)
		for _, e := range x {
			walkObjects(e, f)
		}
	case []any:
		for _, e := range x {
			walkObjects(e, f)
		}
	}
}

// stringOf returns raw as a string, or "".
func stringOf(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// historySize bounds how many conversations a transport remembers.
const historySize = 8192

// history remembers, per response id and conversation id, the tokens the
// last response the transport read for it processed (its usage's total):
// what the next turn that continues it is billed for the earlier turns.
type history struct {
	mu    sync.Mutex
	m     map[string]int64
	order []string // insertion order, for eviction
}

// get returns the history of key.
func (h *history) get(key string) (int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[key]
	return v, ok
}

// put records key's history, dropping the oldest entry when full.
func (h *history) put(key string, tokens int64) {
	if key == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[string]int64)
	}
	if _, ok := h.m[key]; !ok {
		if len(h.order) >= historySize {
			delete(h.m, h.order[0])
			h.order = h.order[1:]
		}
		h.order = append(h.order, key)
	}
	h.m[key] = tokens
}

// priceHidden resolves the hidden input of r: a previous response's or a
// conversation's history that the transport read, and for the rest the
// caller's bound. It returns the parts left unpriced (none when a bound
// covers them).
func (t *Transport) priceHidden(ctx context.Context, r *Request) []string {
	var unpriced []string
	for _, what := range r.Hidden {
		switch {
		case what == "previous_response_id":
			if v, ok := t.hist.get("resp:" + r.PreviousResponseID); ok {
				r.HiddenTokens = satAdd(r.HiddenTokens, v)
				continue
			}
		case what == "conversation" && r.Conversation != "":
			if v, ok := t.hist.get("conv:" + r.Conversation); ok {
				r.HiddenTokens = satAdd(r.HiddenTokens, v)
				continue
			}
		}
		unpriced = append(unpriced, what)
	}
	if len(unpriced) == 0 {
		return nil
	}
	bound, ok := hiddenBound(ctx)
	if !ok && t.cfg.maxHidden > 0 {
		bound, ok = t.cfg.maxHidden, true
	}
	if ok {
		r.HiddenTokens = satAdd(r.HiddenTokens, bound)
		return nil
	}
	return unpriced
}
