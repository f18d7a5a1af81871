package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddblocal"
	"github.com/zaelimiter/limiter/internal/ddbschema"
	"github.com/zaelimiter/limiter/internal/motoserver"
)

// TestMain gives the CLI's SDK configuration dummy credentials and a region
// (kept off ~/.aws and the instance metadata service) and starts one
// DynamoDB Local for the package (see internal/ddblocal), and moto's server
// for the stack commands when a test asks for it (internal/motoserver).
func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           ddblocal.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       ddblocal.SecretAccessKey,
		"AWS_REGION":                  ddblocal.Region,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		os.Setenv(k, v)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", ddbschema.EnvStack, ddbschema.EnvNamespace} {
		os.Unsetenv(k)
	}
	os.Exit(motoserver.Run(func() int { return ddblocal.Main(m) }))
}

// env is a table of its own in DynamoDB Local and the repository of its
// default namespace, for checking the CLI's effects through the library.
type env struct {
	t        *testing.T
	ctx      context.Context
	endpoint string
	table    string
	repo     *table
	client   *dynamodb.Client
}

// newEnv creates a table for the test (dropped when it ends).
func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	e := &env{t: t, ctx: context.Background(), endpoint: ddblocal.Endpoint(t), table: ddblocal.TableName(t)}
	e.client = ddblocal.Client(t)
	repo, err := limiter.OpenDynamoDB(e.ctx, e.client, func(o *limiter.DynamoDBOptions) {
		o.Table = e.table
		o.Namespace = limiter.DefaultNamespace
		o.CreateTable = true
	})
	require.NoError(t, err, "OpenDynamoDB")
	t.Cleanup(func() {
		e.client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(e.table)})
	})
	e.repo = newTable(repo)
	return e
}

// cli runs the CLI in-process against the env's table.
func (e *env) cli(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return runCLI(append(args, "--endpoint-url", e.endpoint, "-n", e.table)...)
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs the CLI and fails the test unless it succeeds quietly.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	require.Equal(e.t, exitOK, code, "zae-limiter %s: stderr %q, stdout %q", strings.Join(args, " "), errs, out)
	require.Empty(e.t, errs, "zae-limiter %s: stderr", strings.Join(args, " "))
	return out
}

// json runs the CLI with -o json and decodes stdout into v.
func (e *env) json(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append(args, "-o", "json")...)
	require.NoError(e.t, json.Unmarshal([]byte(out), v), "zae-limiter %s -o json: %q", strings.Join(args, " "), out)
}

// fail runs the CLI, checks the error contract (exit 2, nothing on stdout,
// one line "zae-limiter: ..." on stderr) and returns the message.
func (e *env) fail(args ...string) string {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	return checkFailure(e.t, args, code, out, errs, exitError)
}

func checkFailure(t *testing.T, args []string, code int, out, errs string, want int) string {
	t.Helper()
	line := "zae-limiter " + strings.Join(args, " ")
	assert.Equal(t, want, code, "%s: exit status (stderr %q)", line, errs)
	if want == exitError {
		assert.Empty(t, out, "%s: stdout", line)
	}
	assert.Regexp(t, `^zae-limiter: [^\n]*\n$`, errs, "%s: stderr, want one line", line)
	return strings.TrimSuffix(strings.TrimPrefix(errs, "zae-limiter: "), "\n")
}

