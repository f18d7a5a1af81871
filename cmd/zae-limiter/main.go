// Command zae-limiter manages zae-limiter deployments and the data in their
// table: the CloudFormation stack (deploy, status, delete, cfn-template),
// version checks, a local development stack on DynamoDB Local (local), a
// load test (load), entities, stored limits at the entity, resource and system
// level, declarative limits manifests, audit events, usage snapshots and
// namespaces.
//
// Run `zae-limiter --help` for the command list and `zae-limiter CMD --help`
// for the flags of one command; `zae-limiter completion bash|zsh|fish|powershell`
// prints a shell completion script. The command tree is built with cobra;
// docs/cli.md's command reference is generated from it (go generate). Every command accepts the common flags
// --name/-n (stack and table name; default $ZAEL_STACK, else "zae-limiter"),
// --region, --endpoint-url, --namespace/-N (default $ZAEL_NAMESPACE, else
// "default") and --output/-o (table or json).
//
// Exit status: 0 on success; 1 when `version` or `check` finds the client
// incompatible with the table; 2 on any error, reported as one line
// "zae-limiter: MESSAGE" on stderr.
package main

//go:generate go run -tags gendocs . gen-cli-docs ../../docs/cli.md

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
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

// exitCodeError carries a non-default exit code together with its message.
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
	// leaves maps each leaf of the command tree to its flags and handler,
	// for the help printer.
	leaves map[*cobra.Command]*command
}

// subcommand is a leaf command with the one-line summary its group lists.
type subcommand struct {
	summary string
	build   func(c *cli) *command
}

