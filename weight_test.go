package limiter_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userDownloads are the modules a program that imports the limiter and
// memorystore may download on go mod tidy: the library's own dependencies
// (the AWS SDK's DynamoDB client, ulid, x/sync) and the test libraries of
// their tests (testify, with its YAML module, and go-cmp).
var userDownloads = []string{
	"github.com/aws/aws-sdk-go-v2",
	"github.com/aws/aws-sdk-go-v2/credentials",
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue",
	"github.com/aws/aws-sdk-go-v2/internal/configsources",
	"github.com/aws/aws-sdk-go-v2/internal/endpoints/v2",
	"github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams",
	"github.com/aws/aws-sdk-go-v2/service/internal/accept-encoding",
	"github.com/aws/aws-sdk-go-v2/service/internal/endpoint-discovery",
	"github.com/aws/smithy-go",
	"github.com/google/go-cmp",
	"github.com/oklog/ulid/v2",
	"github.com/stretchr/testify",
	"go.yaml.in/yaml/v3",
	"golang.org/x/sync",
}

// goList runs go list with args and returns its output's fields.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", append([]string{"list"}, args...)...).Output()
	var stderr []byte
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "go list %s\n%s", strings.Join(args, " "), stderr)
	return strings.Fields(string(out))
}

// TestUserDownloads: go mod tidy in a program that imports the limiter and
// memorystore (and one that also imports llmhttp) loads those packages,
// the packages they import, and the tests of all of these (not the tests
// of the tests' dependencies); the modules that provide them are what the
// program downloads. This lists them offline with go list and holds them
// to userDownloads, so that no heavy test dependency (a container runtime,
// a Redis client, the SDK's config module) creeps into the tests of a
// package users import. `make weight` measures the download itself, on an
// empty module cache.
func TestUserDownloads(t *testing.T) {
	t.Parallel()
	const self = "github.com/zaelimiter/limiter"
	for _, imports := range [][]string{{self, self + "/memorystore"}, {self, self + "/memorystore", self + "/llmhttp"}} {
		var loaded []string // the module's packages that tidy loads
		for _, p := range goList(t, append([]string{"-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, imports...)...) {
			if p == self || strings.HasPrefix(p, self+"/") {
				loaded = append(loaded, p)
			}
		}
		require.Contains(t, loaded, self+"/store") // the list is real
		require.Subset(t, loaded, imports)
		mods := goList(t, append([]string{"-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}"}, loaded...)...)
		slices.Sort(mods)
		mods = slices.DeleteFunc(slices.Compact(mods), func(m string) bool { return m == self })
		extra := slices.DeleteFunc(slices.Clone(mods), func(m string) bool { return slices.Contains(userDownloads, m) })
		assert.Empty(t, extra, "modules that a program importing %v would download for the tests of %v", imports, loaded)
		assert.LessOrEqual(t, len(mods), 15, "%v: modules: %v", imports, mods)
	}
}
