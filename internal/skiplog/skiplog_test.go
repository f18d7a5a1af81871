package skiplog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSkipRecords: Skip skips the test and appends one line per skipped
// test to $ZAEL_SKIP_LOG: tool, directory, test name, the message's first
// line, tab-separated, with the tabs and line breaks of each field turned
// into spaces.
func TestSkipRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skips")
	t.Setenv(EnvFile, path)
	skipped := map[string]bool{}
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			defer func() { skipped[name] = t.Skipped() }()
			Skip(t, "red\tis", "no redis-server on PATH\n(apt-get install redis-server)")
		})
	}
	assert.Equal(t, map[string]bool{"first": true, "second": true}, skipped)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dir, err := os.Getwd()
	require.NoError(t, err)
	want := ""
	for _, name := range []string{"first", "second"} {
		want += strings.Join([]string{"red is", dir, "TestSkipRecords/" + name, "no redis-server on PATH"}, "\t") + "\n"
	}
	assert.Equal(t, want, string(data))
}

// TestRecordWithoutFile: without $ZAEL_SKIP_LOG nothing is written.
func TestRecordWithoutFile(t *testing.T) {
	t.Setenv(EnvFile, "")
	dir := t.TempDir()
	t.Chdir(dir)
	Record(t, "tool", "msg")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