// commands returns the command tree below the root: top-level leaf
// commands and groups of subcommands.
func (c *cli) commands() []*cobra.Command {
	return []*cobra.Command{
		c.leaf("Create or update the CloudFormation stack", cmdDeploy),
		c.leaf("Delete the CloudFormation stack (needs --yes)", cmdDelete),
		c.leaf("Show the CloudFormation stack's status and outputs", cmdStatus),
		c.leaf("Print the CloudFormation template", cmdCfnTemplate),
		c.leaf("Show client, schema and table version information", cmdVersion),
		c.leaf("Check that this client is compatible with the table", cmdCheck),
		c.leaf("List the limiter stacks of the region", cmdList),
		c.leaf("Upgrade a stack's Lambda code, tags and version record to this client", cmdUpgrade),
		c.leaf("Build a Lambda's deployment package (zip) for Terraform or CDK", cmdLambdaExport),
		c.group("entity", "Manage entities and their stored limits",
			subcommand{"Create an entity", cmdEntityCreate},
			subcommand{"Show an entity", cmdEntityShow},
			subcommand{"Delete an entity with its limits and buckets (needs --yes)", cmdEntityDelete},
			subcommand{"List the children of an entity", cmdEntityChildren},
			subcommand{"Store limits for an entity on a resource", cmdEntitySetLimits},
			subcommand{"Show the limits stored for an entity on a resource", cmdEntityGetLimits},
			subcommand{"Delete the limits stored for an entity on a resource (needs --yes)", cmdEntityDeleteLimits},
			subcommand{"List the namespace's entities, or those with stored limits for a resource", cmdEntityList},
			subcommand{"List the resources some entity has stored limits for", cmdEntityListResources},
			subcommand{"Show the limits in force for an entity on a resource, and where each comes from", cmdEntityLimitsInForce},
			subcommand{"Add to a prepaid balance, once per top-up id", cmdEntityTopUp},
		),
		c.group("resource", "Manage resource-level default limits",
			subcommand{"Store the default limits of a resource", cmdResourceSetDefaults},
			subcommand{"Show the default limits of a resource", cmdResourceGetDefaults},
			subcommand{"Delete the default limits of a resource (needs --yes)", cmdResourceDeleteDefaults},
			subcommand{"List the resources with default limits", cmdResourceList},
		),
		c.group("system", "Manage system-level default limits",
			subcommand{"Store the system default limits and on-unavailable mode", cmdSystemSetDefaults},
			subcommand{"Show the system default limits", cmdSystemGetDefaults},
			subcommand{"Delete the system default limits (needs --yes)", cmdSystemDeleteDefaults},
		),
		c.group("limits", "Stored limits at any level, and declarative limits from a YAML manifest",
			subcommand{"Show the changes apply would make", cmdLimitsPlan},
			subcommand{"Apply the manifest's limits", cmdLimitsApply},
			subcommand{"Show drift between the manifest and the table", cmdLimitsDiff},
			subcommand{"Print a CloudFormation template declaring the manifest (Custom::ZaeLimiterLimits)", cmdLimitsCfnTemplate},
			subcommand{"Store limits: --entity ID [--resource R], --resource R or --system", cmdLimitsSet},
			subcommand{"Show stored limits at one level (as set)", cmdLimitsGet},
			subcommand{"Delete stored limits at one level (as set; needs --yes)", cmdLimitsDelete},
		),
		c.group("audit", "Read audit events",
			subcommand{"List audit events of an entity, newest first", cmdAuditList},
		),
		c.group("usage", "Read usage snapshots written by the aggregator, and the spend of calendar limits",
			subcommand{"List usage snapshots", cmdUsageList},
			subcommand{"Summarise usage snapshots", cmdUsageSummary},
			subcommand{"Show the spend of an entity's calendar limits per period", cmdUsagePeriods},
		),
		c.leaf("Load-test the table and report latency, capacity units and cost", cmdLoad),
		c.group("local", "Run DynamoDB Local with the table and the aggregator for development",
			subcommand{"Start DynamoDB Local, create the table, start the aggregator; print the environment", cmdLocalUp},
			subcommand{"Stop what local up started", cmdLocalDown},
			subcommand{"Show what local up runs", cmdLocalStatus},
			subcommand{"Print the environment variables for the local table", cmdLocalEnv},
			subcommand{"Run the aggregator on the local table's stream in the foreground", cmdLocalAggregator},
		),
		c.group("namespace", "Manage the table's namespaces",
			subcommand{"Register namespaces", cmdNamespaceRegister},
			subcommand{"List active namespaces", cmdNamespaceList},
			subcommand{"Show one namespace", cmdNamespaceShow},
			subcommand{"Soft-delete a namespace (needs --yes)", cmdNamespaceDelete},
			subcommand{"Recover a deleted namespace by id", cmdNamespaceRecover},
			subcommand{"List deleted namespaces whose data remains", cmdNamespaceOrphans},
			subcommand{"Delete a deleted namespace's data for good (needs --yes)", cmdNamespacePurge},
		),
	}
}

// readOnlyCommands change nothing that is audited (opening the table may
// still register the namespace or write a missing version record).
var readOnlyCommands = map[string]bool{
	"status": true, "cfn-template": true, "version": true, "check": true, "list": true, "lambda-export": true,
	"entity show": true, "entity children": true, "entity get-limits": true, "entity list": true, "entity list-resources": true,
	"entity limits-in-force": true, "resource get-defaults": true, "resource list": true, "system get-defaults": true,
	"limits get": true, "limits plan": true, "limits diff": true, "limits cfn-template": true,
	"audit list": true, "usage list": true, "usage summary": true, "usage periods": true,
	"namespace list": true, "namespace show": true, "namespace orphans": true,
}

// leaf returns a top-level command without subcommands.
func (c *cli) leaf(summary string, build func(*cli) *command) *cobra.Command {
	f := build(c)
	f.cmd.Short = summary
	return f.cmd
}

