package main

import (
	"fmt"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/store"
)

// namespaceJSON is one namespace of the registry.
type namespaceJSON struct {
	Name        string `json:"name"`
	NamespaceID string `json:"namespace_id"`
	Status      string `json:"status,omitempty"`
	CreatedAt   string `json:"created_at,omitempty"`
	DeletedAt   string `json:"deleted_at,omitempty"`
}

func namespaceToJSON(n store.NamespaceInfo) namespaceJSON {
	return namespaceJSON{Name: n.Name, NamespaceID: n.ID, Status: n.Status, CreatedAt: formatTime(n.CreatedAt), DeletedAt: formatTime(n.DeletedAt)}
}

// openRegistry opens the table for a namespace command. The registry is
// table-wide, so it binds to the "default" namespace whatever --namespace
// says (opening must not register the namespace being managed).
func (c *cli) openRegistry() (*table, error) {
	c.common.namespace = limiter.DefaultNamespace
	return c.openRepo()
}

func cmdNamespaceRegister(c *cli) *command {
	f := c.newFlags("namespace register NAME...", "Register namespaces (an already registered name keeps its id).", 1, -1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		ids, err := repo.RegisterNamespaces(c.ctx, pos...)
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			out := make([]namespaceJSON, len(pos))
			for i, n := range pos {
				out[i] = namespaceJSON{Name: n, NamespaceID: ids[n]}
			}
			return c.writeJSON(map[string]any{"namespaces": out})
		}
		c.printf("Registered %d namespace(s):\n", len(pos))
		for _, n := range pos {
			c.printf("  %s: %s\n", n, ids[n])
		}
		return nil
	}
	return f
}

func cmdNamespaceList(c *cli) *command {
	f := c.newFlags("namespace list", "List the active namespaces.", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		list, err := repo.ListNamespaces(c.ctx)
		if err != nil {
			return err
		}
		return c.namespaces(list, false, "No namespaces registered.")
	}
	return f
}

// namespaces prints namespace records.
func (c *cli) namespaces(list []store.NamespaceInfo, deleted bool, none string) error {
	if c.jsonOutput() {
		out := make([]namespaceJSON, len(list))
		for i, n := range list {
			out[i] = namespaceToJSON(n)
		}
		return c.writeJSON(map[string]any{"namespaces": out})
	}
	if len(list) == 0 {
		c.printf("%s\n", none)
		return nil
	}
	rows := make([][]string, len(list))
	header := []string{"NAME", "NAMESPACE ID", "CREATED AT"}
	if deleted {
		header = []string{"NAME", "NAMESPACE ID", "DELETED AT"}
	}
	for i, n := range list {
		t := n.CreatedAt
		if deleted {
			t = n.DeletedAt
		}
		rows[i] = []string{n.Name, n.ID, dash(formatTime(t))}
	}
	if err := c.table(header, rows); err != nil {
		return err
	}
	c.printf("\nTotal: %d namespace(s)\n", len(list))
	return nil
}

func cmdNamespaceShow(c *cli) *command {
	f := c.newFlags("namespace show NAME", "Show one namespace.", 1, 1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		n, err := repo.GetNamespace(c.ctx, pos[0])
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return c.writeJSON(namespaceToJSON(n))
		}
		return c.kv([][]string{
			{"Namespace:", n.Name}, {"ID:", n.ID}, {"Status:", n.Status}, {"Created:", dash(formatTime(n.CreatedAt))},
		})
	}
	return f
}

func cmdNamespaceDelete(c *cli) *command {
	f := c.newFlags("namespace delete NAME", "Soft-delete a namespace: its name stops resolving, its data stays until purged.", 1, 1, true)
	f.confirm(func(pos []string) string { return "delete namespace " + pos[0] })
	f.run = func(pos []string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		if err := repo.DeleteNamespace(c.ctx, pos[0]); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Deleted namespace '%s' (recover it with `zae-limiter namespace recover ID`, see `namespace orphans`)", pos[0]),
			map[string]any{"deleted": true, "name": pos[0]})
	}
	return f
}

func cmdNamespaceRecover(c *cli) *command {
	f := c.newFlags("namespace recover NAMESPACE_ID", "Recover a deleted namespace by its id.", 1, 1, true)
	f.run = func(pos []string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		name, err := repo.RecoverNamespace(c.ctx, pos[0])
		if err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Recovered namespace '%s' (%s)", name, pos[0]), namespaceJSON{Name: name, NamespaceID: pos[0]})
	}
	return f
}

func cmdNamespaceOrphans(c *cli) *command {
	f := c.newFlags("namespace orphans", "List the deleted namespaces whose data remains (recover or purge them).", 0, 0, true)
	f.run = func([]string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		list, err := repo.ListOrphanNamespaces(c.ctx)
		if err != nil {
			return err
		}
		return c.namespaces(list, true, "No orphan namespaces.")
	}
	return f
}

func cmdNamespacePurge(c *cli) *command {
	f := c.newFlags("namespace purge NAMESPACE_ID", "Delete every item of a deleted namespace, for good.", 1, 1, true)
	f.confirm(func(pos []string) string { return "purge namespace " + pos[0] })
	f.run = func(pos []string) error {
		repo, err := c.openRegistry()
		if err != nil {
			return err
		}
		if err := repo.PurgeNamespace(c.ctx, pos[0]); err != nil {
			return err
		}
		return c.done(fmt.Sprintf("Purged namespace %s", pos[0]), map[string]any{"purged": true, "namespace_id": pos[0]})
	}
	return f
}
