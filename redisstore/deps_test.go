package redisstore_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildsOnStoreOnly: the package imports the backend contract
// (package store), not the limiter, so that a program on Redis compiles
// neither the DynamoDB repository nor the AWS SDK. It asks `go list -deps`,
// as docs/dependencies.md does.
func TestBuildsOnStoreOnly(t *testing.T) {
	t.Parallel()
	const (
		self = "github.com/zaelimiter/limiter/redisstore"
		root = "github.com/zaelimiter/limiter"
	)
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", self)
	out, err := cmd.Output()
	var stderr []byte
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "go list -deps %s\n%s", self, stderr)
	var ours, modules []string // the module's packages; the other modules
	for line := range strings.Lines(string(out)) {
		pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case mod == root:
			ours = append(ours, pkg)
		case mod != "" && !slices.Contains(modules, mod):
			modules = append(modules, mod)
		}
	}
	// The list is real: it holds the package itself and its contract.
	require.Contains(t, ours, self)
	require.Contains(t, ours, root+"/store")
	assert.NotContains(t, ours, root, "redisstore imports the limiter")
	assert.Contains(t, modules, "github.com/redis/go-redis/v9")
	aws := slices.DeleteFunc(slices.Clone(modules), func(m string) bool { return !strings.HasPrefix(m, "github.com/aws/") })
	assert.Empty(t, aws, "redisstore depends on the AWS SDK; all its modules: %v", modules)
}
