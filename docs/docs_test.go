// Package docs holds the tests of the repository's documentation, README.md
// and docs/*.md: every code block in them is compiled, run or tied to the
// test that runs it, and every make target, test name, Go identifier and
// relative link they mention exists.
//
// # Conventions for code blocks
//
// Each fenced code block carries an HTML comment on the line right before
// its fence that says how it is tested. A block without one fails the test.
//
// Go blocks (```go) are type-checked against the module's packages:
//
//   - <!-- go: program --> (or no comment, when the block starts with a
//     package clause): a complete file, checked as it is. When the next block
//     is preceded by <!-- output of the program above -->, the program is
//     run with `go run` and its standard output must equal that block.
//   - <!-- go: file -->: top-level declarations (functions, types, a
//     TestMain...). The package clause and the imports are added.
//   - <!-- go: func(PARAMS) RESULTS -->: statements, the body of a function
//     with that signature; PARAMS name what the fragment takes from its
//     surroundings (ctx context.Context, rl *limiter.RateLimiter, ...).
//
// In the last two, imports are added for the package names the fragment
// uses (limiter, memorystore, redisstore, redis (go-redis), storetest, aggregator, infra, otelmetrics,
// ddblocal, the standard library's, the AWS SDK's config, dynamodb, s3, aws,
// aws-lambda-go's lambda, otel: see knownImports), and every fragment may
// call two stand-ins declared by the test: callLLM(ctx) (llmResponse{
// TotalTokens int64 }, error), the program's call to an LLM, and chatHandler,
// an http.Handler. A fragment may declare a variable it does not use
// afterwards (it is an illustration); every other type error fails.
//
// Other blocks (```sh, ```yaml, ```text, ...) carry one of:
//
//   - <!-- tested by NAME, NAME... -->: each NAME is a test, benchmark or
//     example function of the module (any package), or a file of the
//     repository (a path, such as .ci/run or Makefile). The block's command
//     lines are checked against the source files of those functions (and
//     the named files): a `zae-limiter` command's command and subcommand
//     words must appear there as adjacent Go string literals ("entity",
//     "create") and each of its long flags as a literal ("--parent"); a
//     `make` line's targets must be Makefile targets and appear there (as
//     "target" or `make target`), and its VAR=value arguments must be
//     Makefile variables; `go run PATH` needs PATH there, `go get MODULE`
//     the module's own path, `go mod VERB` and `go work VERB` the literals
//     "mod", "VERB" (or "work", "VERB") adjacent there; an environment
//     variable set or exported needs its name there; any other command needs its program's name there. A
//     make line followed by a comment line `# = COMMAND` is instead checked
//     by `make -n`: one of the lines it prints must end with COMMAND.
//   - <!-- run by the docs test -->: the block's lines are `go test`
//     commands, run here (benchmarks for one iteration).
//   - <!-- file: PATH -->: the block equals the file PATH of the
//     repository, and some test of the module names that file.
//   - <!-- output of TestX -->: sample output of test TestX, which must
//     exist, and at least one line of the block must appear verbatim in the
//     source of TestX's file (the test checks that output).
//
// Besides the blocks: every `make X` in a code span or block names a
// Makefile target; every test, benchmark, fuzz or example function named in
// a code span exists (TestConformance/X: X is a scenario of storetest);
// every exported identifier written as pkg.Name, Type.Member or rl.Method in
// a code span exists; every relative link resolves, anchors included; and
// the README's package map has a line for every package of the module.
package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository root, relative to this package.
const root = ".."

// modulePath is the module's import path.
const modulePath = "github.com/zaelimiter/limiter"

// markdownFiles returns README.md and docs/*.md, relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	m, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range m {
		files = append(files, filepath.Join("docs", filepath.Base(f)))
	}
	require.GreaterOrEqual(t, len(files), 5, "markdown files %v: too few, the layout changed?", files)
	return files
}

// readRoot reads a file relative to root.
func readRoot(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return string(b)
}

// block is one fenced code block.
type block struct {
	file       string // relative to root
	line       int    // of the opening fence, 1-based
	lang       string
	annotation string // the HTML comment before the fence, trimmed; "" if none
	text       string // the content, the fence's indentation removed
}

