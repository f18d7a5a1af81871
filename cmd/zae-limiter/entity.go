package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

func cmdEntityCreate(c *cli) *command {
	f := c.newFlags("entity create ENTITY_ID", "Create an entity (an API key, a project, a tenant).", 1, 1, true)
	var displayName, parent string
	var cascade bool
	var metadata []string
	f.str(&displayName, "display-name", "", "", "human-readable name (default: the entity id)")
	f.str(&parent, "parent", "", "", "parent entity id (for hierarchical limits)")
	f.pair(&cascade, "cascade", "no-cascade", false, "also consume from the parent on every acquire")
	f.list(&metadata, "metadata", "m", "metadata attribute KEY=VALUE (repeatable)")
	f.run = func(pos []string) error {
		md, err := parseKeyValues(metadata, "--metadata")
		if err != nil {
			return err
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		e, err := repo.Admin().CreateEntity(c.ctx, limiter.Entity{ID: pos[0], Name: displayName, ParentID: parent, Cascade: cascade, Metadata: md})
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return c.writeJSON(entityToJSON(e))
		}
		c.printf("Created entity '%s'\n", e.ID)
		if e.Name != "" && e.Name != e.ID {
			c.printf("  Name:    %s\n", e.Name)
		}
		if e.ParentID != "" {
			c.printf("  Parent:  %s\n", e.ParentID)
		}
		c.printf("  Cascade: %t\n", e.Cascade)
		return nil
	}
	return f
}

// parseKeyValues parses repeated KEY=VALUE flag values.
func parseKeyValues(kvs []string, flagName string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid %s %q: use KEY=VALUE", flagName, kv)
		}
		m[k] = v
	}
	return m, nil
}

func cmdEntityShow(c *cli) *command {
	f := c.newFlags("entity show ENTITY_ID", "Show an entity.", 1, 1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		e, err := repo.Admin().Entity(c.ctx, pos[0])
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return c.writeJSON(entityToJSON(e))
		}
		rows := [][]string{
			{"Entity:", e.ID}, {"Name:", e.Name}, {"Parent:", dash(e.ParentID)},
			{"Cascade:", fmt.Sprint(e.Cascade)}, {"Created:", dash(formatTime(e.CreatedAt))},
		}
		for _, k := range sortedKeys(e.Metadata) {
			rows = append(rows, []string{"Metadata " + k + ":", e.Metadata[k]})
		}
		return c.kv(rows)
	}
	return f
}

func cmdEntityDelete(c *cli) *command {
	f := c.newFlags("entity delete ENTITY_ID", "Delete an entity with its stored limits and buckets.", 1, 1, true)
	f.confirm(func(pos []string) string { return "delete entity " + pos[0] })
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if err := repo.Admin().DeleteEntity(c.ctx, pos[0]); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Deleted entity '%s'", pos[0]), map[string]any{"deleted": true, "entity_id": pos[0]})
	}
	return f
}

func cmdEntityChildren(c *cli) *command {
	f := c.newFlags("entity children ENTITY_ID", "List the entities whose parent is ENTITY_ID.", 1, 1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		kids, err := iterx.Collect(repo.Admin().Children(c.ctx, pos[0]))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			out := make([]entityJSON, len(kids))
			for i, e := range kids {
				out[i] = entityToJSON(e)
			}
			return c.writeJSON(map[string]any{"parent_id": pos[0], "children": out})
		}
		if len(kids) == 0 {
			c.printf("No children of entity '%s'\n", pos[0])
			return nil
		}
		rows := make([][]string, len(kids))
		for i, e := range kids {
			rows[i] = []string{e.ID, e.Name, fmt.Sprint(e.Cascade), dash(formatTime(e.CreatedAt))}
		}
		return c.table([]string{"ID", "NAME", "CASCADE", "CREATED"}, rows)
	}
	return f
}

// resourceFlag registers --resource/-r, by default _default_: the entity's
// limits for every resource without its own.
func (f *command) resourceFlag(p *string) {
	f.str(p, "resource", "r", limiter.DefaultResource, "resource name; _default_ for every resource without its own; "+
		"'*' for the entity-wide limits, one bucket charged by every acquire of the entity whatever its resource")
}

