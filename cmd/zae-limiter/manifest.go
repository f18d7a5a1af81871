package main

// Declarative limits: `limits plan|apply|diff -f limits.yaml`.
//
// The manifest is diffed directly against the limits stored in the table
// (not against a record of what a previous apply managed), and the changes
// are applied through the library (SetSystemDefaults, SetResourceDefaults,
// RateLimiter.SetLimits and the Delete* calls), so every change is
// validated, audited, evicts config caches and syncs bucket parameters, and
// a target whose stored limits already match is left alone: applying the
// same manifest twice changes nothing the second time. Targets the manifest
// does not mention are never touched, unless --prune is given: then every
// stored config of the namespace that the manifest does not declare is
// deleted, including those a provisioner Lambda wrote without registry
// entries (found through its state record, see readProvisionerState).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/infra/provisioner"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// Manifest YAML.
type manifestFile struct {
	Namespace string                      `yaml:"namespace"`
	System    *manifestSystem             `yaml:"system"`
	Resources map[string]manifestLimits   `yaml:"resources"`
	Entities  map[string]manifestEntities `yaml:"entities"`
}

type manifestSystem struct {
	OnUnavailable string                  `yaml:"on_unavailable"`
	Limits        map[string]manifestDecl `yaml:"limits"`
	manifestUSD   `yaml:",inline"`
}

type manifestLimits struct {
	Limits      map[string]manifestDecl `yaml:"limits"`
	manifestUSD `yaml:",inline"`
}

type manifestEntities struct {
	Resources map[string]manifestLimits `yaml:"resources"`
}

// manifestDecl is one limit: capacity (required), refill_amount (default
// capacity), refill_period in seconds (default 60); burst, when given,
// replaces capacity (an older spelling, still accepted). With calendar
// (day, week or month) it is a calendar limit instead: capacity tokens
// each period, starting at 00:00 in timezone (an IANA zone, default UTC),
// and no refill fields. With prepaid: true it is a prepaid balance whose
// capacity (optional) is the ceiling of its top-ups, and nothing else.
// With inflight: N it is a limit of N calls in flight, and nothing else.
type manifestDecl struct {
	Capacity     *int64  `yaml:"capacity"`
	Burst        *int64  `yaml:"burst"`
	RefillAmount *int64  `yaml:"refill_amount"`
	RefillPeriod *int64  `yaml:"refill_period"`
	Calendar     *string `yaml:"calendar"`
	Timezone     *string `yaml:"timezone"`
	Prepaid      bool    `yaml:"prepaid"`
	InFlight     *int64  `yaml:"inflight"`
}

// manifest is a validated manifest.
type manifest struct {
	namespace string
	system    *systemDecl
	resources map[string][]limiter.Limit
	entities  map[entityTarget][]limiter.Limit
}

type systemDecl struct {
	limits        []limiter.Limit
	onUnavailable limiter.OnUnavailable // "" leaves the stored mode alone
}

type entityTarget struct{ entity, resource string }

func (t entityTarget) String() string { return t.entity + "/" + t.resource }

// loadManifest reads and validates the manifest at path ("-" is stdin).
func loadManifest(path string, stdin io.Reader) (*manifest, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return parseManifest(data)
}