func (b block) String() string { return b.file + ":" + strconv.Itoa(b.line) }

var (
	fenceRe      = regexp.MustCompile("^( *)(```+|~~~+)\\s*([A-Za-z0-9_+-]*)\\s*$")
	annotationRe = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
)

// parseBlocks returns the fenced code blocks of a markdown file.
func parseBlocks(t *testing.T, file, text string) []block {
	t.Helper()
	lines := strings.Split(text, "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, lang := len(m[1]), m[2], m[3]
		b := block{file: file, line: i + 1, lang: lang}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				continue
			}
			if a := annotationRe.FindStringSubmatch(lines[j]); a != nil {
				b.annotation = a[1]
			}
			break
		}
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == fence {
				break
			}
			l := lines[j]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		require.NotEqual(t, len(lines), j, "%s:%d: unclosed code block", file, i+1)
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// allBlocks returns the code blocks of every markdown file.
func allBlocks(t *testing.T) []block {
	t.Helper()
	var out []block
	for _, f := range markdownFiles(t) {
		out = append(out, parseBlocks(t, f, readRoot(t, f))...)
	}
	return out
}

// codeSpans returns the inline code spans of a markdown text, outside its
// code blocks.
func codeSpans(text string) []string {
	var spans []string
	inBlock := false
	var para strings.Builder
	flush := func() {
		s := para.String()
		para.Reset()
		for {
			i := strings.Index(s, "`")
			if i < 0 {
				return
			}
			n := 1
			for i+n < len(s) && s[i+n] == '`' {
				n++
			}
			delim := s[i : i+n]
			rest := s[i+n:]
			j := strings.Index(rest, delim)
			if j < 0 {
				return
			}
			spans = append(spans, strings.TrimSpace(strings.ReplaceAll(rest[:j], "\n", " ")))
			s = rest[j+n:]
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if fenceRe.MatchString(l) {
			flush()
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		para.WriteString(l)
		para.WriteString("\n")
	}
	flush()
	return spans
}

// funcIndex maps every test, benchmark, fuzz and example function of the
// module to the files (relative to root) that declare one of that name.
type funcIndex map[string][]string

var funcDeclRe = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)

func indexFuncs(t *testing.T) funcIndex {
	t.Helper()
	idx := funcIndex{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range funcDeclRe.FindAllSubmatch(b, -1) {
			idx[string(m[1])] = append(idx[string(m[1])], rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(idx), 100, "only %d test functions found", len(idx))
	return idx
}

// testFilesMention reports whether some _test.go file of the module
// contains s.
func testFilesMention(t *testing.T, s string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") && filepath.Base(path) != "docs_test.go" {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(s)) {
				found = true
			}
		}
		return nil
	})
	return found
}

// makeTargets returns the targets of the Makefile and its variables.
func makeTargets(t *testing.T) (targets, vars map[string]bool) {
	t.Helper()
	mf := readRoot(t, "Makefile")
	targets, vars = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-zA-Z0-9_-]+):`).FindAllStringSubmatch(mf, -1) {
		targets[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)\s*[:?+]?=`).FindAllStringSubmatch(mf, -1) {
		vars[m[1]] = true
	}
	require.True(t, targets["test"], "Makefile targets %v, variables %v: parse failed", targets, vars)
	require.True(t, targets["demo"], "Makefile targets %v, variables %v: parse failed", targets, vars)
	require.True(t, vars["BENCHFLAGS"], "Makefile targets %v, variables %v: parse failed", targets, vars)
	return targets, vars
}

// TestMakeTargetsExist: every `make X` in a code span or a code block of
// the docs names a target of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	targets, _ := makeTargets(t)
	re := regexp.MustCompile(`\bmake((?:\s+[a-z][a-z0-9-]*)+)`)
	for _, f := range markdownFiles(t) {
		text := readRoot(t, f)
		var code []string
		code = append(code, codeSpans(text)...)
		for _, b := range parseBlocks(t, f, text) {
			if b.lang != "go" {
				code = append(code, b.text)
			}
		}
		n := 0
		for _, c := range code {
			for _, m := range re.FindAllStringSubmatch(c, -1) {
				for _, target := range strings.Fields(m[1]) {
					n++
					assert.True(t, targets[target], "%s: `make %s`: no target %q in the Makefile", f, strings.TrimSpace(m[1]), target)
				}
			}
		}
		t.Logf("%s: %d make targets", f, n)
	}
}

