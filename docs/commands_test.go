package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandLine is one command line of a shell block, continuations joined
// and the comment removed, with the `# = COMMAND` line that may follow it.
type commandLine struct {
	cmd    string
	expect string // from a following "# = " line: what `make -n` must print
}

// commandLines returns the command lines of a shell block.
func commandLines(text string) []commandLine {
	var out []commandLine
	var cur strings.Builder
	for _, raw := range strings.Split(text, "\n") {
		l := strings.TrimSpace(raw)
		if rest, ok := strings.CutPrefix(l, "# = "); ok && cur.Len() == 0 && len(out) > 0 {
			out[len(out)-1].expect = strings.TrimSpace(rest)
			continue
		}
		if cont, ok := strings.CutSuffix(l, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(l)
		line := strings.TrimSpace(stripComment(cur.String()))
		cur.Reset()
		if line != "" {
			out = append(out, commandLine{cmd: line})
		}
	}
	return out
}

// stripComment removes a shell comment: a # at the start or after a blank,
// outside quotes.
func stripComment(l string) string {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

// shellFields splits a command into words, honouring quotes (which it
// removes).
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// simpleCommands splits a command line into its simple commands: the parts
// between &&, ||, ; and " | ", without grouping parentheses or a trailing &,
// and the commands inside "$(...)".
func simpleCommands(line string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\$\(([^)]*)\)`).FindAllStringSubmatch(line, -1) {
		out = append(out, simpleCommands(m[1])...)
	}
	line = regexp.MustCompile(`"?\$\([^)]*\)"?`).ReplaceAllString(line, "")
	// A pipe needs blanks around it: "a|b" is a placeholder's alternatives.
	for _, part := range regexp.MustCompile(`&&|\|\||;|\s\|\s`).Split(line, -1) {
		part = strings.TrimSpace(part)
		part = strings.TrimSpace(strings.TrimSuffix(part, "&"))
		part = strings.TrimSpace(strings.Trim(part, "()"))
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// cliTree is the zae-limiter command tree: groups with their subcommands,
// and leaf commands (with no subcommands).
type cliTree struct {
	groups map[string]map[string]bool
	leaves map[string]bool
}

// parseCLITree reads the command tree from the command reference of
// docs/cli.md (generated from the tree; TestCLIReference in
// cmd/zae-limiter checks it is current): a command with subcommands is a
// group, any other a leaf.
func parseCLITree(t *testing.T) cliTree {
	t.Helper()
	tree := cliTree{groups: map[string]map[string]bool{}, leaves: map[string]bool{}}
	headingRe := regexp.MustCompile(`(?m)^### zae-limiter ([a-z-]+)(?: ([a-z-]+))?$`)
	var paths [][]string
	for _, m := range headingRe.FindAllStringSubmatch(readRoot(t, "docs/cli.md"), -1) {
		paths = append(paths, m[1:])
		if m[2] != "" {
			if tree.groups[m[1]] == nil {
				tree.groups[m[1]] = map[string]bool{}
			}
			tree.groups[m[1]][m[2]] = true
		}
	}
	for _, p := range paths {
		if p[1] == "" && tree.groups[p[0]] == nil {
			tree.leaves[p[0]] = true
		}
	}
	require.GreaterOrEqual(t, len(tree.groups["entity"]), 5, "command tree of docs/cli.md's command reference: %+v: parse failed", tree)
	require.True(t, tree.leaves["deploy"], "command tree of docs/cli.md's command reference: %+v: parse failed", tree)
	require.True(t, tree.groups["local"]["up"], "command tree of docs/cli.md's command reference: %+v: parse failed", tree)
	return tree
}

// TestTestedBlocks checks the blocks annotated <!-- tested by ... -->: the
// tests and files they name exist, and every command of the block is
// mentioned in their sources (see the package documentation).
func TestTestedBlocks(t *testing.T) {
	idx := indexFuncs(t)
	tree := parseCLITree(t)
	targets, vars := makeTargets(t)
	makeTool := ""
	n := 0
	for _, b := range allBlocks(t) {
		list, ok := strings.CutPrefix(b.annotation, "tested by ")
		if !ok {
			continue
		}
		n++
		var src strings.Builder
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if strings.ContainsAny(name, "/.") || name == "Makefile" {
				data, err := os.ReadFile(filepath.Join(root, name))
				require.NoError(t, err, "%s: tested by %s", b, name)
				src.Write(data)
				continue
			}
			files, ok := idx[name]
			if !assert.True(t, ok, "%s: tested by %s: no such test, benchmark or example", b, name) {
				continue
			}
			for _, f := range files {
				src.WriteString(readRoot(t, f))
			}
		}
		c := &commandCheck{t: t, b: b, src: src.String(), tree: tree, targets: targets, vars: vars}
		for _, line := range commandLines(b.text) {
			if line.expect != "" {
				if makeTool == "" {
					makeTool = needTool(t, "make")
				}
				c.dryRun(makeTool, line)
				continue
			}
			for _, cmd := range simpleCommands(line.cmd) {
				c.check(cmd)
			}
		}
	}
	assert.GreaterOrEqual(t, n, 15, "%d blocks tested by a named test, want the docs' command blocks", n)
}

