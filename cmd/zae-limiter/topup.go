package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	limiter "github.com/zaelimiter/limiter"
	"github.com/zaelimiter/limiter/internal/iterx"
	"github.com/zaelimiter/limiter/store"
)

// topUpJSON is the JSON output of entity top-up.
type topUpJSON struct {
	EntityID string `json:"entity_id"`
	Resource string `json:"resource"`
	Limit    string `json:"limit"`
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	// Applied is false when a top-up with this id was applied before:
	// nothing was added.
	Applied bool  `json:"applied"`
	Balance int64 `json:"balance"`
}

func cmdEntityTopUp(c *cli) *command {
	f := c.newFlags("entity top-up ENTITY_ID",
		"Add to a prepaid balance of ENTITY_ID on a resource, once per --id: the same top-up sent again adds nothing.", 1, 1, true)
	var resource, limitName, amount, dollars, id string
	f.str(&resource, "resource", "r", "", "resource of the balance, or '*' for the entity-wide balance (default: the entity-wide balance when the entity has one; "+
		"else the error names the resources that hold the limit)")
	f.str(&limitName, "limit", "", "", "name of the prepaid limit (required)")
	f.str(&amount, "amount", "", "", "tokens to add, a positive integer (or --dollars)")
	f.str(&dollars, "dollars", "", "", "dollars to add to a limit counted in micro-dollars, e.g. 25 or 0.50 (or --amount)")
	f.str(&id, "id", "", "", "the top-up's identifier, e.g. a payment id: a top-up with an id applied before adds nothing (required)")
	f.run = func(pos []string) error {
		switch {
		case limitName == "":
			return errors.New("entity top-up: --limit is required")
		case id == "":
			return errors.New("entity top-up: --id is required (a payment or order id: it makes a retried top-up safe)")
		case (amount == "") == (dollars == ""):
			return errors.New("entity top-up: give one of --amount and --dollars")
		}
		var n int64
		var err error
		if dollars != "" {
			n, err = parseDollars(dollars)
		} else if n, err = strconv.ParseInt(strings.TrimSpace(amount), 10, 64); err != nil || n <= 0 {
			err = fmt.Errorf("invalid --amount %q: use a positive integer", amount)
		}
		if err != nil {
			return err
		}
		repo, err := c.openRepo()
		if err != nil {
			return err
		}
		if resource == "" {
			if resource, err = c.balanceResource(repo, pos[0], limitName); err != nil {
				return err
			}
		}
		res, err := repo.TopUp(c.ctx, limiter.TopUpRequest{Entity: pos[0], Resource: resource, Limit: limitName, Amount: n, ID: id})
		if err != nil {
			return err
		}
		avail, err := repo.Available(c.ctx, pos[0], resource)
		if err != nil {
			return err
		}
		out := topUpJSON{EntityID: pos[0], Resource: resource, Limit: limitName, ID: id, Amount: n, Applied: res.Applied, Balance: avail[limitName]}
		if c.jsonOutput() {
			return c.writeJSON(out)
		}
		if res.Applied {
			c.printf("Topped up %s of entity '%s' %s by %s (top-up '%s')\n", limitName, pos[0], onResource(resource), topUpAmount(limitName, n), id)
		} else {
			c.printf("Top-up '%s' was applied before: nothing added\n", id)
		}
		c.printf("  Balance: %s\n", topUpAmount(limitName, out.Balance))
		return nil
	}
	return f
}

// topUpAmount formats an amount of limit name: dollars for usd (counted in
// micro-dollars), else tokens.
func topUpAmount(name string, n int64) string {
	if name == "usd" {
		return formatDollars(n)
	}
	return strconv.FormatInt(n, 10)
}

// balanceResource returns the resource of entityID's prepaid balance
// limitName for a top-up without --resource: the entity-wide resource
// ('*') when the entity has the prepaid limit stored there, or has none
// stored there and the entity-wide defaults (resource set-defaults '*')
// have it. Otherwise it
// fails with an error that says exactly what to pass: the resources on
// which the entity has the limit stored (on _default_ it gives each
// resource a balance of its own), or how to store an entity-wide one.
func (c *cli) balanceResource(repo *table, entityID, limitName string) (string, error) {
	prepaidIn := func(limits []limiter.Limit) bool {
		return slices.ContainsFunc(limits, func(l limiter.Limit) bool { return l.Name == limitName && store.Limit(l).IsPrepaid() })
	}
	hasPrepaid := func(resource string) (bool, error) {
		limits, err := repo.Admin().Limits(c.ctx, limiter.Scope{Entity: entityID, Resource: resource})
		return prepaidIn(limits), err
	}
	// A store that does not take the entity-wide resource refuses to read
	// it with a validation error: no entity-wide balance then.
	own, err := repo.Admin().Limits(c.ctx, limiter.Scope{Entity: entityID, Resource: limiter.AllResources})
	switch {
	case err == nil && prepaidIn(own):
		return limiter.AllResources, nil
	case err == nil && len(own) == 0:
		defaults, err := repo.Admin().Limits(c.ctx, limiter.Scope{Resource: limiter.AllResources})
		if err == nil && prepaidIn(defaults) {
			return limiter.AllResources, nil
		}
		if err != nil && !errors.Is(err, limiter.ErrValidation) {
			return "", err
		}
	case err != nil && !errors.Is(err, limiter.ErrValidation):
		return "", err
	}
	resources, err := iterx.Collect(repo.Admin().ResourcesWithEntityLimits(c.ctx))
	if err != nil {
		return "", err
	}
	var holders []string
	onDefault := false
	for _, r := range resources {
		if r == limiter.AllResources {
			continue
		}
		ok, err := hasPrepaid(r)
		if err != nil {
			return "", err
		}
		switch {
		case ok && r == limiter.DefaultResource:
			onDefault = true
		case ok:
			holders = append(holders, r)
		}
	}
	msg := fmt.Sprintf("entity top-up: entity '%s' has no entity-wide prepaid balance %s", entityID, limitName)
	switch {
	case len(holders) > 0:
		msg += fmt.Sprintf("; it has one on %s: pass -r RESOURCE, e.g. -r %s", quoteList(holders), holders[0])
	case onDefault:
		msg += "; its _default_ limits give each resource a balance of its own: pass -r RESOURCE (the model the calls use)"
	default:
		msg += fmt.Sprintf("; store one with: zae-limiter entity set-limits %s -r '*' -l %s:prepaid (one balance for every resource), "+
			"or pass -r RESOURCE for a balance on one resource", entityID, limitName)
	}
	return "", errors.New(msg)
}

// quoteList formats names as "'a'", "'a' and 'b'", "'a', 'b' and 'c'".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// onResource says where a command acted: "on resource 'gpt-4o'", or "on
// every resource ('*')" for the entity-wide resource.
func onResource(resource string) string {
	if resource == limiter.AllResources {
		return "on every resource ('*')"
	}
	return "on resource '" + resource + "'"
}
