package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// knownImports are the packages a fragment may use by name without
// importing them.
var knownImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "log": "log", "os": "os",
	"time": "time", "slog": "log/slog", "http": "net/http", "testing": "testing", "strings": "strings",
	"limiter":     modulePath,
	"memorystore": modulePath + "/memorystore",
	"redisstore":  modulePath + "/redisstore",
	"redis":       "github.com/redis/go-redis/v9",
	"storetest":   modulePath + "/storetest",
	"store":       modulePath + "/store",
	"httplimit":   modulePath + "/httplimit",
	"llmhttp":     modulePath + "/llmhttp",
	"aggregator":  modulePath + "/aggregator",
	"infra":       modulePath + "/infra",
	"otelmetrics": modulePath + "/otelmetrics",
	"ddblocal":    modulePath + "/internal/ddblocal",
	"aws":         "github.com/aws/aws-sdk-go-v2/aws",
	"config":      "github.com/aws/aws-sdk-go-v2/config",
	"dynamodb":    "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"s3":          "github.com/aws/aws-sdk-go-v2/service/s3",
	"lambda":      "github.com/aws/aws-lambda-go/lambda",
	"otel":        "go.opentelemetry.io/otel",
}

// prelude declares the stand-ins every fragment may use.
const prelude = `package docblock

import (
	"context"
	"net/http"
)

// llmResponse is what callLLM returns.
type llmResponse struct{ TotalTokens int64 }

// callLLM stands for the program's call to an LLM API.
func callLLM(ctx context.Context) (llmResponse, error) { return llmResponse{TotalTokens: 420}, ctx.Err() }

// chatHandler stands for the program's HTTP handler.
var chatHandler http.Handler = http.NotFoundHandler()

var _, _ = callLLM, chatHandler
`

// goBlock is a Go code block made into a package.
type goBlock struct {
	block
	kind  string   // "program", "file" or "func"
	files []string // sources of the package; the first is the block's
	// offset is the number of lines added before the block's first line in
	// files[0], to map error positions back to the markdown file.
	offset int
}

// makeGoBlock builds the package of a Go block.
func makeGoBlock(b block) (goBlock, error) {
	a := strings.TrimSpace(strings.TrimPrefix(b.annotation, "go:"))
	switch {
	case a == "program" || (b.annotation == "" && startsWithPackage(b.text)):
		return goBlock{block: b, kind: "program", files: []string{b.text}}, nil
	case a == "file":
		return wrapFragment(b, "file", b.text, 0)
	case strings.HasPrefix(a, "func("):
		body := "func _" + strings.TrimPrefix(a, "func") + " {\n" + b.text + "}\n"
		return wrapFragment(b, "func", body, 1)
	}
	return goBlock{}, fmt.Errorf("annotation <!-- %s -->: want go: program, go: file or go: func(...)", b.annotation)
}

// wrapFragment adds the package clause and the imports the fragment needs.
func wrapFragment(b block, kind, body string, pre int) (goBlock, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fragment.go", "package docblock\n"+body, parser.AllErrors)
	if err != nil {
		return goBlock{}, fmt.Errorf("does not parse as %s: %w", kind, err)
	}
	var paths []string
	for _, id := range f.Unresolved {
		if p, ok := knownImports[id.Name]; ok && !slices.Contains(paths, p) {
			if isPackageUse(f, id) {
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	var src strings.Builder
	src.WriteString("package docblock\n\nimport (\n")
	for _, p := range paths {
		fmt.Fprintf(&src, "\t%q\n", p)
	}
	src.WriteString(")\n")
	offset := 4 + len(paths) + pre
	src.WriteString(body)
	return goBlock{block: b, kind: kind, files: []string{src.String(), prelude}, offset: offset}, nil
}

// isPackageUse reports whether id is used as the X of a selector somewhere
// in f (pkg.Name), as package names are.
func isPackageUse(f *ast.File, id *ast.Ident) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == id.Name {
				found = true
			}
		}
		return !found
	})
	return found
}

// exportData runs `go list -export -deps` once for the import paths and
// returns the export data file of every package.
type exportData struct {
	files map[string]string // import path → export data file
}

