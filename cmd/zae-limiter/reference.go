package main

// The command reference of docs/cli.md, generated from the command tree:
// `make cli-docs` (go generate) rewrites it, and TestCLIReference fails
// when it is stale.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zaelimiter/limiter/internal/ddbschema"
)

// The markers around the generated reference in docs/cli.md.
const (
	referenceBegin = "<!-- Generated from the command tree by `make cli-docs`; do not edit by hand. -->"
	referenceEnd   = "<!-- End of the generated command reference. -->"
)

// hiddenCommands are added to the tree unlisted: the generator of the
// reference, in a build with -tags gendocs.
var hiddenCommands []func(c *cli) *cobra.Command

// updateReference returns doc with the text between the markers replaced
// by the reference of the command tree, as a clean environment sees it
// ($ZAEL_STACK and $ZAEL_NAMESPACE unset: they change defaults).
func updateReference(doc []byte) ([]byte, error) {
	begin := bytes.Index(doc, []byte(referenceBegin))
	end := bytes.Index(doc, []byte(referenceEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no generated command reference: the markers %q and %q are missing", referenceBegin, referenceEnd)
	}
	for _, name := range []string{ddbschema.EnvStack, ddbschema.EnvNamespace} {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			defer os.Setenv(name, v)
		}
	}
	c := &cli{}
	root := c.rootCommand()
	var out bytes.Buffer
	out.Write(doc[:begin+len(referenceBegin)])
	out.WriteString("\n\n")
	c.writeReference(&out, root)
	out.Write(doc[end:])
	return out.Bytes(), nil
}

// writeReference writes the reference of the commands below root as
// markdown: the common flags, then for each command (depth first, in name
// order) its usage, description and flags.
func (c *cli) writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, "Every command takes the common flags:\n\n")
	for _, name := range commonFlagNames {
		writeFlag(w, root.PersistentFlags().Lookup(name))
	}
	fmt.Fprintln(w)
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			c.writeCommand(w, sub)
			walk(sub)
		}
	}
	walk(root)
}

// writeCommand writes the section of one command.
func (c *cli) writeCommand(w io.Writer, cmd *cobra.Command) {
	path := cmd.CommandPath()
	fmt.Fprintf(w, "### %s\n\n", path)
	f, isLeaf := c.leaves[cmd]
	switch {
	case cmd.HasAvailableSubCommands():
		fmt.Fprintf(w, "%s.\n\n", strings.TrimSuffix(cmd.Short, "."))
		fmt.Fprintf(w, "Usage: `%s SUBCOMMAND [ARGS] [FLAGS]`, where SUBCOMMAND is one of:\n\n", path)
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "* `%s`: %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintln(w)
	case isLeaf:
		writeText(w, f.cmd.Long)
		fmt.Fprintf(w, "Usage: `zae-limiter %s [FLAGS]`\n\n", f.use)
		out := f.cmd.Flags().Lookup("output")
		tableOrJSON := out != nil && out.Usage == outputUsage
		var own []string
		for _, long := range f.order {
			if long != "output" || !tableOrJSON {
				own = append(own, long)
			}
		}
		if tableOrJSON {
			fmt.Fprint(w, "Takes the common flags and `-o, --output table|json`.")
		} else {
			fmt.Fprint(w, "Takes the common flags.")
		}
		if len(own) == 0 {
			fmt.Fprint(w, "\n\n")
			return
		}
		fmt.Fprint(w, " Flags:\n\n")
		for _, long := range own {
			if parts := strings.Split(long, "|"); len(parts) == 3 {
				fl := f.cmd.Flags().Lookup(parts[0])
				fmt.Fprintf(w, "* `--%s` / `--%s`: %s (default `--%s`)\n", parts[0], parts[1], oneLine(fl.Usage), parts[2])
				continue
			}
			writeFlag(w, f.cmd.Flags().Lookup(long))
		}
		fmt.Fprintln(w)
	default: // cobra's own commands (completion SHELL)
		fmt.Fprintf(w, "%s.\n\nUsage: `%s`\n\n", strings.TrimSuffix(cmd.Short, "."), cmd.UseLine())
		var flags []*pflag.Flag
		cmd.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Name != "help" {
				flags = append(flags, fl)
			}
		})
		for _, fl := range flags {
			writeFlag(w, fl)
		}
		if len(flags) > 0 {
			fmt.Fprintln(w)
		}
	}
}

// writeText writes a command's description: its lines, those indented
// as a list ("  --flag ARG  what it does" as "* `--flag ARG`: what it does").
func writeText(w io.Writer, text string) {
	inList := false
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		item := strings.HasPrefix(l, " ")
		if item != inList {
			fmt.Fprintln(w)
			inList = item
		}
		if head, tail, ok := strings.Cut(strings.TrimSpace(l), "  "); item && ok {
			fmt.Fprintf(w, "* `%s`: %s\n", head, strings.TrimSpace(tail))
		} else if item {
			fmt.Fprintf(w, "* %s\n", strings.TrimSpace(l))
		} else {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintln(w)
}

// writeFlag writes one flag as a list item: names, value type, usage and
// default.
func writeFlag(w io.Writer, fl *pflag.Flag) {
	names := "--" + fl.Name
	if fl.Shorthand != "" {
		names = "-" + fl.Shorthand + ", --" + fl.Name
	}
	switch t := fl.Value.Type(); t {
	case "bool":
	case "stringArray":
		names += " string"
	case "float64":
		names += " float"
	default:
		names += " " + t
	}
	usage := oneLine(fl.Usage)
	if fl.Value.Type() == "stringArray" && !strings.Contains(usage, "repeatable") {
		usage += " (repeatable)"
	}
	if d := fl.DefValue; d != "" && d != "false" && d != "0" && d != "[]" {
		usage += fmt.Sprintf(" (default `%s`)", d)
	}
	fmt.Fprintf(w, "* `%s`: %s\n", names, usage)
}
