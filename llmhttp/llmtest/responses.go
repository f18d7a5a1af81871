package llmtest

import (
	"fmt"
	"net/http"
)

// This file writes the answers of OpenAI's Responses API.

// responseID is the answer's id as the Responses API spells it.
func (a answer) responseID() string { return fmt.Sprintf("resp_sim%d", a.id) }

func (a answer) responsesUsage() map[string]any {
	return a.usage(map[string]any{
		"input_tokens": a.in, "output_tokens": a.out, "total_tokens": a.in + a.out,
		"input_tokens_details":  map[string]any{"cached_tokens": a.shape.CacheRead},
		"output_tokens_details": map[string]any{"reasoning_tokens": a.shape.Reasoning},
	})
}

// response is the Responses API's response object; usage nil while in
// progress.
func (a answer) response(status string, usage map[string]any, text string) map[string]any {
	r := map[string]any{
		"id": a.responseID(), "object": "response", "created_at": a.created, "status": status, "model": a.model,
		"service_tier": a.tier("default"), "usage": nil, "output": []any{},
	}
	if usage != nil {
		r["usage"] = usage
		r["output"] = []any{map[string]any{"type": "message", "id": fmt.Sprintf("msg_sim%d", a.id), "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}
	}
	return r
}

func (a answer) responsesJSON(w http.ResponseWriter) {
	writeJSON(w, a.response("completed", a.responsesUsage(), a.text()))
}

func (a answer) responsesStream(w http.ResponseWriter) {
	s := newSSE(w, a.stall)
	s.send("response.created", map[string]any{"type": "response.created", "response": a.response("in_progress", nil, "")})
	for _, p := range a.pieces() {
		s.send("response.output_text.delta", map[string]any{"type": "response.output_text.delta",
			"item_id": fmt.Sprintf("msg_sim%d", a.id), "output_index": 0, "content_index": 0, "delta": p})
	}
	s.send("response.completed", map[string]any{"type": "response.completed",
		"response": a.response("completed", a.responsesUsage(), a.text())})
}
