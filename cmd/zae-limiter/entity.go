package main

import (
	"errors"
	"fmt"
	"strings"

	limiter "github.com/zaelimiter/limiter"
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
		e, err := repo.CreateEntity(c.ctx, limiter.Entity{ID: pos[0], Name: displayName, ParentID: parent, Cascade: cascade, Metadata: md})
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
		e, err := repo.GetEntity(c.ctx, pos[0])
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
		if err := repo.DeleteEntity(c.ctx, pos[0]); err != nil {
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
		kids, err := repo.Children(c.ctx, pos[0])
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

// resourceFlag registers --resource/-r with the original's default
// (_default_: the entity's limits for every resource without its own).
func (f *command) resourceFlag(p *string) {
	f.str(p, "resource", "r", limiter.DefaultResource, "resource name; _default_ for every resource without its own")
}

func cmdEntitySetLimits(c *cli) *command {
	f := c.newFlags("entity set-limits ENTITY_ID", "Store limits for ENTITY_ID on a resource, replacing those stored before.", 1, 1, true)
	var resource string
	var specs []string
	f.resourceFlag(&resource)
	f.limitFlag(&specs)
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
		if err := repo.SetLimits(c.ctx, pos[0], resource, limits); err != nil {
			return err
		}
		return c.printLimitsSet(fmt.Sprintf("Set %d limit(s) for entity '%s' on resource '%s':", len(limits), pos[0], resource),
			limitsJSON{EntityID: pos[0], Resource: resource, Limits: limitsToJSON(limits)}, limits)
	}
	return f
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
		limits, err := repo.GetLimits(c.ctx, pos[0], resource)
		if err != nil {
			return err
		}
		return c.printLimits(limitsJSON{EntityID: pos[0], Resource: resource, Limits: limitsToJSON(limits)}, limits,
			fmt.Sprintf("No limits configured for entity '%s' on resource '%s'", pos[0], resource))
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
		if err := repo.DeleteLimits(c.ctx, pos[0], resource); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Deleted limits for entity '%s' on resource '%s'", pos[0], resource),
			map[string]any{"deleted": true, "entity_id": pos[0], "resource": resource})
	}
	return f
}

func cmdEntityList(c *cli) *command {
	f := c.newFlags("entity list", "List the entities with stored limits for a resource.", 0, 0, true)
	var resource string
	var max int
	f.str(&resource, "with-custom-limits", "", "", "resource whose entities with stored limits to list (required)")
	f.integer(&max, "limit", "", 0, "most entities to list (0: all)")
	f.run = func([]string) error {
		if resource == "" {
			return errors.New("entity list: --with-custom-limits RESOURCE is required")
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		var ids []string
		cursor := ""
		for {
			page := 0
			if max > 0 {
				page = max - len(ids)
			}
			got, next, err := repo.ListEntitiesWithCustomLimits(c.ctx, resource, page, cursor)
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

func cmdEntityListResources(c *cli) *command {
	f := c.newFlags("entity list-resources", "List the resources for which some entity has stored limits.", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		res, err := repo.ListResourcesWithEntityConfigs(c.ctx)
		if err != nil {
			return err
		}
		return c.stringList(res, "resources", "No resources with entity-level custom limits")
	}
	return f
}
