package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRun: the SDK's calls through the transport are charged their real
// usage (the simulator's exact counts), and the call the budget cannot pay
// for is refused before it reaches the provider.
func TestRun(t *testing.T) {
	var out strings.Builder
	require.NoError(t, run(context.Background(), &out))
	assert.Equal(t, `call 1: 14 input + 120 output tokens (estimate 300); tpm left 466
call 2: 14 input + 120 output tokens (estimate 300); tpm left 332
stream: 14 input + 120 output tokens; tpm left 198
call 4: denied by tpm, retry in 10s; the provider saw 3 requests
`, out.String())
}
