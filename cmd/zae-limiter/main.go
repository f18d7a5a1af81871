// Command zae-limiter manages zae-limiter deployments and the data in their
// table: the CloudFormation stack (deploy, status, delete, cfn-template),
// version checks, a local development stack on DynamoDB Local (local), a
// load test (load), entities, stored limits at the entity, resource and system
// level, declarative limits manifests, audit events, usage snapshots and
// namespaces. Its commands and flags follow the Python zae-limiter CLI.
//
// Run `zae-limiter --help` for the command list and `zae-limiter CMD --help`
// for the flags of one command. Every command accepts the common flags
// --name/-n (stack and table name; default $ZAEL_STACK, else "zae-limiter"),
// --region, --endpoint-url, --namespace/-N (default $ZAEL_NAMESPACE, else
// "default") and --output/-o (table or json).
//
// Exit status: 0 on success; 1 when `version` or `check` finds the client
// incompatible with the table; 2 on any error, reported as one line
// "zae-limiter: MESSAGE" on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK           = 0
	exitIncompatible = 1 // version/check: the client cannot use the table
	exitError        = 2
)

// errHelp is returned by a command that printed its help.
var errHelp = errors.New("help requested")

// exitError carries a non-default exit code together with its message.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// cli is one invocation: the context, the output streams and the command's
// common flags once parsed.
type cli struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	common commonFlags
	// readOnly is set for commands that change nothing audited: they skip
	// resolving the audit principal (an STS call).
	readOnly bool
}

// handler runs one command with its arguments (after the command words).
type handler func(c *cli, args []string) error

// group is a command with subcommands.
type group struct {
	summary string
	subs    map[string]subcommand
}

// subcommand is a leaf command.
type subcommand struct {
	summary string
	run     handler
}

