package main

// The leaf commands of the tree: each is a cobra.Command with pflag flags,
// bounds on its positional arguments and a handler. The help printer and
// the parse errors keep the CLI's own wording and layout.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// command is one leaf command: its cobra.Command, its flags in the order
// the help lists them, and its handler.
type command struct {
	cmd     *cobra.Command
	c       *cli
	use     string // e.g. "entity create ENTITY_ID"
	minArgs int
	maxArgs int      // -1: unbounded
	order   []string // long names in registration order; "on|off|default" for a pair
	// post runs after a successful parse, e.g. to convert flag values.
	post []func()
	// checks run after post, before run (e.g. --yes).
	checks []func(pos []string) error
	// run is the command's work, given the positional arguments.
	run func(pos []string) error
}

// newFlags returns the leaf command use (its command words, then its
// positional arguments in capitals) with the summary as its description.
// Commands that print something other than a table or JSON pass withOutput
// false and may define --output themselves. The caller registers its flags
// and sets run.
func (c *cli) newFlags(use, summary string, minArgs, maxArgs int, withOutput bool) *command {
	f := &command{c: c, use: use, minArgs: minArgs, maxArgs: maxArgs}
	path := f.command()
	name := path[strings.LastIndex(path, " ")+1:]
	f.cmd = &cobra.Command{
		Use:  name + strings.TrimPrefix(use, path),
		Long: summary,
		Args: func(_ *cobra.Command, args []string) error { return f.checkArgs(args) },
		RunE: func(cmd *cobra.Command, args []string) error { return f.execute(cmd.Flags(), args) },
	}
	if maxArgs == 0 {
		f.cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	c.common.output = outputTable
	if withOutput {
		f.str(&c.common.output, "output", "o", outputTable, outputUsage)
		_ = f.cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputTable, outputJSON}, cobra.ShellCompDirectiveNoFileComp))
	}
	if c.leaves != nil {
		c.leaves[f.cmd] = f
	}
	return f
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (f *command) flags() *pflag.FlagSet { return f.cmd.Flags() }

// str defines a string flag with an optional one-letter alias.
func (f *command) str(p *string, long, short, def, usage string) {
	f.flags().StringVarP(p, long, short, def, usage)
	f.order = append(f.order, long)
}

// integer defines an int flag.
func (f *command) integer(p *int, long, short string, def int, usage string) {
	f.flags().IntVarP(p, long, short, def, usage)
	f.order = append(f.order, long)
}

// duration defines a time.Duration flag.
func (f *command) duration(p *time.Duration, long, short string, def time.Duration, usage string) {
	f.flags().DurationVarP(p, long, short, def, usage)
	f.order = append(f.order, long)
}

// float defines a float64 flag.
func (f *command) float(p *float64, long, short string, def float64, usage string) {
	f.flags().Float64VarP(p, long, short, def, usage)
	f.order = append(f.order, long)
}

// boolean defines a bool flag.
func (f *command) boolean(p *bool, long, short string, def bool, usage string) {
	f.flags().BoolVarP(p, long, short, def, usage)
	f.order = append(f.order, long)
}

// pair defines a --on/--off pair of bool flags writing *p, like click's
// "--enable-x/--no-x" options.
func (f *command) pair(p *bool, on, off string, def bool, usage string) {
	*p = def
	for _, v := range []struct {
		name  string
		value bool
	}{{on, true}, {off, false}} {
		f.flags().VarPF(boolSetter{p: p, value: v.value}, v.name, "", usage).NoOptDefVal = "true"
	}
	d := off
	if def {
		d = on
	}
	f.order = append(f.order, on+"|"+off+"|"+d)
}

// list defines a repeatable string flag.
func (f *command) list(p *[]string, long, short, usage string) {
	f.flags().StringArrayVarP(p, long, short, nil, usage)
	f.order = append(f.order, long)
}

// boolSetter is a bool flag that stores a fixed value when given.
type boolSetter struct {
	p     *bool
	value bool
}