// parseManifest decodes and validates a manifest. Unknown keys are errors.
func parseManifest(data []byte) (*manifest, error) {
	if err := checkManifestKeys(data); err != nil {
		return nil, err
	}
	var mf manifestFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&mf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("invalid manifest: the file is empty")
		}
		return nil, fmt.Errorf("invalid manifest: %s", manifestTypeNames.Replace(strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	m := &manifest{namespace: mf.Namespace, resources: map[string][]limiter.Limit{}, entities: map[entityTarget][]limiter.Limit{}}
	if s := mf.System; s != nil {
		limits, err := declLimits("system", s.Limits, s.manifestUSD)
		if err != nil {
			return nil, err
		}
		ou := limiter.OnUnavailable(s.OnUnavailable)
		if ou != "" && !ou.Valid() {
			return nil, fmt.Errorf("invalid manifest: system.on_unavailable %q: use allow or block", s.OnUnavailable)
		}
		if len(limits) == 0 && ou == "" {
			return nil, errors.New("invalid manifest: system declares neither limits nor on_unavailable")
		}
		m.system = &systemDecl{limits: limits, onUnavailable: ou}
	}
	for res, decl := range mf.Resources {
		if err := provisioner.ValidateDefaultsResource(res); err != nil {
			return nil, fmt.Errorf("invalid manifest: resources.%s: %v", res, err)
		}
		limits, err := declLimits("resources."+res, decl.Limits, decl.manifestUSD)
		if err != nil {
			return nil, err
		}
		if len(limits) == 0 {
			return nil, fmt.Errorf("invalid manifest: resources.%s declares no limits", res)
		}
		m.resources[res] = limits
	}
	for id, ent := range mf.Entities {
		if err := store.ValidateIdentifier(id, "entity_id"); err != nil {
			return nil, fmt.Errorf("invalid manifest: entities.%s: %v", id, err)
		}
		if len(ent.Resources) == 0 {
			return nil, fmt.Errorf("invalid manifest: entities.%s declares no resources", id)
		}
		for res, decl := range ent.Resources {
			if err := provisioner.ValidateEntityResource(res); err != nil {
				return nil, fmt.Errorf("invalid manifest: entities.%s.resources.%s: %v", id, res, err)
			}
			path := "entities." + id + ".resources." + res
			limits, err := declLimits(path, decl.Limits, decl.manifestUSD)
			if err != nil {
				return nil, err
			}
			if len(limits) == 0 {
				return nil, fmt.Errorf("invalid manifest: %s declares no limits", path)
			}
			m.entities[entityTarget{id, res}] = limits
		}
	}
	return m, nil
}

// declLimits converts a limits mapping, and the level's dollar
// shorthand, into limits sorted by name.
func declLimits(path string, decls map[string]manifestDecl, usd manifestUSD) ([]limiter.Limit, error) {
	limits := make([]limiter.Limit, 0, len(decls)+1)
	for _, name := range sortedKeys(decls) {
		l, err := declLimit(path+".limits."+name, name, decls[name])
		if err != nil {
			return nil, err
		}
		limits = append(limits, l)
	}
	budget, ok, err := usd.limit(path)
	if err != nil || !ok {
		return limits, err
	}
	if _, dup := decls[usdLimitName]; dup {
		return nil, fmt.Errorf("invalid manifest: %s: %s and limits.%s both declare the limit %s: keep one",
			path, usd.key(), usdLimitName, usdLimitName)
	}
	limits = append(limits, budget)
	return sortLimits(limits), nil
}

// declLimit converts one limit declaration at p (its path in the manifest).
func declLimit(p, name string, d manifestDecl) (limiter.Limit, error) {
	if d.InFlight != nil {
		if d.Capacity != nil || d.Burst != nil || d.RefillAmount != nil || d.RefillPeriod != nil || d.Calendar != nil || d.Timezone != nil || d.Prepaid {
			return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: a limit of calls in flight takes inflight: N and nothing else", p)
		}
		l := limiter.InFlight(name, *d.InFlight)
		if err := l.Validate(); err != nil {
			return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v", p, err)
		}
		return l, nil
	}
	if d.Prepaid {
		return declPrepaidLimit(p, name, d)
	}
	if d.Capacity == nil && d.Burst == nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: capacity is required", p)
	}
	var capacity int64
	if d.Capacity != nil {
		capacity = *d.Capacity
	}
	if d.Burst != nil {
		capacity = *d.Burst
	}
	if d.Calendar != nil {
		return declCalendarLimit(p, name, capacity, d)
	}
	if d.Timezone != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: timezone is only for a calendar limit (calendar: day, week or month)", p)
	}
	refill, period := capacity, int64(60)
	if d.RefillAmount != nil {
		refill = *d.RefillAmount
	}
	if d.RefillPeriod != nil {
		period = *d.RefillPeriod
	}
	if period <= 0 || period > int64(1<<62)/int64(time.Second) {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: refill_period must be a positive number of seconds", p)
	}
	l := limiter.Limit{Name: name, Capacity: capacity, RefillAmount: refill, RefillPeriod: time.Duration(period) * time.Second}
	err := l.Validate()
	if err != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v", p, err)
	}
	return l, nil
}

