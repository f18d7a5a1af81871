package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliDoc is docs/cli.md, whose command reference is generated.
var cliDoc = filepath.Join("..", "..", "docs", "cli.md")

// TestCLIReference: the command reference in docs/cli.md is the one the
// command tree generates.
func TestCLIReference(t *testing.T) {
	doc, err := os.ReadFile(cliDoc)
	require.NoError(t, err)
	want, err := updateReference(doc)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(doc),
		"docs/cli.md's command reference is stale: run `make cli-docs` (go generate ./cmd/zae-limiter)")
}

// TestCLIReferenceDetectsStaleness: a reference lacking a flag, or one
// without its markers, is not taken as current.
func TestCLIReferenceDetectsStaleness(t *testing.T) {
	doc, err := os.ReadFile(cliDoc)
	require.NoError(t, err)
	line := []byte("* `--display-name string`: human-readable name (default: the entity id)\n")
	require.Contains(t, string(doc), string(line))
	stale := bytes.Replace(doc, line, nil, 1)
	fresh, err := updateReference(stale)
	require.NoError(t, err)
	assert.NotEqual(t, string(stale), string(fresh))
	assert.Equal(t, string(doc), string(fresh))

	_, err = updateReference(bytes.Replace(doc, []byte(referenceEnd), nil, 1))
	assert.ErrorContains(t, err, "markers")
}

// TestCompletion: `completion SHELL` prints the script of each shell, and
// the hidden completion command cobra adds completes commands, subcommands
// and the values of --output.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{
		"bash": "__start_zae-limiter", "zsh": "#compdef zae-limiter", "fish": "complete -c zae-limiter", "powershell": "Register-ArgumentCompleter",
	} {
		code, out, errs := runCLI("completion", shell)
		assert.Equal(t, exitOK, code, shell)
		assert.Empty(t, errs, shell)
		assert.Contains(t, out, marker, shell)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "ent"}, []string{"entity"}},
		{[]string{"__complete", "entity", "set-"}, []string{"set-limits"}},
		{[]string{"__complete", "resource", "list", "--end"}, []string{"--endpoint-url"}},
		{[]string{"__complete", "resource", "list", "-o", ""}, []string{"table", "json"}},
	} {
		code, out, errs := runCLI(tc.args...)
		require.Equal(t, exitOK, code, "%v: stderr %q", tc.args, errs)
		var got []string
		for _, l := range strings.Split(out, "\n") {
			name, _, _ := strings.Cut(l, "\t")
			got = append(got, name)
		}
		for _, w := range tc.want {
			assert.Contains(t, got, w, "%v", tc.args)
		}
	}
}

// TestSuggestions: a mistyped command or subcommand names the nearest.
func TestSuggestions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"entiy"}, `unknown command "entiy" (did you mean "entity"? run`},
		{[]string{"namespac", "list"}, `unknown command "namespac" (did you mean "namespace"? run`},
		{[]string{"entity", "craete", "e1"}, `entity: unknown subcommand "craete" (did you mean "create"? one of: children, create,`},
		{[]string{"local", "stat"}, `local: unknown subcommand "stat" (did you mean "status"? one of:`},
	} {
		code, out, errs := runCLI(tc.args...)
		assert.Contains(t, checkFailure(t, tc.args, code, out, errs, exitError), tc.want)
	}
	code, out, errs := runCLI("frobnicate")
	assert.NotContains(t, checkFailure(t, []string{"frobnicate"}, code, out, errs, exitError), "did you mean")
}

// TestVersionFlag: --version prints the client version; -v is no flag.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI("--version")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, "zae-limiter (go) "+clientVersion()+"\n", out)
	code, out, errs = runCLI("-v")
	assert.Contains(t, checkFailure(t, []string{"-v"}, code, out, errs, exitError), `unknown command "-v"`)
}

// TestHelpCommand: `help CMD` and `CMD help` print the help of CMD.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"help", "entity"}, {"help", "entity", "create"}, {"entity", "help"}} {
		code, out, errs := runCLI(args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Empty(t, errs, "%v", args)
		assert.True(t, strings.HasPrefix(out, "Usage: zae-limiter"), "%v: %q", args, out)
	}
	_, out, _ := runCLI("help", "entity", "create")
	assert.Contains(t, out, "Usage: zae-limiter entity create ENTITY_ID [FLAGS]")
	assert.Contains(t, out, "--cascade / --no-cascade")
}

// TestSingleDashLongFlags: long flags written with one dash, as the standard
// flag package accepted them, still work; shorthands and values after "--"
// are left alone.
func TestSingleDashLongFlags(t *testing.T) {
	t.Parallel()
	root := (&cli{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}).rootCommand()
	got := singleDashLongFlags(root, []string{"-name", "x", "-namespace=ns", "-n", "y", "-help", "-5", "--region", "r", "--", "-name"})
	assert.Equal(t, []string{"--name", "x", "--namespace=ns", "-n", "y", "--help", "-5", "--region", "r", "--", "-name"}, got)

	code, out, errs := runCLI("-version")
	require.Equal(t, exitOK, code, errs)
	assert.Equal(t, "zae-limiter (go) "+clientVersion()+"\n", out)
	code, out, _ = runCLI("entity", "create", "-help")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "Usage: zae-limiter entity create")
}
