package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// answer is one admitted completion, written in either API's format.
type answer struct {
	id, created int64
	model       string
	in, out     int64
	chunks      int
	edit        func(map[string]any) // Config.EditUsage
	shape       Shape                // Config.Shape's, cut to in and out
	stall       <-chan struct{}      // Shape.Stall: the request's context's Done
}

// usage returns u, edited by Config.EditUsage and the shape's EditUsage.
func (a answer) usage(u map[string]any) map[string]any {
	if a.edit != nil {
		a.edit(u)
	}
	if a.shape.EditUsage != nil {
		a.shape.EditUsage(u)
	}
	return u
}

// tier returns the service tier the answer reports: def, or the shape's.
func (a answer) tier(def string) string {
	if a.shape.ServiceTier != "" {
		return a.shape.ServiceTier
	}
	return def
}

// text returns out tokens of text: four bytes each.
func (a answer) text() string { return strings.Repeat("abc ", int(a.out)) }

// pieces splits the text into the stream's content events.
func (a answer) pieces() []string {
	t := a.text()
	n := max(min(a.chunks, len(t)/4), 1)
	size := (len(t) + n - 1) / n
	var out []string
	for len(t) > 0 {
		k := min(size, len(t))
		out = append(out, t[:k])
		t = t[k:]
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

func (a answer) openAIUsage() map[string]any {
	prompt := map[string]any{"cached_tokens": a.shape.CacheRead, "audio_tokens": 0}
	if a.shape.CacheWrite > 0 {
		prompt["cache_write_tokens"] = a.shape.CacheWrite
	}
	return a.usage(map[string]any{
		"prompt_tokens": a.in, "completion_tokens": a.out, "total_tokens": a.in + a.out,
		"prompt_tokens_details": prompt,
		"completion_tokens_details": map[string]any{"reasoning_tokens": a.shape.Reasoning, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	})
}

func (a answer) openAIJSON(w http.ResponseWriter) {
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("chatcmpl-sim%d", a.id), "object": "chat.completion", "created": a.created, "model": a.model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": a.text(), "refusal": nil, "annotations": []any{}},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage":              a.openAIUsage(),
		"service_tier":       a.tier("default"),
		"system_fingerprint": "fp_sim",
	})
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
	// stall, when set, is waited on after the first event (Shape.Stall):
	// the request's context's Done. Later events are not sent.
	stall <-chan struct{}
	sent  int
}

func newSSE(w http.ResponseWriter, stall <-chan struct{}) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f, stall: stall}
}

func (s *sse) send(event string, v any) {
	if s.stall != nil && s.sent > 0 {
		if s.sent == 1 {
			<-s.stall
		}
		s.sent++
		return
	}
	s.sent++
	var data []byte
	if b, ok := v.([]byte); ok {
		data = b
	} else {
		data, _ = json.Marshal(v)
	}
	if event != "" {
		fmt.Fprintf(s.w, "event: %s\n", event)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", data)
	if s.f != nil {
		s.f.Flush()
	}
}

func (a answer) openAIStream(w http.ResponseWriter, includeUsage bool) {
	s := newSSE(w, a.stall)
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{
			"id": fmt.Sprintf("chatcmpl-sim%d", a.id), "object": "chat.completion.chunk", "created": a.created, "model": a.model,
			"service_tier": a.tier("default"), "system_fingerprint": "fp_sim",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}
	s.send("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	for _, p := range a.pieces() {
		s.send("", chunk(map[string]any{"content": p}, nil))
	}
	s.send("", chunk(map[string]any{}, "stop"))
	if includeUsage {
		s.send("", map[string]any{
			"id": fmt.Sprintf("chatcmpl-sim%d", a.id), "object": "chat.completion.chunk", "created": a.created, "model": a.model,
			"service_tier": a.tier("default"), "system_fingerprint": "fp_sim", "choices": []any{}, "usage": a.openAIUsage(),
		})
	}
	s.send("", []byte("[DONE]"))
}

func (a answer) anthropicUsage(out int64) map[string]any {
	sh := a.shape
	u := map[string]any{
		"input_tokens": a.in - sh.CacheRead - sh.CacheWrite, "cache_creation_input_tokens": sh.CacheWrite,
		"cache_read_input_tokens": sh.CacheRead, "output_tokens": out, "service_tier": a.tier("standard"),
	}
	if sh.CacheWrite > 0 {
		u["cache_creation"] = map[string]any{
			"ephemeral_5m_input_tokens": sh.CacheWrite - sh.CacheWriteLong, "ephemeral_1h_input_tokens": sh.CacheWriteLong,
		}
	}
	if sh.Reasoning > 0 && out == a.out {
		u["output_tokens_details"] = map[string]any{"thinking_tokens": sh.Reasoning}
	}
	return a.usage(u)
}

func (a answer) anthropicJSON(w http.ResponseWriter) {
	writeJSON(w, map[string]any{
		"id": fmt.Sprintf("msg_sim%d", a.id), "type": "message", "role": "assistant", "model": a.model,
		"content":     []any{map[string]any{"type": "text", "text": a.text()}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": a.anthropicUsage(a.out),
	})
}

// deltaUsage is the usage of Anthropic's message_delta: the final output.
func (a answer) deltaUsage() map[string]any {
	u := map[string]any{"output_tokens": a.out}
	if a.shape.Reasoning > 0 {
		u["output_tokens_details"] = map[string]any{"thinking_tokens": a.shape.Reasoning}
	}
	return a.usage(u)
}

func (a answer) anthropicStream(w http.ResponseWriter) {
	s := newSSE(w, a.stall)
	s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_sim%d", a.id), "type": "message", "role": "assistant", "model": a.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": a.anthropicUsage(1),
	}})
	s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	s.send("ping", map[string]any{"type": "ping"})
	for _, p := range a.pieces() {
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
	}
	s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": a.deltaUsage()})
	s.send("message_stop", map[string]any{"type": "message_stop"})
}