// declPrepaidLimit converts a declaration with prepaid: true: a prepaid
// balance, its capacity (optional) the ceiling of its top-ups.
func declPrepaidLimit(p, name string, d manifestDecl) (limiter.Limit, error) {
	if d.RefillAmount != nil || d.RefillPeriod != nil || d.Calendar != nil || d.Timezone != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: a prepaid balance takes no refill_amount, refill_period, calendar or timezone", p)
	}
	var capacity int64
	if d.Capacity != nil {
		capacity = *d.Capacity
	}
	if d.Burst != nil {
		capacity = *d.Burst
	}
	if (d.Capacity != nil || d.Burst != nil) && capacity <= 0 {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: capacity must be positive", p)
	}
	l, err := provisioner.PrepaidLimit(name, capacity)
	if err != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v", p, err)
	}
	return l, nil
}

// declCalendarLimit converts a declaration with calendar: capacity tokens
// each day, week or month in the declared time zone.
func declCalendarLimit(p, name string, capacity int64, d manifestDecl) (limiter.Limit, error) {
	if d.RefillAmount != nil || d.RefillPeriod != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: a calendar limit resets each period and takes no refill_amount or refill_period", p)
	}
	period, err := provisioner.ParseCalendar(*d.Calendar)
	if err != nil {
		if s := suggest(*d.Calendar, []string{"day", "week", "month"}); s != "" {
			return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v (did you mean %s?)", p, err, s)
		}
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v", p, err)
	}
	tz := ""
	if d.Timezone != nil {
		tz = *d.Timezone
	}
	l, err := provisioner.CalendarLimit(name, capacity, period, tz)
	if err != nil {
		return limiter.Limit{}, fmt.Errorf("invalid manifest: %s: %v", p, err)
	}
	return l, nil
}

// Change actions and levels, as plan and apply print them.
const (
	actionCreate = "create"
	actionUpdate = "update"
	actionDelete = "delete"

	levelSystem   = "system"
	levelResource = "resource"
	levelEntity   = "entity"
)

// change is one planned change. JSON: action, level, target ("" for the
// system level, the resource, or "entity/resource"), limits (the limits to
// store, for create and update), previous (the stored limits, for update and
// delete) and on_unavailable (system level).
type change struct {
	Action        string      `json:"action"`
	Level         string      `json:"level"`
	Target        string      `json:"target"`
	Limits        []limitJSON `json:"limits,omitempty"`
	Previous      []limitJSON `json:"previous,omitempty"`
	OnUnavailable string      `json:"on_unavailable,omitempty"`

	limits   []limiter.Limit
	entity   string
	resource string
}

// planResult is the JSON output of plan, diff and apply.
type planResult struct {
	Namespace string   `json:"namespace"`
	Changes   []change `json:"changes"`
	Applied   bool     `json:"applied"`
	Created   int      `json:"created"`
	Updated   int      `json:"updated"`
	Deleted   int      `json:"deleted"`
}

// sameLimits reports whether a and b hold the same limits in any order.
// Calendar limits compare by period and zone name: two loads of one zone
// are two *time.Location values.
func sameLimits(a, b []limiter.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	byName := make(map[string]limitKey, len(a))
	for _, l := range a {
		byName[l.Name] = keyOf(l)
	}
	for _, l := range b {
		if o, ok := byName[l.Name]; !ok || o != keyOf(l) {
			return false
		}
	}
	return true
}

// limitKey is what makes two limits the same.
type limitKey struct {
	name                   string
	capacity, refillAmount int64
	refillPeriod           time.Duration
	calendar               store.CalendarPeriod
	zone                   string
	prepaid                bool
	inFlight               bool
}

