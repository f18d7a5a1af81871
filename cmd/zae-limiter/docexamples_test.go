package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docExamples are the commands of the blocks of docs/cli.md annotated
// <!-- tested by TestCLIDocExamples -->, in their order: the entity and
// stored-limit examples of "Data commands", which a reader pastes one
// after the other on the table `local up` created.
var docExamples = [][]string{
	{"entity", "create", "proj-1", "--display-name", "Project 1", "-m", "team=ml"},
	{"entity", "create", "key-1", "--parent", "proj-1", "--cascade"},
	{"entity", "show", "key-1", "-o", "json"},
	{"entity", "children", "proj-1"},
	{"entity", "list"},

	{"entity", "set-limits", "key-1", "-r", "gpt-4", "-l", "rpm:100", "-l", "tpm:10000/min:20000"},
	{"entity", "get-limits", "key-1", "-r", "gpt-4"},
	{"resource", "set-defaults", "gpt-4", "-l", "rpm:1000", "-l", "tph:50000/hour"},
	{"resource", "get-defaults", "gpt-4"},
	{"resource", "list"},
	{"system", "set-defaults", "-l", "rpm:100", "--on-unavailable", "allow"},
	{"system", "get-defaults"},
	{"entity", "list", "--with-custom-limits", "gpt-4", "--limit", "10"},
	{"entity", "list-resources"},
	{"entity", "delete-limits", "key-1", "-r", "gpt-4", "--yes"},
	{"entity", "limits-in-force", "key-1", "-r", "gpt-4"},
	{"resource", "delete-defaults", "gpt-4", "--yes"},
	{"system", "delete-defaults", "--yes"},
	{"entity", "delete", "key-1", "--yes"},
}

// TestCLIDocExamples runs the examples of docs/cli.md's data commands as
// written, in order, on one table: each succeeds, and what they print
// matches the text around them (the limits in force after delete-limits
// are the sample output under them).
func TestCLIDocExamples(t *testing.T) {
	doc, err := os.ReadFile(cliDoc)
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)<!-- tested by TestCLIDocExamples -->\n```sh\n(.*?)```").FindAllSubmatch(doc, -1)
	require.Len(t, blocks, 2, "docs/cli.md: the blocks tested by TestCLIDocExamples")
	var inDoc [][]string
	for _, b := range blocks {
		for _, line := range strings.Split(string(b[1]), "\n") {
			if words := splitCommand(line); len(words) > 0 {
				require.Equal(t, "zae-limiter", words[0], "docs/cli.md: %q", line)
				inDoc = append(inDoc, words[1:])
			}
		}
	}
	require.Equal(t, docExamples, inDoc, "docs/cli.md's examples and docExamples differ: change both")

	sample := regexp.MustCompile("(?s)<!-- output of TestCLIDocExamples -->\n```text\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, sample, "docs/cli.md: the output of the limits in force")

	e := newEnv(t)
	for _, args := range docExamples {
		out := e.ok(args...)
		switch strings.Join(args[:2], " ") {
		case "entity list":
			if len(args) == 2 {
				contains(t, out, "key-1", "proj-1  Project 1")
			} else {
				assert.Equal(t, "key-1\n", out)
			}
		case "entity get-limits":
			contains(t, out, "tpm", "20000")
		case "entity limits-in-force":
			assert.Equal(t, string(sample[1]), out, "docs/cli.md's sample output of entity limits-in-force")
			contains(t, out, "proj-1  rpm    1000      1000    60s     resource gpt-4 defaults")
		}
	}
}

// splitCommand splits a shell line into words: blanks separate them,
// double or single quotes group them, and a # after a blank starts a
// comment.
func splitCommand(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	prev := ' '
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == '#' && prev == ' ':
			if inWord {
				words = append(words, cur.String())
			}
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
		prev = r
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