// commands is the command tree. Leaf top-level commands have no subs.
func commands() map[string]group {
	return map[string]group{
		"deploy":       {summary: "Create or update the CloudFormation stack", subs: leaf(cmdDeploy)},
		"delete":       {summary: "Delete the CloudFormation stack (needs --yes)", subs: leaf(cmdDelete)},
		"status":       {summary: "Show the CloudFormation stack's status and outputs", subs: leaf(cmdStatus)},
		"cfn-template": {summary: "Print the CloudFormation template", subs: leaf(cmdCfnTemplate)},
		"version":      {summary: "Show client, schema and table version information", subs: leaf(cmdVersion)},
		"check":        {summary: "Check that this client is compatible with the table", subs: leaf(cmdCheck)},
		"entity": {summary: "Manage entities and their stored limits", subs: map[string]subcommand{
			"create":         {"Create an entity", cmdEntityCreate},
			"show":           {"Show an entity", cmdEntityShow},
			"delete":         {"Delete an entity with its limits and buckets (needs --yes)", cmdEntityDelete},
			"children":       {"List the children of an entity", cmdEntityChildren},
			"set-limits":     {"Store limits for an entity on a resource", cmdEntitySetLimits},
			"get-limits":     {"Show the limits stored for an entity on a resource", cmdEntityGetLimits},
			"delete-limits":  {"Delete the limits stored for an entity on a resource (needs --yes)", cmdEntityDeleteLimits},
			"list":           {"List the entities with stored limits for a resource", cmdEntityList},
			"list-resources": {"List the resources some entity has stored limits for", cmdEntityListResources},
		}},
		"resource": {summary: "Manage resource-level default limits", subs: map[string]subcommand{
			"set-defaults":    {"Store the default limits of a resource", cmdResourceSetDefaults},
			"get-defaults":    {"Show the default limits of a resource", cmdResourceGetDefaults},
			"delete-defaults": {"Delete the default limits of a resource (needs --yes)", cmdResourceDeleteDefaults},
			"list":            {"List the resources with default limits", cmdResourceList},
		}},
		"system": {summary: "Manage system-level default limits", subs: map[string]subcommand{
			"set-defaults":    {"Store the system default limits and on-unavailable mode", cmdSystemSetDefaults},
			"get-defaults":    {"Show the system default limits", cmdSystemGetDefaults},
			"delete-defaults": {"Delete the system default limits (needs --yes)", cmdSystemDeleteDefaults},
		}},
		"limits": {summary: "Stored limits at any level, and declarative limits from a YAML manifest", subs: map[string]subcommand{
			"plan":   {"Show the changes apply would make", cmdLimitsPlan},
			"apply":  {"Apply the manifest's limits", cmdLimitsApply},
			"diff":   {"Show drift between the manifest and the table", cmdLimitsDiff},
			"set":    {"Store limits: --entity ID [--resource R], --resource R or --system", cmdLimitsSet},
			"get":    {"Show stored limits at one level (as set)", cmdLimitsGet},
			"delete": {"Delete stored limits at one level (as set; needs --yes)", cmdLimitsDelete},
		}},
		"audit": {summary: "Read audit events", subs: map[string]subcommand{
			"list": {"List audit events of an entity, newest first", cmdAuditList},
		}},
		"usage": {summary: "Read usage snapshots written by the aggregator", subs: map[string]subcommand{
			"list":    {"List usage snapshots", cmdUsageList},
			"summary": {"Summarise usage snapshots", cmdUsageSummary},
		}},
		"load": {summary: "Load-test the table and report latency, capacity units and cost", subs: leaf(cmdLoad)},
		"local": {summary: "Run DynamoDB Local with the table and the aggregator for development", subs: map[string]subcommand{
			"up":         {"Start DynamoDB Local, create the table, start the aggregator; print the environment", cmdLocalUp},
			"down":       {"Stop what local up started", cmdLocalDown},
			"status":     {"Show what local up runs", cmdLocalStatus},
			"env":        {"Print the environment variables for the local table", cmdLocalEnv},
			"aggregator": {"Run the aggregator on the local table's stream in the foreground", cmdLocalAggregator},
		}},
		"namespace": {summary: "Manage the table's namespaces", subs: map[string]subcommand{
			"register": {"Register namespaces", cmdNamespaceRegister},
			"list":     {"List active namespaces", cmdNamespaceList},
			"show":     {"Show one namespace", cmdNamespaceShow},
			"delete":   {"Soft-delete a namespace (needs --yes)", cmdNamespaceDelete},
			"recover":  {"Recover a deleted namespace by id", cmdNamespaceRecover},
			"orphans":  {"List deleted namespaces whose data remains", cmdNamespaceOrphans},
			"purge":    {"Delete a deleted namespace's data for good (needs --yes)", cmdNamespacePurge},
		}},
	}
}

// readOnlyCommands change nothing that is audited (opening the table may
// still register the namespace or write a missing version record).
var readOnlyCommands = map[string]bool{
	"status": true, "cfn-template": true, "version": true, "check": true,
	"entity show": true, "entity children": true, "entity get-limits": true, "entity list": true, "entity list-resources": true,
	"resource get-defaults": true, "resource list": true, "system get-defaults": true,
	"limits get": true, "limits plan": true, "limits diff": true,
	"audit list": true, "usage list": true, "usage summary": true,
	"namespace list": true, "namespace show": true, "namespace orphans": true,
}

// leaf marks a top-level command without subcommands.
func leaf(h handler) map[string]subcommand { return map[string]subcommand{"": {run: h}} }

// run executes the command line args (without the program name) and returns
// the exit code. It writes results to stdout and a one-line error to
// stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr}
	err := c.dispatch(args)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	}
	fmt.Fprintf(stderr, "zae-limiter: %s\n", errorMessage(err))
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	return exitError
}

func (c *cli) dispatch(args []string) error {
	cmds := commands()
	args, err := hoistCommonFlags(args, cmds)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return errors.New("missing command (run `zae-limiter --help` for the list)")
	}
	name := args[0]
	if isHelp(name) {
		c.printTopUsage(cmds)
		return errHelp
	}
	if name == "--version" {
		fmt.Fprintf(c.stdout, "zae-limiter (go) %s\n", clientVersion())
		return nil
	}
	g, ok := cmds[name]
	if !ok {
		return fmt.Errorf("unknown command %q (run `zae-limiter --help` for the list)", name)
	}
	if sub, ok := g.subs[""]; ok {
		c.readOnly = readOnlyCommands[name]
		return sub.run(c, args[1:])
	}
	if len(args) < 2 {
		return fmt.Errorf("%s: missing subcommand (one of: %s)", name, strings.Join(sortedKeys(g.subs), ", "))
	}
	if isHelp(args[1]) {
		c.printGroupUsage(name, g)
		return errHelp
	}
	sub, ok := g.subs[args[1]]
	if !ok {
		return fmt.Errorf("%s: unknown subcommand %q (one of: %s)", name, args[1], strings.Join(sortedKeys(g.subs), ", "))
	}
	c.readOnly = readOnlyCommands[name+" "+args[1]]
	return sub.run(c, args[2:])
}