func (b boolSetter) String() string { return "" }
func (b boolSetter) Type() string   { return "bool" }
func (b boolSetter) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = v == b.value
	return nil
}

// confirm registers --yes/-y on a destructive command, which refuses to run
// without it; what names the action from the positional arguments, e.g.
// "delete entity key-1".
func (f *command) confirm(what func(pos []string) string) {
	var yes bool
	f.boolean(&yes, "yes", "y", false, "confirm this destructive command")
	f.checks = append(f.checks, func(pos []string) error { return requireYes(yes, what(pos)) })
}

// requireYes refuses a destructive command without --yes: there is no
// interactive confirmation (CI has no stdin).
func requireYes(yes bool, what string) error {
	if !yes {
		return fmt.Errorf("refusing to %s without --yes", what)
	}
	return nil
}

// checkArgs checks the number of positional arguments.
func (f *command) checkArgs(pos []string) error {
	if len(pos) < f.minArgs {
		return fmt.Errorf("%s: missing argument (usage: zae-limiter %s)", f.command(), f.use)
	}
	if f.maxArgs >= 0 && len(pos) > f.maxArgs {
		return fmt.Errorf("%s: unexpected argument %q", f.command(), pos[f.maxArgs])
	}
	return nil
}

// execute runs the command once its flags are parsed into flags: it
// checks the common flags, then runs post, checks and run.
func (f *command) execute(flags *pflag.FlagSet, pos []string) error {
	c := f.c
	c.readOnly = readOnlyCommands[f.command()]
	c.common.explicit = map[string]bool{}
	flags.Visit(func(fl *pflag.Flag) { c.common.explicit[fl.Name] = true })
	if err := ddbschema.ValidateStackName(c.common.name); err != nil {
		var ve *limiter.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("invalid --name %q: %s", c.common.name, ve.Reason)
		}
		return err
	}
	if c.common.output != outputTable && c.common.output != outputJSON {
		return fmt.Errorf("invalid --output %q: use table or json", c.common.output)
	}
	for _, fn := range f.post {
		fn()
	}
	for _, check := range f.checks {
		if err := check(pos); err != nil {
			return err
		}
	}
	return f.run(pos)
}