func keyOf(l limiter.Limit) limitKey {
	return limitKey{l.Name, l.Capacity, l.RefillAmount, l.RefillPeriod, l.Calendar, store.Limit(l).LocationName(), store.Limit(l).IsPrepaid(), store.Limit(l).IsInFlight()}
}

func sortLimits(ls []limiter.Limit) []limiter.Limit {
	out := append([]limiter.Limit(nil), ls...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// setChange returns the create/update change for a target, or ok false when
// the stored limits already match.
func setChange(level, target string, want, have []limiter.Limit) (change, bool) {
	ch := change{Level: level, Target: target, Limits: limitsToJSON(want), limits: want}
	switch {
	case len(have) == 0:
		ch.Action = actionCreate
	case !sameLimits(want, have):
		ch.Action = actionUpdate
		ch.Previous = limitsToJSON(sortLimits(have))
	default:
		return ch, false
	}
	return ch, true
}

// plan diffs the manifest against the stored limits of repo's namespace.
func plan(c *cli, repo *table, m *manifest, prune bool) ([]change, error) {
	ctx := c.ctx
	var changes []change

	// System.
	have, haveOU, err := repo.Admin().SystemDefaults(ctx)
	if err != nil {
		return nil, err
	}
	systemStored := len(have) > 0 || haveOU != ""
	if s := m.system; s != nil {
		ou := s.onUnavailable
		if ou == "" {
			ou = haveOU // not managed by the manifest: keep what is stored
		}
		ch := change{Level: levelSystem, Limits: limitsToJSON(s.limits), OnUnavailable: string(ou), limits: s.limits}
		switch {
		case !systemStored:
			ch.Action = actionCreate
		case !sameLimits(s.limits, have) || ou != haveOU:
			ch.Action = actionUpdate
			ch.Previous = limitsToJSON(sortLimits(have))
		}
		if ch.Action != "" {
			changes = append(changes, ch)
		}
	} else if prune && systemStored {
		changes = append(changes, change{Action: actionDelete, Level: levelSystem, Previous: limitsToJSON(sortLimits(have)), OnUnavailable: string(haveOU)})
	}

	// Resources.
	for _, res := range sortedKeys(m.resources) {
		have, err := repo.Admin().Limits(ctx, limiter.Scope{Resource: res})
		if err != nil {
			return nil, err
		}
		if ch, ok := setChange(levelResource, res, m.resources[res], have); ok {
			ch.resource = res
			changes = append(changes, ch)
		}
	}
	var prov provisionerState
	if prune {
		if prov, err = c.readProvisionerState(repo); err != nil {
			return nil, err
		}
		stored, err := iterx.Collect(repo.Admin().ResourcesWithDefaults(ctx))
		if err != nil {
			return nil, err
		}
		for _, res := range union(stored, prov.resources) {
			if _, ok := m.resources[res]; ok {
				continue
			}
			have, err := repo.Admin().Limits(ctx, limiter.Scope{Resource: res})
			if err != nil {
				return nil, err
			}
			if len(have) > 0 {
				changes = append(changes, change{Action: actionDelete, Level: levelResource, Target: res, Previous: limitsToJSON(sortLimits(have)), resource: res})
			}
		}
	}

	// Entities.
	targets := make([]entityTarget, 0, len(m.entities))
	for t := range m.entities {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].String() < targets[j].String() })
	for _, t := range targets {
		have, err := repo.Admin().Limits(ctx, limiter.Scope{Entity: t.entity, Resource: t.resource})
		if err != nil {
			return nil, err
		}
		if ch, ok := setChange(levelEntity, t.String(), m.entities[t], have); ok {
			ch.entity, ch.resource = t.entity, t.resource
			changes = append(changes, ch)
		}
	}
	if prune {
		stale, err := staleEntityConfigs(c, repo, m, prov.entities)
		if err != nil {
			return nil, err
		}
		for _, t := range stale {
			have, err := repo.Admin().Limits(ctx, limiter.Scope{Entity: t.entity, Resource: t.resource})
			if err != nil {
				return nil, err
			}
			if len(have) > 0 {
				changes = append(changes, change{Action: actionDelete, Level: levelEntity, Target: t.String(),
					Previous: limitsToJSON(sortLimits(have)), entity: t.entity, resource: t.resource})
			}
		}
	}
	return changes, nil
}