func cmdEntityGetLimits(c *cli) *command {
	f := c.newFlags("entity get-limits ENTITY_ID", "Show the limits stored for ENTITY_ID on a resource.", 1, 1, true)
	var resource string
	f.resourceFlag(&resource)
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		limits, err := repo.Admin().Limits(c.ctx, limiter.Scope{Entity: pos[0], Resource: resource})
		if err != nil {
			return err
		}
		none := fmt.Sprintf("No limits configured for entity '%s' on resource '%s'", pos[0], resource)
		switch resource {
		case limiter.AllResources:
			none = fmt.Sprintf("No entity-wide limits configured for entity '%s' ('*': charged by every acquire of the entity, "+
				"beside its limits on the resource; the entity-wide defaults of resource '*' may apply)", pos[0])
		case limiter.DefaultResource:
			none += " (stored at this level; zae-limiter entity limits-in-force " + pos[0] + " -r RESOURCE shows the limits in force)"
		default:
			none += fmt.Sprintf(" (stored at this level; the entity's _default_ limits, the resource's or the system defaults may apply: "+
				"zae-limiter entity limits-in-force %s -r %s shows the limits in force)", pos[0], resource)
		}
		return c.printLimits(limitsJSON{EntityID: pos[0], Resource: resource, Limits: limitsToJSON(limits)}, limits, none)
	}
	return f
}

func cmdEntityDeleteLimits(c *cli) *command {
	f := c.newFlags("entity delete-limits ENTITY_ID", "Delete the limits stored for ENTITY_ID on a resource.", 1, 1, true)
	var resource string
	f.resourceFlag(&resource)
	f.confirm(func(pos []string) string {
		return fmt.Sprintf("delete the limits of entity %s on resource %s", pos[0], resource)
	})
	f.run = func(pos []string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if err := repo.Admin().DeleteLimits(c.ctx, limiter.Scope{Entity: pos[0], Resource: resource}); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Deleted limits for entity '%s' on resource '%s'", pos[0], resource),
			map[string]any{"deleted": true, "entity_id": pos[0], "resource": resource})
	}
	return f
}

func cmdEntityList(c *cli) *command {
	f := c.newFlags("entity list", "List the namespace's entities, or with --with-custom-limits the entities with stored limits for a resource.", 0, 0, true)
	var resource string
	var max int
	f.str(&resource, "with-custom-limits", "", "", "list only the entities with stored limits for this resource (their ids)")
	f.integer(&max, "limit", "", 0, "most entities to list (0: all)")
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if resource == "" {
			return c.listAllEntities(repo, max)
		}
		var ids []string
		cursor := ""
		for {
			page := 0
			if max > 0 {
				page = max - len(ids)
			}
			got, next, err := repo.store().(store.ConfigLister).ListEntitiesWithCustomLimits(c.ctx, resource, page, cursor)
			if err != nil {
				return err
			}
			ids = append(ids, got...)
			if next == "" || (max > 0 && len(ids) >= max) {
				break
			}
			cursor = next
		}
		return c.stringList(ids, "entities", fmt.Sprintf("No entities with custom limits for resource '%s'", resource))
	}
	return f
}

// entityListPage is the page size of `entity list`: index entries read per
// call (an entity's stored limits and usage snapshots count too).
const entityListPage = 500