// commonValueFlags are the common flags, by name without dashes, all of
// which take a value.
var commonValueFlags = map[string]bool{
	"n": true, "name": true, "region": true, "endpoint-url": true,
	"N": true, "namespace": true, "o": true, "output": true,
}

// hoistCommonFlags moves common flags given before the command words
// (`zae-limiter -n x entity list`, `zae-limiter entity -n x list`) to just
// after them, where the command's flag set parses them.
func hoistCommonFlags(args []string, cmds map[string]group) ([]string, error) {
	var words, hoisted []string
	i := 0
	take := func() error { // the common flag at args[i], with its value
		a := args[i]
		if strings.Contains(a, "=") {
			hoisted = append(hoisted, a)
			i++
			return nil
		}
		if i+1 >= len(args) {
			return fmt.Errorf("flag needs an argument: %s", a)
		}
		hoisted = append(hoisted, a, args[i+1])
		i += 2
		return nil
	}
	for want := 1; len(words) < want && i < len(args); {
		a := args[i]
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && a != "-" && a != "--" && commonValueFlags[name] {
			if err := take(); err != nil {
				return nil, err
			}
			continue
		}
		if strings.HasPrefix(a, "-") {
			break // help, --version or an error the dispatcher reports
		}
		words = append(words, a)
		i++
		if g, ok := cmds[a]; ok && len(words) == 1 {
			if _, leaf := g.subs[""]; !leaf {
				want = 2
			}
		}
	}
	if len(words) == 0 && i == len(args) {
		return nil, nil // only flags: a missing command
	}
	if len(words) == 0 { // help or --version: keep them first
		return append(args[i:len(args):len(args)], hoisted...), nil
	}
	out := make([]string, 0, len(args))
	out = append(out, words...)
	out = append(out, hoisted...)
	return append(out, args[i:]...), nil
}

func isHelp(s string) bool { return s == "-h" || s == "--help" || s == "-help" || s == "help" }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c *cli) printTopUsage(cmds map[string]group) {
	w := c.stdout
	fmt.Fprintln(w, "Usage: zae-limiter COMMAND [SUBCOMMAND] [ARGS] [FLAGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Manage zae-limiter stacks and the rate-limiter data in their DynamoDB table.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, name := range sortedKeys(cmds) {
		fmt.Fprintf(w, "  %-14s %s\n", name, cmds[name].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Common flags (every command):")
	fmt.Fprint(w, commonFlagsHelp)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `zae-limiter COMMAND --help` for a command's flags.")
}

func (c *cli) printGroupUsage(name string, g group) {
	w := c.stdout
	fmt.Fprintf(w, "Usage: zae-limiter %s SUBCOMMAND [ARGS] [FLAGS]\n\n%s.\n\nSubcommands:\n", name, g.summary)
	for _, sub := range sortedKeys(g.subs) {
		fmt.Fprintf(w, "  %-16s %s\n", sub, g.subs[sub].summary)
	}
	fmt.Fprintf(w, "\nRun `zae-limiter %s SUBCOMMAND --help` for its flags.\n", name)
}

const commonFlagsHelp = `  -n, --name NAME          stack and table name (default $ZAEL_STACK, else "zae-limiter")
      --region REGION      AWS region (default: the SDK's configuration)
      --endpoint-url URL   AWS endpoint, e.g. http://localhost:8000 for DynamoDB Local
  -N, --namespace NAME     namespace within the table (default $ZAEL_NAMESPACE, else "default")
  -o, --output FORMAT      table or json (default table)
`