func loadExportData(t *testing.T, paths []string) *exportData {
	t.Helper()
	goTool := needTool(t, "go")
	cmd := exec.Command(goTool, append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Error", "--"}, paths...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -export %v\n%s", paths, stderr.String())
	ed := &exportData{files: map[string]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Export string
			Error              *struct{ Err string }
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Nil(t, p.Error, "go list: %s", p.ImportPath)
		ed.files[p.ImportPath] = p.Export
	}
	return ed
}

// importer returns a types.Importer reading the export data.
func (ed *exportData) importer(fset *token.FileSet) types.Importer {
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := ed.files[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
}

// goBlocks returns the Go blocks of the docs as packages, failing t for
// those that cannot be built.
func goBlocks(t *testing.T) []goBlock {
	t.Helper()
	var out []goBlock
	for _, b := range allBlocks(t) {
		if b.lang != "go" {
			continue
		}
		gb, err := makeGoBlock(b)
		if !assert.NoError(t, err, "%s", b) {
			continue
		}
		out = append(out, gb)
	}
	require.GreaterOrEqual(t, len(out), 15, "%d Go blocks in the docs, want the docs' examples", len(out))
	return out
}

// importsOf returns the import paths of Go sources.
func importsOf(t *testing.T, srcs ...string) []string {
	t.Helper()
	var paths []string
	for _, src := range srcs {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.ImportsOnly)
		if err != nil {
			continue // reported by the type check
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

var (
	exportOnce sync.Once
	exportMemo *exportData
)

// sharedExportData loads the export data of every package the docs' Go
// blocks import, and of the packages whose identifiers the docs name.
func sharedExportData(t *testing.T, blocks []goBlock) *exportData {
	t.Helper()
	exportOnce.Do(func() {
		var srcs []string
		for _, b := range blocks {
			srcs = append(srcs, b.files...)
		}
		paths := importsOf(t, srcs...)
		for _, p := range knownImports {
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		exportMemo = loadExportData(t, paths)
	})
	require.NotNil(t, exportMemo, "export data not loaded")
	return exportMemo
}

var unusedRe = regexp.MustCompile(`declared and not used`)

// TestGoBlocks type-checks every Go block of the docs, and runs the
// programs whose output the docs show.
func TestGoBlocks(t *testing.T) {
	blocks := goBlocks(t)
	ed := sharedExportData(t, blocks)
	for _, gb := range blocks {
		fset := token.NewFileSet()
		var files []*ast.File
		for i, src := range gb.files {
			f, err := parser.ParseFile(fset, fmt.Sprintf("f%d.go", i), src, parser.AllErrors)
			if err != nil {
				assert.Fail(t, "the block does not parse", "%s: %v", gb.block, gb.mapErr(err.Error()))
				files = nil
				break
			}
			files = append(files, f)
		}
		if files == nil {
			continue
		}
		conf := types.Config{Importer: ed.importer(fset), Error: func(err error) {
			var te types.Error
			if errors.As(err, &te) && te.Soft && gb.kind != "program" && unusedRe.MatchString(te.Msg) {
				return // an illustration may declare what it does not use
			}
			assert.Fail(t, "the block does not type-check", "%s (%s): %s", gb.block, gb.kind, gb.mapErr(err.Error()))
		}}
		_, _ = conf.Check("docblock", fset, files, nil)
	}
	runPrograms(t)
}

// mapErr rewrites "f0.go:LINE:COL" of an error into the markdown position.
func (gb goBlock) mapErr(msg string) string {
	return regexp.MustCompile(`f0\.go:(\d+):(\d+)`).ReplaceAllStringFunc(msg, func(s string) string {
		var l, c int
		fmt.Sscanf(s, "f0.go:%d:%d", &l, &c)
		return fmt.Sprintf("%s:%d:%d", gb.file, gb.line+l-gb.offset, c)
	})
}

// runPrograms runs each program block followed by an output block and
// compares what it prints.
func runPrograms(t *testing.T) {
	t.Helper()
	var runs int
	for _, f := range markdownFiles(t) {
		blocks := parseBlocks(t, f, readRoot(t, f))
		for i, b := range blocks {
			if b.annotation != "output of the program above" {
				continue
			}
			const noProgram = "%s: output of the program above, but the block before is no program"
			if !assert.Positive(t, i, noProgram, b) || !assert.Equal(t, "go", blocks[i-1].lang, noProgram, b) ||
				!assert.True(t, startsWithPackage(blocks[i-1].text), noProgram, b) {
				continue
			}
			runs++
			dir := t.TempDir()
			main := filepath.Join(dir, "main.go")
			require.NoError(t, os.WriteFile(main, []byte(blocks[i-1].text), 0o600))
			cmd := exec.Command(needTool(t, "go"), "run", main)
			cmd.Dir = root // the module's go.mod resolves the imports
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if !assert.NoError(t, err, "%s: go run\n%s", blocks[i-1], stderr.String()) {
				continue
			}
			assert.Equal(t, b.text, string(out), "%s: the program prints\n%s\nthe docs show\n%s", b, out, b.text)
		}
	}
	assert.NotZero(t, runs, "no program of the docs is run: the README's quickstart should be")
}

// TestIdentifiersExist: every exported identifier a code span of the docs
// writes as pkg.Name (pkg one of knownImports' module packages), as
// Type.Member (Type an exported type of those packages) or as rl.Method,
// admin.Method (rl.Admin()'s) or lease.Method exists.
func TestIdentifiersExist(t *testing.T) {
	ed := sharedExportData(t, goBlocks(t))
	fset := token.NewFileSet()
	imp := ed.importer(fset)
	pkgs := map[string]*types.Package{}
	for name, path := range knownImports {
		if !strings.HasPrefix(path, modulePath) {
			continue
		}
		p, err := imp.Import(path)
		require.NoError(t, err, "import %s", path)
		pkgs[name] = p
	}
	// types names the exported types of the module's packages.
	typesByName := map[string][]types.Type{}
	for _, p := range pkgs {
		for _, n := range p.Scope().Names() {
			if tn, ok := p.Scope().Lookup(n).(*types.TypeName); ok && tn.Exported() {
				typesByName[n] = append(typesByName[n], tn.Type())
			}
		}
	}
	hasMember := func(typs []types.Type, member string) bool {
		for _, typ := range typs {
			for _, ty := range []types.Type{typ, types.NewPointer(typ)} {
				if obj, _, _ := types.LookupFieldOrMethod(ty, true, nil, member); obj != nil {
					return true
				}
			}
		}
		return false
	}
	rateLimiter := pkgs["limiter"].Scope().Lookup("RateLimiter").Type()
	lease := pkgs["limiter"].Scope().Lookup("Lease").Type()
	admin := pkgs["limiter"].Scope().Lookup("Admin").Type()
	qualRe := regexp.MustCompile(`\b(limiter|store|httplimit|memorystore|storetest|aggregator|infra|otelmetrics|rl|admin|lease)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	typeRe := regexp.MustCompile(`(?:^|[^\w.])([A-Z]\w*)\.([A-Z]\w*)\b`)
	checked := 0
	for _, f := range markdownFiles(t) {
		for _, span := range codeSpans(readRoot(t, f)) {
			for _, m := range qualRe.FindAllStringSubmatch(span, -1) {
				checked++
				switch m[1] {
				case "rl", "admin", "lease":
					typ := map[string]types.Type{"rl": rateLimiter, "admin": admin, "lease": lease}[m[1]]
					assert.True(t, hasMember([]types.Type{typ}, m[2]), "%s: `%s`: %s has no %s", f, span, typ, m[2])
					continue
				}
				obj := pkgs[m[1]].Scope().Lookup(m[2])
				if !assert.NotNil(t, obj, "%s: `%s`: package %s has no %s", f, span, m[1], m[2]) {
					continue
				}
				if tn, ok := obj.(*types.TypeName); ok && m[3] != "" {
					assert.True(t, hasMember([]types.Type{tn.Type()}, m[3]), "%s: `%s`: %s.%s has no %s", f, span, m[1], m[2], m[3])
				}
			}
			for _, m := range typeRe.FindAllStringSubmatch(span, -1) {
				if typs, ok := typesByName[m[1]]; ok {
					checked++
					assert.True(t, hasMember(typs, m[2]), "%s: `%s`: type %s has no %s", f, span, m[1], m[2])
				}
			}
		}
	}
	assert.GreaterOrEqual(t, checked, 50, "only %d identifiers checked, want the docs' API names", checked)
}