// staleEntityConfigs lists the entity configs that are stored (found
// through the registry, or among extra) and that the manifest does not
// declare, sorted and without duplicates.
func staleEntityConfigs(c *cli, repo *table, m *manifest, extra []entityTarget) ([]entityTarget, error) {
	resources, err := iterx.Collect(repo.Admin().ResourcesWithEntityLimits(c.ctx))
	if err != nil {
		return nil, err
	}
	seen := map[entityTarget]bool{}
	var stale []entityTarget
	add := func(t entityTarget) {
		if _, ok := m.entities[t]; !ok && !seen[t] {
			seen[t] = true
			stale = append(stale, t)
		}
	}
	for _, t := range extra {
		add(t)
	}
	for _, res := range resources {
		cursor := ""
		for {
			ids, next, err := repo.store().(store.ConfigLister).ListEntitiesWithCustomLimits(c.ctx, res, 0, cursor)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				add(entityTarget{id, res})
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].String() < stale[j].String() })
	return stale, nil
}

// applyChange writes one change through the library.
func applyChange(c *cli, repo *table, rl *limiter.RateLimiter, ch change) error {
	ctx := c.ctx
	switch {
	case ch.Action == actionDelete && ch.Level == levelSystem:
		return repo.Admin().DeleteLimits(ctx, limiter.Scope{})
	case ch.Action == actionDelete && ch.Level == levelResource:
		return repo.Admin().DeleteLimits(ctx, limiter.Scope{Resource: ch.resource})
	case ch.Action == actionDelete:
		return rl.Admin().DeleteLimits(ctx, limiter.Scope{Entity: ch.entity, Resource: ch.resource})
	case ch.Level == levelSystem:
		return repo.Admin().SetSystemDefaults(ctx, ch.limits, limiter.OnUnavailable(ch.OnUnavailable))
	case ch.Level == levelResource:
		return repo.Admin().SetLimits(ctx, limiter.Scope{Resource: ch.resource}, ch.limits)
	default:
		return rl.Admin().SetLimits(ctx, limiter.Scope{Entity: ch.entity, Resource: ch.resource}, ch.limits)
	}
}

// manifestCommand is the command use that plan, apply and diff share:
// flags, loading the manifest, opening the namespace and planning; run
// does the rest.
func manifestCommand(c *cli, use, summary string, run func(repo *table, m *manifest, changes []change) error) *command {
	f := c.newFlags(use, summary, 0, 0, true)
	var path string
	var prune bool
	f.str(&path, "file", "f", "", "YAML limits manifest (required; - reads stdin)")
	f.boolean(&prune, "prune", "", false, "also delete stored limits the manifest does not declare")
	f.run = func([]string) error {
		if path == "" {
			return fmt.Errorf("%s: --file is required", use)
		}
		m, err := loadManifest(path, os.Stdin)
		if err != nil {
			return err
		}
		if m.namespace != "" {
			if c.common.explicit["namespace"] && c.common.namespace != m.namespace {
				return fmt.Errorf("the manifest's namespace %q differs from --namespace %q", m.namespace, c.common.namespace)
			}
			c.common.namespace = m.namespace
		}
		m.namespace = c.common.namespace
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		changes, err := plan(c, repo, m, prune)
		if err != nil {
			return err
		}
		return run(repo, m, changes)
	}
	return f
}

func changeSymbol(action string) string {
	switch action {
	case actionCreate:
		return "+"
	case actionUpdate:
		return "~"
	}
	return "-"
}

// changeLine formats a change on one line, with the limits.
// targetName is the change's target as printed: the system level has none.
func (ch change) targetName() string {
	if ch.Target == "" {
		return "(system defaults)"
	}
	return ch.Target
}

