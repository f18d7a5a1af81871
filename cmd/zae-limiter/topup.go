package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	f.resourceFlag(&resource)
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
		res, err := repo.TopUp(c.ctx, pos[0], resource, limitName, n, id)
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
			c.printf("Topped up %s of entity '%s' on resource '%s' by %s (top-up '%s')\n", limitName, pos[0], resource, topUpAmount(limitName, n), id)
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
