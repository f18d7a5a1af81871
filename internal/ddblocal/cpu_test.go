package ddblocal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParseProcStatCPU: utime and stime are fields 14 and 15, counted
// after the command's closing parenthesis (a command may hold spaces and
// parentheses of its own).
func TestParseProcStatCPU(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
		ok   bool
	}{
		{"4242 (java) S 1 4242 4242 0 -1 4194560 93122 0 12 0 2416 181 0 0 20 0 41 0 9351 4085714944 91392", 25970 * time.Millisecond, true},
		{"7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0", 70 * time.Millisecond, true},
		{"7 (java) R 1 7 7 0 -1 0 0 0 0 0 3", 0, false},
		{"7 (java) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", 0, false},
		{"no parenthesis", 0, false},
	} {
		got, ok := parseProcStatCPU([]byte(tc.line))
		require.Equal(t, tc.ok, ok, tc.line)
		require.Equal(t, tc.want, got, tc.line)
	}
}