func changeLine(ch change) string {
	target := ch.targetName()
	s := fmt.Sprintf("  %s %s %s: %s", changeSymbol(ch.Action), ch.Action, ch.Level, target)
	var parts []string
	for _, l := range ch.limits {
		parts = append(parts, formatLimit(l))
	}
	if ch.Level == levelSystem && ch.Action != actionDelete && ch.OnUnavailable != "" {
		parts = append(parts, "on_unavailable: "+ch.OnUnavailable)
	}
	if len(parts) > 0 {
		s += "  [" + strings.Join(parts, ", ") + "]"
	}
	return s
}

func countChanges(r *planResult) {
	for _, ch := range r.Changes {
		switch ch.Action {
		case actionCreate:
			r.Created++
		case actionUpdate:
			r.Updated++
		default:
			r.Deleted++
		}
	}
}

func cmdLimitsPlan(c *cli) *command {
	return manifestCommand(c, "limits plan", "Show the changes `limits apply` would make (like terraform plan).", func(_ *table, m *manifest, changes []change) error {
		r := planResult{Namespace: m.namespace, Changes: nonNil(changes)}
		countChanges(&r)
		if c.jsonOutput() {
			return c.writeJSON(r)
		}
		if len(changes) == 0 {
			c.printf("No changes. Infrastructure is up-to-date.\n")
			return nil
		}
		c.printf("Plan: %d change(s) in namespace %s\n\n", len(changes), m.namespace)
		for _, ch := range changes {
			c.printf("%s\n", changeLine(ch))
		}
		c.printf("\nPlan: %d to create, %d to update, %d to delete.\n", r.Created, r.Updated, r.Deleted)
		return nil
	})
}

func cmdLimitsDiff(c *cli) *command {
	return manifestCommand(c, "limits diff", "Show the drift between the manifest and the stored limits.", func(_ *table, m *manifest, changes []change) error {
		r := planResult{Namespace: m.namespace, Changes: nonNil(changes)}
		countChanges(&r)
		if c.jsonOutput() {
			return c.writeJSON(r)
		}
		if len(changes) == 0 {
			c.printf("No drift detected. Live state matches YAML.\n")
			return nil
		}
		c.printf("Drift detected: %d difference(s)\n\n", len(changes))
		for _, ch := range changes {
			target := ch.targetName()
			c.printf("  %s %s: %s\n", changeSymbol(ch.Action), ch.Level, target)
		}
		return nil
	})
}

func cmdLimitsApply(c *cli) *command {
	return manifestCommand(c, "limits apply", "Apply the manifest: store the limits it declares that differ from the stored ones (like terraform apply).", func(repo *table, m *manifest, changes []change) error {
		rl := repo.RateLimiter
		r := planResult{Namespace: m.namespace, Changes: []change{}, Applied: true}
		for _, ch := range changes {
			if err := applyChange(c, repo, rl, ch); err != nil {
				if !c.jsonOutput() && len(r.Changes) > 0 {
					c.printf("Applied %d of %d change(s) before the error.\n", len(r.Changes), len(changes))
				}
				target := ch.targetName()
				return fmt.Errorf("%s %s %s: %w", ch.Action, ch.Level, target, err)
			}
			r.Changes = append(r.Changes, ch)
			if !c.jsonOutput() {
				c.printf("%s\n", changeLine(ch))
			}
		}
		countChanges(&r)
		if c.jsonOutput() {
			return c.writeJSON(r)
		}
		if len(changes) == 0 {
			c.printf("No changes. Infrastructure is up-to-date.\n")
			return nil
		}
		c.printf("\nApplied: %d created, %d updated, %d deleted.\n", r.Created, r.Updated, r.Deleted)
		return nil
	})
}

// union returns the strings of a and b, sorted, without duplicates.
func union(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range append(append([]string(nil), a...), b...) {
		set[s] = true
	}
	return sortedKeys(set)
}

func nonNil(ch []change) []change {
	if ch == nil {
		return []change{}
	}
	return ch
}