func contains(t *testing.T, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		assert.Contains(t, got, w, "output")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown subcommand", []string{"entity", "frobnicate"}, `entity: unknown subcommand "frobnicate"`},
		{"missing subcommand", []string{"entity"}, "entity: missing subcommand"},
		{"unknown flag", []string{"entity", "show", "e1", "--bogus"}, "entity show: unknown flag --bogus"},
		{"unknown short flag", []string{"resource", "list", "-z"}, "resource list: unknown flag -z"},
		{"missing argument", []string{"entity", "show"}, "entity show: missing argument"},
		{"extra argument", []string{"entity", "show", "a", "b"}, `entity show: unexpected argument "b"`},
		{"bad limit syntax", []string{"entity", "set-limits", "e1", "-l", "rpm=100"}, `invalid limit "rpm=100"`},
		{"bad limit period", []string{"resource", "set-defaults", "gpt", "-l", "rpm:100/week"}, `period "/week"`},
		{"bad stack name", []string{"resource", "list", "-n", "my_table"}, `invalid --name "my_table": contains an underscore`},
		{"bad output", []string{"resource", "list", "-o", "yaml"}, `invalid --output "yaml"`},
		{"no limits", []string{"resource", "set-defaults", "gpt"}, "at least one --limit"},
		{"bad on-unavailable", []string{"system", "set-defaults", "--on-unavailable", "maybe"}, `invalid --on-unavailable "maybe"`},
		{"delete needs yes", []string{"entity", "delete", "e1"}, "refusing to delete entity e1 without --yes"},
		{"stack delete needs yes", []string{"delete", "-n", "prod"}, "refusing to delete stack prod without --yes"},
		{"usage needs a key", []string{"usage", "list"}, "either --entity-id or --resource is required"},
		{"audit needs an entity", []string{"audit", "list"}, "--entity-id is required"},
		{"manifest needs a file", []string{"limits", "plan"}, "--file is required"},
		{"deploy without lambda zip", []string{"deploy", "--lambda-zip", "no/such.zip"}, "run `make lambda` first"},
		{"deploy no-wait", []string{"deploy", "--no-wait"}, "--no-wait is not supported"},
		{"deploy bad log retention", []string{"deploy", "--log-retention-days", "2"}, "invalid --log-retention-days 2"},
		{"deploy iam conflict", []string{"deploy", "--no-iam", "--create-iam-roles"}, "--create-iam-roles cannot be used with --no-iam"},
		{"deploy bad tag", []string{"deploy", "--no-aggregator", "-t", "novalue"}, `invalid --tag "novalue"`},
		{"deploy bad option named by flag", []string{"deploy", "--no-aggregator", "--lambda-memory", "5"}, "invalid stack options: --lambda-memory 5: want 128-3008 MB"},
		{"deploy bad window named by flag", []string{"deploy", "--no-aggregator", "--snapshot-windows", "weekly"}, `invalid stack options: --snapshot-windows "weekly"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(tc.args...)
			assert.Contains(t, checkFailure(t, tc.args, code, out, errs, exitError), tc.want)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"entity", "--help"}, {"entity", "create", "-h"}, {"limits", "apply", "--help"}, {"deploy", "-h"},
	} {
		code, out, errs := runCLI(args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Empty(t, errs, "%v", args)
		assert.True(t, strings.HasPrefix(out, "Usage: zae-limiter"), "%v: %q", args, out)
	}
	_, out, _ := runCLI("deploy", "-h")
	contains(t, out, "--enable-aggregator / --no-aggregator", "-t, --tag", "--lambda-zip", `(default "bin/aggregator.zip")`)
}

// TestMissingTable: on a local endpoint the hint is `local up` (with the
// port when it is not 8000); elsewhere `deploy`.
func TestMissingTable(t *testing.T) {
	t.Parallel()
	ep := ddblocal.Endpoint(t)
	name := ddblocal.TableName(t)
	args := []string{"entity", "show", "e1", "--endpoint-url", ep, "-n", name}
	code, out, errs := runCLI(args...)
	msg := checkFailure(t, args, code, out, errs, exitError)
	u, err := url.Parse(ep)
	require.NoError(t, err)
	assert.Equal(t, `table "`+name+`" not found at `+ep+` (create it with: zae-limiter local up --name `+name+` --port `+u.Port()+`; on LocalStack: zae-limiter deploy --name `+name+`)`, msg)

	notFound := &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	for _, tc := range []struct{ endpoint, want string }{
		{"http://localhost:8000", `table "t1" not found at http://localhost:8000 (create it with: zae-limiter local up --name t1; on LocalStack: zae-limiter deploy --name t1)`},
		{"http://[::1]:9000", `table "t1" not found at http://[::1]:9000 (create it with: zae-limiter local up --name t1 --port 9000; on LocalStack: zae-limiter deploy --name t1)`},
		{"https://dynamodb.eu-west-1.amazonaws.com", `table "t1" not found (deploy it with: zae-limiter deploy --name t1)`},
		{"", `table "t1" not found (deploy it with: zae-limiter deploy --name t1)`},
	} {
		c := &cli{common: commonFlags{name: "t1", endpoint: tc.endpoint}}
		assert.EqualError(t, c.tableErr(fmt.Errorf("open: %w", notFound)), tc.want, "endpoint %q", tc.endpoint)
	}
}