// listAllEntities prints every entity of the namespace (at most max when
// max > 0), reading page after page.
func (c *cli) listAllEntities(repo *table, max int) error {
	var all []limiter.Entity
	cursor := ""
	for {
		got, next, err := repo.store().(store.EntityLister).ListEntities(c.ctx, entityListPage, cursor)
		if err != nil {
			return err
		}
		all = append(all, got...)
		if max > 0 && len(all) >= max {
			all = all[:max]
			break
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if c.jsonOutput() {
		out := make([]entityJSON, len(all))
		for i, e := range all {
			out[i] = entityToJSON(e)
		}
		return c.writeJSON(map[string]any{"entities": out})
	}
	if len(all) == 0 {
		c.printf("No entities in namespace '%s'\n", c.common.namespace)
		return nil
	}
	rows := make([][]string, len(all))
	for i, e := range all {
		rows[i] = []string{e.ID, e.Name, dash(e.ParentID), fmt.Sprint(e.Cascade), dash(formatTime(e.CreatedAt))}
	}
	return c.table([]string{"ID", "NAME", "PARENT", "CASCADE", "CREATED"}, rows)
}

// limitInForceJSON is one limit in force: a limit with the entity whose
// bucket holds it and the level it comes from.
type limitInForceJSON struct {
	EntityID string `json:"entity_id"`
	limitJSON
	Source string `json:"source"`
}

func cmdEntityLimitsInForce(c *cli) *command {
	f := c.newFlags("entity limits-in-force ENTITY_ID", "Show the limits an acquire of ENTITY_ID on a resource is checked against, "+
		"and where each comes from: the entity's limits on the resource, its _default_ limits, the resource's defaults or the "+
		"system defaults (the first level with any), then, when the entity cascades, its parent's.", 1, 1, true)
	var resource string
	f.str(&resource, "resource", "r", "", "the resource of the acquire (required)")
	f.run = func(pos []string) error {
		if resource == "" {
			return errors.New("entity limits-in-force: --resource RESOURCE is required")
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		inForce, err := repo.LimitsInForce(c.ctx, pos[0], resource)
		var ve *limiter.ValidationError
		if errors.As(err, &ve) && ve.Field == "limits" {
			inForce, err = nil, nil // none at any level: said below
		}
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			out := make([]limitInForceJSON, len(inForce))
			for i, l := range inForce {
				out[i] = limitInForceJSON{EntityID: l.EntityID, limitJSON: limitsToJSON([]limiter.Limit{l.Limit})[0], Source: string(l.Source)}
			}
			return c.writeJSON(map[string]any{"entity_id": pos[0], "resource": resource, "limits": out})
		}
		if len(inForce) == 0 {
			c.printf("No limits in force for entity '%s' on resource '%s': an acquire fails until limits are stored "+
				"for the entity (entity set-limits), the resource (resource set-defaults) or the system (system set-defaults)\n", pos[0], resource)
			return nil
		}
		c.printf("Limits in force for entity '%s' on resource '%s':\n", pos[0], resource)
		rows := make([][]string, len(inForce))
		var ancestors []string
		for i, l := range inForce {
			if l.EntityID != pos[0] && !slices.Contains(ancestors, l.EntityID) {
				ancestors = append(ancestors, l.EntityID)
			}
			refill, period := limitRefillCells(l.Limit)
			rows[i] = []string{l.EntityID, l.Limit.Name, capacityCell(l.Limit), refill, period, describeSource(l)}
		}
		if err := c.table([]string{"ENTITY", "LIMIT", "CAPACITY", "REFILL", "PERIOD", "SOURCE"}, rows); err != nil {
			return err
		}
		if len(ancestors) > 0 {
			c.printf("%s\n", describeChain(pos[0], ancestors))
		}
		return nil
	}
	return f
}

// describeChain says which entities an acquire of entity charges, every
// level named: "'key-1' cascades to 'proj-1': an acquire takes from both
// buckets." or "'key-1' cascades to 'proj-1', which cascades to 'org': an
// acquire takes from all 3 entities' buckets."
func describeChain(entity string, ancestors []string) string {
	if len(ancestors) == 1 {
		return fmt.Sprintf("'%s' cascades to '%s': an acquire takes from both buckets.", entity, ancestors[0])
	}
	s := fmt.Sprintf("'%s' cascades to '%s'", entity, ancestors[0])
	for _, a := range ancestors[1:] {
		s += fmt.Sprintf(", which cascades to '%s'", a)
	}
	return s + fmt.Sprintf(": an acquire takes from all %d entities' buckets.", len(ancestors)+1)
}

// capacityCell is the CAPACITY cell of a limits table: dollars for the
// limit usd (counted in micro-dollars), as set-limits shows it, else the
// count.
func capacityCell(l limiter.Limit) string {
	if l.Name == usdLimitName {
		return formatDollars(l.Capacity)
	}
	return fmt.Sprint(l.Capacity)
}

// describeSource says where a limit in force is stored, as the command
// that shows it addresses it.
func describeSource(l limiter.LimitInForce) string {
	switch l.Source {
	case limiter.SourceEntity:
		if l.Resource == limiter.AllResources {
			return "entity " + l.EntityID + " on * (every resource)"
		}
		return "entity " + l.EntityID + " on " + l.Resource
	case limiter.SourceEntityDefault:
		return "entity " + l.EntityID + " on " + limiter.DefaultResource
	case limiter.SourceResource:
		if l.Resource == limiter.AllResources {
			return "entity-wide defaults (resource *)"
		}
		return "resource " + l.Resource + " defaults"
	case limiter.SourceSystem:
		return "system defaults"
	}
	return string(l.Source)
}

func cmdEntityListResources(c *cli) *command {
	f := c.newFlags("entity list-resources", "List the resources for which some entity has stored limits.", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		res, err := iterx.Collect(repo.Admin().ResourcesWithEntityLimits(c.ctx))
		if err != nil {
			return err
		}
		return c.stringList(res, "resources", "No resources with entity-level custom limits")
	}
	return f
}
