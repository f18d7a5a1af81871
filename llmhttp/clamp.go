package llmhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/zaelimiter/limiter"
)

// This file lowers a request's output ceiling to what its budget has left
// when its worst case does not fit: the provider enforces the ceiling
// exactly, so a lower one bounds the bill as surely as a refusal, and the
// last of a budget buys a shorter answer instead of nothing.

// DefaultMinOutputTokens is the least output ceiling the transport lowers a
// request to ([Options.MinOutputTokens]).
const DefaultMinOutputTokens = 128

// clampTries bounds the acquires of one request: the first at its own
// ceiling, then at ceilings lowered to what the refusals showed left.
const clampTries = 4

// clampOn reports whether output ceilings are lowered.
func (t *Transport) clampOn() bool {
	switch t.cfg.clamp {
	case ClampOn:
		return true
	case ClampOff:
		return false
	}
	return t.cfg.costName != ""
}

// attempt is one form of a request: its body and what its lease acquires.
type attempt struct {
	req      *http.Request
	body     []byte
	r        Request
	estimate limiter.Consume
	cost     *costCall
}

// clampAcquire handles a refused acquire (err) of a: while clamping may
// help, it lowers a's output ceiling to what the refusal shows left and
// acquires again. It returns the lease and the attempt it was acquired
// for, or the last refusal.
func (t *Transport) clampAcquire(ctx context.Context, c call, a attempt, callerEstimate limiter.Consume,
	opts []limiter.AcquireOption, err error) (*limiter.Lease, attempt, error) {
	if !t.clampOn() || a.body == nil {
		return nil, a, err
	}
	floor := t.cfg.minOutput
	for range clampTries - 1 {
		var rle *limiter.RateLimitExceededError
		if !errors.As(err, &rle) {
			return nil, a, err
		}
		left := leftOf(rle.Statuses)
		cur := a.r.OutputCeiling
		if cur <= 0 && a.cost != nil {
			cur = a.cost.price.MaxOutputTokens
		}
		if cur <= floor {
			t.st.clampRefused.Add(1)
			return nil, a, err
		}
		estAt := func(ceiling int64) (attempt, bool) {
			b, ok := withCeiling(a.body, a.req.URL.Path, ceiling)
			if !ok {
				return attempt{}, false
			}
			n, e := t.attemptFor(ctx, c, a, b, ceiling, callerEstimate)
			if e != nil {
				return attempt{}, false
			}
			return n, true
		}
		fits := func(n attempt) bool {
			for name, v := range n.estimate {
				if l, ok := left[name]; ok && v > l {
					return false
				}
			}
			return true
		}
		// The largest ceiling in [floor, cur) that fits.
		lo, hi := floor, cur-1
		best, found := attempt{}, false
		for lo <= hi {
			mid := lo + (hi-lo)/2
			n, ok := estAt(mid)
			if !ok {
				return nil, a, err
			}
			if fits(n) {
				best, found, lo = n, true, mid+1
			} else {
				hi = mid - 1
			}
		}
		if !found {
			t.st.clampRefused.Add(1)
			return nil, a, err
		}
		a = best
		lease, aerr := t.rl.Acquire(ctx, c.entity, c.resource, a.estimate, opts...)
		if aerr == nil {
			t.st.clamped.Add(1)
			return lease, a, nil
		}
		err = aerr
	}
	return nil, a, err
}

// leftOf returns, per limit name, the least any bucket of a refused
// acquire had available: what every one of them can pay.
func leftOf(statuses []limiter.LimitStatus) map[string]int64 {
	left := make(map[string]int64, len(statuses))
	for _, s := range statuses {
		if v, ok := left[s.LimitName]; !ok || s.Available < v {
			left[s.LimitName] = s.Available
		}
	}
	return left
}

// attemptFor returns a with body b, whose output ceiling is ceiling: its
// request, and its estimate worked out again (the caller's own amounts
// kept as given).
func (t *Transport) attemptFor(ctx context.Context, c call, a attempt, b []byte, ceiling int64,
	callerEstimate limiter.Consume) (attempt, error) {
	n := a
	n.body = b
	n.req = withBody(a.req, b)
	// The worst case of the body sent, whose ceiling is ceiling.
	n.r = RequestFromBody(b)
	n.r.HiddenTokens, n.r.PreviousResponseID, n.r.Conversation = a.r.HiddenTokens, a.r.PreviousResponseID, a.r.Conversation
	if n.r.Model == "" {
		n.r.Model = a.r.Model
	}
	if callerEstimate != nil {
		n.estimate = cloneConsume(callerEstimate)
	} else {
		est, err := t.cfg.estimator(estimatorRequest(n.req, n.r.HiddenTokens))
		if err != nil {
			return attempt{}, err
		}
		n.estimate = cloneConsume(est)
	}
	if a.cost != nil {
		cc := *a.cost
		n.cost = &cc
		cc.mods, cc.longCache = n.r.Modifiers, n.r.LongCache
		if v, ok := n.estimate[cc.name]; ok {
			cc.estimate, cc.worstCase = v, false
		} else {
			cc.estimate = cc.price.Estimate(n.r)
			n.estimate[cc.name] = cc.estimate
		}
	}
	return n, nil
}

func cloneConsume(c limiter.Consume) limiter.Consume {
	out := make(limiter.Consume, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	return out
}

// withBody returns a copy of req that sends b.
func withBody(req *http.Request, b []byte) *http.Request {
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r2.ContentLength = int64(len(b))
	if r2.Header.Get("Content-Length") != "" {
		r2.Header.Set("Content-Length", strconv.Itoa(len(b)))
	}
	return r2
}

// ceilingKeys are the output ceilings of the APIs.
var ceilingKeys = []string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// withCeiling returns body with every output ceiling it names above
// ceiling lowered to it, or with the API's ceiling added when it names
// none (the path says which API). It reports false for a body that is not
// a JSON object.
func withCeiling(body []byte, path string, ceiling int64) ([]byte, bool) {
	if strings.Contains(path, "/converse") {
		// Bedrock's Converse API nests its ceiling
		// (inferenceConfig.maxTokens): not lowered.
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	type span struct{ start, end int64 }
	var spans []span
	members := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		members++
		for _, k := range ceilingKeys {
			if key == k {
				var n int64
				if json.Unmarshal(v, &n) != nil || n <= 0 || n > ceiling {
					spans = append(spans, span{start, dec.InputOffset()})
				}
			}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	end := dec.InputOffset()
	num := strconv.FormatInt(ceiling, 10)
	if len(spans) == 0 && !hasCeiling(body) {
		key := "max_tokens"
		switch {
		case strings.HasSuffix(path, "/responses"):
			key = "max_output_tokens"
		case strings.HasSuffix(path, "/chat/completions"):
			key = "max_completion_tokens"
		}
		sep := ","
		if members == 0 {
			sep = ""
		}
		out := append([]byte{}, body[:end-1]...)
		out = append(out, sep+`"`+key+`":`+num+"}"...)
		return append(out, body[end:]...), true
	}
	var out []byte
	prev := int64(0)
	for _, s := range spans {
		out = append(out, body[prev:s.start]...)
		out = append(out, ":"+num...)
		prev = s.end
	}
	return append(out, body[prev:]...), true
}

// hasCeiling reports whether the JSON object body names a positive output
// ceiling.
func hasCeiling(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	for _, k := range ceilingKeys {
		if intOf(top[k]) > 0 {
			return true
		}
	}
	return false
}