// commandCheck checks the commands of one block against the sources of
// the tests that run them.
type commandCheck struct {
	t             *testing.T
	b             block
	src           string
	tree          cliTree
	targets, vars map[string]bool
}

func (c *commandCheck) errorf(format string, args ...any) {
	c.t.Helper()
	assert.Fail(c.t, "command block", append([]any{"%s: " + format, c.b}, args...)...)
}

// mentionsLiteral reports whether the sources contain the Go string literal s.
func (c *commandCheck) mentionsLiteral(s string) bool {
	return strings.Contains(c.src, `"`+s+`"`)
}

// check checks one simple command.
func (c *commandCheck) check(cmd string) {
	c.t.Helper()
	words := shellFields(cmd)
	// Leading assignments: environment variables of the command, or shell
	// variables when nothing follows.
	i := 0
	for ; i < len(words) && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[i]); i++ {
	}
	if i == len(words) {
		return // a shell variable
	}
	for _, w := range words[:i] {
		c.needEnv(w)
	}
	words = words[i:]
	prog := words[0]
	switch filepath.Base(prog) {
	case "cd", "eval":
	case "export":
		for _, w := range words[1:] {
			c.needEnv(w)
		}
	case "zae-limiter":
		c.checkCLI(words[1:])
	case "make":
		c.checkMake(words[1:])
	case "go":
		c.checkGo(words[1:])
	default:
		if !strings.Contains(c.src, filepath.Base(prog)) {
			c.errorf("%q: the tests named do not mention %s", cmd, filepath.Base(prog))
		}
	}
}

// needEnv checks that the variable of NAME=value (or NAME) is mentioned.
func (c *commandCheck) needEnv(assignment string) {
	c.t.Helper()
	name, _, _ := strings.Cut(assignment, "=")
	if !strings.Contains(c.src, name) {
		c.errorf("environment variable %s: the tests named do not mention it", name)
	}
}