// TestTestNamesExist: every test, benchmark, fuzz or example function named
// in a code span of the docs exists; TestConformance/X names a scenario of
// storetest.
func TestTestNamesExist(t *testing.T) {
	idx := indexFuncs(t)
	storetestSrc := ""
	files, err := filepath.Glob(filepath.Join(root, "storetest", "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			storetestSrc += readRoot(t, filepath.Join("storetest", filepath.Base(f)))
		}
	}
	re := regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz|Example)[A-Z_]\w*)(/\w+)?`)
	for _, f := range markdownFiles(t) {
		for _, span := range codeSpans(readRoot(t, f)) {
			for _, m := range re.FindAllStringSubmatch(span, -1) {
				if _, ok := idx[m[1]]; !assert.True(t, ok, "%s: `%s`: no function %s in the module", f, span, m[1]) {
					continue
				}
				if m[1] == "TestConformance" && m[2] != "" {
					assert.Contains(t, storetestSrc, `"`+m[2][1:]+`"`, "%s: `%s`: storetest has no scenario %q", f, span, m[2][1:])
				}
			}
		}
	}
	// The compatibility page lists the tests that show each behaviour: it
	// must name some.
	assert.GreaterOrEqual(t, len(re.FindAllString(strings.Join(codeSpans(readRoot(t, "docs/compatibility.md")), " "), -1)), 40, "docs/compatibility.md names")
}

// TestLinks: every relative link of the docs resolves to a file or
// directory of the repository, and every anchor to a heading.
func TestLinks(t *testing.T) {
	linkRe := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		a := headingAnchors(readRoot(t, rel))
		anchors[rel] = a
		return a
	}
	for _, f := range markdownFiles(t) {
		text := readRoot(t, f)
		n := 0
		for _, m := range linkRe.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			path, anchor, _ := strings.Cut(target, "#")
			rel := f
			if path != "" {
				rel = filepath.Clean(filepath.Join(filepath.Dir(f), path))
				if _, err := os.Stat(filepath.Join(root, rel)); !assert.NoError(t, err, "%s: link %s", f, target) {
					continue
				}
			}
			if anchor != "" {
				if assert.True(t, strings.HasSuffix(rel, ".md"), "%s: link %s: an anchor into a file that is not markdown", f, target) {
					assert.True(t, anchorsOf(rel)[anchor], "%s: link %s: no heading with anchor #%s in %s", f, target, anchor, rel)
				}
			}
		}
		t.Logf("%s: %d relative links", f, n)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown text.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inBlock := false
	for _, l := range strings.Split(text, "\n") {
		if fenceRe.MatchString(l) {
			inBlock = !inBlock
			continue
		}
		if inBlock || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && isLetter(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// isLetter reports whether r is a letter outside ASCII (GitHub keeps them
// in anchors); symbols such as arrows are dropped.
func isLetter(r rune) bool {
	return r >= 0xC0 && r <= 0x24F
}

// TestEveryBlockAnnotated: every code block says how it is tested, with an
// annotation this test knows.
func TestEveryBlockAnnotated(t *testing.T) {
	n := 0
	for _, b := range allBlocks(t) {
		n++
		a := b.annotation
		switch {
		case b.lang == "go":
			assert.True(t, strings.HasPrefix(a, "go:") || startsWithPackage(b.text),
				"%s: Go block without <!-- go: program|file|func(...) --> and no package clause", b)
		case strings.HasPrefix(a, "tested by "), a == "run by the docs test", strings.HasPrefix(a, "file: "), strings.HasPrefix(a, "output of "):
		case a == "":
			assert.Fail(t, "a block without an annotation saying how it is tested", "%s: ```%s", b, b.lang)
		default:
			assert.Fail(t, "unknown annotation", "%s: <!-- %s -->", b, a)
		}
	}
	assert.GreaterOrEqual(t, n, 30, "%d code blocks in the docs, want the docs' blocks", n)
}

