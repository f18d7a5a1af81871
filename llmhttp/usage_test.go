package llmhttp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixtures under testdata are responses of the providers' APIs, as
// recorded (ids and texts shortened): chat completions of OpenAI, as JSON
// and as a stream with and without stream_options.include_usage, a
// Responses API stream, and Anthropic messages as JSON and as a stream with
// prompt caching.
var usageFixtures = []struct {
	file        string
	contentType string
	want        Usage
	ok          bool
}{
	{"openai_chat.json", "application/json", Usage{InputTokens: 1117, OutputTokens: 46, CacheReadTokens: 1024, TotalTokens: 1163,
		CacheInInput: true, ServiceTier: "default"}, true},
	{"openai_chat_stream.txt", "text/event-stream; charset=utf-8", Usage{InputTokens: 21, OutputTokens: 9, TotalTokens: 30,
		CacheInInput: true, ServiceTier: "default"}, true},
	{"openai_chat_stream_nousage.txt", "text/event-stream", Usage{}, false},
	{"openai_responses_stream.txt", "text/event-stream", Usage{InputTokens: 37, OutputTokens: 11, TotalTokens: 48, CacheInInput: true}, true},
	{"anthropic_message.json", "application/json", Usage{InputTokens: 2095, OutputTokens: 503, CacheReadTokens: 1820, TotalTokens: 2095 + 1820 + 503,
		ServiceTier: "standard"}, true},
	{"anthropic_stream.txt", "text/event-stream", Usage{InputTokens: 472, OutputTokens: 15, CacheCreationTokens: 1536, TotalTokens: 472 + 1536 + 15,
		ServiceTier: "standard"}, true},
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// TestUsageFromRecordedResponses feeds each recorded body to its parser in
// pieces of several sizes (one byte at a time included): the token counts
// come out exact whatever the pieces.
func TestUsageFromRecordedResponses(t *testing.T) {
	for _, fx := range usageFixtures {
		body := readFixture(t, fx.file)
		for _, size := range []int{1, 2, 7, 64, 4096, len(body)} {
			p := newParser(fx.contentType)
			for b := body; len(b) > 0; {
				n := min(size, len(b))
				p.write(b[:n])
				b = b[n:]
			}
			got := p.parsed()
			assert.Equal(t, fx.ok, got.final, "%s in pieces of %d", fx.file, size)
			assert.False(t, got.malformed, "%s in pieces of %d", fx.file, size)
			assert.Equal(t, fx.want, got.usage, "%s in pieces of %d", fx.file, size)
		}
	}
}

// TestUsageJSONIgnoresNestedUsage: only the top-level usage member counts;
// a "usage" key inside a string or a nested object does not.
func TestUsageJSONIgnoresNestedUsage(t *testing.T) {
	p := &jsonUsageParser{}
	p.write([]byte(`{"note":"\"usage\": {\"prompt_tokens\": 9}","meta":{"usage":{"prompt_tokens":5}},"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	got := p.parsed()
	require.True(t, got.final)
	assert.Equal(t, Usage{InputTokens: 3, OutputTokens: 4, TotalTokens: 7, CacheInInput: true}, got.usage)

	p = &jsonUsageParser{}
	p.write([]byte(`{"error":{"message":"usage limit","type":"invalid_request_error"}}`))
	got = p.parsed()
	assert.False(t, got.seen)
	assert.False(t, got.malformed)
}

// TestUsageStreamCRLF: event streams with CRLF line ends parse the same.
func TestUsageStreamCRLF(t *testing.T) {
	p := &sseUsageParser{}
	p.write([]byte("event: message_delta\r\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":8}}\r\n\r\n"))
	got := p.parsed()
	require.True(t, got.final)
	assert.Equal(t, Usage{OutputTokens: 8, TotalTokens: 8}, got.usage)
}

// TestUsageMalformed: a usage with a negative count, a count above 10^9,
// a count that is no integer or a usage that is no object is malformed,
// in a JSON body and in a stream; counts at the bounds are not, and their
// sums do not overflow.
func TestUsageMalformed(t *testing.T) {
	for _, u := range []string{
		`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":-1000000}`,
		`{"input_tokens":1000000001,"output_tokens":1}`,
		`{"input_tokens":4611686018427387904,"cache_read_input_tokens":4611686018427387904,"output_tokens":1}`,
		`{"input_tokens":1e20}`,
		`{"input_tokens":12.5}`,
		`{"input_tokens":"12"}`,
		`{"prompt_tokens_details":{"cached_tokens":-1}}`,
		`[1,2]`,
	} {
		p := &jsonUsageParser{}
		p.write([]byte(`{"id":"x","usage":` + u + `}`))
		assert.True(t, p.parsed().malformed, "JSON body, usage %s", u)

		s := &sseUsageParser{}
		s.write([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":" + u + "}\n\n"))
		assert.True(t, s.parsed().malformed, "stream, usage %s", u)
	}
	p := &jsonUsageParser{}
	p.write([]byte(`{"usage":{"input_tokens":1000000000,"cache_creation_input_tokens":1000000000,"cache_read_input_tokens":1000000000,"output_tokens":1000000000}}`))
	got := p.parsed()
	assert.False(t, got.malformed)
	assert.Equal(t, int64(4_000_000_000), got.usage.TotalTokens)

	// A total below the sum of its parts charges the sum.
	p = &jsonUsageParser{}
	p.write([]byte(`{"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":1}}`))
	assert.Equal(t, int64(150), p.parsed().usage.TotalTokens)

	// A broken line that mentions usage is malformed; one that does not is
	// skipped.
	s := &sseUsageParser{}
	s.write([]byte("data: {\"delta\":{\"text\":\"ab\"}\n\n"))
	assert.False(t, s.parsed().malformed)
	s.write([]byte("data: {\"usage\":{\"output_tokens\":3}\n\n"))
	assert.True(t, s.parsed().malformed)
}

// TestUsageStreamPartial: Anthropic's message_start is not the final
// usage; the output text of the content events counts as output seen, for
// either provider's stream.
func TestUsageStreamPartial(t *testing.T) {
	s := &sseUsageParser{}
	s.write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":900,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcdefghi\"}}\n\n"))
	got := s.parsed()
	assert.True(t, got.seen)
	assert.False(t, got.final)
	assert.Equal(t, int64(900), got.usage.InputTokens)
	assert.Equal(t, int64(3), got.outputSeen, "9 bytes of text")

	s = &sseUsageParser{}
	s.write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"abcd"}}],"usage":null}` + "\n\n" +
		`data: {"type":"response.output_text.delta","delta":"efgh"}` + "\n\n"))
	got = s.parsed()
	assert.False(t, got.seen)
	assert.Equal(t, int64(2), got.outputSeen)
}

// feedPieces writes body to p in pieces of size bytes.
func feedPieces(p usageParser, body string, size int) parsed {
	for b := []byte(body); len(b) > 0; {
		n := min(size, len(b))
		p.write(b[:n])
		b = b[n:]
	}
	return p.parsed()
}

// TestUsagePricedFields: what prices a usage beyond its four counts is
// read from both providers' bodies and streams: cache writes by lifetime,
// reasoning, and the tier, speed and region that served the response.
func TestUsagePricedFields(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		want                    Usage
		split                   bool
	}{
		{"anthropic json", "application/json",
			`{"type":"message","usage":{"input_tokens":10,"cache_creation_input_tokens":300,"cache_read_input_tokens":20,` +
				`"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":200},"output_tokens":50,` +
				`"output_tokens_details":{"thinking_tokens":30},"service_tier":"batch","speed":"fast","inference_geo":"us"}}`,
			Usage{InputTokens: 10, CacheCreationTokens: 300, CacheCreationLongTokens: 200, CacheReadTokens: 20, OutputTokens: 50,
				ReasoningTokens: 30, ServiceTier: "batch", Speed: "fast", InferenceGeo: "us", TotalTokens: 380}, true},
		{"anthropic stream", "text/event-stream",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":300," +
				"\"cache_read_input_tokens\":0,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":300}," +
				"\"output_tokens\":1,\"service_tier\":\"priority\",\"inference_geo\":\"global\"}}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":40,\"output_tokens_details\":{\"thinking_tokens\":12}}}\n\n",
			Usage{InputTokens: 10, CacheCreationTokens: 300, CacheCreationLongTokens: 300, OutputTokens: 40, ReasoningTokens: 12,
				ServiceTier: "priority", InferenceGeo: "global", TotalTokens: 350}, true},
		{"openai json, tier before usage", "application/json",
			`{"id":"c","service_tier":"flex","usage":{"prompt_tokens":1000,"completion_tokens":90,"total_tokens":1090,` +
				`"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300},"completion_tokens_details":{"reasoning_tokens":70}}}`,
			Usage{InputTokens: 1000, CacheReadTokens: 600, CacheCreationTokens: 300, OutputTokens: 90, ReasoningTokens: 70,
				CacheInInput: true, ServiceTier: "flex", TotalTokens: 1090}, false},
		{"openai json, tier after usage", "application/json",
			`{"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6},"choices":[{"service_tier":"nested"}],"service_tier":"priority"}`,
			Usage{InputTokens: 5, OutputTokens: 1, CacheInInput: true, ServiceTier: "priority", TotalTokens: 6}, false},
		{"openai stream", "text/event-stream",
			`data: {"choices":[{"delta":{"content":"hi"}}],"service_tier":"priority"}` + "\n\n" +
				`data: {"choices":[],"service_tier":"priority","usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\n",
			Usage{InputTokens: 5, OutputTokens: 1, CacheInInput: true, ServiceTier: "priority", TotalTokens: 6}, false},
		{"responses stream", "text/event-stream",
			`data: {"type":"response.completed","response":{"service_tier":"flex","usage":{"input_tokens":100,` +
				`"input_tokens_details":{"cached_tokens":10,"cache_write_tokens":50,"cache_write_tokens_details":{"ttl_12h_tokens":20,"ttl_30m_tokens":30}},` +
				`"output_tokens":9,"output_tokens_details":{"reasoning_tokens":4},"total_tokens":109}}}` + "\n\n",
			Usage{InputTokens: 100, CacheReadTokens: 10, CacheCreationTokens: 50, CacheCreationLongTokens: 20, OutputTokens: 9,
				ReasoningTokens: 4, CacheInInput: true, ServiceTier: "flex", TotalTokens: 109}, true},
		{"a tier of another type is ignored", "application/json",
			`{"service_tier":7,"usage":{"input_tokens":5,"output_tokens":1,"service_tier":{"x":1},"speed":null}}`,
			Usage{InputTokens: 5, OutputTokens: 1, TotalTokens: 6}, false},
	} {
		for _, size := range []int{1, 3, 64, len(tc.body)} {
			got := feedPieces(newParser(tc.contentType), tc.body, size)
			require.False(t, got.malformed, "%s in pieces of %d", tc.name, size)
			require.True(t, got.final, "%s in pieces of %d", tc.name, size)
			assert.Equal(t, tc.want, got.usage, "%s in pieces of %d", tc.name, size)
			assert.Equal(t, tc.split, got.cacheSplit, "%s in pieces of %d", tc.name, size)
		}
	}
	for _, u := range []string{
		`{"cache_creation":{"ephemeral_1h_input_tokens":-1}}`,
		`{"completion_tokens_details":{"reasoning_tokens":1000000001}}`,
		`{"input_tokens_details":{"cache_write_tokens_details":{"ttl_12h_tokens":-5}}}`,
	} {
		p := &jsonUsageParser{}
		p.write([]byte(`{"usage":` + u + `}`))
		assert.True(t, p.parsed().malformed, "usage %s", u)
	}
}