// checkCLI checks a zae-limiter command: its command words as adjacent
// string literals, its long flags as literals.
func (c *commandCheck) checkCLI(args []string) {
	c.t.Helper()
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.HasPrefix(a, "[") || strings.HasPrefix(a, "$") {
			continue
		}
		if len(words) == 0 {
			if _, ok := c.tree.groups[a]; ok || c.tree.leaves[a] {
				words = append(words, a)
			}
			continue
		}
		if subs := c.tree.groups[words[0]]; subs != nil && subs[a] && len(words) == 1 {
			words = append(words, a)
		}
	}
	line := "zae-limiter " + strings.Join(args, " ")
	switch {
	case len(words) == 0:
		if !slices.Contains(args, "--help") && !slices.Contains(args, "-h") {
			c.errorf("%q: no command", line)
		}
	case len(words) == 1 && c.tree.groups[words[0]] != nil:
		c.errorf("%q: %s without a subcommand", line, words[0])
	case len(words) == 2:
		if !regexp.MustCompile(`"` + regexp.QuoteMeta(words[0]) + `",\s*"` + regexp.QuoteMeta(words[1]) + `"`).MatchString(c.src) {
			c.errorf("%q: the tests named never run %q, %q", line, words[0], words[1])
		}
	default:
		if !c.mentionsLiteral(words[0]) {
			c.errorf("%q: the tests named never run %q", line, words[0])
		}
	}
	for _, a := range args {
		a = strings.Trim(a, "[]")
		if !strings.HasPrefix(a, "--") {
			continue
		}
		flag, _, _ := strings.Cut(a, "=")
		if !c.mentionsLiteral(flag) {
			c.errorf("%q: the tests named never pass %s", line, flag)
		}
	}
}

// checkMake checks a make command: targets and variables exist, and the
// targets are mentioned.
func (c *commandCheck) checkMake(args []string) {
	c.t.Helper()
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-"):
		case strings.Contains(a, "="):
			name, _, _ := strings.Cut(a, "=")
			if !c.vars[name] {
				c.errorf("make %s: the Makefile has no variable %s", strings.Join(args, " "), name)
			}
		default:
			if !c.targets[a] {
				c.errorf("make %s: the Makefile has no target %s", strings.Join(args, " "), a)
			}
			if !c.mentionsLiteral(a) && !strings.Contains(c.src, "make "+a) {
				c.errorf("make %s: the tests named never run target %s", strings.Join(args, " "), a)
			}
		}
	}
}

// checkGo checks a go command.
func (c *commandCheck) checkGo(args []string) {
	c.t.Helper()
	if len(args) == 0 {
		c.errorf("go without a command")
		return
	}
	switch args[0] {
	case "get":
		if len(args) != 2 || strings.TrimSuffix(args[1], "@latest") != modulePath {
			c.errorf("go %s: want go get %s", strings.Join(args, " "), modulePath)
		}
	case "run":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "./") {
				if !strings.Contains(c.src, a) {
					c.errorf("go run %s: the tests named never run %s", strings.Join(args[1:], " "), a)
				}
				return
			}
		}
		c.errorf("go run %s: no ./package", strings.Join(args[1:], " "))
	case "test":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "./") {
				dir := filepath.Join(root, strings.TrimSuffix(a, "/..."))
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					c.errorf("go test %s: no package %s", strings.Join(args[1:], " "), a)
				}
			}
		}
	case "mod", "work":
		// go mod edit|tidy, go work init|use: the tests named run them,
		// their words as adjacent string literals.
		if len(args) < 2 || !regexp.MustCompile(`"`+args[0]+`",\s*"`+regexp.QuoteMeta(args[1])+`"`).MatchString(c.src) {
			c.errorf("go %s: the tests named never run it", strings.Join(args, " "))
		}
	default:
		c.errorf("go %s: unknown go command in a tested block", args[0])
	}
}

// dryRun checks a make line followed by "# = COMMAND": `make -n` prints a
// line ending with COMMAND.
func (c *commandCheck) dryRun(makeTool string, line commandLine) {
	c.t.Helper()
	words := shellFields(line.cmd)
	if len(words) < 2 || words[0] != "make" {
		c.errorf("%q followed by # = %s: only make lines have a dry run", line.cmd, line.expect)
		return
	}
	cmd := exec.Command(makeTool, append([]string{"-n", "--no-print-directory"}, words[1:]...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.errorf("make -n %s: %v\n%s", strings.Join(words[1:], " "), err, out)
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(strings.TrimSpace(l), line.expect) {
			return
		}
	}
	c.errorf("make -n %s prints no line ending with %q:\n%s", strings.Join(words[1:], " "), line.expect, out)
}