// group returns a command whose subcommands are subs. Run alone or with
// an unknown subcommand it fails, suggesting the nearest names.
func (c *cli) group(name, summary string, subs ...subcommand) *cobra.Command {
	g := &cobra.Command{
		Use:   name + " SUBCOMMAND",
		Short: summary,
		Long:  summary + ".",
		Args:  cobra.ArbitraryArgs,
		// cobra's default: suggest names within 2 edits, or with the word as prefix.
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "help" {
				return c.help(cmd)
			}
			names := subcommandNames(cmd)
			if len(args) == 0 {
				return fmt.Errorf("%s: missing subcommand (one of: %s)", name, strings.Join(names, ", "))
			}
			return fmt.Errorf("%s: unknown subcommand %q (%sone of: %s)", name, args[0], didYouMean(cmd, args[0]), strings.Join(names, ", "))
		},
	}
	for _, s := range subs {
		f := s.build(c)
		f.cmd.Short = s.summary
		g.AddCommand(f.cmd)
	}
	return g
}

// subcommandNames returns the names of cmd's subcommands, sorted.
func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

// didYouMean returns "did you mean "x"? " for the subcommands of cmd
// nearest to the mistyped word (cobra's suggestions: a Levenshtein
// distance of at most 2, or a prefix), or "".
func didYouMean(cmd *cobra.Command, word string) string {
	s := cmd.SuggestionsFor(word)
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf("did you mean %q? ", strings.Join(s, `" or "`))
}

// rootCommand returns the command tree of c.
func (c *cli) rootCommand() *cobra.Command {
	c.leaves = map[*cobra.Command]*command{}
	root := &cobra.Command{
		Use:   "zae-limiter",
		Short: "Manage zae-limiter stacks and the rate-limiter data in their DynamoDB table",
		Long:  "Manage zae-limiter stacks and the rate-limiter data in their DynamoDB table.",
		// The root runs only to report a missing or unknown command.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q (%srun `zae-limiter --help` for the list)", args[0], didYouMean(cmd, args[0]))
			}
			return errors.New("missing command (run `zae-limiter --help` for the list)")
		},
		SuggestionsMinimumDistance: 2,
		Version:                    clientVersion(),
		SilenceErrors:              true,
		SilenceUsage:               true,
	}
	root.SetVersionTemplate("zae-limiter (go) {{.Version}}\n")
	// Declared here so that cobra adds no -v shorthand.
	root.Flags().Bool("version", false, "print the client version")
	pf := root.PersistentFlags()
	pf.StringVarP(&c.common.name, "name", "n", envOr(ddbschema.EnvStack, limiter.DefaultTable), "stack and table name ($ZAEL_STACK)")
	pf.StringVar(&c.common.region, "region", "", "AWS region (default: the SDK's configuration)")
	pf.StringVar(&c.common.endpoint, "endpoint-url", "", "AWS endpoint URL, e.g. http://localhost:8000 for DynamoDB Local")
	pf.StringVarP(&c.common.namespace, "namespace", "N", envOr(ddbschema.EnvNamespace, limiter.DefaultNamespace), "namespace within the table ($ZAEL_NAMESPACE)")
	root.AddCommand(c.commands()...)
	for _, hidden := range hiddenCommands {
		h := hidden(c)
		h.Hidden = true
		root.AddCommand(h)
	}
	root.SetFlagErrorFunc(parseFlagError)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { _ = c.help(cmd) })
	// The completion command takes its output stream when it is added.
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// run executes the command line args (without the program name) and returns
// the exit code. It writes results to stdout and a one-line error to
// stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr}
	root := c.rootCommand()
	root.SetArgs(singleDashLongFlags(root, args))
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "zae-limiter: %s\n", errorMessage(err))
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	return exitError
}

// singleDashLongFlags rewrites "-name" and "-name=value" to "--name" and
// "--name=value" where name is a long flag of the command tree, so that
// command lines written for the standard flag package, which the CLI used
// before it moved to cobra, keep working. Arguments after "--" are left as
// they are, and so is anything that is not a known long flag (shorthands
// such as -n stay shorthands).
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	long := map[string]bool{"help": true}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		add := func(f *pflag.Flag) { long[f.Name] = true }
		cmd.LocalFlags().VisitAll(add)
		cmd.PersistentFlags().VisitAll(add)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && long[name] {
			out[i] = "-" + a
		}
	}
	return out
}
