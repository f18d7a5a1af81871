package main

import (
	"errors"
	"fmt"
	"strings"
)

// `limits set|get|delete` address the three levels of stored limits with
// flags — --entity ID [--resource R], --resource R, or --system — and run
// the same code as `entity set-limits`, `resource set-defaults` and
// `system set-defaults` (and their get/delete forms).

// limitsLevel is the level a `limits set|get|delete` command addresses.
type limitsLevel struct {
	entity, resource       string
	hasEntity, hasResource bool
	system                 bool
	rest                   []string // the other arguments, forwarded
	help                   bool
}

// parseLimitsLevel takes --entity/-e, --resource/-r and --system (in any of
// the forms the flag package accepts: -x v, --x v, --x=v) out of args.
func parseLimitsLevel(args []string) (limitsLevel, error) {
	var lv limitsLevel
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			lv.rest = append(lv.rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			lv.rest = append(lv.rest, a)
			continue
		}
		take := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
				return "", fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "entity", "e":
			lv.entity, err = take()
			lv.hasEntity = true
		case "resource", "r":
			lv.resource, err = take()
			lv.hasResource = true
		case "system":
			lv.system = !hasValue || value == "true"
		case "h", "help":
			lv.help = true
		default:
			lv.rest = append(lv.rest, a)
		}
		if err != nil {
			return lv, err
		}
	}
	return lv, nil
}

// limitsLevelUsage is the help of `limits set|get|delete`.
const limitsLevelUsage = `Usage: zae-limiter limits %[1]s (--entity ID [--resource R] | --resource R | --system) [FLAGS]

%[2]s stored limits at one level of the hierarchy:
  --entity ID [--resource R]  limits of an entity on a resource (default _default_: every resource without its own)
  --resource R                default limits of a resource
  --system                    namespace-wide defaults (set also takes --on-unavailable allow|block)

The other flags are those of: zae-limiter %[3]s --help
`

// limitsLevelCommand routes `limits verb` to the command of the level.
func limitsLevelCommand(c *cli, args []string, verb, title string, entityCmd, resourceCmd, systemCmd handler, names [3]string) error {
	lv, err := parseLimitsLevel(args)
	if err != nil {
		return fmt.Errorf("limits %s: %w", verb, err)
	}
	if lv.help {
		fmt.Fprintf(c.stdout, limitsLevelUsage, verb, title, strings.Join(names[:], ", "))
		return errHelp
	}
	levels := 0
	for _, b := range []bool{lv.hasEntity, lv.system, lv.hasResource && !lv.hasEntity} {
		if b {
			levels++
		}
	}
	switch {
	case levels != 1:
		return errors.New("limits " + verb + ": give exactly one of --entity ID (with an optional --resource), --resource R or --system")
	case lv.hasEntity:
		fwd := append(lv.rest, lv.entity)
		if lv.hasResource {
			fwd = append(fwd, "--resource", lv.resource)
		}
		return entityCmd(c, fwd)
	case lv.system:
		return systemCmd(c, lv.rest)
	default:
		return resourceCmd(c, append(lv.rest, lv.resource))
	}
}

func cmdLimitsSet(c *cli, args []string) error {
	return limitsLevelCommand(c, args, "set", "Store", cmdEntitySetLimits, cmdResourceSetDefaults, cmdSystemSetDefaults,
		[3]string{"entity set-limits", "resource set-defaults", "system set-defaults"})
}

func cmdLimitsGet(c *cli, args []string) error {
	return limitsLevelCommand(c, args, "get", "Show", cmdEntityGetLimits, cmdResourceGetDefaults, cmdSystemGetDefaults,
		[3]string{"entity get-limits", "resource get-defaults", "system get-defaults"})
}

func cmdLimitsDelete(c *cli, args []string) error {
	return limitsLevelCommand(c, args, "delete", "Delete (needs --yes)", cmdEntityDeleteLimits, cmdResourceDeleteDefaults, cmdSystemDeleteDefaults,
		[3]string{"entity delete-limits", "resource delete-defaults", "system delete-defaults"})
}
