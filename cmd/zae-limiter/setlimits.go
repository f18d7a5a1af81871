package main

import (
	"errors"
	"fmt"
	"slices"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// setLimitsJSON is the JSON output of entity set-limits: the limits
// given, and how they changed what was stored before.
type setLimitsJSON struct {
	limitsJSON
	// Replaced holds the limits stored before under a name given, as
	// they were.
	Replaced []limitJSON `json:"replaced,omitempty"`
	// Removed holds the limits stored before under a name not given:
	// deleted (without --merge).
	Removed []limitJSON `json:"removed,omitempty"`
	// Kept holds the limits stored before under a name not given, kept
	// by --merge.
	Kept []limitJSON `json:"kept,omitempty"`
}

func cmdEntitySetLimits(c *cli) *command {
	f := c.newFlags("entity set-limits ENTITY_ID", "Store limits for ENTITY_ID on a resource, replacing those stored before "+
		"(with --merge only those of the names given), and say what was replaced.", 1, 1, true)
	var resource string
	var specs []string
	var merge bool
	f.resourceFlag(&resource)
	f.limitFlag(&specs)
	f.mergeFlag(&merge)
	f.run = func(pos []string) error {
		limits, err := parseLimits(specs)
		if err != nil {
			return err
		}
		if len(limits) == 0 {
			return errors.New("entity set-limits: at least one --limit is required")
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		entity := pos[0]
		if _, err := repo.Admin().Entity(c.ctx, entity); errors.Is(err, limiter.ErrEntityNotFound) {
			c.warnf("entity '%s' does not exist: its limits apply to acquires of that id, which has no parent until "+
				"'zae-limiter entity create %s' creates it (a misspelled id?)", entity, entity)
		} else if err != nil {
			return err
		}
		before, err := repo.Admin().Limits(c.ctx, limiter.Scope{Entity: entity, Resource: resource})
		if err != nil {
			return err
		}
		for _, l := range limits {
			if hint := limitNameHint(l.Name, before); hint != "" {
				c.warnf("limit '%s' is new for entity '%s' on resource '%s' (stored: %s): %s", l.Name, entity, resource, namesOf(before), hint)
			}
		}
		stored, ch := mergeLimits(before, limits, merge)
		if err := repo.Admin().SetLimits(c.ctx, limiter.Scope{Entity: entity, Resource: resource}, stored); err != nil {
			return err
		}
		return c.reportSet(fmt.Sprintf("Set %d limit(s) for entity '%s' %s:", len(limits), entity, onResource(resource)),
			limitsJSON{EntityID: entity, Resource: resource, Limits: limitsToJSON(limits)}, limits, ch)
	}
	return f
}

// reportSet reports limits just stored (given) and how they changed the
// stored set (ch): as JSON, out with the changes; as text, header, the
// limits, the on-unavailable mode when set, and each kind of change.
func (c *cli) reportSet(header string, out limitsJSON, given []limiter.Limit, ch limitChanges) error {
	js := setLimitsJSON{limitsJSON: out}
	if len(ch.replaced) > 0 {
		js.Replaced = limitsToJSON(ch.replaced)
	}
	if len(ch.removed) > 0 {
		js.Removed = limitsToJSON(ch.removed)
	}
	if len(ch.kept) > 0 {
		js.Kept = limitsToJSON(ch.kept)
	}
	if c.jsonOutput() {
		return c.writeJSON(js)
	}
	c.printf("%s\n", header)
	for _, l := range given {
		c.printf("  %s\n", formatLimit(l))
	}
	if out.OnUnavailable != "" {
		c.printf("  on_unavailable: %s\n", out.OnUnavailable)
	}
	for _, g := range []struct {
		title  string
		limits []limiter.Limit
	}{
		{"Replaced (as stored before):", ch.replaced},
		{"Removed (stored before, not given; --merge keeps such limits):", ch.removed},
		{"Kept (stored before, not given, --merge):", ch.kept},
	} {
		if len(g.limits) == 0 {
			continue
		}
		c.printf("%s\n", g.title)
		for _, l := range g.limits {
			c.printf("  %s\n", formatLimit(l))
		}
	}
	return nil
}

// limitChanges says how a set of limits changed the stored one: the
// stored limits replaced by a limit of the same name (when they differ),
// and those of names not given, removed or, with merge, kept.
type limitChanges struct {
	replaced, removed, kept []limiter.Limit
}

// mergeLimits returns the limits to store when given replaces before
// (every limit of before goes, unless merge keeps those whose names given
// lacks, in their order, before the limits given) and the changes.
func mergeLimits(before, given []limiter.Limit, merge bool) ([]limiter.Limit, limitChanges) {
	var ch limitChanges
	var stored []limiter.Limit
	for _, old := range before {
		i := slices.IndexFunc(given, func(l limiter.Limit) bool { return l.Name == old.Name })
		switch {
		case i >= 0:
			if !limitsEqual(old, given[i]) {
				ch.replaced = append(ch.replaced, old)
			}
		case merge:
			ch.kept = append(ch.kept, old)
			stored = append(stored, old)
		default:
			ch.removed = append(ch.removed, old)
		}
	}
	return append(stored, given...), ch
}

// limitsEqual reports whether a and b are the same limit (the zone
// compared by name).
func limitsEqual(a, b limiter.Limit) bool {
	if store.Limit(a).LocationName() != store.Limit(b).LocationName() {
		return false
	}
	a.Location, b.Location = nil, nil
	return a == b
}

// namesOf returns the names of limits, comma-separated ("none" for none).
func namesOf(limits []limiter.Limit) string {
	if len(limits) == 0 {
		return "none"
	}
	s := ""
	for i, l := range limits {
		if i > 0 {
			s += ", "
		}
		s += l.Name
	}
	return s
}

// conventionalLimitNames are names a limit is commonly given: a new name
// close to one of them (or to a stored name) is likely a typo.
var conventionalLimitNames = []string{
	"rpm", "rph", "rpd", "tpm", "tph", "tpd", usdLimitName,
	"rps", "tps", // per second
}

// limitNameHint returns "did you mean X?" when name is new to before (no
// stored limit has it), is not a conventional name, and is a likely typo of
// a stored or conventional name; else "".
func limitNameHint(name string, before []limiter.Limit) string {
	if slices.Contains(conventionalLimitNames, name) || slices.ContainsFunc(before, func(l limiter.Limit) bool { return l.Name == name }) {
		return ""
	}
	candidates := make([]string, 0, len(before)+len(conventionalLimitNames))
	for _, l := range before {
		candidates = append(candidates, l.Name)
	}
	candidates = append(candidates, conventionalLimitNames...)
	if s := suggest(name, candidates); s != "" {
		return fmt.Sprintf("did you mean %s?", s)
	}
	return ""
}

// mergeFlag registers --merge.
func (f *command) mergeFlag(p *bool) {
	f.boolean(p, "merge", "", false, "keep the stored limits whose names are not given (default: the limits given replace the whole set)")
}
