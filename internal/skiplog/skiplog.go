// Package skiplog records the tests that skip for want of a tool
// (DynamoDB Local, redis-server, moto, Chromium, Docker) in the file that
// $ZAEL_SKIP_LOG names, one line per test, so that `make test` can list
// them when it ends: go test shows no skip of a package that passes unless
// run with -v. Without $ZAEL_SKIP_LOG it records nothing.
package skiplog

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvFile names the file the lines are appended to.
const EnvFile = "ZAEL_SKIP_LOG"

// Skip records t as skipped for want of tool and skips it with msg.
func Skip(t testing.TB, tool, msg string) {
	t.Helper()
	Record(t, tool, msg)
	t.Skip(msg)
}

// Record appends one line to the file $ZAEL_SKIP_LOG names: tool, the
// package's directory (a test runs in it), the test's name and the first
// line of msg, separated by tabs. An error is logged on t, not failed.
func Record(t testing.TB, tool, msg string) {
	t.Helper()
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	dir, err := os.Getwd()
	if err != nil {
		dir = "?"
	}
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	line := fmt.Sprintf("%s\t%s\t%s\t%s\n", clean(tool), dir, clean(t.Name()), clean(first))
	// One write of one short line in append mode: the lines of test
	// binaries running at once do not interleave.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Logf("skiplog: %s: %v", path, err)
	}
}

// clean turns the tabs and line breaks of s into spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