// startsWithPackage reports whether Go source starts with a package clause
// (after comments).
func startsWithPackage(src string) bool {
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return strings.HasPrefix(l, "package ")
	}
	return false
}

// TestFileBlocks: a block annotated <!-- file: PATH --> equals that file,
// and a test of the module names the file.
func TestFileBlocks(t *testing.T) {
	for _, b := range allBlocks(t) {
		path, ok := strings.CutPrefix(b.annotation, "file: ")
		if !ok {
			continue
		}
		got, err := os.ReadFile(filepath.Join(root, path))
		if !assert.NoError(t, err, "%s", b) {
			continue
		}
		assert.Equal(t, b.text, string(got), "%s: the block differs from %s; copy one to the other", b, path)
		assert.True(t, testFilesMention(t, filepath.ToSlash(filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path)))), "%s: no test names %s", b, path)
	}
}

// TestOutputBlocks: a block annotated <!-- output of TestX --> names an
// existing test whose file contains one of the block's lines.
func TestOutputBlocks(t *testing.T) {
	idx := indexFuncs(t)
	for _, b := range allBlocks(t) {
		rest, ok := strings.CutPrefix(b.annotation, "output of ")
		if !ok || rest == "the program above" {
			continue
		}
		name := strings.Fields(rest)[0]
		files, ok := idx[name]
		if !assert.True(t, ok, "%s: output of %s: no such test", b, name) {
			continue
		}
		var src strings.Builder
		for _, f := range files {
			src.WriteString(readRoot(t, f))
		}
		found := false
		for _, l := range strings.Split(b.text, "\n") {
			if l = strings.TrimSpace(l); len(l) >= 12 && strings.Contains(src.String(), l) {
				found = true
				break
			}
		}
		assert.True(t, found, "%s: output of %s: no line of the block appears in %v", b, name, files)
	}
}

// TestRunByDocsTest runs the blocks annotated <!-- run by the docs test -->:
// `go test` commands, benchmarks for one iteration.
func TestRunByDocsTest(t *testing.T) {
	goTool := needTool(t, "go")
	for _, b := range allBlocks(t) {
		if b.annotation != "run by the docs test" {
			continue
		}
		for _, line := range commandLines(b.text) {
			args := shellFields(line.cmd)
			if !assert.GreaterOrEqual(t, len(args), 2, "%s: %q: only `go test` commands can be run by the docs test", b, line.cmd) ||
				!assert.Equal(t, []string{"go", "test"}, args[:2], "%s: %q: only `go test` commands can be run by the docs test", b, line.cmd) {
				continue
			}
			if !assert.False(t, slices.ContainsFunc(args, func(a string) bool { return a == "./docs" || strings.HasSuffix(a, "...") }),
				"%s: %q: the docs test cannot run itself", b, line.cmd) {
				continue
			}
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-bench") }) {
				args = append(args[:2], append([]string{"-benchtime=1x"}, args[2:]...)...)
			}
			cmd := exec.Command(goTool, args[1:]...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if assert.NoError(t, err, "%s: %s\n%s", b, strings.Join(args, " "), out) {
				t.Logf("%s: %s: ok", b, strings.Join(args, " "))
			}
		}
	}
}

// needTool returns the path of a program, or skips t without it (fails it
// in CI).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		require.NotEqual(t, "true", os.Getenv("CI"), "%s is not on PATH", name)
		t.Skipf("%s is not on PATH", name)
	}
	return p
}

// TestPackageMap: the README's package map has a line for every package of
// the module.
func TestPackageMap(t *testing.T) {
	cmd := exec.Command(needTool(t, "go"), "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./...")
	readme := readRoot(t, "README.md")
	i := strings.Index(readme, "\n## Packages\n")
	require.GreaterOrEqual(t, i, 0, "README.md has no ## Packages section")
	packageMap := readme[i:]
	if j := strings.Index(packageMap[1:], "\n## "); j >= 0 {
		packageMap = packageMap[:j+1]
	}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, modulePath), "/")
		if rel == "" {
			rel = "limiter"
		}
		assert.True(t, strings.Contains(packageMap, "| [`"+rel+"`]") || strings.Contains(packageMap, "| `"+rel+"` |"),
			"README.md's package map has no line for %s", rel)
	}
}
