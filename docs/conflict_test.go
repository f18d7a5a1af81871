package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoMergeConflictMarkers: no file of the repository keeps the markers
// of an unresolved merge ("<<<<<<< " or ">>>>>>> " opening a line), which
// gofmt catches in Go files but nothing else does in the docs, the
// Makefile, scripts and fixtures.
func TestNoMergeConflictMarkers(t *testing.T) {
	skip := map[string]bool{".git": true, ".cache": true, "bin": true, "node_modules": true}
	var checked int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		checked++
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") {
				assert.Fail(t, "merge conflict marker", "%s:%d: %s", path, n, line)
			}
		}
		return nil // a binary file's long line ends the scan: it has no markers to find
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 100, "files checked: the walk did not reach the repository")
}
