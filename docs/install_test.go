package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// installWithReplace and installWithWorkspace are the commands of the
// README's blocks tested by TestInstallFromCheckout, in order: the two
// ways to build against a checkout while the module is not published.
var (
	installWithReplace = [][]string{
		{"go", "mod", "edit", "-require=github.com/zaelimiter/limiter@v0.0.0", "-replace=github.com/zaelimiter/limiter=../limiter"},
		{"go", "mod", "tidy"},
	}
	installWithWorkspace = [][]string{
		{"go", "work", "init", ".", "../limiter"},
	}
)

// TestInstallFromCheckout follows the README's Install section as a new
// user would: a new module beside a checkout (../limiter, here this
// repository), the README's commands run in it as written, then the
// quickstart saved as main.go and run with `go run .`; its output must be
// the README's. Both ways are followed: require and replace, and a
// workspace. Modules come from the module cache and, for those it lacks
// (go mod tidy reads the go.mod of every module in the graph, which the
// module's own build never needed), from the module proxy `go env GOPROXY`
// names, as for a new user.
func TestInstallFromCheckout(t *testing.T) {
	goTool := needTool(t, "go")
	readme := readRoot(t, "README.md")
	var inDoc [][]string
	var quickstart, quickOutput string
	var goModLines string
	blocks := parseBlocks(t, "README.md", readme)
	for i, b := range blocks {
		switch {
		case b.annotation == "tested by TestInstallFromCheckout":
			for _, l := range commandLines(b.text) {
				inDoc = append(inDoc, shellFields(l.cmd))
			}
		case b.annotation == "output of TestInstallFromCheckout":
			goModLines = b.text
		case b.annotation == "go: program" && quickstart == "":
			// The first program of the README, the quickstart.
			if i+1 < len(blocks) && blocks[i+1].annotation == "output of the program above" {
				quickstart, quickOutput = b.text, blocks[i+1].text
			}
		}
	}
	require.Equal(t, append(append([][]string{}, installWithReplace...), installWithWorkspace...), inDoc,
		"README.md's install commands and installWithReplace, installWithWorkspace differ: change both")
	require.NotEmpty(t, quickstart, "README.md: the quickstart program and its output")
	// The lines go mod edit writes, as the README shows them.
	require.Equal(t, "require github.com/zaelimiter/limiter v0.0.0\nreplace github.com/zaelimiter/limiter => ../limiter\n", goModLines)

	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	for _, way := range []struct {
		name     string
		commands [][]string
	}{{"replace", installWithReplace}, {"workspace", installWithWorkspace}} {
		t.Run(way.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Symlink(abs, filepath.Join(dir, "limiter")))
			app := filepath.Join(dir, "app")
			require.NoError(t, os.Mkdir(app, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/app\n\ngo 1.26.0\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(quickstart), 0o644))
			env := append(os.Environ(), "GOFLAGS=", "GOWORK=")
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(goTool, args[1:]...)
				cmd.Dir, cmd.Env = app, env
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "%s in a new module beside the checkout:\n%s", strings.Join(args, " "), out)
				return string(out)
			}
			for _, c := range way.commands {
				run(c...)
			}
			if way.name == "replace" {
				mod, err := os.ReadFile(filepath.Join(app, "go.mod"))
				require.NoError(t, err)
				for _, l := range strings.Split(strings.TrimSpace(goModLines), "\n") {
					// tidy may move the require into a block: match its words.
					words := strings.Fields(l)
					re := regexp.MustCompile(`(?m)^(` + regexp.QuoteMeta(words[0]) + ` |\t)` + regexp.QuoteMeta(strings.Join(words[1:], " ")) + `$`)
					assert.Regexp(t, re, string(mod), "go.mod after the README's commands")
				}
			}
			assert.Equal(t, quickOutput, run("go", "run", "."), "the quickstart's output, as the README shows it")
		})
	}
}