// command returns the command words of f.use ("entity create").
func (f *command) command() string {
	var words []string
	for _, w := range strings.Fields(f.use) {
		if strings.ToUpper(w) == w || w[0] < 'a' || w[0] > 'z' {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// commandPath returns cmd's command words without the program name.
func commandPath(cmd *cobra.Command) string {
	_, path, _ := strings.Cut(cmd.CommandPath(), " ")
	return path
}

// errFlagNeedsValue is the error of a flag value that looks like a flag.
var errFlagNeedsValue = errors.New("flag needs an argument")

// parseFlagError rewords pflag's parse errors as the CLI reports them:
// "entity show: unknown flag --bogus", "flag needs an argument: -n".
func parseFlagError(cmd *cobra.Command, err error) error {
	var (
		notExist *pflag.NotExistError
		required *pflag.ValueRequiredError
		invalid  *pflag.InvalidValueError
		msg      string
	)
	flagName := func(name, shorthands string) string {
		if shorthands != "" {
			return "-" + name
		}
		return "--" + name
	}
	switch {
	case errors.As(err, &notExist):
		name := flagName(notExist.GetSpecifiedName(), notExist.GetSpecifiedShortnames())
		if !cmd.HasParent() {
			return fmt.Errorf("unknown command %q (run `zae-limiter --help` for the list)", name)
		}
		msg = "unknown flag " + name
	case errors.As(err, &required):
		msg = "flag needs an argument: " + flagName(required.GetSpecifiedName(), required.GetSpecifiedShortnames())
	case errors.As(err, &invalid) && errors.Is(err, errFlagNeedsValue):
		msg = "flag needs an argument: --" + invalid.GetFlag().Name
	case errors.As(err, &invalid):
		cause := invalid.Unwrap()
		var num *strconv.NumError
		if errors.As(cause, &num) {
			cause = num.Err
		}
		msg = fmt.Sprintf("invalid value %q for flag --%s: %v", invalid.GetValue(), invalid.GetFlag().Name, cause)
	default:
		msg = err.Error()
	}
	if !cmd.HasParent() {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", commandPath(cmd), msg)
}

// help prints the help of cmd: the command list at the root, the
// subcommands of a group, the flags of a leaf.
func (c *cli) help(cmd *cobra.Command) error {
	w := cmd.OutOrStdout()
	f, isLeaf := c.leaves[cmd]
	switch {
	case !cmd.HasParent():
		fmt.Fprintln(w, "Usage: zae-limiter COMMAND [SUBCOMMAND] [ARGS] [FLAGS]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, cmd.Long)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Commands:")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-14s %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Common flags (every command):")
		fmt.Fprint(w, commonFlagsHelp)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Run `zae-limiter COMMAND --help` for a command's flags.")
	case cmd.HasAvailableSubCommands():
		path := commandPath(cmd)
		fmt.Fprintf(w, "Usage: zae-limiter %s SUBCOMMAND [ARGS] [FLAGS]\n\n%s.\n\nSubcommands:\n", path, strings.TrimSuffix(cmd.Short, "."))
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-16s %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintf(w, "\nRun `zae-limiter %s SUBCOMMAND --help` for its flags.\n", path)
	case isLeaf:
		fmt.Fprintf(w, "Usage: zae-limiter %s [FLAGS]\n\n%s\n\nFlags:\n", f.use, f.cmd.Long)
		for _, u := range f.flagUsages() {
			fmt.Fprintf(w, "  %s\n        \t%s\n", u.names, u.usage)
		}
	default: // cobra's own commands (completion SHELL)
		fmt.Fprintf(w, "Usage: zae-limiter %s [FLAGS]\n\n%s\n", strings.TrimPrefix(cmd.UseLine(), "zae-limiter "), strings.TrimSpace(cmd.Long))
		if fs := cmd.LocalFlags(); fs.HasAvailableFlags() {
			fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
		}
	}
	return nil
}

// flagUsage is one flag of a command's help: its names and its description
// with its default.
type flagUsage struct {
	names string // "-n, --name", "    --region" or "    --wait / --no-wait"
	usage string
}

// outputUsage is the usage of --output (table or json).
const outputUsage = "output format: table or json"

// commonFlagNames are the common flags (the root's persistent flags) in
// the order a command's help lists them, before its own.
var commonFlagNames = []string{"name", "region", "endpoint-url", "namespace"}

// flagUsages returns the flags of f: the common flags, then its own in
// registration order.
func (f *command) flagUsages() []flagUsage {
	var out []flagUsage
	lookup := func(name string) *pflag.Flag {
		if fl := f.cmd.Flags().Lookup(name); fl != nil {
			return fl
		}
		return f.cmd.Root().PersistentFlags().Lookup(name)
	}
	for _, long := range append(commonFlagNames[:len(commonFlagNames):len(commonFlagNames)], f.order...) {
		if parts := strings.Split(long, "|"); len(parts) == 3 {
			fl := lookup(parts[0])
			out = append(out, flagUsage{"    --" + parts[0] + " / --" + parts[1], fl.Usage + " (default --" + parts[2] + ")"})
			continue
		}
		fl := lookup(long)
		if fl == nil {
			continue // a command not in the tree (limits set's targets)
		}
		names := "    --" + long
		if fl.Shorthand != "" {
			names = "-" + fl.Shorthand + ", --" + long
		}
		usage := fl.Usage
		if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
			usage += fmt.Sprintf(" (default %q)", d)
		}
		out = append(out, flagUsage{names, usage})
	}
	return out
}

const commonFlagsHelp = `  -n, --name NAME          stack and table name (default $ZAEL_STACK, else "zae-limiter")
      --region REGION      AWS region (default: the SDK's configuration)
      --endpoint-url URL   AWS endpoint, e.g. http://localhost:8000 for DynamoDB Local
  -N, --namespace NAME     namespace within the table (default $ZAEL_NAMESPACE, else "default")
  -o, --output FORMAT      table or json (default table)
`

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
