package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// `limits set|get|delete` address the three levels of stored limits with
// flags — --entity ID [--resource R], --resource R, or --system — and run
// the same code as `entity set-limits`, `resource set-defaults` and
// `system set-defaults` (and their get/delete forms).

// levelValue is the value of --entity or --resource: a string that
// refuses a value that looks like a flag, so that `--entity --resource r`
// is a missing argument rather than the entity "--resource".
type levelValue struct{ p *string }

func (v levelValue) String() string { return *v.p }
func (v levelValue) Type() string   { return "string" }
func (v levelValue) Set(s string) error {
	if strings.HasPrefix(s, "-") {
		return errFlagNeedsValue
	}
	*v.p = s
	return nil
}

// limitsLevelUsage describes `limits set|get|delete`.
const limitsLevelUsage = `%[1]s stored limits at one level of the hierarchy:
  --entity ID [--resource R]  limits of an entity on a resource (default _default_: every resource without its own)
  --resource R                default limits of a resource
  --system                    namespace-wide defaults (set also takes --on-unavailable allow|block)
The other flags are those of: zae-limiter %[2]s --help`

// limitsLevelCommand returns `limits verb`, which runs the command of the
// level its flags address: targets are the entity, resource and system
// commands. It takes their flags as well and hands those given to the one
// it runs.
func limitsLevelCommand(c *cli, verb, title string, targets [3]func(*cli) *command) *command {
	var built [3]*command
	var names [3]string
	for i, build := range targets {
		built[i] = build(c)
		names[i] = built[i].command()
	}
	f := c.newFlags("limits "+verb+" (--entity ID [--resource R] | --resource R | --system)",
		fmt.Sprintf(limitsLevelUsage, title, strings.Join(names[:], ", ")), 0, 0, true)
	var entity, resource string
	var system bool
	f.flags().VarP(levelValue{&entity}, "entity", "e", "the entity whose limits (with --resource: on that resource)")
	f.flags().VarP(levelValue{&resource}, "resource", "r", "the resource: with --entity, the entity's limits on it; alone, its defaults")
	f.order = append(f.order, "entity", "resource")
	f.boolean(&system, "system", "", false, "the namespace-wide defaults")
	for _, t := range built {
		t.flags().VisitAll(func(fl *pflag.Flag) {
			if f.flags().Lookup(fl.Name) == nil {
				f.flags().AddFlag(fl)
				f.order = append(f.order, fl.Name)
			}
		})
	}
	f.run = func([]string) error {
		flags := f.flags()
		hasEntity, hasResource := flags.Changed("entity"), flags.Changed("resource")
		levels := 0
		for _, b := range []bool{hasEntity, system, hasResource && !hasEntity} {
			if b {
				levels++
			}
		}
		var t *command
		var pos []string
		switch {
		case levels != 1:
			return errors.New("limits " + verb + ": give exactly one of --entity ID (with an optional --resource), --resource R or --system")
		case hasEntity:
			t, pos = built[0], []string{entity}
		case system:
			t = built[2]
		default:
			t, pos = built[1], []string{resource}
		}
		if err := handFlags(flags, t, hasEntity); err != nil {
			return err
		}
		if err := t.checkArgs(pos); err != nil {
			return err
		}
		return t.execute(flags, pos)
	}
	return f
}

// handFlags sets on t the flags given in flags, other than the level's
// (--resource goes along with --entity) and the common ones (which set
// the same variables for every command).
func handFlags(flags *pflag.FlagSet, t *command, withResource bool) error {
	var err error
	flags.Visit(func(fl *pflag.Flag) {
		if err != nil || fl.Name == "entity" || fl.Name == "system" || (fl.Name == "resource" && !withResource) || slices.Contains(commonFlagNames, fl.Name) {
			return
		}
		tf := t.flags().Lookup(fl.Name)
		switch {
		case tf == nil:
			err = fmt.Errorf("%s: unknown flag --%s", t.command(), fl.Name)
			return
		case tf == fl:
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			err = tf.Value.(pflag.SliceValue).Replace(sv.GetSlice())
		} else {
			err = tf.Value.Set(fl.Value.String())
		}
		tf.Changed = true
	})
	return err
}

func cmdLimitsSet(c *cli) *command {
	return limitsLevelCommand(c, "set", "Store", [3]func(*cli) *command{cmdEntitySetLimits, cmdResourceSetDefaults, cmdSystemSetDefaults})
}

func cmdLimitsGet(c *cli) *command {
	return limitsLevelCommand(c, "get", "Show", [3]func(*cli) *command{cmdEntityGetLimits, cmdResourceGetDefaults, cmdSystemGetDefaults})
}

func cmdLimitsDelete(c *cli) *command {
	return limitsLevelCommand(c, "delete", "Delete (needs --yes)", [3]func(*cli) *command{cmdEntityDeleteLimits, cmdResourceDeleteDefaults, cmdSystemDeleteDefaults})
}