// TestCommonFlagsAnywhere: the common flags may come before the command
// words, between them, or after.
func TestCommonFlagsAnywhere(t *testing.T) {
	e := newEnv(t)
	e.ok("resource", "set-defaults", "gpt-4", "-l", "rpm:100")
	for _, args := range [][]string{
		{"-n", e.table, "--endpoint-url", e.endpoint, "resource", "list"},
		{"--name=" + e.table, "resource", "--endpoint-url=" + e.endpoint, "list"},
		{"resource", "-n", e.table, "list", "--endpoint-url", e.endpoint},
		{"-o", "json", "-n", e.table, "resource", "list", "--endpoint-url", e.endpoint},
	} {
		code, out, errs := runCLI(args...)
		assert.Equal(t, exitOK, code, "%v: stderr %q", args, errs)
		assert.Empty(t, errs, "%v", args)
		assert.Contains(t, out, "gpt-4", "%v", args)
	}
	_, out, _ := runCLI("-o", "json", "-n", e.table, "resource", "list", "--endpoint-url", e.endpoint)
	assert.True(t, strings.HasPrefix(out, "{"), "-o json before the command: %q", out)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n"}, "flag needs an argument: -n"},
		{[]string{"-n", "x"}, "missing command"},
		{[]string{"-n", "x", "nosuch"}, `unknown command "nosuch"`},
		// Not "entity list": cobra takes "entity" as --bogus's value, and
		// "list" is a top-level command too.
		{[]string{"--bogus", "entity", "show"}, `unknown command "--bogus"`},
	} {
		code, out, errs := runCLI(tc.args...)
		contains(t, checkFailure(t, tc.args, code, out, errs, exitError), tc.want)
	}
	code, out, _ := runCLI("-n", "x", "--help")
	assert.Equal(t, exitOK, code, "-n x --help")
	assert.True(t, strings.HasPrefix(out, "Usage: zae-limiter"), "-n x --help: %q", out)
}

func TestUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"resource", "list", "--endpoint-url", "http://127.0.0.1:1"},
		{"entity", "create", "e1", "--endpoint-url", "http://127.0.0.1:1"}, // a change: asks for the principal too
	} {
		start := time.Now()
		code, out, errs := runCLI(args...)
		d := time.Since(start)
		msg := checkFailure(t, args, code, out, errs, exitError)
		contains(t, msg, "limiter: cannot reach DynamoDB at http://127.0.0.1:1", "connection refused", "zae-limiter local up")
		assert.Less(t, d, 2*time.Second, "%v: a closed port took %v", args, d)
	}
}

// TestBinary builds the command and runs it as a process: the real exit
// codes and streams.
func TestBinary(t *testing.T) {
	e := newEnv(t)
	// Built as docs/cli.md says, with `make cli` (into a temporary BIN_DIR);
	// without make, with go build.
	binDir := t.TempDir()
	bin := filepath.Join(binDir, "zae-limiter")
	var build *exec.Cmd
	if makeTool, err := exec.LookPath("make"); err == nil {
		build = exec.Command(makeTool, "cli", "BIN_DIR="+binDir)
		build.Dir = filepath.Join("..", "..")
		build.Env = append(os.Environ(), "MAKEFLAGS=")
	} else if goTool, err := exec.LookPath("go"); err == nil {
		build = exec.Command(goTool, "build", "-o", bin, ".")
	} else {
		t.Skip("neither make nor go on PATH")
	}
	buildOut, err := build.CombinedOutput()
	require.NoError(t, err, "%s\n%s", strings.Join(build.Args, " "), buildOut)
	runBin := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err, "run %s", bin)
		}
		return code, out.String(), errb.String()
	}

	for _, args := range [][]string{{"--help"}, {"entity", "create", "--help"}} {
		code, out, errs := runBin(args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Empty(t, errs, "%v", args)
		assert.True(t, strings.HasPrefix(out, "Usage: zae-limiter"), "%v: %q", args, out)
	}

	// Shell completion, as docs/cli.md says.
	code, out, errs := runBin("completion", "bash")
	assert.Equal(t, exitOK, code, "completion bash: stderr %q", errs)
	assert.Empty(t, errs, "completion bash")
	assert.Contains(t, out, "__start_zae-limiter", "completion bash")

	code, out, errs = runBin("resource", "set-defaults", "gpt-4", "-l", "rpm:100", "-n", e.table, "--endpoint-url", e.endpoint)
	require.Equal(t, exitOK, code, "resource set-defaults: stderr %q", errs)
	require.Empty(t, errs, "resource set-defaults")
	contains(t, out, "Set 1 default(s) for resource 'gpt-4':", "rpm: 100/min")

	args := []string{"entity", "show", "nobody", "-n", e.table, "--endpoint-url", e.endpoint}
	code, out, errs = runBin(args...)
	msg := checkFailure(t, args, code, out, errs, exitError)
	contains(t, msg, "limiter: entity not found: nobody")
}

// TestReadOnlyCommandsExist: every entry of readOnlyCommands names a
// command, so a rename cannot leave a write command without its audit
// principal unnoticed.
func TestReadOnlyCommandsExist(t *testing.T) {
	c := &cli{}
	root := c.rootCommand()
	for name := range readOnlyCommands {
		cmd, rest, err := root.Find(strings.Fields(name))
		if assert.NoError(t, err, name) {
			assert.Empty(t, rest, "readOnlyCommands[%q]: no such command", name)
			assert.Equal(t, name, commandPath(cmd), "readOnlyCommands[%q]: no such command", name)
			assert.NotNil(t, c.leaves[cmd], "readOnlyCommands[%q]: not a leaf", name)
		}
	}
}
